"""The C toolkit from several host threads, as a C++ program uses the card's runtime: each thread has
its own device, context, stream, tensors and error messages (the runtime's per-thread state lives in
the embedded interpreter, behind the bridge); kernels of two threads run while the other thread calls
into the runtime; and the libraries load with dlopen(RTLD_LAZY) by absolute path, without
LD_LIBRARY_PATH, as op-plugin style loaders load them."""

import pytest

import ctoolkit

RUN_TIMEOUT = 120

# Shared by the C++ programs: a status check that names the line, and LogSigmoidBackward on device
# buffers (gradInput = gradOutput * sigmoid(-self); `buffer` is ignored by the operator).
COMMON = r"""
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include "acl/acl.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"

#define CHECK(expr) do { long long r_ = (long long)(expr); if (r_ != 0) { \
    std::fprintf(stderr, "line %d: %s returned %lld: %s\n", __LINE__, #expr, r_, \
                 aclGetRecentErrMsg() ? aclGetRecentErrMsg() : "(no message)"); std::exit(10); } } while (0)
#define EXPECT(cond, ...) do { if (!(cond)) { std::fprintf(stderr, "line %d: expected %s: ", __LINE__, #cond); \
    std::fprintf(stderr, __VA_ARGS__); std::fprintf(stderr, "\n"); std::exit(11); } } while (0)

// The data of problem `p`: n floats each, deterministic and different for each p.
static void make_inputs(int p, size_t n, std::vector<float> *grad, std::vector<float> *self) {
  grad->resize(n);
  self->resize(n);
  for (size_t i = 0; i < n; ++i) {
    (*grad)[i] = 0.5f + 0.25f * (float)((i * 7 + p) % 11) + 0.125f * (float)p;
    (*self)[i] = 6.0f * std::sin(0.013 * (double)i + 0.7 * p) - 0.01f * (float)p;
  }
}

// Device buffers and tensors of one LogSigmoidBackward problem, on the calling thread's context.
struct Problem {
  std::vector<int64_t> shape, strides;
  size_t n = 0;
  void *dev[4] = {nullptr, nullptr, nullptr, nullptr};  // gradOutput, self, buffer, gradInput
  aclTensor *t[4] = {nullptr, nullptr, nullptr, nullptr};

  void create(int64_t rows, int64_t cols, const std::vector<float> &grad, const std::vector<float> &self) {
    shape = {rows, cols};
    strides = {cols, 1};
    n = (size_t)(rows * cols);
    const size_t bytes = n * sizeof(float);
    const std::vector<float> *host[4] = {&grad, &self, &self, nullptr};
    for (int k = 0; k < 4; ++k) {
      CHECK(aclrtMalloc(&dev[k], bytes, ACL_MEM_MALLOC_HUGE_FIRST));
      if (host[k] != nullptr) {
        CHECK(aclrtMemcpy(dev[k], bytes, host[k]->data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
      } else {
        CHECK(aclrtMemset(dev[k], bytes, 0, bytes));
      }
      t[k] = aclCreateTensor(shape.data(), 2, ACL_FLOAT, strides.data(), 0, ACL_FORMAT_ND, shape.data(), 2, dev[k]);
      EXPECT(t[k] != nullptr, "aclCreateTensor: %s", aclGetRecentErrMsg());
    }
  }
  // Both phases, queued on `stream` (a workspace, if the operator asks for one, is kept in `ws`).
  void launch(aclrtStream stream, void **ws, uint64_t *ws_size) {
    uint64_t size = 0;
    aclOpExecutor *executor = nullptr;
    CHECK(aclnnLogSigmoidBackwardGetWorkspaceSize(t[0], t[1], t[2], t[3], &size, &executor));
    if (size > *ws_size) {
      if (*ws != nullptr) CHECK(aclrtFree(*ws));
      CHECK(aclrtMalloc(ws, size, ACL_MEM_MALLOC_HUGE_FIRST));
      *ws_size = size;
    }
    CHECK(aclnnLogSigmoidBackward(size ? *ws : nullptr, size, executor, stream));
  }
  std::vector<float> result() const {
    std::vector<float> out(n);
    CHECK(aclrtMemcpy(out.data(), n * sizeof(float), dev[3], n * sizeof(float), ACL_MEMCPY_DEVICE_TO_HOST));
    return out;
  }
  void destroy() {
    for (int k = 0; k < 4; ++k) {
      CHECK(aclDestroyTensor(t[k]));
      CHECK(aclrtFree(dev[k]));
    }
  }
};
"""

