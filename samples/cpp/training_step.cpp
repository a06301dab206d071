// A training step for each of the five forward/backward pairs, in C++ (the twin of
// samples/training_step.py): the forward, then its backward, on one stream with an event before,
// between and after them; each gradient checked against a finite-difference estimate made with the
// forward itself, along a random direction v: (L(x + h·v) - L(x - h·v)) / 2h against
// <gradient, v>. Non-scalar outputs are weighted by a random upstream gradient g (L = sum(g·f(x))).
// CtcLoss is differentiated through log_softmax (its backward gives the gradient with respect to
// the logits z of logProbs = log_softmax(z)). Runs on every chip npuemu emulates: CtcLoss's logAlpha
// width is the chip's (aclrtGetSocName), and a pair whose forward or backward has no kernel on the
// chip (its first phase returns 561003) is skipped with that status and message, after releasing
// what it made. Prints one line per pair; exits 1 if one that ran disagrees.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_binary_cross_entropy_with_logits.h"
#include "aclnnop/aclnn_binary_cross_entropy_with_logits_backward.h"
#include "aclnnop/aclnn_ctc_loss.h"
#include "aclnnop/aclnn_ctc_loss_backward.h"
#include "aclnnop/aclnn_kl_div.h"
#include "aclnnop/aclnn_kl_div_backward.h"
#include "aclnnop/aclnn_logsigmoid.h"
#include "aclnnop/aclnn_logsigmoid_backward.h"
#include "aclnnop/aclnn_scaled_masked_softmax.h"
#include "aclnnop/aclnn_scaled_masked_softmax_backward.h"

namespace {

const double kStep = 1e-2;       // h of the central difference, in float32 on inputs of order 1
const double kTolerance = 1e-2;  // relative agreement of the two derivatives
const aclnnStatus kNoKernel = 561003;  // ACLNN_ERR_INNER_FIND_KERNEL_ERROR: a first phase's "no kernel for this chip"

typedef std::vector<int64_t> Shape;
typedef std::function<aclnnStatus(uint64_t*, aclOpExecutor**)> FirstPhase;
typedef aclnnStatus (*SecondPhase)(void*, uint64_t, aclOpExecutor*, aclrtStream);

void Fail(const char* what, int ret) {
  printf("%s failed. ERROR: %d\n%s\n", what, ret, aclGetRecentErrMsg());
  exit(1);
}

void Check(const char* what, int ret) {
  if (ret != ACL_SUCCESS) Fail(what, ret);
}

// A first phase that found no kernel for the chip: the pair cannot run here. `reason` is its status
// and message, on one line.
struct NoKernel {
  std::string reason;
};

NoKernel NoKernelFrom(const char* firstPhase, aclnnStatus status) {
  std::string reason = std::string(firstPhase) + " returned " + std::to_string(status) + ": ";
  const char* message = aclGetRecentErrMsg();
  bool space = false;  // runs of white space (newlines included) become one space
  for (const char* c = message ? message : ""; *c; ++c) {
    const bool blank = *c == ' ' || *c == '\n' || *c == '\t' || *c == '\r';
    if (!blank && space && reason.back() != ' ') reason += ' ';
    if (!blank) reason += *c;
    space = blank;
  }
  return NoKernel{reason};
}

int64_t Elements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// One stream, and what is made on it until Release(): tensors and their device memory, int arrays,
// workspaces, and executors planned but not launched.
class Device {
 public:
  Device() {
    Check("aclInit", aclInit(nullptr));
    Check("aclrtSetDevice", aclrtSetDevice(0));
    Check("aclrtCreateStream", aclrtCreateStream(&stream_));
  }

  ~Device() {
    Release();
    Check("aclrtDestroyStream", aclrtDestroyStream(stream_));
    Check("aclrtResetDevice", aclrtResetDevice(0));
    Check("aclFinalize", aclFinalize());
  }

  aclrtStream stream() const { return stream_; }

