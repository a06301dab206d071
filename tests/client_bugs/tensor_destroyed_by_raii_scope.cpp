// A small RAII wrapper destroys its aclTensor when it goes out of scope. The first phase runs inside
// a block that owns the tensors, and the second phase after it: the executor is launched with
// tensors destroyed after its first phase (on the card, freed descriptors).
// expect: memcheck destroyed tensor
// sites: 35, 59, 63
// output: result[0] is: 0.268941
// output: result[3] is: 0.017986
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

class Tensor {
 public:
  Tensor(void* data, int64_t n) : tensor_(CreateTensor(data, {n})) {}
  ~Tensor() { aclDestroyTensor(tensor_); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  aclTensor* get() const { return tensor_; }

 private:
  aclTensor* tensor_;
};

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  std::vector<float> grad(4, 1.0f), self = {1, 2, 3, 4}, result(4, 0.0f);
  void *gradDev = nullptr, *selfDev = nullptr, *outDev = nullptr;
  CHECK(aclrtMalloc(&gradDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&selfDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMalloc(&outDev, 16, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(aclrtMemcpy(gradDev, 16, grad.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  CHECK(aclrtMemcpy(selfDev, 16, self.data(), 16, ACL_MEMCPY_HOST_TO_DEVICE));
  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  {
    Tensor gradT(gradDev, 4), selfT(selfDev, 4), outT(outDev, 4);
    CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(gradT.get(), selfT.get(), selfT.get(), outT.get(), &workspaceSize,
                                                  &executor));
  }  // BUG: the three tensors are destroyed here, before the second phase
  CHECK(aclnnLogSigmoidBackward(nullptr, 0, executor, stream));
  CHECK(aclrtSynchronizeStream(stream));
  CHECK(aclrtMemcpy(result.data(), 16, outDev, 16, ACL_MEMCPY_DEVICE_TO_HOST));
  for (int i = 0; i < 4; i++) {
    printf("result[%d] is: %f\n", i, result[i]);
  }

  aclrtFree(gradDev);
  aclrtFree(selfDev);
  aclrtFree(outDev);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
