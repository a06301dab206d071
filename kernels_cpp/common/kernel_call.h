// One call of a kernel from Python, and the two ways its work ends early, as a task on the card
// does: the task timeout (NPUEMU_TASK_TIMEOUT, handed over by set_task_timeout) and Ctrl-C.
//
// A kernel's binding wraps its work in KernelCall::run. The kernels call checkpoint() between
// pieces of work of a few thousand elements at most (once per block taken from share_blocks or
// share_block_runs, and through a Pacer in loops whose length the data decides); it throws
// Stopped, in whichever thread runs the piece, once the call must stop: the deadline has passed,
// another thread of the call has stopped, or the calling thread found a pending signal whose
// handler raised. Every thread of the pool then leaves the job at its next checkpoint, and run()
// raises TimeoutError or the handler's exception (KeyboardInterrupt) in Python. The pool stays
// usable.
//
// Signals: the pool releases the GIL, and CPython runs signal handlers only in the main thread,
// with the GIL held. So the calling thread, when it is the main thread, takes the GIL back for a
// moment at most every kSignalPeriod to run PyErr_CheckSignals(); a call from another thread
// never touches the GIL (its signals are the main thread's business). The handlers run there, in
// the middle of the kernel: one must not launch a kernel itself (it could wait forever for the
// pool this one holds).
//
// A stopped kernel leaves its output partly written, as a task the card stops does. Work that
// ends before its first checkpoint (one block) is not stopped: it is done.
//
// The errors a kernel raises say who is at fault:
// - KernelDataError (Python: _kernels.KernelDataError): the data is, as the device would report
//   an AI-core exception (a CTC label out of range, a length beyond its tensor);
// - ContractError (Python: RuntimeError): npuemu's own caller broke the kernel's contract
//   (dtype combinations, shapes the first phase guarantees): an internal error;
// - a tuple of the wrong form fails pybind11's conversion: TypeError, also internal.
#pragma once
#include <pybind11/pybind11.h>
#include <cxxabi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/without_gil.h"

namespace npuemu {

struct KernelDataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ContractError : std::logic_error {
  using std::logic_error::logic_error;
};

// Thrown through a kernel's loops once its call must stop; KernelCall::run catches it.
struct Stopped {};

void set_task_timeout(double seconds);  // 0: no limit
double task_timeout();

// The Python thread id of the main thread, whose signals the kernels watch for (set at import).
void set_main_thread(unsigned long ident);

constexpr std::chrono::milliseconds kSignalPeriod{20};

class KernelCall {
 public:
  // With the GIL held, on the thread that calls the kernel; `kernel` names it in messages.
  explicit KernelCall(const char* kernel);
  ~KernelCall();
  KernelCall(const KernelCall&) = delete;
  KernelCall& operator=(const KernelCall&) = delete;

  // Runs work() without the GIL; raises the Python exception of a stop, if there was one.
  // Another error of the work is raised as is, unless a signal handler raised first.
  template <class Work>
  void run(Work&& work) {
    std::exception_ptr error;
    without_gil([&] {
      try {
        work();
      } catch (const Stopped&) {
        // the reason is recorded: raised below, with the GIL
      } catch (abi::__forced_unwind&) {
        throw;  // the thread is ending
      } catch (...) {
        error = std::current_exception();
      }
    });
    raise_if_stopped(error);
  }

  // Whether the call must stop, checking the deadline (and signals, on the calling thread) now.
  // Never throws: the pool's caller uses it while it waits for the workers.
  bool must_stop();

  // The calling thread waited `waited` for the pool, which another host thread's kernel held: on the
  // card both kernels would run, so the wait does not count against the task timeout (the deadline
  // moves by it; none of the call's workers reads it meanwhile: the call has no job on the pool).
  // Returns must_stop(): Ctrl-C still stops the call while it waits.
  bool waited_for_the_pool(std::chrono::steady_clock::duration waited);

  // The call this thread works for (null outside kernels); pool workers adopt their job's call.
  static KernelCall* current() { return current_; }

  class Adopt {
   public:
    explicit Adopt(KernelCall* call) : saved_(current_) { current_ = call; }
    ~Adopt() { current_ = saved_; }

   private:
    KernelCall* saved_;
  };

 private:
  enum Reason : int { kRunning, kTimedOut, kInterrupted };
  using Clock = std::chrono::steady_clock;

  void stop(Reason reason);
  void check_signals();  // the calling thread only: takes the GIL
  void raise_if_stopped(std::exception_ptr error);

  static thread_local KernelCall* current_;

  const char* kernel_;
  KernelCall* outer_;       // the call this thread worked for before (restored at the end)
  double timeout_;          // seconds, 0: none
  Clock::time_point deadline_;
  std::thread::id caller_;  // the thread that called the kernel, which alone checks signals
  bool watches_signals_;    // called from the main thread
  Clock::time_point next_signal_check_;
  std::atomic<int> reason_{kRunning};
  PyObject* raised_[3] = {nullptr, nullptr, nullptr};  // type, value, traceback of a signal handler's exception
};

// Throws Stopped if the call this thread works for must stop.
inline void checkpoint() {
  KernelCall* call = KernelCall::current();
  if (call && call->must_stop()) throw Stopped{};
}

// Calls checkpoint() once per kCheckpointWork units of work reported to it: for loops whose
// single steps are too small to check each, and whose length the data decides.
constexpr int64_t kCheckpointWork = 1 << 12;

class Pacer {
 public:
  void operator()(int64_t work = 1) {
    budget_ -= work;
    if (budget_ < 0) {
      budget_ = kCheckpointWork;
      checkpoint();
    }
  }

 private:
  int64_t budget_ = kCheckpointWork;
};

}  // namespace npuemu