  // A contiguous tensor of `shape` holding `values`, stored as T.
  template <typename T>
  aclTensor* Make(const std::vector<T>& values, const Shape& shape, aclDataType dtype) {
    const size_t bytes = std::max<size_t>(values.size() * sizeof(T), 1);
    void* address = nullptr;
    Check("aclrtMalloc", aclrtMalloc(&address, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    if (!values.empty())
      Check("aclrtMemcpy", aclrtMemcpy(address, bytes, values.data(), values.size() * sizeof(T), ACL_MEMCPY_HOST_TO_DEVICE));
    Shape strides(shape.size(), 1);
    for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) strides[i] = shape[i + 1] * strides[i + 1];
    aclTensor* tensor = aclCreateTensor(shape.data(), shape.size(), dtype, strides.data(), 0, ACL_FORMAT_ND,
                                        shape.data(), shape.size(), address);
    tensors_.push_back(Made{tensor, address, values.size() * sizeof(T)});
    return tensor;
  }

  aclIntArray* IntArray(const std::vector<int64_t>& values) {
    aclIntArray* array = aclCreateIntArray(values.data(), values.size());
    arrays_.push_back(array);
    return array;
  }

  aclTensor* Floats(const std::vector<double>& values, const Shape& shape) {
    return Make(std::vector<float>(values.begin(), values.end()), shape, ACL_FLOAT);
  }

  aclTensor* Zeros(const Shape& shape) { return Floats(std::vector<double>(Elements(shape), 0.0), shape); }

  // A float tensor's values (once the stream is synchronised).
  std::vector<double> Read(aclTensor* tensor) {
    for (const Made& made : tensors_) {
      if (made.tensor != tensor) continue;
      std::vector<float> host(made.bytes / sizeof(float));
      if (!host.empty())
        Check("aclrtMemcpy", aclrtMemcpy(host.data(), made.bytes, made.address, made.bytes, ACL_MEMCPY_DEVICE_TO_HOST));
      return std::vector<double>(host.begin(), host.end());
    }
    Fail("Read (not a tensor of this device)", -1);
    return {};
  }

  // The first phase of an operator, with its workspace; returns the launch of its second phase on
  // the stream. The workspace lives until Synchronize(). Throws NoKernel if the chip has none.
  std::function<void()> Plan(const char* name, const FirstPhase& first, SecondPhase second) {
    uint64_t size = 0;
    aclOpExecutor* executor = nullptr;
    const aclnnStatus status = first(&size, &executor);
    if (status == kNoKernel) throw NoKernelFrom((std::string(name) + "GetWorkspaceSize").c_str(), status);
    Check(name, status);
    planned_.push_back(executor);
    void* workspace = nullptr;
    if (size > 0) {
      Check("allocate workspace", aclrtMalloc(&workspace, size, ACL_MEM_MALLOC_HUGE_FIRST));
      workspaces_.push_back(workspace);
    }
    return [=] { Launch(name, second, workspace, size, executor); };
  }

  // Both phases of an operator on the stream.
  void Run(const char* name, const FirstPhase& first, SecondPhase second) { Plan(name, first, second)(); }

  void Synchronize() {
    Check("aclrtSynchronizeStream", aclrtSynchronizeStream(stream_));
    FreeWorkspaces();
  }

  // Everything made since the last Release(), the plans a refusal left unlaunched included.
  void Release() {
    for (aclOpExecutor* executor : planned_) Check("aclDestroyAclOpExecutor", aclDestroyAclOpExecutor(executor));
    planned_.clear();
    FreeWorkspaces();
    for (aclIntArray* array : arrays_) aclDestroyIntArray(array);
    arrays_.clear();
    for (const Made& made : tensors_) {
      aclDestroyTensor(made.tensor);
      Check("aclrtFree", aclrtFree(made.address));
    }
    tensors_.clear();
  }

 private:
  void Launch(const char* name, SecondPhase second, void* workspace, uint64_t size, aclOpExecutor* executor) {
    Check(name, second(workspace, size, executor, stream_));
    planned_.erase(std::find(planned_.begin(), planned_.end(), executor));  // its second phase released it
  }

  void FreeWorkspaces() {
    for (void* workspace : workspaces_) Check("aclrtFree", aclrtFree(workspace));
    workspaces_.clear();
  }

  struct Made {
    aclTensor* tensor;
    void* address;
    size_t bytes;
  };
  aclrtStream stream_ = nullptr;
  std::vector<Made> tensors_;
  std::vector<aclIntArray*> arrays_;
  std::vector<void*> workspaces_;
  std::vector<aclOpExecutor*> planned_;  // executors whose second phase has not run yet
};

// The planned forward and backward (Device::Plan's launches) queued on the stream between three
// events, so that the events time the device's work alone; the milliseconds of each. The callers
// plan the forward first (not both in the arguments of this call, whose order C++ leaves open), so
// that a chip without either kernel is reported by the forward's first phase, as in Python.
void StepWithEvents(Device& device, const std::function<void()>& forward, const std::function<void()>& backward,
                    float* forward_ms, float* backward_ms) {
  aclrtEvent events[3];
  for (aclrtEvent& event : events) Check("aclrtCreateEvent", aclrtCreateEvent(&event));
  Check("aclrtRecordEvent", aclrtRecordEvent(events[0], device.stream()));
  forward();
  Check("aclrtRecordEvent", aclrtRecordEvent(events[1], device.stream()));
  backward();
  Check("aclrtRecordEvent", aclrtRecordEvent(events[2], device.stream()));
  Check("aclrtSynchronizeEvent", aclrtSynchronizeEvent(events[2]));
  device.Synchronize();
  Check("aclrtEventElapsedTime", aclrtEventElapsedTime(forward_ms, events[0], events[1]));
  Check("aclrtEventElapsedTime", aclrtEventElapsedTime(backward_ms, events[1], events[2]));
  for (aclrtEvent event : events) Check("aclrtDestroyEvent", aclrtDestroyEvent(event));
}

std::vector<double> Random(std::mt19937& rng, size_t n, double low, double high) {
  std::uniform_real_distribution<double> uniform(low, high);
  std::vector<double> values(n);
  for (double& v : values) v = uniform(rng);
  return values;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// A pair: its input x, the loss of an x (the forward, reduced on the host), and a training step
// (forward then backward with events) that gives the gradient.
struct Pair {
  const char* name;
  Shape shape;
  std::vector<double> x;
  std::function<double(Device&, const std::vector<double>&)> loss;
  std::function<std::vector<double>(Device&, const std::vector<double>&, float*, float*)> step;
};

Pair LogSigmoid(std::mt19937& rng) {
  const Shape shape = {4, 8};
  const std::vector<double> g = Random(rng, 32, -1, 1);
  Pair pair{"LogSigmoid", shape, Random(rng, 32, -6, 6), nullptr, nullptr};
  pair.loss = [=](Device& device, const std::vector<double>& x) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* out = device.Zeros(shape);
    device.Run("aclnnLogSigmoid", [&](uint64_t* size, aclOpExecutor** executor) {
      return aclnnLogSigmoidGetWorkspaceSize(self, out, size, executor); }, aclnnLogSigmoid);
    device.Synchronize();
    return Dot(g, device.Read(out));
  };
  pair.step = [=](Device& device, const std::vector<double>& x, float* forward_ms, float* backward_ms) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* out = device.Zeros(shape);
    aclTensor* buffer = device.Zeros(shape);
    aclTensor* gradOutput = device.Floats(g, shape);
    aclTensor* gradInput = device.Zeros(shape);
    const std::function<void()> launchForward = device.Plan("aclnnLogSigmoidForward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnLogSigmoidForwardGetWorkspaceSize(self, out, buffer, size, executor); },
      aclnnLogSigmoidForward);
    const std::function<void()> launchBackward = device.Plan("aclnnLogSigmoidBackward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnLogSigmoidBackwardGetWorkspaceSize(gradOutput, self, buffer, gradInput, size, executor); },
      aclnnLogSigmoidBackward);
    StepWithEvents(device, launchForward, launchBackward, forward_ms, backward_ms);
    return device.Read(gradInput);
  };
  return pair;
}

Pair BinaryCrossEntropyWithLogits(std::mt19937& rng) {
  const Shape shape = {4, 8}, row = {8}, one = {1};
  const int64_t mean = 1;
  const std::vector<double> target = Random(rng, 32, 0, 1), weight = Random(rng, 8, 0.5, 1.5),
                            posWeight = Random(rng, 8, 0.5, 2.0);
  Pair pair{"BinaryCrossEntropyWithLogits", shape, Random(rng, 32, -4, 4), nullptr, nullptr};
  pair.loss = [=](Device& device, const std::vector<double>& x) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* t = device.Floats(target, shape);
    aclTensor* w = device.Floats(weight, row);
    aclTensor* p = device.Floats(posWeight, row);
    aclTensor* out = device.Zeros(one);
    device.Run("aclnnBinaryCrossEntropyWithLogits", [&](uint64_t* size, aclOpExecutor** executor) {
      return aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(self, t, w, p, mean, out, size, executor); },
      aclnnBinaryCrossEntropyWithLogits);
    device.Synchronize();
    return device.Read(out)[0];
  };
  pair.step = [=](Device& device, const std::vector<double>& x, float* forward_ms, float* backward_ms) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* t = device.Floats(target, shape);
    aclTensor* w = device.Floats(weight, row);
    aclTensor* p = device.Floats(posWeight, row);
    aclTensor* out = device.Zeros(one);
    aclTensor* gradOutput = device.Floats({1.0}, one);
    aclTensor* grad = device.Zeros(shape);
    const std::function<void()> launchForward = device.Plan("aclnnBinaryCrossEntropyWithLogits",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnBinaryCrossEntropyWithLogitsGetWorkspaceSize(self, t, w, p, mean, out, size, executor); },
      aclnnBinaryCrossEntropyWithLogits);
    const std::function<void()> launchBackward = device.Plan("aclnnBinaryCrossEntropyWithLogitsBackward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnBinaryCrossEntropyWithLogitsBackwardGetWorkspaceSize(gradOutput, self, t, w, p, mean, grad, size,
                                                                         executor); },
      aclnnBinaryCrossEntropyWithLogitsBackward);
    StepWithEvents(device, launchForward, launchBackward, forward_ms, backward_ms);
    return device.Read(grad);
  };
  return pair;
}

