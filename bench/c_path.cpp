// The C side of bench/c_path.py: the calls it times, from C, through npuemu's toolkit.
//
// Built by c_path.py with the documented recipe (g++ -O2 ... -lopapi_nn -lopapi_math -lascendcl -lnnopbase)
// and driven over stdin, so that its rounds interleave with the Python rounds of the same run:
//
//   call N     N whole 4x4 float32 LogSigmoidBackward calls: GetWorkspaceSize + launch + aclrtSynchronizeStream
//   memcpy N   N 16-byte host-to-device aclrtMemcpy calls
//   trivial N  N aclrtGetLastError calls (the bridge's fixed cost per call: almost no Python work behind it)
//   quit       release everything, aclFinalize
//
// Each command answers one line: the nanoseconds of each call (std::chrono::steady_clock), space-separated.
// After its set-up and warm-up it prints "ready" and the 16 results of the call (%a, exact), or
// "error <message>" and exits with status 1.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"

namespace {

const int kWarmup = 200;
const int64_t kShape[2] = {4, 4}, kStrides[2] = {4, 1};
const size_t kElements = 16, kBytes = kElements * sizeof(float);

[[noreturn]] void fail(const char *what, long long ret) {
  const char *message = aclGetRecentErrMsg();
  std::printf("error %s returned %lld: %s\n", what, ret, message != nullptr ? message : "(no message)");
  std::fflush(stdout);
  std::exit(1);
}

#define CHECK(expr) do { long long r_ = (long long)(expr); if (r_ != 0) fail(#expr, r_); } while (0)

struct Bench {
  aclrtStream stream = nullptr;
  void *dev[4] = {nullptr, nullptr, nullptr, nullptr};  // gradOutput, self, buffer, gradInput
  aclTensor *tensors[4] = {nullptr, nullptr, nullptr, nullptr};
  void *workspace = nullptr;
  uint64_t workspace_size = 0;
  void *copy_target = nullptr;
  float copy_source[4] = {1.0f, 2.0f, 3.0f, 4.0f};  // 16 bytes

  void set_up() {
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    float host[3][kElements];
    for (size_t i = 0; i < kElements; ++i) {  // the values c_path.py gives its Python call
      host[0][i] = 1.0f + 0.125f * static_cast<float>(i);
      host[1][i] = -2.0f + 0.25f * static_cast<float>(i);
      host[2][i] = host[1][i];
    }
    for (int k = 0; k < 4; ++k) {
      CHECK(aclrtMalloc(&dev[k], kBytes, ACL_MEM_MALLOC_HUGE_FIRST));
      if (k < 3) {
        CHECK(aclrtMemcpy(dev[k], kBytes, host[k], kBytes, ACL_MEMCPY_HOST_TO_DEVICE));
      } else {
        CHECK(aclrtMemset(dev[k], kBytes, 0, kBytes));
      }
      tensors[k] = aclCreateTensor(kShape, 2, ACL_FLOAT, kStrides, 0, ACL_FORMAT_ND, kShape, 2, dev[k]);
      if (tensors[k] == nullptr) fail("aclCreateTensor", 0);
    }
    CHECK(aclrtMalloc(&copy_target, sizeof(copy_source), ACL_MEM_MALLOC_HUGE_FIRST));
    // The workspace is allocated once, from a first call, as a program caches it (and as the Python side does).
    aclOpExecutor *executor = nullptr;
    CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], tensors[3], &workspace_size,
                                                  &executor));
    if (workspace_size > 0) CHECK(aclrtMalloc(&workspace, workspace_size, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclnnLogSigmoidBackward(workspace, workspace_size, executor, stream));
    CHECK(aclrtSynchronizeStream(stream));
  }

  // The whole two-phase call.
  void call() {
    uint64_t size = 0;
    aclOpExecutor *executor = nullptr;
    CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(tensors[0], tensors[1], tensors[2], tensors[3], &size, &executor));
    if (size > workspace_size) fail("the workspace grew", static_cast<long long>(size));
    CHECK(aclnnLogSigmoidBackward(size ? workspace : nullptr, size, executor, stream));
    CHECK(aclrtSynchronizeStream(stream));
  }

  void copy() { CHECK(aclrtMemcpy(copy_target, sizeof(copy_source), copy_source, sizeof(copy_source),
                                  ACL_MEMCPY_HOST_TO_DEVICE)); }

  void trivial() {
    if (aclrtGetLastError(ACL_RT_THREAD_LEVEL) != ACL_SUCCESS) fail("aclrtGetLastError", 1);
  }

  void print_result() {
    float out[kElements];
    CHECK(aclrtMemcpy(out, kBytes, dev[3], kBytes, ACL_MEMCPY_DEVICE_TO_HOST));
    std::printf("ready");
    for (float value : out) std::printf(" %a", static_cast<double>(value));
    std::printf("\n");
    std::fflush(stdout);
  }

  void tear_down() {
    for (int k = 0; k < 4; ++k) {
      CHECK(aclDestroyTensor(tensors[k]));
      CHECK(aclrtFree(dev[k]));
    }
    if (workspace != nullptr) CHECK(aclrtFree(workspace));
    CHECK(aclrtFree(copy_target));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
  }
};

// The nanoseconds of each of `count` calls of `fn`, on one line.
template <typename Fn>
void timed(Fn fn, long count, std::vector<long long> *ns) {
  ns->clear();
  for (long i = 0; i < count; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    fn();
    const auto end = std::chrono::steady_clock::now();
    ns->push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(end - begin).count());
  }
  std::string line;
  for (long long value : *ns) line += std::to_string(value) + ' ';
  if (!line.empty()) line.back() = '\n';
  std::fputs(line.c_str(), stdout);
  std::fflush(stdout);
}

}  // namespace

int main() {
  Bench bench;
  bench.set_up();
  for (int i = 0; i < kWarmup; ++i) {
    bench.call();
    bench.copy();
    bench.trivial();
  }
  bench.print_result();
  std::vector<long long> ns;
  char command[64];
  long count = 0;
  while (std::scanf("%63s", command) == 1) {
    if (std::strcmp(command, "quit") == 0) break;
    if (std::scanf("%ld", &count) != 1 || count <= 0) {
      std::printf("error bad command %s\n", command);
      return 1;
    }
    if (std::strcmp(command, "call") == 0) {
      timed([&] { bench.call(); }, count, &ns);
    } else if (std::strcmp(command, "memcpy") == 0) {
      timed([&] { bench.copy(); }, count, &ns);
    } else if (std::strcmp(command, "trivial") == 0) {
      timed([&] { bench.trivial(); }, count, &ns);
    } else {
      std::printf("error unknown command %s\n", command);
      return 1;
    }
  }
  bench.tear_down();
  std::printf("done\n");
  return 0;
}
