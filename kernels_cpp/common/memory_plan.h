// The memory plan: how the kernels move large amounts of data on this machine, chosen once per
// process on first use (as FFTW's planner or OpenBLAS's run-time dispatch do) instead of constants
// tuned on one CPU. It holds
// - streaming: whether outputs above `threshold` bytes are written with non-temporal (streaming)
//   stores, which skip the read-for-ownership of each line and leave the caches alone, or with
//   ordinary stores;
// - threshold: the output size in bytes above which stores stream (when streaming is on);
// - prefetch: how many bytes ahead of its loads each input of the element-wise engine is
//   prefetched (0: none, the hardware prefetchers alone), and hint, into which caches: prefetchnta
//   (nta), prefetcht0 (t0: every level), prefetcht1 (t1: L2 and beyond), prefetcht2 (t2). The
//   best differs between CPUs: Intel's prefetchnta fills L1 but not L2, which on this project's
//   Xeon halved the bandwidth of the kernels tuned with it on AMD EPYC;
// - block: the most elements the element-wise engine hands a thread at a time.
//
// None of these changes a result: they decide how bytes move, never what is computed (every path
// rounds alike, simd.h). docs/performance.md explains how each is chosen; in short:
// 1. NPUEMU_MEMORY_PLAN (e.g. "streaming=on,threshold=8M,prefetch=512,hint=t0,block=32768")
//    forces any of them; a malformed variable is an error that names the bad entry (thrown at
//    every use);
// 2. the threshold and the block come from the cache hierarchy, with the reported last-level cache
//    capped (a virtual machine may report the host's whole LLC, hundreds of MiB, as its own);
// 3. the store kind, the prefetch distance and hint are measured: a few timed passes of the
//    engine over buffers evicted from the caches, a few milliseconds in all, each alternative kept
//    only if it beats the default clearly, a measurement that looks absurd falling back to the
//    defaults.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace npuemu {

struct MemoryPlan {
  bool streaming = true;
  int64_t threshold = int64_t(8) << 20;  // bytes
  int64_t prefetch = 512;                // bytes ahead; 0: no software prefetch
  int hint = 0;                          // the locality of __builtin_prefetch: 0 nta, 1 t2, 2 t1, 3 t0
  int64_t block = int64_t(1) << 15;      // elements

  // Whether an output of `bytes` bytes is written with streaming stores.
  bool streams(int64_t bytes) const { return streaming && bytes > threshold; }

  // How far ahead each input of a loop with `inputs` inputs is prefetched. `prefetch` is measured
  // with kProbeInputs inputs; a loop with fewer keeps as many bytes in flight in all by reaching
  // further with each (what a stream gets is the bytes in flight over the memory's latency):
  // aclnnLogSigmoid, one input, 4096x4096 FLOAT, 1 thread, on the Intel Xeon, took 36.0 / 25.8 /
  // 19.0 ms prefetching 256 / 512 / 1024 bytes ahead, and the measured plan varies between them.
  int64_t prefetch_for(int inputs) const;
};

constexpr int kProbeInputs = 3;  // the inputs of the loop that measures `prefetch` (memory_plan.cpp)

// The sanity bounds of each choice: a forced value outside them is refused, a measured or derived
// one is clamped to them (the threshold derived from the caches to [kMinThreshold, kMaxThreshold];
// a forced one may be anything up to kMaxThreshold, 0 included: the tests stream small outputs).
constexpr int64_t kMinThreshold = int64_t(256) << 10, kMaxThreshold = int64_t(1) << 30;
constexpr int64_t kMaxPrefetch = 4096;  // a multiple of 64, or 0

inline int64_t MemoryPlan::prefetch_for(int inputs) const {
  if (inputs >= kProbeInputs || prefetch == 0) return prefetch;
  const int64_t reach = prefetch * kProbeInputs / (inputs > 0 ? inputs : 1);
  return std::min(kMaxPrefetch, (reach + 63) / 64 * 64);
}
constexpr int64_t kMinBlock = int64_t(1) << 12, kMaxBlock = int64_t(1) << 18;  // a multiple of 64

// The plan in force, made on the first call (from the environment, the caches and measurements).
// Cheap after that (a few relaxed atomic loads), for a kernel to read once per call. Throws
// std::invalid_argument while NPUEMU_MEMORY_PLAN is malformed.
MemoryPlan memory_plan();

// Where each choice of the plan came from, and what the planner saw: for `npuemu` and the tests.
struct PlanReport {
  MemoryPlan plan;
  std::string source[5];  // streaming, threshold, prefetch, hint, block: "measured", "caches",
                          // "default", "environment" or "forced"
  double measure_ms = 0;  // wall time the planner took (0 when nothing was measured)
  int64_t l1d = 0, l2 = 0, llc_reported = 0, llc_effective = 0;  // bytes
  std::vector<std::pair<std::string, double>> timings;  // each alternative measured: name, GB/s
  std::string fallback;  // why a measurement was discarded for the defaults, if it was
};
PlanReport memory_plan_report();

// Parses a NPUEMU_MEMORY_PLAN value onto `plan`; `given` gets the names set. Throws
// std::invalid_argument naming the bad entry.
void parse_memory_plan(const std::string& spec, MemoryPlan& plan, std::vector<std::string>& given);

}  // namespace npuemu