// Rows of `columns` values turned into log-probabilities (log_softmax along each row).
std::vector<double> LogSoftmaxRows(const std::vector<double>& z, size_t columns) {
  std::vector<double> result(z.size());
  for (size_t begin = 0; begin < z.size(); begin += columns) {
    const double top = *std::max_element(z.begin() + begin, z.begin() + begin + columns);
    double sum = 0;
    for (size_t i = begin; i < begin + columns; ++i) sum += std::exp(z[i] - top);
    for (size_t i = begin; i < begin + columns; ++i) result[i] = z[i] - top - std::log(sum);
  }
  return result;
}

Pair KlDiv(std::mt19937& rng) {
  const Shape shape = {4, 8}, one = {1};
  const int64_t batchmean = 3;
  std::vector<double> target = Random(rng, 32, 0.05, 1);  // rows normalised to probabilities
  for (size_t begin = 0; begin < 32; begin += 8) {
    double sum = 0;
    for (size_t i = begin; i < begin + 8; ++i) sum += target[i];
    for (size_t i = begin; i < begin + 8; ++i) target[i] /= sum;
  }
  Pair pair{"KlDiv", shape, LogSoftmaxRows(Random(rng, 32, -2, 2), 8), nullptr, nullptr};
  pair.loss = [=](Device& device, const std::vector<double>& x) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* t = device.Floats(target, shape);
    aclTensor* out = device.Zeros(one);
    device.Run("aclnnKlDiv", [&](uint64_t* size, aclOpExecutor** executor) {
      return aclnnKlDivGetWorkspaceSize(self, t, batchmean, false, out, size, executor); }, aclnnKlDiv);
    device.Synchronize();
    return device.Read(out)[0];
  };
  pair.step = [=](Device& device, const std::vector<double>& x, float* forward_ms, float* backward_ms) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* t = device.Floats(target, shape);
    aclTensor* out = device.Zeros(one);
    aclTensor* gradOutput = device.Floats({1.0}, one);
    aclTensor* grad = device.Zeros(shape);
    const std::function<void()> launchForward = device.Plan("aclnnKlDiv",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnKlDivGetWorkspaceSize(self, t, batchmean, false, out, size, executor); },
      aclnnKlDiv);
    const std::function<void()> launchBackward = device.Plan("aclnnKlDivBackward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnKlDivBackwardGetWorkspaceSize(gradOutput, self, t, batchmean, false, grad, size, executor); },
      aclnnKlDivBackward);
    StepWithEvents(device, launchForward, launchBackward, forward_ms, backward_ms);
    return device.Read(grad);
  };
  return pair;
}