EIGHT_THREADS = COMMON + r"""
#include <condition_variable>
#include <mutex>
#include <thread>

const int kThreads = 8, kLaunches = 50, kRows = 64;

struct Barrier {  // C++11 has none
  std::mutex m;
  std::condition_variable cv;
  int waiting = 0, generation = 0;
  void wait() {
    std::unique_lock<std::mutex> lock(m);
    const int g = generation;
    if (++waiting == kThreads) {
      waiting = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != g; });
    }
  }
};

Barrier barrier;
std::vector<float> expected[kThreads];
std::string failures[kThreads];

#define T_EXPECT(cond, ...) do { if (!(cond)) { char b_[512]; std::snprintf(b_, sizeof(b_), __VA_ARGS__); \
    failures[id] += std::string("line ") + std::to_string(__LINE__) + ": " + #cond + ": " + b_ + "\n"; } } while (0)
#define T_CHECK(expr) do { long long r_ = (long long)(expr); if (r_ != 0) { const char *m_ = aclGetRecentErrMsg(); \
    T_EXPECT(false, "%s returned %lld: %s", #expr, r_, m_ ? m_ : "(no message)"); } } while (0)

void worker(int id) {
  // Still this thread's own device and context after each step?
  aclrtContext context = nullptr;
  auto still_mine = [&](const char *step) {
    aclrtContext current = nullptr;
    int32_t device = -1;
    T_CHECK(aclrtGetCurrentContext(&current));
    T_CHECK(aclrtGetDevice(&device));
    T_EXPECT(current == context, "after %s: current context %p, expected the thread's own %p", step, current, context);
    T_EXPECT(device == id, "after %s: current device %d, expected %d", step, device, id);
  };
  barrier.wait();  // all threads start together
  T_CHECK(aclrtSetDevice(id));
  int32_t device = -1;
  T_CHECK(aclrtGetDevice(&device));
  T_EXPECT(device == id, "after aclrtSetDevice: device %d, expected %d", device, id);
  T_CHECK(aclrtCreateContext(&context, id));
  T_EXPECT(context != nullptr, "aclrtCreateContext gave null");
  still_mine("aclrtCreateContext");
  aclrtStream stream = nullptr;
  T_CHECK(aclrtCreateStream(&stream));
  still_mine("aclrtCreateStream");
  std::vector<float> grad, self;
  make_inputs(id, (size_t)kRows * (100 + id), &grad, &self);
  Problem problem;
  problem.create(kRows, 100 + id, grad, self);
  still_mine("creating the tensors");
  void *ws = nullptr;
  uint64_t ws_size = 0;
  for (int i = 0; i < kLaunches; ++i) {
    problem.launch(stream, &ws, &ws_size);
    still_mine("a launch");
  }
  T_CHECK(aclrtSynchronizeStream(stream));
  still_mine("aclrtSynchronizeStream");
  std::vector<float> got = problem.result();
  still_mine("copying back");
  T_EXPECT(got.size() == expected[id].size() && std::memcmp(got.data(), expected[id].data(), got.size() * 4) == 0,
           "result differs from the serial run of the main thread (first value %g, expected %g)",
           got.empty() ? 0.0 : got[0], expected[id].empty() ? 0.0 : expected[id][0]);

  // A thread-specific error, made by all threads at once: each reads its own message.
  aclGetRecentErrMsg();  // nothing old left
  barrier.wait();
  const int bad = 100 + id;
  const aclError ret = aclrtSetDevice(bad);
  T_EXPECT(ret == ACL_ERROR_RT_INVALID_DEVICEID, "aclrtSetDevice(%d) returned %d, expected %d", bad, ret,
           ACL_ERROR_RT_INVALID_DEVICEID);
  barrier.wait();  // every thread has made its error before any reads its message
  const char *message = aclGetRecentErrMsg();
  const std::string text = message ? message : "";
  const std::string mine = "found " + std::to_string(bad);
  T_EXPECT(text.find(mine) != std::string::npos, "aclGetRecentErrMsg() = \"%s\", expected it to name \"%s\"",
           text.c_str(), mine.c_str());
  for (int other = 0; other < kThreads; ++other) {
    const std::string theirs = "found " + std::to_string(100 + other);
    T_EXPECT(other == id || text.find(theirs) == std::string::npos,
             "aclGetRecentErrMsg() = \"%s\" names another thread's error (\"%s\")", text.c_str(), theirs.c_str());
  }
  message = aclGetRecentErrMsg();
  T_EXPECT(message == nullptr, "a second aclGetRecentErrMsg() = \"%s\", expected null (reading clears)", message);
  still_mine("the failed aclrtSetDevice");
  barrier.wait();

  problem.destroy();
  if (ws != nullptr) T_CHECK(aclrtFree(ws));
  T_CHECK(aclrtDestroyStream(stream));
  T_CHECK(aclrtDestroyContext(context));
  T_CHECK(aclrtResetDevice(id));
}

int main() {
  CHECK(aclInit(nullptr));
  // The reference: every thread's problem run serially on this thread first.
  CHECK(aclrtSetDevice(0));
  aclrtContext main_context = nullptr;
  CHECK(aclrtGetCurrentContext(&main_context));
  aclrtStream stream = nullptr;
  CHECK(aclrtCreateStream(&stream));
  void *ws = nullptr;
  uint64_t ws_size = 0;
  for (int p = 0; p < kThreads; ++p) {
    std::vector<float> grad, self;
    make_inputs(p, (size_t)kRows * (100 + p), &grad, &self);
    Problem problem;
    problem.create(kRows, 100 + p, grad, self);
    problem.launch(stream, &ws, &ws_size);
    CHECK(aclrtSynchronizeStream(stream));
    expected[p] = problem.result();
    problem.destroy();
    for (size_t i = 0; i < expected[p].size(); ++i) {  // sanity: the operator's formula
      const double want = grad[i] / (1.0 + std::exp((double)self[i]));
      EXPECT(std::fabs(expected[p][i] - want) <= 1e-4 * (std::fabs(want) + 1e-3), "problem %d [%zu]: %g, expected %g",
             p, i, expected[p][i], want);
    }
  }
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (auto &thread : threads) thread.join();
  int failed = 0;
  for (int id = 0; id < kThreads; ++id) {
    if (!failures[id].empty()) {
      std::fprintf(stderr, "thread %d:\n%s", id, failures[id].c_str());
      ++failed;
    }
  }
  aclrtContext current = nullptr;  // the main thread's context is untouched by the workers'
  CHECK(aclrtGetCurrentContext(&current));
  EXPECT(current == main_context, "main thread's context %p after the workers, expected %p", current, main_context);
  if (ws != nullptr) CHECK(aclrtFree(ws));
  CHECK(aclrtDestroyStream(stream));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  if (failed) return 1;
  std::printf("all %d threads ok\n", kThreads);
  return 0;
}
"""

