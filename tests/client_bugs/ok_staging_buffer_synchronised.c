// Control: upload_then_readback.c and staging_buffer_reused.c fixed, in plain C: each batch goes
// through the staging buffer only after the previous copy was synchronised, and the read back
// waits for the stream. Nothing to report.
// expect: none
// output: slot 0 holds batch 0
// output: slot 2 holds batch 2
// output: verification passed
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
    CHECK(aclrtSynchronizeStream(stream));   /* the previous batch's copy has run: the buffer is free */
    for (int i = 0; i < N; i++) {
      staging[i] = (float)b;
    }
    CHECK(aclrtMemcpyAsync(slots[b], sizeof(staging), staging, sizeof(staging), ACL_MEMCPY_HOST_TO_DEVICE, stream));
  }
  CHECK(aclrtSynchronizeStream(stream));

  int ok = 1;
  for (int b = 0; b < BATCHES; b++) {
    CHECK(aclrtMemcpy(back, sizeof(back), slots[b], sizeof(back), ACL_MEMCPY_DEVICE_TO_HOST));
    printf("slot %d holds batch %g\n", b, back[0]);
    ok = ok && back[N - 1] == (float)b;
    CHECK(aclrtFree(slots[b]));
  }
  printf("verification %s\n", ok ? "passed" : "FAILED");
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  return 0;
}
