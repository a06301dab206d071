// A refactoring moved the release of the inputs above the launch: the kernel is queued on memory
// that was already freed. It faults when it runs (the synchronisation returns 507015) and writes
// nothing, so the output keeps its initial zeros.
// expect: memcheck invalid device access
// sites: 39, 53, 54
// output: aclrtSynchronizeStream failed. ERROR: 507015
// output: result[0] is: 0.000000
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
  std::vector<float> grad(4, 1.0f), self = {1, 2, 3, 4}, result(4, 0.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&selfDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, 16, grad.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(selfDev, 16, self.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(outDev, 16, result.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = CreateTensor(gradDev, {4});
  aclTensor* selfT = CreateTensor(selfDev, {4});
  aclTensor* outT = CreateTensor(outDev, {4});
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  // release the inputs  -- BUG: before the launch that reads them
  aclrtFree(selfDev);
  aclrtFree(gradDev);
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  auto ret = aclrtSynchronizeStream(stream);
  if (ret != ACL_SUCCESS) {
    printf("aclrtSynchronizeStream failed. ERROR: %d\n", ret);
  }
  CHECK(aclrtMemcpy(result.data(), 16, outDev, 16, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; i++) {
    printf("result[%d] is: %f\n", i, result[i]);
  }

  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(outDev);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