NO_DEVICE_THREAD = COMMON + r"""
#include <thread>

int main() {
  CHECK(aclInit(nullptr));
  CHECK(aclrtSetDevice(0));  // the main thread has a device, hence a context
  aclrtStream mine = nullptr;
  CHECK(aclrtCreateStream(&mine));
  aclError created = -1, current = -1;
  std::string message;
  aclrtStream stream = nullptr;
  aclrtContext context = nullptr;
  std::thread other([&] {  // never calls aclrtSetDevice: no context on this thread, as on the card
    created = aclrtCreateStream(&stream);
    const char *text = aclGetRecentErrMsg();
    message = text ? text : "";
    current = aclrtGetCurrentContext(&context);
    aclGetRecentErrMsg();
  });
  other.join();
  EXPECT(created == ACL_ERROR_RT_CONTEXT_NULL, "aclrtCreateStream on a thread without a device returned %d", created);
  EXPECT(stream == nullptr, "aclrtCreateStream failed but wrote a stream %p", stream);
  EXPECT(message.find("aclrtCreateStream") != std::string::npos && message.find("context") != std::string::npos,
         "its message names the call and the missing context: \"%s\"", message.c_str());
  EXPECT(current == ACL_ERROR_RT_CONTEXT_NULL, "aclrtGetCurrentContext on that thread returned %d", current);
  // The main thread still has its own.
  aclrtStream again = nullptr;
  CHECK(aclrtCreateStream(&again));
  CHECK(aclrtDestroyStream(again));
  CHECK(aclrtDestroyStream(mine));
  CHECK(aclrtResetDevice(0));
  CHECK(aclFinalize());
  std::printf("ok\n");
  return 0;
}
"""

