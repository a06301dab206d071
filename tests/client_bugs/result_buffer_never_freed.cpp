// A scoring function allocates a device buffer for its result on every call, copies the result
// out and frees its inputs, but never the result buffer: each call leaks it (two calls, two leaks,
// both made at the same line of Score, called from main).
// expect: leakcheck leak
// sites: 38, 65
// output: score 0: 0.268941 0.119203 0.047426 0.017986
// output: score 1: 0.268941 0.119203 0.047426 0.017986
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

static int Score(aclrtStream stream, const std::vector<float>& x, std::vector<float>* result) {
  const size_t bytes = x.size() * sizeof(float);
  std::vector<float> ones(x.size(), 1.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&selfDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, bytes, ones.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(selfDev, bytes, x.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
  aclTensor* gradT = CreateTensor(gradDev, {(int64_t)x.size()});
  aclTensor* selfT = CreateTensor(selfDev, {(int64_t)x.size()});
  aclTensor* outT = CreateTensor(outDev, {(int64_t)x.size()});
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT, selfT, selfT, outT, &workspaceSize, &executor));
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result->data(), bytes, outDev, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
  aclDestroyTensor(gradT);
  aclDestroyTensor(selfT);
  aclDestroyTensor(outT);
  aclrtFree(gradDev);
  aclrtFree(selfDev);
  return 0;  // BUG: outDev is never freed
}

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  std::vector<float> x = {1, 2, 3, 4}, result(4, 0.0f);
  for (int call = 0; call < 2; call++) {
    CHECK(Score(stream, x, &result));
    printf("score %d: %f %f %f %f\n", call, result[0], result[1], result[2], result[3]);
  }
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
