#include "common/thread_pool.h"

#include <cxxabi.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace npuemu {
namespace {

constexpr std::chrono::microseconds kSpin{100};  // how long an idle worker watches for work before sleeping

class Pool {
 public:
  explicit Pool(int workers) { resize(workers); }
  ~Pool() { resize(0); }

  // Stops the workers, then starts `workers` new ones, or as many as the system lets this process
  // start (RLIMIT_NPROC, memory for their stacks): the caller computes too, and the results do not
  // depend on the number of threads, so fewer only run slower. why_short() says what stopped it.
  void resize(int workers) {
    std::lock_guard<std::timed_mutex> run_guard(run_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    caller_cpu_ = -1;
    workers_elsewhere_ = false;
    stop_ = false;
    const uint64_t start = generation_;  // workers wait for the first job after this point
    wanted_ = workers;
    why_short_.clear();
    try {
      threads_.reserve(workers);
      for (int i = 0; i < workers; ++i) threads_.emplace_back([this, start] { loop(start); });
    } catch (const std::system_error& error) {  // pthread_create: EAGAIN
      why_short_ = error.code().message();
    } catch (const std::bad_alloc&) {  // the thread's state, or the vector
      why_short_ = std::strerror(ENOMEM);
    }
  }

  int size() const { return static_cast<int>(threads_.size()) + 1; }
  int wanted_size() const { return wanted_ + 1; }
  const std::string& why_short() const { return why_short_; }

  // In the child of a fork (pthread_atfork), where only the forking thread lives on: the pool is made
  // fresh, with no worker, and the number of workers it had is returned, for pool() to start them again
  // at the next use. A worker of the parent, or a thread of it inside run(), may have held a mutex or
  // waited on a condition at the fork: they are made anew (the old state belongs to threads the child
  // does not have). The workers' handles are left behind, never joined nor destroyed: their threads are
  // not in this process, and destroying a joinable std::thread ends the process.
  int forget_workers_in_child() {
    const int workers = static_cast<int>(threads_.size());
    new std::vector<std::thread>(std::move(threads_));  // deliberately leaked: see above
    threads_.clear();
    new (&run_mutex_) std::timed_mutex();
    new (&mutex_) std::mutex();
    new (&wake_) std::condition_variable();
    new (&done_) std::condition_variable();
    new (&error_) std::exception_ptr();  // a parent's job's error, if any, is not the child's to free
    job_ = nullptr;
    call_ = nullptr;
    parts_ = 0;
    next_part_ = 0;
    open_ = false;
    joined_ = 0;
    caller_cpu_ = -1;
    workers_elsewhere_ = false;
    sleepers_ = 0;
    stop_ = false;
    return workers;
  }

  // Runs job(part) for part in [0, parts) across the caller and the workers, each part taken by
  // whoever is free next. The caller does not wait for workers that have not woken up by the time
  // the parts run out (waking a sleeping thread can take longer than a small job): those skip the
  // job. An exception in any part is rethrown here, in the calling thread, once every part that
  // started has finished; Stopped, before the job starts, if the call stops while it waits for its turn.
  void run(int parts, const std::function<void(int)>& job) {
    take_turn(KernelCall::current());
    std::lock_guard<std::timed_mutex> run_guard(run_mutex_, std::adopt_lock);
    error_ = nullptr;
    if (parts <= 1 || threads_.empty()) {
      for (int p = 0; p < parts; ++p) job(p);
      return;
    }
    keep_workers_off_the_callers_cpu();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      call_ = KernelCall::current();
      parts_ = parts;
      next_part_ = 0;
      open_ = true;
      ++generation_;
    }
    // A worker that counts itself a sleeper after this read checks the generation under the lock
    // first, and sees the new one: it does not block.
    if (sleepers_.load()) wake_.notify_all();
    take_parts(job, parts);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      open_ = false;  // from now on a worker that wakes up leaves this job alone
    }
    watch_for_workers();
    wait_for_workers();
    job_ = nullptr;
    call_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Takes run_mutex_ for `call` (null: outside a kernel), at once when it is free. Otherwise another
  // host thread's job holds the pool, possibly for seconds: the caller waits in slices of
  // kSignalPeriod, after each of which the time waited moves the call's deadline (the wait is no
  // compute of this kernel; on the card both would run) and a signal handler that raised, on the
  // main thread, stops the call as a checkpoint does. The deadline moves by each wait rather than
  // starting when the pool is taken: a kernel may run several jobs, and compute between them or on
  // the caller alone, all of which its task timeout counts.
  void take_turn(KernelCall* call) {
    if (run_mutex_.try_lock()) return;
    auto since = std::chrono::steady_clock::now();
    for (;;) {
      const bool taken = run_mutex_.try_lock_for(kSignalPeriod);
      if (call) {
        const auto now = std::chrono::steady_clock::now();
        const bool stop = call->waited_for_the_pool(now - since);
        since = now;
        if (stop) {
          if (taken) run_mutex_.unlock();
          throw Stopped{};
        }
      }
      if (taken) return;
    }
  }

