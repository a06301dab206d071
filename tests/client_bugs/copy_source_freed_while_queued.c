// Plain C: a buffer is duplicated on the device with aclrtMemcpyAsync and the source is freed right
// after, as if the copy were done: it is only queued. When it runs its source is freed memory, so it
// faults (the synchronisation returns 507015) and the copy holds nothing it should.
// expect: synccheck memory freed while in use
// expect: memcheck invalid device access
// sites: 31, 35, 37
// output: aclrtSynchronizeStream returned 507015
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

int main(void) {
  float values[16];
  void *original = NULL, *duplicate = NULL;
  aclrtStream stream = NULL;
  for (int i = 0; i < 16; i++) {
    values[i] = (float)i;
  }
  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  CHECK(aclrtCreateStream(&stream));
  CHECK(aclrtMalloc(&original, sizeof(values), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&duplicate, sizeof(values), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(original, sizeof(values), values, sizeof(values), ACL_MEMCPY_HOST_TO_DEVICE));

  CHECK(aclrtMemcpyAsync(duplicate, sizeof(values), original, sizeof(values), ACL_MEMCPY_DEVICE_TO_DEVICE,
                         stream));
  CHECK(aclrtFree(original));   /* BUG: the copy above is only queued */
  printf("aclrtSynchronizeStream returned %d\n", aclrtSynchronizeStream(stream));

  CHECK(aclrtFree(duplicate));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  return 0;
}