// CtcLoss's logAlpha width on this chip: the Ascend950 family (also named Ascend910_95) keeps
// 2·max(targetLengths) + 1, the other chips round it up to a multiple of 8 (docs/ops/ctc_loss.md).
int64_t AlphaWidth(int64_t maxTargetLength) {
  const int64_t exact = 2 * maxTargetLength + 1;
  const char* soc = aclrtGetSocName();
  const std::string name = soc ? soc : "";
  if (name.compare(0, 9, "Ascend950") == 0 || name.compare(0, 12, "Ascend910_95") == 0) return exact;
  return (exact + 7) / 8 * 8;
}

// x is the logits z (T, N, C); the loss is sum(g · negLogLikelihood(log_softmax(z))).
Pair CtcLoss(std::mt19937& rng) {
  const int64_t T = 10, N = 2, C = 5, width = AlphaWidth(3);  // 3: max(targetLengths)
  const Shape shape = {T, N, C}, batch = {N}, alphaShape = {N, T, width}, targetsShape = {N, 3};
  const std::vector<int64_t> targets = {1, 3, 3, 2, 4, 0}, inputLengths = {10, 8}, targetLengths = {3, 2};
  const int64_t blank = 0;
  const std::vector<double> g = Random(rng, N, 0.5, 1.5);
  Pair pair{"CtcLoss", shape, Random(rng, T * N * C, -2, 2), nullptr, nullptr};
  // The planned forward of log_softmax(z) (Device::Plan's launch).
  auto forward = [=](Device& device, aclTensor* logProbs, aclTensor* nll, aclTensor* logAlpha, aclTensor* t,
                     aclIntArray* il, aclIntArray* tl) {
    return device.Plan("aclnnCtcLoss", [&](uint64_t* size, aclOpExecutor** executor) {
      return aclnnCtcLossGetWorkspaceSize(logProbs, t, il, tl, blank, false, nll, logAlpha, size, executor); },
      aclnnCtcLoss);
  };
  pair.loss = [=](Device& device, const std::vector<double>& z) {
    aclTensor* logProbs = device.Floats(LogSoftmaxRows(z, C), shape);
    aclTensor* t = device.Make(targets, targetsShape, ACL_INT64);
    aclTensor* nll = device.Zeros(batch);
    aclTensor* logAlpha = device.Zeros(alphaShape);
    aclIntArray* il = device.IntArray(inputLengths);
    aclIntArray* tl = device.IntArray(targetLengths);
    forward(device, logProbs, nll, logAlpha, t, il, tl)();
    device.Synchronize();
    return Dot(g, device.Read(nll));
  };
  pair.step = [=](Device& device, const std::vector<double>& z, float* forward_ms, float* backward_ms) {
    aclTensor* logProbs = device.Floats(LogSoftmaxRows(z, C), shape);
    aclTensor* t = device.Make(targets, targetsShape, ACL_INT64);
    aclTensor* nll = device.Zeros(batch);
    aclTensor* logAlpha = device.Zeros(alphaShape);
    aclTensor* gradOut = device.Floats(g, batch);
    aclTensor* grad = device.Zeros(shape);
    aclIntArray* il = device.IntArray(inputLengths);
    aclIntArray* tl = device.IntArray(targetLengths);
    const std::function<void()> launchForward = forward(device, logProbs, nll, logAlpha, t, il, tl);
    const std::function<void()> launchBackward = device.Plan("aclnnCtcLossBackward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnCtcLossBackwardGetWorkspaceSize(gradOut, logProbs, t, il, tl, nll, logAlpha, blank, false, grad,
                                                    size, executor); },
      aclnnCtcLossBackward);
    StepWithEvents(device, launchForward, launchBackward, forward_ms, backward_ms);
    return device.Read(grad);
  };
  return pair;
}

