// Control: race_event_reset_after_record.cpp fixed, over three steps: each step records the event
// after the producer's kernel, the consumer's stream waits for it, and only then is the event reset
// (on the consumer's stream, after its wait) for the next step. Nothing to report.
// expect: none
// output: step 0: final[0] is: 2.000000
// output: step 2: final[3] is: 8.000000
#include <cstdio>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_kl_div_backward.h"

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
  aclrtStream producer = nullptr, consumer = nullptr;
  CHECK(aclrtCreateStream(&producer));
  CHECK(aclrtCreateStream(&consumer));
  aclrtEvent ready = nullptr;
  CHECK(aclrtCreateEvent(&ready));
  std::vector<std::vector<float>> hosts = {{1, 1, 1, 1}, {2, 3, 5, 8}, {2, 3, 5, 8}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  std::vector<void*> devs(hosts.size(), nullptr);
  std::vector<aclTensor*> tensors(hosts.size(), nullptr);
  for (size_t i = 0; i < hosts.size(); i++) {
    CHECK(aclrtMalloc(&devs[i], 16, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(devs[i], 16, hosts[i].data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
    tensors[i] = CreateTensor(devs[i], {4});
  }
  aclTensor *grad = tensors[0], *x = tensors[1], *target = tensors[2], *mid = tensors[3], *final = tensors[4];

  std::vector<float> result(4, 0);
  for (int step = 0; step < 3; step++) {
    uint64_t workspaceSize = 0;
    aclOpExecutor* executor = nullptr;
    CHECK(aclnnKlDivBackwardGetWorkspaceSize(grad, x, target, 0, false, mid, &workspaceSize, &executor));
    CHECK(aclnnKlDivBackward(nullptr, 0, executor, producer));   // mid = -target
    CHECK(aclrtRecordEvent(ready, producer));
    CHECK(aclrtStreamWaitEvent(consumer, ready));
    CHECK(aclrtResetEvent(ready, consumer));
    CHECK(aclnnKlDivBackwardGetWorkspaceSize(grad, x, mid, 0, false, final, &workspaceSize, &executor));
    CHECK(aclnnKlDivBackward(nullptr, 0, executor, consumer));   // final = -mid
    CHECK(aclrtSynchronizeStream(consumer));
    CHECK(aclrtMemcpy(result.data(), 16, devs[4], 16, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int i = 0; i < 4; i++) {
      printf("step %d: final[%d] is: %f\n", step, i, result[i]);
    }
  }

  CHECK(aclrtSynchronizeStream(producer));
  for (size_t i = 0; i < hosts.size(); i++) {
    aclDestroyTensor(tensors[i]);
    aclrtFree(devs[i]);
  }
  aclrtDestroyEvent(ready);
  aclrtDestroyStream(producer);
  aclrtDestroyStream(consumer);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
