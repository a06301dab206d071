// Plain C: two streams each compute half of a result and download their half into one pinned
// buffer, but a copy-paste gives the second download the first half's address (results instead of
// results + HALF): the two DMA writes land on the same bytes in no fixed order, and the second half
// is never written. Here stream 2 is synchronised last: the first half holds its values.
// expect: racecheck race
// sites: 39, 40
// output: results[0] = 5, results[4] = 0
#include <stdio.h>
#include "acl/acl.h"

#define CHECK(call)                                                             \
  do {                                                                          \
    int ret_ = (call);                                                          \
    if (ret_ != 0) {                                                            \
      printf("%s failed. ERROR: %d\n%s\n", #call, ret_, aclGetRecentErrMsg());   \
      return 1;                                                                 \
    }                                                                           \
  } while (0)

#define HALF 4

int main(void) {
  aclrtStream s1 = NULL, s2 = NULL;
  void *a = NULL, *b = NULL;
  float *results = NULL;
  float va[HALF] = {1, 2, 3, 4}, vb[HALF] = {5, 6, 7, 8};
  CHECK(aclInit(NULL));
  CHECK(aclrtSetDevice(0));
  CHECK(aclrtCreateStream(&s1));
  CHECK(aclrtCreateStream(&s2));
  CHECK(aclrtMalloc(&a, sizeof(va), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&b, sizeof(vb), ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMallocHost((void **)&results, 2 * sizeof(va)));
  for (int i = 0; i < 2 * HALF; i++) results[i] = 0;
  CHECK(aclrtMemcpyAsync(a, sizeof(va), va, sizeof(va), ACL_MEMCPY_HOST_TO_DEVICE, s1));
  CHECK(aclrtMemcpyAsync(b, sizeof(vb), vb, sizeof(vb), ACL_MEMCPY_HOST_TO_DEVICE, s2));

  /* BUG: the second half goes to results + HALF */
  CHECK(aclrtMemcpyAsync(results, sizeof(va), a, sizeof(va), ACL_MEMCPY_DEVICE_TO_HOST, s1));
  CHECK(aclrtMemcpyAsync(results, sizeof(vb), b, sizeof(vb), ACL_MEMCPY_DEVICE_TO_HOST, s2));
  CHECK(aclrtSynchronizeStream(s1));
  CHECK(aclrtSynchronizeStream(s2));
  printf("results[0] = %g, results[%d] = %g\n", results[0], HALF, results[HALF]);

  CHECK(aclrtFreeHost(results));
  CHECK(aclrtFree(a));
  CHECK(aclrtFree(b));
  CHECK(aclrtDestroyStream(s1));
  CHECK(aclrtDestroyStream(s2));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  return 0;
}