# A plain C loader: dlopen(RTLD_LAZY) by absolute path (no RTLD_GLOBAL), dlsym, nothing linked.
DLOPEN_LOADER = r"""
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "acl/acl.h"

typedef struct aclTensor aclTensor;
typedef struct aclOpExecutor aclOpExecutor;

static void *open_library(const char *root, const char *name) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/lib64/%s", root, name);
  void *handle = dlopen(path, RTLD_LAZY);
  if (handle == NULL) {
    fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
    exit(20);
  }
  return handle;
}

static void *symbol(void *library, const char *name) {
  void *address = dlsym(library, name);
  if (address == NULL) {
    fprintf(stderr, "dlsym(%s): %s\n", name, dlerror());
    exit(21);
  }
  return address;
}

#define CHECK(expr) do { int r_ = (int)(expr); if (r_ != 0) { \
    fprintf(stderr, "line %d: %s returned %d: %s\n", __LINE__, #expr, r_, get_msg() ? get_msg() : "?"); \
    exit(22); } } while (0)

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  void *rt = open_library(argv[1], "libascendcl.so");
  void *base = open_library(argv[1], "libnnopbase.so");
  void *ops = open_library(argv[1], "libopapi_nn.so");

  aclError (*init)(const char *) = (aclError (*)(const char *))symbol(rt, "aclInit");
  aclError (*finalize)(void) = (aclError (*)(void))symbol(rt, "aclFinalize");
  const char *(*get_msg)(void) = (const char *(*)(void))symbol(rt, "aclGetRecentErrMsg");
  aclError (*set_device)(int32_t) = (aclError (*)(int32_t))symbol(rt, "aclrtSetDevice");
  aclError (*reset_device)(int32_t) = (aclError (*)(int32_t))symbol(rt, "aclrtResetDevice");
  aclError (*create_stream)(aclrtStream *) = (aclError (*)(aclrtStream *))symbol(rt, "aclrtCreateStream");
  aclError (*destroy_stream)(aclrtStream) = (aclError (*)(aclrtStream))symbol(rt, "aclrtDestroyStream");
  aclError (*sync)(aclrtStream) = (aclError (*)(aclrtStream))symbol(rt, "aclrtSynchronizeStream");
  aclError (*rt_malloc)(void **, size_t, aclrtMemMallocPolicy) =
      (aclError (*)(void **, size_t, aclrtMemMallocPolicy))symbol(rt, "aclrtMalloc");
  aclError (*rt_free)(void *) = (aclError (*)(void *))symbol(rt, "aclrtFree");
  aclError (*memcpy_)(void *, size_t, const void *, size_t, aclrtMemcpyKind) =
      (aclError (*)(void *, size_t, const void *, size_t, aclrtMemcpyKind))symbol(rt, "aclrtMemcpy");
  aclTensor *(*create_tensor)(const int64_t *, uint64_t, aclDataType, const int64_t *, int64_t, aclFormat,
                              const int64_t *, uint64_t, void *) =
      (aclTensor *(*)(const int64_t *, uint64_t, aclDataType, const int64_t *, int64_t, aclFormat, const int64_t *,
                      uint64_t, void *))symbol(base, "aclCreateTensor");
  int32_t (*destroy_tensor)(const aclTensor *) = (int32_t (*)(const aclTensor *))symbol(base, "aclDestroyTensor");
  int32_t (*first)(const aclTensor *, const aclTensor *, const aclTensor *, aclTensor *, uint64_t *,
                   aclOpExecutor **) =
      (int32_t (*)(const aclTensor *, const aclTensor *, const aclTensor *, aclTensor *, uint64_t *,
                   aclOpExecutor **))symbol(ops, "aclnnLogSigmoidBackwardGetWorkspaceSize");
  int32_t (*second)(void *, uint64_t, aclOpExecutor *, aclrtStream) =
      (int32_t (*)(void *, uint64_t, aclOpExecutor *, aclrtStream))symbol(ops, "aclnnLogSigmoidBackward");

  CHECK(init(NULL));
  CHECK(set_device(0));
  aclrtStream stream = NULL;
  CHECK(create_stream(&stream));
  const float host[3][4] = {{1, 1, 1, 1}, {1, 2, 3, 4}, {1, 2, 3, 4}};
  const int64_t shape[2] = {2, 2}, strides[2] = {2, 1};
  void *dev[4];
  aclTensor *t[4];
  for (int k = 0; k < 4; ++k) {
    CHECK(rt_malloc(&dev[k], sizeof(host[0]), ACL_MEM_MALLOC_HUGE_FIRST));
    if (k < 3) CHECK(memcpy_(dev[k], sizeof(host[0]), host[k], sizeof(host[0]), ACL_MEMCPY_HOST_TO_DEVICE));
    t[k] = create_tensor(shape, 2, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 2, dev[k]);
    if (t[k] == NULL) {
      fprintf(stderr, "aclCreateTensor: %s\n", get_msg());
      return 23;
    }
  }
  uint64_t ws_size = 0;
  aclOpExecutor *executor = NULL;
  CHECK(first(t[0], t[1], t[2], t[3], &ws_size, &executor));
  void *ws = NULL;
  if (ws_size > 0) CHECK(rt_malloc(&ws, ws_size, ACL_MEM_MALLOC_HUGE_FIRST));
  CHECK(second(ws, ws_size, executor, stream));
  CHECK(sync(stream));
  float out[4] = {0, 0, 0, 0};
  CHECK(memcpy_(out, sizeof(out), dev[3], sizeof(out), ACL_MEMCPY_DEVICE_TO_HOST));
  printf("%f %f %f %f\n", out[0], out[1], out[2], out[3]);
  for (int k = 0; k < 4; ++k) {
    CHECK(destroy_tensor(t[k]));
    CHECK(rt_free(dev[k]));
  }
  if (ws != NULL) CHECK(rt_free(ws));
  CHECK(destroy_stream(stream));
  CHECK(reset_device(0));
  CHECK(finalize());
  return 0;
}
"""