Pair ScaledMaskedSoftmax(std::mt19937& rng) {
  const Shape shape = {2, 2, 4, 8}, maskShape = {1, 2, 4, 8};
  const double scale = 0.5;
  const std::vector<double> g = Random(rng, 128, -1, 1), draw = Random(rng, 64, 0, 1);
  std::vector<uint8_t> mask(64);  // true: masked out
  for (size_t i = 0; i < mask.size(); ++i) mask[i] = draw[i] < 0.25;
  Pair pair{"ScaledMaskedSoftmax", shape, Random(rng, 128, -4, 4), nullptr, nullptr};
  pair.loss = [=](Device& device, const std::vector<double>& x) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* m = device.Make(mask, maskShape, ACL_BOOL);
    aclTensor* y = device.Zeros(shape);
    device.Run("aclnnScaledMaskedSoftmax", [&](uint64_t* size, aclOpExecutor** executor) {
      return aclnnScaledMaskedSoftmaxGetWorkspaceSize(self, m, scale, false, y, size, executor); },
      aclnnScaledMaskedSoftmax);
    device.Synchronize();
    return Dot(g, device.Read(y));
  };
  pair.step = [=](Device& device, const std::vector<double>& x, float* forward_ms, float* backward_ms) {
    aclTensor* self = device.Floats(x, shape);
    aclTensor* m = device.Make(mask, maskShape, ACL_BOOL);
    aclTensor* y = device.Zeros(shape);
    aclTensor* gradOutput = device.Floats(g, shape);
    aclTensor* grad = device.Zeros(shape);
    const std::function<void()> launchForward = device.Plan("aclnnScaledMaskedSoftmax",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnScaledMaskedSoftmaxGetWorkspaceSize(self, m, scale, false, y, size, executor); },
      aclnnScaledMaskedSoftmax);
    const std::function<void()> launchBackward = device.Plan("aclnnScaledMaskedSoftmaxBackward",
      [&](uint64_t* size, aclOpExecutor** executor) {
        return aclnnScaledMaskedSoftmaxBackwardGetWorkspaceSize(gradOutput, y, m, scale, false, grad, size, executor); },
      aclnnScaledMaskedSoftmaxBackward);
    StepWithEvents(device, launchForward, launchBackward, forward_ms, backward_ms);
    return device.Read(grad);
  };
  return pair;
}

