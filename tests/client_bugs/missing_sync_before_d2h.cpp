// aclnnKlDivBackward's documented example with step 4 (aclrtSynchronizeStream) forgotten: the result
// is copied back while the kernel is still queued, and the host prints what the output held before.
// The stream is only synchronised at the end, before the memory is freed.
// expect: synccheck missing synchronisation
// sites: 66, 71
// output: result[0] is: 0.000000
// output: result[3] is: 0.000000
#include <cstdio>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_kl_div_backward.h"

#define CHECK_RET(cond, return_expr) \
  do {                               \
    if (!(cond)) {                   \
      return_expr;                   \
    }                                \
  } while (0)

static int CreateAclTensor(const std::vector<float>& hostData, const std::vector<int64_t>& shape,
                           void** deviceAddr, aclTensor** tensor) {
  size_t size = hostData.size() * sizeof(float);
  auto ret = aclrtMalloc(deviceAddr, size, ACL_MEM_MALLOC_HUGE_FIRST);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMalloc failed. ERROR: %d\n", ret); return ret);
  ret = aclrtMemcpy(*deviceAddr, size, hostData.data(), size, ACL_MEMCPY_HOST_TO_DEVICE);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclrtMemcpy failed. ERROR: %d\n", ret); return ret);
  std::vector<int64_t> strides = {2, 1};
  *tensor = aclCreateTensor(shape.data(), shape.size(), ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND,
                            shape.data(), shape.size(), *deviceAddr);
  return 0;
}

int main() {
  int32_t deviceId = 0;
  aclrtStream stream;
  auto ret = aclInit(nullptr);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclInit failed. ERROR: %d\n", ret); return ret);
  ret = aclrtSetDevice(deviceId);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclrtSetDevice failed. ERROR: %d\n", ret); return ret);
  ret = aclrtCreateStream(&stream);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclrtCreateStream failed. ERROR: %d\n", ret); return ret);

  std::vector<int64_t> shape = {2, 2};
  void* gradOutputAddr = nullptr;
  void* selfAddr = nullptr;
  void* targetAddr = nullptr;
  void* outAddr = nullptr;
  aclTensor* gradOutput = nullptr;
  aclTensor* self = nullptr;
  aclTensor* target = nullptr;
  aclTensor* out = nullptr;
  CHECK_RET(CreateAclTensor({2, 3, 5, 8}, shape, &gradOutputAddr, &gradOutput) == 0, return 1);
  CHECK_RET(CreateAclTensor({2, 3, 5, 8}, shape, &selfAddr, &self) == 0, return 1);
  CHECK_RET(CreateAclTensor({2, 3, 5, 8}, shape, &targetAddr, &target) == 0, return 1);
  CHECK_RET(CreateAclTensor({0, 0, 0, 0}, shape, &outAddr, &out) == 0, return 1);

  uint64_t workspaceSize = 0;
  aclOpExecutor* executor = nullptr;
  ret = aclnnKlDivBackwardGetWorkspaceSize(gradOutput, self, target, 0, false, out, &workspaceSize, &executor);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclnnKlDivBackwardGetWorkspaceSize failed. ERROR: %d\n", ret); return ret);
  void* workspaceAddr = nullptr;
  if (workspaceSize > 0) {
    ret = aclrtMalloc(&workspaceAddr, workspaceSize, ACL_MEM_MALLOC_HUGE_FIRST);
    CHECK_RET(ret == ACL_SUCCESS, printf("allocate workspace failed. ERROR: %d\n", ret); return ret);
  }
  ret = aclnnKlDivBackward(workspaceAddr, workspaceSize, executor, stream);
  CHECK_RET(ret == ACL_SUCCESS, printf("aclnnKlDivBackward failed. ERROR: %d\n", ret); return ret);

  // BUG: step 4, aclrtSynchronizeStream(stream), is missing here
  std::vector<float> resultData(4, 0);
  ret = aclrtMemcpy(resultData.data(), resultData.size() * sizeof(float), outAddr, 4 * sizeof(float),
                    ACL_MEMCPY_DEVICE_TO_HOST);
  CHECK_RET(ret == ACL_SUCCESS, printf("copy result from device to host failed. ERROR: %d\n", ret); return ret);
  for (int i = 0; i < 4; i++) {
    printf("result[%d] is: %f\n", i, resultData[i]);
  }

  aclrtSynchronizeStream(stream);
  aclDestroyTensor(gradOutput);
  aclDestroyTensor(self);
  aclDestroyTensor(target);
  aclDestroyTensor(out);
  aclrtFree(gradOutputAddr);
  aclrtFree(selfAddr);
  aclrtFree(targetAddr);
  aclrtFree(outAddr);
  if (workspaceSize > 0) {
    aclrtFree(workspaceAddr);
  }
  aclrtDestroyStream(stream);
  aclrtResetDevice(deviceId);
  aclFinalize();
  return 0;
}
