// An upload stream copies the gradient in with aclrtMemcpyAsync while a compute stream runs the
// kernel that reads it, with no event between them: a read/write race. The compute stream ran first
// and read the zeros the buffer was cleared with, so the result is all zeros.
// expect: racecheck race
// sites: 51, 53
// output: result[0] is: 0.000000
// output: result[3] is: 0.000000
#include <cstdio>
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

static aclTensor* Tensor1D(void* data, int64_t n) {
  int64_t shape[1] = {n};
  int64_t strides[1] = {1};
  return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, data);
}

int main() {
  const int64_t n = 4;
  const size_t bytes = n * sizeof(float);
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream upload = nullptr, compute = nullptr;
  CHECK(aclrtCreateStream(&upload));
  CHECK(aclrtCreateStream(&compute));

  std::vector<float> grad = {1, 1, 1, 1}, self = {1, 2, 3, 4}, result(n, -1.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&selfDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemset(gradDev, bytes, 0, bytes));
  CHECK(aclrtMemcpy(selfDev, bytes, self.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = Tensor1D(gradDev, n);
  aclTensor* selfT = Tensor1D(selfDev, n);
  aclTensor* outT = Tensor1D(outDev, n);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));

  CHECK(aclrtMemcpyAsync(gradDev, bytes, grad.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE, upload));
  // BUG: missing aclrtRecordEvent(uploaded, upload) + aclrtStreamWaitEvent(compute, uploaded)
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, compute));

  CHECK(aclrtSynchronizeStream(compute));
  CHECK(aclrtMemcpy(result.data(), bytes, outDev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int64_t i = 0; i < n; i++) {
    printf("result[%ld] is: %f\n", (long)i, result[i]);
  }
  CHECK(aclrtSynchronizeStream(upload));

  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(gradDev);
  aclrtFree(selfDev);
  aclrtFree(outDev);
  aclrtDestroyStream(upload);
  aclrtDestroyStream(compute);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