TWO_BIG_THREADS = COMMON + r"""
#include <thread>

const int kThreads = 2, kLaunches = 4;
const int64_t kRows = 2048, kCols = 2048;  // 4M floats per tensor

std::string failures[kThreads];

void worker(int id) {
  std::string &failure = failures[id];
  auto check = [&](long long ret, const char *what) {
    if (ret != 0 && failure.empty()) {
      const char *m = aclGetRecentErrMsg();
      failure = std::string(what) + " returned " + std::to_string(ret) + ": " + (m ? m : "(no message)");
    }
    return ret == 0;
  };
  if (!check(aclrtSetDevice(id), "aclrtSetDevice")) return;
  aclrtStream stream = nullptr;
  if (!check(aclrtCreateStream(&stream), "aclrtCreateStream")) return;
  std::vector<float> grad, self;
  make_inputs(10 + id, (size_t)(kRows * kCols), &grad, &self);
  Problem problem;
  problem.create(kRows, kCols, grad, self);
  void *ws = nullptr;
  uint64_t ws_size = 0;
  for (int i = 0; i < kLaunches; ++i) {  // each synchronised: the kernel runs while the other thread calls in
    problem.launch(stream, &ws, &ws_size);
    if (!check(aclrtSynchronizeStream(stream), "aclrtSynchronizeStream")) return;
  }
  std::vector<float> got = problem.result();
  size_t wrong = 0, first_wrong = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = grad[i] / (1.0 + std::exp((double)self[i]));
    if (!(std::fabs(got[i] - want) <= 1e-4 * (std::fabs(want) + 1e-3)) && wrong++ == 0) first_wrong = i;
  }
  if (wrong) {
    failure = std::to_string(wrong) + " of " + std::to_string(got.size()) + " values wrong, first [" +
              std::to_string(first_wrong) + "] = " + std::to_string(got[first_wrong]);
  }
  problem.destroy();
  if (ws != nullptr) check(aclrtFree(ws), "aclrtFree");
  check(aclrtDestroyStream(stream), "aclrtDestroyStream");
  check(aclrtResetDevice(id), "aclrtResetDevice");
}

int main() {
  CHECK(aclInit(nullptr));
  std::vector<std::thread> threads;
  for (int id = 0; id < kThreads; ++id) threads.emplace_back(worker, id);
  for (auto &thread : threads) thread.join();
  int failed = 0;
  for (int id = 0; id < kThreads; ++id) {
    if (!failures[id].empty()) {
      std::fprintf(stderr, "thread %d: %s\n", id, failures[id].c_str());
      ++failed;
    }
  }
  CHECK(aclFinalize());
  if (failed) return 1;
  std::printf("ok\n");
  return 0;
}
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """build(source, name, language="c++", **options) -> executable, each built once per module."""
    ctoolkit.require_compilers()
    directory = tmp_path_factory.mktemp("toolkit_threads")
    built = {}

    def make(source: str, name: str, language: str = "c++", **options) -> str:
        if name not in built:
            built[name] = ctoolkit.compile_program(source, directory, name, language, **options)
        return built[name]
    return make


def assert_clean_run(done, expected_stdout):
    report = "exit status %d\nstdout:\n%s\nstderr:\n%s" % (done.returncode, done.stdout, done.stderr)
    assert done.returncode == 0, report
    assert done.stdout.splitlines() == expected_stdout, report
    assert "leak" not in done.stderr.lower(), report


# Three runs to catch races, in the default settings and with work run at once or a single kernel thread.
@pytest.mark.parametrize("settings", [{}, {"NPUEMU_EXECUTION": "eager"}, {"NPUEMU_THREADS": "1"}],
                         ids=["default", "eager", "one-kernel-thread"])
def test_eight_threads_each_with_its_own_device_context_stream_tensors_and_messages(build, settings):
    executable = build(EIGHT_THREADS, "eight_threads", flags=["-pthread"])
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(**settings), timeout=RUN_TIMEOUT)
    assert_clean_run(done, ["all 8 threads ok"])


def test_a_thread_that_never_set_a_device_has_no_context(build):
    executable = build(NO_DEVICE_THREAD, "no_device_thread", flags=["-pthread"])
    done = ctoolkit.run_program(executable, timeout=RUN_TIMEOUT)
    assert_clean_run(done, ["ok"])


def test_dlopen_rtld_lazy_local_by_absolute_path_without_library_path(build):
    root = ctoolkit.toolkit_root()
    executable = build(DLOPEN_LOADER, "dlopen_loader", language="c", libraries=("dl",))
    env = ctoolkit.untouched_environment()
    assert not any(root in entry for entry in env.get("LD_LIBRARY_PATH", "").split(":") if entry)
    done = ctoolkit.run_program(executable, env=env, timeout=RUN_TIMEOUT, args=[root])
    assert_clean_run(done, ["0.268941 0.119203 0.047426 0.017986"])


def test_kernels_of_two_threads_on_big_inputs_are_correct(build):
    executable = build(TWO_BIG_THREADS, "two_big_threads", flags=["-O2", "-pthread"])
    done = ctoolkit.run_program(executable, timeout=RUN_TIMEOUT)
    assert_clean_run(done, ["ok"])


# Streams and events of another device, and a thread with no context, from C: the codes (and the words of
# the messages) Python gets, since the toolkit forwards to the same functions.
OTHER_DEVICE = r"""
#include <cstdio>
#include <thread>
#include "acl/acl.h"