  // The caller computes too, so a worker woken on the caller's CPU only waits for it: observed on
  // virtual machines, where the scheduler kept waking a worker next to its busy waker (halving the
  // speed of two threads, until it moved on its own after many calls). Workers may run on any CPU
  // the caller may, but the one the caller is on; redone only when the caller has moved.
  void keep_workers_off_the_callers_cpu() {
    const int here = sched_getcpu();
    if (here < 0 || here == caller_cpu_) return;
    caller_cpu_ = here;
    workers_elsewhere_ = false;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    CPU_CLR(here, &allowed);
    if (CPU_COUNT(&allowed) == 0) return;  // the caller may only run here: nothing to spread over
    for (auto& t : threads_) pthread_setaffinity_np(t.native_handle(), sizeof allowed, &allowed);
    workers_elsewhere_ = true;
  }

  // The workers still in the job are finishing their last part, which is short: watching for
  // them a while before sleeping until the last one signals spares the caller a wake-up (10 to 50
  // us on a virtual machine: with 2 threads on 1e5 elements, it returned 15 us after the worker
  // had finished an 18 us job), and still lets it sleep if a worker lost its core. Not when the
  // workers may share the caller's only CPU: there, watching would hold up the very worker it
  // waits for.
  void watch_for_workers() const {
    if (!workers_elsewhere_.load(std::memory_order_relaxed)) return;
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (joined_.load(std::memory_order_acquire) != 0 && std::chrono::steady_clock::now() < until)
      __builtin_ia32_pause();
  }

