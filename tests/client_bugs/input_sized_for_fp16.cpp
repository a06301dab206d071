// The input buffer is sized for float16 (2 bytes an element) but filled and read as float32: the
// copy writes, and the kernel reads, 16 bytes past the 16 requested. They fall inside the padding
// aclrtMalloc reserves, so nothing faults and the numbers look right, but those bytes were never
// the program's.
// expect: memcheck padding overrun
// sites: 43, 44, 53
// output: result[0] is: 0.268941
// output: result[7] is: 0.000335
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
  const int64_t n = 8;
  std::vector<float> grad(n, 1.0f), self = {1, 2, 3, 4, 5, 6, 7, 8}, result(n, 0.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, n * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
  // BUG: sizeof(aclFloat16), the tensor is ACL_FLOAT
  CHECK(aclrtMalloc(&selfDev, n * sizeof(aclFloat16), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(selfDev, n * sizeof(float), self.data(), n * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMalloc(&outDev, n * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, n * sizeof(float), grad.data(), n * sizeof(float), ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = CreateTensor(gradDev, {n});
  aclTensor* selfT = CreateTensor(selfDev, {n});
  aclTensor* outT = CreateTensor(outDev, {n});
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result.data(), n * sizeof(float), outDev, n * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < n; i++) {
    printf("result[%d] is: %f\n", i, result[i]);
  }

  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(gradDev);
  aclrtFree(selfDev);
  aclrtFree(outDev);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
