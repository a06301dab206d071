// Control: event_recorded_before_kernel.cpp fixed: the event is recorded after the kernel, and
// synchronising it makes the copy back safe; the elapsed time between a start and an end event is
// read the same way. Nothing to report.
// expect: none
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
  aclrtEvent start = nullptr, done = nullptr;
  CHECK(aclrtCreateEvent(&start));
  CHECK(aclrtCreateEvent(&done));
  std::vector<float> grad(4, 1.0f), self = {1, 2, 3, 4}, result(4, 0.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&selfDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, 16, grad.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(selfDev, 16, self.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = CreateTensor(gradDev, {4});
  aclTensor* selfT = CreateTensor(selfDev, {4});
  aclTensor* outT = CreateTensor(outDev, {4});
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  CHECK(aclrtRecordEvent(start, stream));
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtRecordEvent(done, stream));
  CHECK(aclrtSynchronizeEvent(done));
  float ms = 0;
  CHECK(aclrtEventElapsedTime(&ms, start, done));
  CHECK(aclrtMemcpy(result.data(), 16, outDev, 16, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; i++) {
    printf("result[%d] is: %f\n", i, result[i]);
  }

  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(gradDev);
  aclrtFree(selfDev);
  aclrtFree(outDev);
  aclrtDestroyEvent(start);
  aclrtDestroyEvent(done);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
