// A small persistent pool of host threads for kernels (NPUEMU_THREADS). Work is split by index into
// parts or blocks, each taken by whichever thread is free next, so which thread computes what
// never changes a result; a worker that wakes up after the work ran out leaves the job alone
// instead of being waited for. One job runs at a time across all host threads (Pool::run): the
// kernels of several host threads, which compute at once (the runtime releases its lock meanwhile),
// take turns at the pool job by job, so they do not oversubscribe the cores, and a job's parts, its
// call and its error are one kernel's. No job keeps state for the next (thread_scratch is per thread
// and used within a part), so the turns change no result. A kernel waiting for its turn still stops
// on Ctrl-C, and the wait does not count against its task timeout (KernelCall::waited_for_the_pool).
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "common/kernel_call.h"

namespace npuemu {

// Host threads a kernel may use (the caller among them). Returns "" when all could be started,
// otherwise the system's reason it started fewer (threads() tells how many): kernels then run on
// those, with the same results.
std::string set_threads(int count);
int threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks hold at least `grain` items.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Runs worker(take) on up to `participants` threads (the caller among them). take() hands out the
// blocks 0 .. blocks-1 in order, one per call, from a shared counter, and -1 once none is left: a
// thread that starts late (waking a sleeping worker takes a millisecond or more on a virtual
// machine) or runs slower simply takes fewer blocks, instead of holding up the others. Every block
// but the first is a checkpoint of the kernel's call (kernel_call.h). Work for one thread, or of
// one block, runs on the caller without waking the pool.
template <class Worker>
void share_blocks(int64_t blocks, int64_t participants, Worker&& worker) {
  std::atomic<int64_t> next{0};
  const auto take = [&next, blocks]() -> int64_t {
    const int64_t block = next.fetch_add(1, std::memory_order_relaxed);
    if (block >= blocks) return -1;
    if (block > 0) checkpoint();
    return block;
  };
  const int64_t threads = std::min(participants, blocks);
  if (threads <= 1) {
    if (blocks > 0) worker(take);
    return;
  }
  parallel_for(threads, 1, [&](int64_t, int64_t) { worker(take); });
}

// The blocks of the next run when `left` remain for `threads` threads (share_block_runs).
inline int64_t block_run_length(int64_t left, int64_t threads) {
  return threads <= 1 ? left : std::max<int64_t>(1, left / (2 * threads));
}

// A block from share_block_runs: its index (-1: none left) and the end of its thread's run, the
// block after the last one the thread has taken in a row.
struct RunBlock {
  int64_t index = -1, run_end = -1;
};

// As share_blocks (every block but the first a checkpoint), but a thread takes the blocks in runs
// of consecutive ones, and take() returns a RunBlock. A run is the whole range for one thread,
// otherwise a (2 * threads)th of the blocks left (at least one): the runs shrink as the work runs
// out, and the last ones are single blocks that even out the threads' ends (threads of one speed
// end together), while a thread meets few run boundaries before (18 runs for 128 blocks and two
// threads). A kernel that prefetches reads ahead across the blocks of its run up to run_end,
// where the first rows of a block taken alone would be read cold.
template <class Worker>
void share_block_runs(int64_t blocks, int64_t participants, Worker&& worker) {
  const int64_t threads = std::min(participants, blocks);
  std::atomic<int64_t> next{0};
  const auto work = [&] {
    int64_t at = 0, end = 0;  // the rest of this thread's run
    worker([&]() -> RunBlock {
      if (at == end) {
        int64_t first = next.load(std::memory_order_relaxed), count = 0;
        do {
          if (first >= blocks) return {};
          count = block_run_length(blocks - first, threads);
        } while (!next.compare_exchange_weak(first, first + count, std::memory_order_relaxed));
        at = first;
        end = first + count;
      }
      if (at > 0) checkpoint();
      return {at++, end};
    });
  };
  if (threads <= 1) {
    if (blocks > 0) work();
    return;
  }
  parallel_for(threads, 1, [&](int64_t, int64_t) { work(); });
}

}  // namespace npuemu
