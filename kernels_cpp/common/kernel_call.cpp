#include "common/kernel_call.h"

#include <pythread.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>

namespace npuemu {
namespace {

std::atomic<double> g_task_timeout{0.0};
std::atomic<unsigned long> g_main_thread{0};

// Longer limits are no limit in practice, and would overflow the clock's arithmetic.
constexpr double kLongestTimeout = 1e9;

}  // namespace

thread_local KernelCall* KernelCall::current_ = nullptr;

void set_task_timeout(double seconds) {
  if (!(seconds >= 0.0) || !std::isfinite(seconds))
    throw std::invalid_argument("task timeout: expected seconds >= 0 (0: no limit), found " + std::to_string(seconds));
  g_task_timeout = seconds;
}

double task_timeout() { return g_task_timeout; }

void set_main_thread(unsigned long ident) { g_main_thread = ident; }

KernelCall::KernelCall(const char* kernel)
    : kernel_(kernel), outer_(current_), timeout_(g_task_timeout),
      caller_(std::this_thread::get_id()), watches_signals_(PyThread_get_thread_ident() == g_main_thread) {
  if (timeout_ > 0.0 || watches_signals_) {
    const Clock::time_point now = Clock::now();
    const std::chrono::duration<double> limit(std::min(timeout_, kLongestTimeout));
    deadline_ = now + std::chrono::duration_cast<Clock::duration>(limit);
    next_signal_check_ = now + kSignalPeriod;
  }
  current_ = this;
}

KernelCall::~KernelCall() {
  current_ = outer_;
  for (PyObject*& object : raised_) Py_CLEAR(object);  // not raised: another error went first (the GIL is held)
}

bool KernelCall::must_stop() {
  if (reason_.load(std::memory_order_relaxed) != kRunning) return true;
  const bool on_caller = watches_signals_ && std::this_thread::get_id() == caller_;
  if (timeout_ > 0.0 || on_caller) {
    const Clock::time_point now = Clock::now();
    if (timeout_ > 0.0 && now >= deadline_) {
      stop(kTimedOut);
    } else if (on_caller && now >= next_signal_check_) {
      next_signal_check_ = now + kSignalPeriod;
      check_signals();
    }
  }
  return reason_.load(std::memory_order_relaxed) != kRunning;
}

bool KernelCall::waited_for_the_pool(Clock::duration waited) {
  deadline_ += waited;
  return must_stop();
}

void KernelCall::stop(Reason reason) {
  int running = kRunning;
  reason_.compare_exchange_strong(running, reason);
}

void KernelCall::check_signals() {
  const PyGILState_STATE gil = PyGILState_Ensure();
  if (PyErr_CheckSignals() != 0) {  // a handler raised (KeyboardInterrupt for SIGINT by default)
    PyErr_Fetch(&raised_[0], &raised_[1], &raised_[2]);
    stop(kInterrupted);
  }
  PyGILState_Release(gil);
}

void KernelCall::raise_if_stopped(std::exception_ptr error) {
  if (raised_[0]) {  // first: the user asked to stop
    PyErr_Restore(raised_[0], raised_[1], raised_[2]);
    raised_[0] = raised_[1] = raised_[2] = nullptr;
    throw pybind11::error_already_set();
  }
  if (error) std::rethrow_exception(error);
  if (reason_.load() == kTimedOut) {
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", timeout_);
    const std::string message = std::string(kernel_) + ": the kernel ran past the task timeout of " + limit +
                                " s (NPUEMU_TASK_TIMEOUT) and was stopped";
    PyErr_SetString(PyExc_TimeoutError, message.c_str());
    throw pybind11::error_already_set();
  }
}

}  // namespace npuemu