// One training step of `pair`, and its gradient against the central difference of its loss: false
// if they disagree; true if they agree or the chip has no kernel for the pair (skipped).
bool CheckPair(Device& device, const Pair& pair, std::mt19937& rng) {
  float forward_ms = 0, backward_ms = 0;
  std::vector<double> gradient;
  try {
    gradient = pair.step(device, pair.x, &forward_ms, &backward_ms);
  } catch (const NoKernel& refusal) {
    device.Release();
    printf("%-29s skipped: %s\n", pair.name, refusal.reason.c_str());
    return true;
  }
  device.Release();
  std::normal_distribution<double> normal;
  std::vector<double> direction(pair.x.size()), plus(pair.x), minus(pair.x);
  for (size_t i = 0; i < direction.size(); ++i) {
    direction[i] = normal(rng);
    plus[i] += kStep * direction[i];
    minus[i] -= kStep * direction[i];
  }
  const double along = Dot(gradient, direction);
  const double estimate = (pair.loss(device, plus) - pair.loss(device, minus)) / (2 * kStep);
  device.Release();
  const bool agrees = std::fabs(along - estimate) <= kTolerance * std::max({std::fabs(along), std::fabs(estimate), 1e-3});
  printf("%-29s forward %.3f ms, backward %.3f ms; <gradient, v> = %.5f, finite difference %.5f: %s\n", pair.name,
         forward_ms, backward_ms, along, estimate, agrees ? "ok" : "DIFFERENT");
  return agrees;
}

}  // namespace

int main() {
  std::mt19937 rng(2026);
  bool all = true;
  {
    Device device;
    const Pair pairs[] = {LogSigmoid(rng), BinaryCrossEntropyWithLogits(rng), KlDiv(rng), CtcLoss(rng),
                          ScaledMaskedSoftmax(rng)};
    for (const Pair& pair : pairs) all = CheckPair(device, pair, rng) && all;
  }
  return all ? 0 : 1;
}
