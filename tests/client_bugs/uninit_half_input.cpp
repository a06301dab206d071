// The helper that uploads an input copies half of the elements (a stray "/ 2" in its byte count), so only
// the first row of the 2x4 `self` reaches the device: the kernel reads 16 bytes nothing wrote, which
// read as the poison pattern (a NaN) and make the second row of the result NaN.
// expect: initcheck uninitialised read
// sites: 35, 51, 59
// output: result[0] is: 0.268941
// output: result[4] is: -nan
// output: result[7] is: -nan
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

static int Upload(const std::vector<float>& host, const std::vector<int64_t>& shape, void** dev) {
  size_t capacity = host.size() * sizeof(float);
  CHECK(aclrtMalloc(dev, capacity, ACL_MEM_MALLOC_HUGE_FIRST));
  size_t bytes = shape[0] * shape.back() / 2 * sizeof(float);   // BUG: rows * cols / 2 = one row
  CHECK(aclrtMemcpy(*dev, capacity, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  return 0;
}

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  std::vector<int64_t> shape = {2, 4};
  std::vector<float> grad(8, 1.0f), self = {1, 2, 3, 4, 5, 6, 7, 8}, zeros(8, 0.0f), result(8, 0.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, 32, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, 32, grad.data(), 32, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(Upload(self, shape, &selfDev));
  CHECK(aclrtMalloc(&outDev, 32, ACL_MEM_MALLOC_HUGE_FIRST));
  aclTensor* gradT = CreateTensor(gradDev, shape);
  aclTensor* selfT = CreateTensor(selfDev, shape);
  aclTensor* outT = CreateTensor(outDev, shape);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result.data(), 32, outDev, 32, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 8; i++) {
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
