#include "common/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace npuemu {
namespace {

class Pool {
 public:
  ~Pool() { resize(0); }

  void resize(int workers) {
    std::lock_guard<std::mutex> run_guard(run_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
    caller_cpu_ = -1;
    stop_ = false;
    const uint64_t start = generation_;  // workers wait for the first job after this point
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i, start] { loop(i + 1, start); });
  }

  int size() const { return static_cast<int>(threads_.size()) + 1; }

  // Runs job(part) for part in [0, parts) across the caller and the workers. An exception in any
  // part is rethrown here, in the calling thread, once every part has finished.
  void run(int parts, const std::function<void(int)>& job) {
    std::lock_guard<std::mutex> run_guard(run_mutex_);
    error_ = nullptr;
    if (parts <= 1 || threads_.empty()) {
      for (int p = 0; p < parts; ++p) job(p);
      return;
    }
    keep_workers_off_the_callers_cpu();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = &job;
      parts_ = parts;
      pending_ = static_cast<int>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
    run_parts(0, job, parts);  // the caller is participant 0
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // The caller computes too, so a worker woken on the caller's CPU only waits for it: observed on
  // virtual machines, where the scheduler kept waking a worker next to its busy waker (halving the
  // speed of two threads, until it moved on its own after many calls). Workers may run on any CPU
  // the caller may, but the one the caller is on; redone only when the caller has moved.
  void keep_workers_off_the_callers_cpu() {
    const int here = sched_getcpu();
    if (here < 0 || here == caller_cpu_) return;
    caller_cpu_ = here;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
    CPU_CLR(here, &allowed);
    if (CPU_COUNT(&allowed) == 0) return;  // the caller may only run here: nothing to spread over
    for (auto& t : threads_) pthread_setaffinity_np(t.native_handle(), sizeof allowed, &allowed);
  }

  void loop(int participant, uint64_t seen) {
    for (;;) {
      const std::function<void(int)>* job;
      int parts;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        job = job_;
        parts = parts_;
      }
      run_parts(participant, *job, parts);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void run_parts(int participant, const std::function<void(int)>& job, int parts) {
    try {
      for (int p = participant; p < parts; p += size()) job(p);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
    }
  }

  std::mutex run_mutex_;  // one job at a time, whichever host thread submits it
  std::exception_ptr error_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(int)>* job_ = nullptr;
  int parts_ = 0;
  int pending_ = 0;
  int caller_cpu_ = -1;  // the CPU workers were last kept off
  uint64_t generation_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool* instance = [] {
    auto* p = new Pool();  // never destroyed: workers must not be joined during static destruction
    p->resize(std::max(1u, std::thread::hardware_concurrency()) - 1);
    return p;
  }();
  return *instance;
}

}  // namespace

void set_threads(int count) {
  if (count < 1) count = 1;
  if (count != pool().size()) pool().resize(count - 1);
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