static void report(const char *name, aclError ret) {
  const char *message = aclGetRecentErrMsg();
  std::printf("%s %d %s\n", name, (int)ret, message != nullptr ? message : "(none)");
}

int main() {
  aclrtContext context0 = nullptr;
  aclrtStream s0 = nullptr, s0b = nullptr, s1 = nullptr;
  aclrtEvent e0 = nullptr, e1 = nullptr;
  if (aclInit(nullptr) != 0 || aclrtSetDevice(0) != 0 || aclrtGetCurrentContext(&context0) != 0 ||
      aclrtCreateStream(&s0) != 0 || aclrtCreateStream(&s0b) != 0 || aclrtCreateEvent(&e0) != 0) return 10;
  if (aclrtSetDevice(1) != 0 || aclrtCreateStream(&s1) != 0 || aclrtCreateEvent(&e1) != 0) return 11;
  report("destroy-stream-of-device-0", aclrtDestroyStream(s0));
  report("destroy-stream-force-of-device-0", aclrtDestroyStreamForce(s0));
  std::thread([&] { report("destroy-stream-without-context", aclrtDestroyStream(s0b)); }).join();
  report("record-event-of-device-0-on-device-1", aclrtRecordEvent(e0, s1));
  report("reset-event-of-device-0-on-device-1", aclrtResetEvent(e0, s1));
  report("record-event", aclrtRecordEvent(e1, s1));
  if (aclrtSetCurrentContext(context0) != 0 || aclrtRecordEvent(e0, s0) != 0) return 12;
  report("wait-for-event-of-device-1", aclrtStreamWaitEvent(s0, e1));
  report("synchronize-event-of-device-1", aclrtSynchronizeEvent(e1));
  report("synchronize-stream", aclrtSynchronizeStream(s0));
  float ms = -1.0f;
  report("elapsed-time-across-devices", aclrtEventElapsedTime(&ms, e0, e1));
  if (aclrtDestroyEvent(e0) != 0 || aclrtDestroyEvent(e1) != 0 || aclrtDestroyStream(s0) != 0 ||
      aclrtDestroyStream(s0b) != 0 || aclrtResetDevice(0) != 0) return 13;
  if (aclrtSetDevice(1) != 0 || aclrtDestroyStream(s1) != 0 || aclrtResetDevice(1) != 0 || aclrtResetDevice(1) != 0 ||
      aclFinalize() != 0) return 14;
  return 0;
}
"""


def test_streams_and_events_of_another_device_from_c_get_the_codes_python_gets(build):
    """aclrtDestroyStream(Force) of a stream of another device → 107003, without a current context → 107002;
    an event recorded or reset on a stream of another device → 107003, the elapsed time of events of two
    devices → 107000; a wait for or a synchronisation with an event of another device works."""
    executable = build(OTHER_DEVICE, "other_device", flags=["-pthread"])
    done = ctoolkit.run_program(executable, env=ctoolkit.toolkit_environment(NPUEMU_LEAK_CHECK="1"),
                                timeout=RUN_TIMEOUT)
    report = "exit status %d\nstdout:\n%s\nstderr:\n%s" % (done.returncode, done.stdout, done.stderr)
    assert done.returncode == 0 and "leak" not in done.stderr, report
    results = {name: (int(code), message) for name, code, message in
               (line.split(" ", 2) for line in done.stdout.splitlines())}
    expected = {
        "destroy-stream-of-device-0": (107003, "aclrtDestroyStream: stream: expected a stream of the current device 1"),
        "destroy-stream-force-of-device-0": (107003, "aclrtDestroyStreamForce: stream: expected a stream of the "
                                                     "current device 1"),
        "destroy-stream-without-context": (107002, "aclrtDestroyStream: context: expected a current context"),
        "record-event-of-device-0-on-device-1": (107003, "aclrtRecordEvent: stream: expected a stream of the "
                                                         "event's device 0"),
        "reset-event-of-device-0-on-device-1": (107003, "aclrtResetEvent: stream: expected a stream of the event's "
                                                        "device 0"),
        "record-event": (0, "(none)"), "wait-for-event-of-device-1": (0, "(none)"),
        "synchronize-event-of-device-1": (0, "(none)"), "synchronize-stream": (0, "(none)"),
        "elapsed-time-across-devices": (107000, "aclrtEventElapsedTime: endEvent: expected an event of startEvent's "
                                                "device 0"),
    }
    assert sorted(results) == sorted(expected), report
    for name, (code, words) in expected.items():
        assert results[name][0] == code and words in results[name][1], (name, results[name])
