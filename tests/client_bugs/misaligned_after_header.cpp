// The inputs arrive as one blob: a 4-byte record header, then the floats. The program uploads the
// blob as it is and points the `self` tensor 4 bytes in, past the header: its data address is not
// 32-byte aligned as aclCreateTensor requires. The emulator computes the right values; the card may
// fault or read shifted data.
// expect: memcheck misaligned tensor
// sites: 49, 54
// output: result[0] is: 0.268941
// output: result[3] is: 0.017986
#include <cstdio>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"

#define CHECK(call)                                                         \
  do {                                                                      \
    int ret_ = (call);                                                      \
    if (ret_ != 0) {                                                        \
      printf("%s failed. ERROR: %d\n%s\n", #call, ret_, aclGetRecentErrMsg()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

static aclTensor* CreateTensor(void* data, std::vector<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = (int)shape.size() - 2; i >= 0; i--) {
    strides[i] = shape[i + 1] * strides[i + 1];
  }
  return aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                         shape.size(), data);
}

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  std::vector<float> grad(4, 1.0f), result(4, 0.0f);
  std::vector<float> record = {4.0f /* header: the element count */, 1, 2, 3, 4};
  size_t recordBytes = record.size() * sizeof(float);
  void *gradDev = nullptr, *recordDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&recordDev, recordBytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, 16, grad.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(recordDev, recordBytes, record.data(), recordBytes, ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = CreateTensor(gradDev, {4});
  // BUG: the data starts after the 4-byte header, which breaks the 32-byte alignment
  aclTensor* selfT = CreateTensor(static_cast<char*>(recordDev) + 4, {4});
  aclTensor* outT = CreateTensor(outDev, {4});
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result.data(), 16, outDev, 16, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; i++) {
    printf("result[%d] is: %f\n", i, result[i]);
  }

  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(gradDev);
  aclrtFree(recordDev);
  aclrtFree(outDev);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
