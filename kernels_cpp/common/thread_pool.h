// A small persistent pool of host threads for kernels (NPUEMU_THREADS). Work is split by index into
// parts or blocks, each taken by whichever thread is free next, so which thread computes what
// never changes a result; a worker that wakes up after the work ran out leaves the job alone
// instead of being waited for. One kernel runs at a time across all host threads: several host
// threads launching at once do not oversubscribe the cores.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>

namespace npuemu {

void set_threads(int count);
int threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks hold at least `grain` items.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Runs worker(take) on up to `participants` threads (the caller among them). take() hands out the
// blocks 0 .. blocks-1 in order, one per call, from a shared counter, and -1 once none is left: a
// thread that starts late (waking a sleeping worker takes a millisecond or more on a virtual
// machine) or runs slower simply takes fewer blocks, instead of holding up the others.
template <class Worker>
void share_blocks(int64_t blocks, int64_t participants, Worker&& worker) {
  std::atomic<int64_t> next{0};
  const auto take = [&next, blocks]() -> int64_t {
    const int64_t block = next++;
    return block < blocks ? block : -1;
  };
  parallel_for(std::min(participants, blocks), 1, [&](int64_t, int64_t) { worker(take); });
}

}  // namespace npuemu