  // Until the workers in the job are done. Meanwhile the caller still watches the deadline and
  // Ctrl-C for the call (a worker's last part can be long: the kernel's parallel_for splits the
  // work in one part per thread), so that the workers stop at their next checkpoint.
  void wait_for_workers() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (done_.wait_for(lock, kSignalPeriod, [this] { return joined_ == 0; })) return;
      }
      if (call_) call_->must_stop();
    }
  }

  void loop(uint64_t seen) {
    for (;;) {
      const std::function<void(int)>* job;
      KernelCall* call;
      int parts;
      spin_while_idle(seen);
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ++sleepers_;
        wake_.wait(lock, [&] { return generation_ != seen; });
        --sleepers_;
        seen = generation_;
        if (stop_) return;
        if (!open_) continue;  // the job was done without this worker
        ++joined_;
        job = job_;
        call = call_;
        parts = parts_;
      }
      {
        const KernelCall::Adopt adopt(call);  // the job's checkpoints see its call
        take_parts(*job, parts);
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (--joined_ == 0) done_.notify_one();
    }
  }

  // A kernel launched right after another (the usual pattern: a Python loop of calls) finds the
  // worker still awake if it watches for new work a little before it sleeps; waking a sleeping
  // thread costs 10 to 50 us on a virtual machine, as long as a whole small kernel. Not on the
  // caller's only CPU, where watching would take the time the caller needs to launch that work.
  void spin_while_idle(uint64_t seen) const {
    if (!workers_elsewhere_.load(std::memory_order_relaxed)) return;
    const auto until = std::chrono::steady_clock::now() + kSpin;
    while (generation_.load(std::memory_order_acquire) == seen && std::chrono::steady_clock::now() < until)
      __builtin_ia32_pause();
  }

  void take_parts(const std::function<void(int)>& job, int parts) {
    try {
      for (int p = next_part_++; p < parts; p = next_part_++) job(p);
    } catch (abi::__forced_unwind&) {
      throw;  // the thread is ending: it is no error of the job
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  std::timed_mutex run_mutex_;  // one job at a time, whichever host thread submits it (take_turn)
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  int wanted_ = 0;         // the workers the last resize asked for
  std::string why_short_;  // the system's reason it started fewer (empty: it did not)
  const std::function<void(int)>* job_ = nullptr;
  KernelCall* call_ = nullptr;  // the kernel call the job works for (null: none)
  int parts_ = 0;
  std::atomic<int> next_part_{0};
  bool open_ = false;  // workers may still join the current job
  std::atomic<int> joined_{0};  // workers inside the current job (changed under mutex_)
  int caller_cpu_ = -1;  // the CPU workers were last kept off
  std::atomic<bool> workers_elsewhere_{false};  // and whether they could be: they run on other CPUs
  std::atomic<uint64_t> generation_{0};  // changed under mutex_; read by spinning workers without it
  std::atomic<int> sleepers_{0};         // workers blocked (or about to block) on wake_, counted under mutex_
  bool stop_ = false;
};

// The cores this process may run on (taskset, cpusets): the pool's size until NPUEMU_THREADS is
// applied, as that setting's default is.
int usable_cores() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_COUNT(&allowed) > 0) return CPU_COUNT(&allowed);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Pool* the_pool = nullptr;
std::atomic<int> workers_lost_at_fork{0};  // the workers to start again in a forked child (pool_of())

// The child handler of pthread_atfork: threads do not survive a fork, so the child's pool starts with
// none, and its workers are started again at its first kernel that uses the pool (a child that only
// execs or exits never pays for them).
// A child that forks again before its first kernel (a double-fork daemon) has no worker yet: the count
// it is owed carries over to its own child.
void forget_pool_workers_in_child() {
  const int workers = the_pool->forget_workers_in_child();
  workers_lost_at_fork = std::max(workers, workers_lost_at_fork.load());
}

constexpr int kUsableCores = 0;  // pool_of(): as many threads as usable_cores()

// The pool, made on first use with `threads` (kUsableCores: usable_cores()), so that set_threads()
// before any kernel starts only the workers it asks for. Never destroyed: workers must not be
// joined during static destruction.
Pool& pool_of(int threads) {
  static Pool* instance = [threads] {
    auto* p = new Pool((threads == kUsableCores ? usable_cores() : threads) - 1);
    the_pool = p;
    pthread_atfork(nullptr, nullptr, forget_pool_workers_in_child);
    return p;
  }();
  if (workers_lost_at_fork.load(std::memory_order_relaxed) != 0) {
    const int workers = workers_lost_at_fork.exchange(0);
    if (workers != 0 && instance->size() == 1) instance->resize(workers);
  }
  return *instance;
}

Pool& pool() { return pool_of(kUsableCores); }

}  // namespace

std::string set_threads(int count) {
  count = std::max(count, 1);
  Pool& p = pool_of(count);
  if (count != p.wanted_size()) p.resize(count - 1);  // not again for a count the system cut short
  return p.why_short();
}

int threads() { return pool().size(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t parts = std::min<int64_t>(pool().size(), (n + grain - 1) / grain);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  pool().run(static_cast<int>(parts), [&](int p) {
    int64_t begin = n * p / parts, end = n * (p + 1) / parts;
    if (begin < end) fn(begin, end);
  });
}

}  // namespace npuemu
