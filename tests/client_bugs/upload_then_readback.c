// Plain C: an input is uploaded with aclrtMemcpyAsync and read straight back with aclrtMemcpy to
// verify it, without synchronising. The synchronous copy does not wait for the queued one: it reads
// device bytes nothing has written yet (the poison pattern, NaN) instead of the values.
// expect: synccheck missing synchronisation
// expect: initcheck uninitialised read
// sites: 30, 32, 34
// output: check[0] = -nan (expected 1.5)
// output: verification FAILED
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
  float values[8] = {1.5f, 2.5f, 3.5f, 4.5f, 5.5f, 6.5f, 7.5f, 8.5f};
  float check[8];
  void* dev = NULL;
  aclrtStream stream = NULL;
  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  CHECK(aclrtCreateStream(&stream));
  CHECK(aclrtMalloc(&dev, sizeof(values), ACL_MEM_MALLOC_HUGE_FIRST));

  CHECK(aclrtMemcpyAsync(dev, sizeof(values), values, sizeof(values), ACL_MEMCPY_HOST_TO_DEVICE, stream));
  /* BUG: no aclrtSynchronizeStream(stream) before reading back */
  CHECK(aclrtMemcpy(check, sizeof(check), dev, sizeof(values), ACL_MEMCPY_DEVICE_TO_HOST));
  printf("check[0] = %g (expected %g)\n", check[0], values[0]);
  printf("verification %s\n", memcmp(check, values, sizeof(values)) == 0 ? "passed" : "FAILED");

  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtFree(dev));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  return 0;
}
