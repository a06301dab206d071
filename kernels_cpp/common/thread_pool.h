// A small persistent pool of host threads for kernels (NPUEMU_THREADS). Work is split statically
// by index, so which thread computes what never changes the result. One kernel runs at a time
// across all host threads: several host threads launching at once do not oversubscribe the cores.
#pragma once
#include <cstdint>
#include <functional>

namespace npuemu {

void set_threads(int count);
int threads();

// Calls fn(begin, end) on disjoint chunks covering [0, n); chunks hold at least `grain` items.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace npuemu
