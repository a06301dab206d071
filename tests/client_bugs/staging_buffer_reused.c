// Plain C: batches are uploaded through one host staging buffer. Each batch is written into the
// buffer and queued with aclrtMemcpyAsync, and the stream is synchronised only once at the end: the
// host overwrites the staging buffer while earlier copies have not run, so every device slot ends
// up holding the last batch.
// expect: synccheck host memory in flight
// sites: 42, 44
// output: slot 0 holds batch 2
// output: slot 1 holds batch 2
// output: slot 2 holds batch 2
#include <stdio.h>
#include <string.h>
#include "acl/acl.h"

#define CHECK(call)                                                             \
  do {                                                                          \
    int ret_ = (call);                                                          \
    if (ret_ != 0) {                                                            \
      printf("%s failed. ERROR: %d\n%s\n", #call, ret_, aclGetRecentErrMsg());   \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

#define BATCHES 3
#define N 64

int main(void) {
  static float staging[N];
  float back[N];
  void* slots[BATCHES];
  aclrtStream stream = NULL;
  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  CHECK(aclrtCreateStream(&stream));
  for (int b = 0; b < BATCHES; b++) {
    CHECK(aclrtMalloc(&slots[b], sizeof(staging), ACL_MEM_MALLOC_HUGE_FIRST));
  }

  for (int b = 0; b < BATCHES; b++) {
    for (int i = 0; i < N; i++) {
      staging[i] = (float)b;   /* BUG: the previous batch's copy may not have run yet */
    }
    CHECK(aclrtMemcpyAsync(slots[b], sizeof(staging), staging, sizeof(staging), ACL_MEMCPY_HOST_TO_DEVICE, stream));
  }
  CHECK(aclrtSynchronizeStream(stream));

  for (int b = 0; b < BATCHES; b++) {
    CHECK(aclrtMemcpy(back, sizeof(back), slots[b], sizeof(back), ACL_MEMCPY_DEVICE_TO_HOST));
    printf("slot %d holds batch %g\n", b, back[0]);
    CHECK(aclrtFree(slots[b]));
  }
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  return 0;
}
