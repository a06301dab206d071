// A multi-label classifier weighs the positive term of each class by posWeight, one row for the
// whole batch, given to aclnnBinaryCrossEntropyWithLogits as a [3, 4] view with stride 0 along the
// batch. The program makes the output with the same helper call and strides: the three rows of
// losses are one row of memory. On a card the cores write those elements in no fixed order, so which
// row's losses stay there changes from run to run (npuemu keeps the last row's: 4 * ln(1 + e^-3) =
// 0.194349 is row 2's fourth loss); rows 1 and 2 of the buffer are never written.
// expect: memcheck overlapping output
// sites: 54, 60
// output: row 0: 0.693147 0.626523 0.380784 0.194349
// output: row 1: 0.000000 0.000000 0.000000 0.000000
#include <cstdio>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_binary_cross_entropy_with_logits.h"

#define CHECK(call)                                                         \
  do {                                                                      \
    int ret_ = (call);                                                      \
    if (ret_ != 0) {                                                        \
      printf("%s failed. ERROR: %d\n%s\n", #call, ret_, aclGetRecentErrMsg()); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

static aclTensor* CreateTensor(void* data, std::vector<int64_t> shape, std::vector<int64_t> strides) {
  return aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(),
                         shape.size(), data);
}

static void* Upload(const std::vector<float>& values) {
  void* dev = nullptr;
  size_t bytes = values.size() * sizeof(float);
  if (aclrtMalloc(&dev, bytes, ACL_MEM_MALLOC_HUGE_FIRST) != 0) return nullptr;
  aclrtMemcpy(dev, bytes, values.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE);
  return dev;
}

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  std::vector<float> logits = {2, -1, 0, 1, -2, 0, 3, 1, 0, 1, 2, 3};
  std::vector<float> labels(12, 1.0f), posWeight = {1, 2, 3, 4}, result(12, 0.0f);
  void* logitsDev = Upload(logits);
  void* labelsDev = Upload(labels);
  void* weightDev = Upload(posWeight);
  void* outDev = Upload(result);  // cleared
  std::vector<int64_t> dense = {4, 1}, expanded = {0, 1};
  aclTensor* x = CreateTensor(logitsDev, {3, 4}, dense);
  aclTensor* t = CreateTensor(labelsDev, {3, 4}, dense);
  aclTensor* p = CreateTensor(weightDev, {3, 4}, expanded);
  // BUG: the output made with the posWeight's strides
  aclTensor* out = CreateTensor(outDev, {3, 4}, expanded);
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  CHECK(aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(x, t, nullptr, p, 0, out, &workspaceSize, &executor));
  void* workspace = nullptr;
  if (workspaceSize > 0) CHECK(aclrtMalloc(&workspace, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclnnBinaryCrossEntropyWithLogits(workspace, workspaceSize, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result.data(), 48, outDev, 48, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int row = 0; row < 2; row++) {
    printf("row %d: %f %f %f %f\n", row, result[4 * row], result[4 * row + 1], result[4 * row + 2], result[4 * row + 3]);
  }

  aclDestroyTensor(x);
  aclDestroyTensor(t);
  aclDestroyTensor(p);
  aclDestroyTensor(out);
  if (workspace) aclrtFree(workspace);
  aclrtFree(logitsDev);
  aclrtFree(labelsDev);
  aclrtFree(weightDev);
  aclrtFree(outDev);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
