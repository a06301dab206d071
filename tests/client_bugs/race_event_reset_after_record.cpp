// A producer/consumer pair of streams reuses one event per step. The step resets the event right
// after recording it ("ready for the next step"), before the consumer's stream waits on it: the
// wait then finds no record, orders nothing, and the consumer reads the producer's output unordered
// (a read/write race). The consumer ran first and saw the output's initial zeros.
// expect: racecheck race
// sites: 57, 64
// output: final[0] is: -0.000000
// output: final[3] is: -0.000000
#include <cstdio>
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

struct Buffer {
  void* dev = nullptr;
  aclTensor* tensor = nullptr;
};

static int Upload(const std::vector<float>& host, Buffer* buffer) {
  size_t bytes = host.size() * sizeof(float);
  CHECK(aclrtMalloc(&buffer->dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(buffer->dev, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  int64_t shape[1] = {(int64_t)host.size()};
  int64_t strides[1] = {1};
  buffer->tensor = aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, buffer->dev);
  return 0;
}

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream producer = nullptr, consumer = nullptr;
  CHECK(aclrtCreateStream(&producer));
  CHECK(aclrtCreateStream(&consumer));
  aclrtEvent ready = nullptr;
  CHECK(aclrtCreateEvent(&ready));
  Buffer grad, x, target, mid, final;
  CHECK(Upload({1, 1, 1, 1}, &grad));
  CHECK(Upload({2, 3, 5, 8}, &x));
  CHECK(Upload({2, 3, 5, 8}, &target));
  CHECK(Upload({0, 0, 0, 0}, &mid));
  CHECK(Upload({0, 0, 0, 0}, &final));

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnKlDivBackwardGetWorkspaceSize(grad.tensor, x.tensor, target.tensor, 0, false, mid.tensor,
                                           &workspaceSize, &executor));
  CHECK(aclnnKlDivBackward(nullptr, 0, executor, producer));   // mid = -target
  CHECK(aclrtRecordEvent(ready, producer));
  // BUG: reset too early: the consumer has not waited yet
  CHECK(aclrtResetEvent(ready, producer));
  CHECK(aclrtStreamWaitEvent(consumer, ready));
  CHECK(aclnnKlDivBackwardGetWorkspaceSize(grad.tensor, x.tensor, mid.tensor, 0, false, final.tensor,
                                           &workspaceSize, &executor));
  CHECK(aclnnKlDivBackward(nullptr, 0, executor, consumer));   // final = -mid

  CHECK(aclrtSynchronizeStream(consumer));
  std::vector<float> result(4, 0);
  CHECK(aclrtMemcpy(result.data(), 16, final.dev, 16, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; i++) {
    printf("final[%d] is: %f\n", i, result[i]);
  }
  CHECK(aclrtSynchronizeStream(producer));

  for (Buffer* b : {&grad, &x, &target, &mid, &final}) {
    aclDestroyTensor(b->tensor);
    aclrtFree(b->dev);
  }
  aclrtDestroyEvent(ready);
  aclrtDestroyStream(producer);
  aclrtDestroyStream(consumer);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
