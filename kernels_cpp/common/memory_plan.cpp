#include "common/memory_plan.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <cpuid.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "common/elementwise.h"
#include "common/registry.h"
#include "common/vmath.h"
#include "common/without_gil.h"

namespace py = pybind11;

namespace npuemu {
namespace {

enum Choice { kStreaming, kThreshold, kPrefetch, kHint, kBlock, kChoices };
const char* const kNames[kChoices] = {"streaming", "threshold", "prefetch", "hint", "block"};
const char* const kHints[4] = {"nta", "t2", "t1", "t0"};  // by locality

// The index of a hint's name in kHints (its __builtin_prefetch locality), or -1 for another name.
int hint_named(const std::string& name) {
  const auto* found = std::find(kHints, kHints + 4, name);
  return found == kHints + 4 ? -1 : static_cast<int>(found - kHints);
}

// ---- the plan in force: plain atomics, read by every kernel call without a lock ----
// (A reader may see one field of a plan being replaced and another of the old one: harmless, as
// no choice changes a result.)

std::atomic<bool> g_made{false};
std::atomic<bool> g_streaming{MemoryPlan{}.streaming};
std::atomic<int64_t> g_threshold{MemoryPlan{}.threshold}, g_prefetch{MemoryPlan{}.prefetch}, g_block{MemoryPlan{}.block};
std::atomic<int> g_hint{MemoryPlan{}.hint};
std::mutex g_mutex;  // guards g_report and the making of the plan
// Never destroyed: the module's static objects are destroyed at exit before the global destructors of
// a C program that loaded the toolkit earlier, and such a destructor may still run an operator.
PlanReport& g_report = *new PlanReport();

void publish(const MemoryPlan& plan) {
  g_streaming.store(plan.streaming, std::memory_order_relaxed);
  g_threshold.store(plan.threshold, std::memory_order_relaxed);
  g_prefetch.store(plan.prefetch, std::memory_order_relaxed);
  g_hint.store(plan.hint, std::memory_order_relaxed);
  g_block.store(plan.block, std::memory_order_relaxed);
}

// ---- NPUEMU_MEMORY_PLAN ----

[[noreturn]] void bad_entry(const std::string& entry, const std::string& expected) {
  throw std::invalid_argument("NPUEMU_MEMORY_PLAN: entry '" + entry + "': expected " + expected);
}

// A count with an optional binary suffix (K, M, G: powers of 1024), e.g. 8M or 512.
bool parse_size(const std::string& text, int64_t& value) {
  if (text.empty() || text.size() > 12) return false;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  if (digits == 0) return false;
  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty()) return false;
  const int64_t count = std::stoll(text.substr(0, digits));  // at most 12 digits: an int64
  if (count > (std::numeric_limits<int64_t>::max() >> shift)) return false;  // 99999999999G: no int64
  value = count << shift;
  return true;
}

bool parse_switch(const std::string& text, bool& value) {
  if (text == "on" || text == "1" || text == "true") return value = true, true;
  if (text == "off" || text == "0" || text == "false") return value = false, true;
  return false;
}

std::string range(int64_t low, int64_t high, const char* unit) {
  return "a multiple of 64 " + std::string(unit) + " in [" + std::to_string(low) + ", " + std::to_string(high) + "]";
}

// The text in lower case: NPUEMU_* values are read without regard to case (README), streaming=ON too.
std::string lowered(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// Applies one "name=value" entry to `plan`; returns the choice it sets.
Choice apply_entry(const std::string& entry, MemoryPlan& plan) {
  const std::string text = lowered(entry);  // messages quote the entry as it was given
  const size_t equals = text.find('=');
  const std::string name = text.substr(0, equals), value = equals == std::string::npos ? "" : text.substr(equals + 1);
  if (equals == std::string::npos)
    bad_entry(entry, "name=value, the name one of streaming, threshold, prefetch, hint, block");
  int64_t size = 0;
  if (name == "streaming") {
    if (!parse_switch(value, plan.streaming)) bad_entry(entry, "streaming=on or streaming=off");
    return kStreaming;
  }
  if (name == "threshold") {
    if (!parse_size(value, size) || size > kMaxThreshold)
      bad_entry(entry, "a size in bytes (suffix K, M or G allowed) up to 1G");
    plan.threshold = size;
    return kThreshold;
  }
  if (name == "prefetch") {
    if (!parse_size(value, size) || size % 64 || size > kMaxPrefetch) bad_entry(entry, range(0, kMaxPrefetch, "bytes"));
    plan.prefetch = size;
    return kPrefetch;
  }
  if (name == "hint") {
    plan.hint = hint_named(value);
    if (plan.hint < 0) bad_entry(entry, "hint=nta, hint=t0, hint=t1 or hint=t2");
    return kHint;
  }
  if (name == "block") {
    if (!parse_size(value, size) || size % 64 || size < kMinBlock || size > kMaxBlock)
      bad_entry(entry, range(kMinBlock, kMaxBlock, "elements"));
    plan.block = size;
    return kBlock;
  }
  bad_entry(entry, "a name among streaming, threshold, prefetch, hint, block");
}

// ---- the cache hierarchy ----

int64_t cache_size(int name) {
  const long size = sysconf(name);
  return size > 0 ? size : 0;
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// The per-core share of a last-level cache on current x86 servers is 1.25-4 MiB (Intel Xeon
// 1.25-1.875 MiB, AMD EPYC Zen 3/4 4 MiB: 32 MiB per 8-core CCX). What one process can count on
// is at most its cores' share, whatever the LLC reported: a virtual machine may report the host's
// whole LLC (this project's 2-vCPU VM reports 480 MiB) or a sum over sockets.
constexpr int64_t kLlcPerCore = int64_t(4) << 20;

void read_caches(PlanReport& report) {
  report.l1d = cache_size(_SC_LEVEL1_DCACHE_SIZE);
  report.l2 = cache_size(_SC_LEVEL2_CACHE_SIZE);
  report.llc_reported = std::max(cache_size(_SC_LEVEL3_CACHE_SIZE), report.l2);
  const int64_t share = kLlcPerCore * usable_cpus();
  report.llc_effective = report.llc_reported ? std::min(report.llc_reported, share) : share;
  report.llc_effective = std::max(report.llc_effective, report.l2);
}

// Streaming pays off for an output that would not stay in this process's share of the LLC
// anyway: the lines it evicts are worth more than the RFO it saves.
int64_t threshold_from_caches(const PlanReport& report) {
  return std::clamp(report.llc_effective, kMinThreshold, kMaxThreshold);
}

// The largest power of two whose three-operand FLOAT block (12 bytes an element) fits in the L2,
// within the bounds. A block that starts a thread's run of blocks is a restart (nothing in flight
// for it; share_block_runs makes such starts few), so larger blocks were better as long as the
// threads still get several each (block_elements sees to that). A quarter of the L2 (32768 on the
// Intel Xeon, when every block was a restart) gave two threads 10-20% less bandwidth than 131072
// (aclnnLogSigmoid 4096x4096 FLOAT, 2 threads: 30 vs 37 GB/s; the triad 33 vs 38); 262144
// measured the same as 131072.
int64_t block_from_caches(const PlanReport& report) {
  if (report.l2 <= 0) return MemoryPlan{}.block;
  int64_t block = kMinBlock;
  while (block * 2 * 12 <= report.l2 && block * 2 <= kMaxBlock) block *= 2;
  return block;
}

// ---- measuring the store kind and the prefetch distance ----

// The probe: a kernel of the element-wise engine shaped like the costly ones (BCE-with-logits,
// LogSigmoid): three FLOAT inputs, one FLOAT output, an exponential and a division per element.
// The arithmetic matters: how many lines a loop keeps in flight, and so what prefetching and the
// store kind bring, depends on the time it spends between its loads.
struct Probe {
  static constexpr int kInputs = 3;
  template <class V>
  NPUEMU_INLINE typename V::F apply(const typename V::F* in) const {
    const typename V::F z = simd::exp_nonpositive<V>(V::from_bits(V::bits(in[0]) | 0x80000000u));
    return (in[1] * z + in[2]) / (1.0f + z);
  }
};
static_assert(Probe::kInputs == kProbeInputs, "the plan's prefetch distance is per input of the probe");
constexpr int kProbeOperands = Probe::kInputs + 1;

// Evicts [p, p + bytes) from every cache level, writing dirty lines back (clflushopt where the
// machine has it: pipelined, an order of magnitude faster than clflush).
__attribute__((target("clflushopt"))) void flush_opt(const char* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) __builtin_ia32_clflushopt(p + i);
  __builtin_ia32_mfence();
}
void flush_plain(const char* p, int64_t bytes) {
  for (int64_t i = 0; i < bytes; i += 64) __builtin_ia32_clflush(p + i);
  __builtin_ia32_mfence();
}
bool has_clflushopt() {
  unsigned a, b, c, d;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 23 & 1);  // CPUID.(7,0):EBX bit 23
}
void flush(const char* p, int64_t bytes) {
  static const bool opt = has_clflushopt();
  if (opt) flush_opt(p, bytes);
  else flush_plain(p, bytes);
}

struct Buffers {
  int64_t bytes;     // per operand
  char* memory;      // the probe's operands, 4 KiB aligned
  explicit Buffers(int64_t size)
      : bytes(size), memory(static_cast<char*>(std::aligned_alloc(4096, kProbeOperands * size))) {
    if (!memory) throw std::bad_alloc();
    // Values from -1 to -11: the probe's exponential stays far from subnormal results, which take
    // a microcode assist and would time the arithmetic instead of the memory. Faulting the pages
    // in here keeps that out of the timings too.
    float* f = reinterpret_cast<float*>(memory);
    for (int64_t i = 0; i < kProbeOperands * size / 4; ++i) f[i] = -1.0f - static_cast<float>(i & 1023) * 0.01f;
  }
  ~Buffers() { std::free(memory); }
  char* operand(int k) const { return memory + k * bytes; }
};

struct Alternative {
  std::string name;
  bool streaming;
  int64_t prefetch;
  int hint;
};

// GB/s of one pass of the probe over cold operands: all evicted first, the output flushed again
// after the pass, inside the timing, so that ordinary stores pay for writing their dirty lines
// back, as they do in a large kernel (streamed lines are already in memory).
double time_pass(const Buffers& b, const Alternative& a) {
  flush(b.memory, kProbeOperands * b.bytes);
  elementwise_detail::Run<kProbeOperands> run{{}, {}, {}, b.bytes / 4, a.streaming, a.prefetch, a.hint};
  for (int k = 0; k < kProbeOperands; ++k) run.data[k] = b.operand(k), run.dtype[k] = kFloat;
  const auto start = std::chrono::steady_clock::now();
  elementwise_detail::run(Probe{}, run, simd::machine_isa());
  flush(b.operand(0), b.bytes);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return seconds > 0 ? kProbeOperands * b.bytes / seconds / 1e9 : 0.0;
}

constexpr int kRounds = 5;        // passes of each alternative, interleaved; the median counts
constexpr double kMargin = 1.05;  // an alternative replaces the default only if this much faster
constexpr double kTie = 1.04;     // alternatives this close to the fastest are alike to the probe
constexpr double kSaneLow = 0.2, kSaneHigh = 2000;  // GB/s: outside this, a timing is broken

// Median GB/s of each alternative, the alternatives interleaved round by round (noise from other
// processes hits them alike).
std::vector<double> medians(const Buffers& b, const std::vector<Alternative>& alternatives) {
  std::vector<std::vector<double>> rates(alternatives.size());
  for (int round = 0; round < kRounds; ++round)
    for (size_t a = 0; a < alternatives.size(); ++a) rates[a].push_back(time_pass(b, alternatives[a]));
  std::vector<double> result;
  for (auto& r : rates) {
    std::sort(r.begin(), r.end());
    result.push_back(r[r.size() / 2]);
  }
  return result;
}

// The alternative to keep. Among the alternatives within kTie of the fastest (the probe cannot
// tell them apart), the one that prefetches furthest, then into more caches (t0 before nta); it
// replaces alternatives[0] (the default) only if it beats it by kMargin. Why the furthest: the
// probe has little arithmetic per element, and kernels with more (BCE-with-logits forward and
// backward, 4-5 streams) gain from a distance the probe does not: on the AMD EPYC (Zen 5) the probe
// timed none, 256 and 2048 bytes ahead alike (44-46 GB/s) and chose among them by noise, while
// BCE-with-logits 4096x4096 FLOAT ran 12-15% faster with 2048 than with none or 256, and the
// kernels with one or two inputs lost 5-10% at most; on the Intel Xeon 2048 t0 was already the
// usual choice and the best for those kernels.
size_t pick(const std::vector<Alternative>& grid, const std::vector<double>& rate) {
  size_t fastest = 0;
  for (size_t a = 1; a < rate.size(); ++a)
    if (rate[a] > rate[fastest]) fastest = a;
  size_t chosen = fastest;
  const auto reach = [&](size_t a) { return std::make_pair(grid[a].prefetch, grid[a].hint); };
  for (size_t a = 0; a < rate.size(); ++a)
    if (rate[a] * kTie >= rate[fastest] && reach(a) > reach(chosen)) chosen = a;
  return rate[chosen] > rate[0] * kMargin ? chosen : 0;
}

bool sane(const std::vector<double>& rate) {
  return std::all_of(rate.begin(), rate.end(), [](double r) { return r >= kSaneLow && r <= kSaneHigh; });
}

// Operand size of the probe: a sixteenth of the L2, within [64 KiB, 256 KiB]: large enough for
// the hardware prefetchers to reach their steady state (16 pages and more per operand) and for a
// pass to last tens of microseconds, small enough for the whole measurement to take a few
// milliseconds.
int64_t probe_bytes(const PlanReport& report) {
  return std::clamp<int64_t>(report.l2 / 16, int64_t(64) << 10, int64_t(256) << 10) / 4096 * 4096;
}

std::string describe(const char* stage, const Alternative& a) {
  return std::string(stage) + (a.streaming ? "streaming" : "ordinary") + " stores, prefetch " +
         (a.prefetch ? std::to_string(a.prefetch) + " " + kHints[a.hint] : std::string("none"));
}

// Runs `grid` (the default first), records its timings under `stage`, and returns the alternative
// chosen, or nothing if a timing is absurd (report.fallback then says which).
std::optional<Alternative> measure_grid(const char* stage, const Buffers& buffers, std::vector<Alternative> grid,
                                        PlanReport& report) {
  for (Alternative& a : grid) a.name = describe(stage, a);
  const std::vector<double> rate = medians(buffers, grid);
  for (size_t a = 0; a < grid.size(); ++a) report.timings.emplace_back(grid[a].name, rate[a]);
  if (!sane(rate)) {
    report.fallback = "a timing out of [0.2, 2000] GB/s";
    return std::nullopt;
  }
  return grid[pick(grid, rate)];
}

// The prefetch alternatives: none, and each distance with each hint, the default first; a forced
// distance or hint is the only one of its kind (a forced distance off the grid still has its hint
// measured: with 768 forced, the hint once stayed the default nta unmeasured, 2.5x slower here
// than t0). The hints are nta and t0: t1 and t2 fill L2 but not L1 on Intel, where the kernels
// ran 5-10% slower with t1 than with t0 (4096x4096 FLOAT, 2048 bytes ahead, on the Xeon) while
// the probe could not tell them apart and chose t1 in 5 processes of 12; AMD's Zen optimisation
// guide describes t0, t1 and t2 alike (not measured here).
std::vector<Alternative> prefetch_grid(const MemoryPlan& plan, const bool* forced) {
  const std::vector<int64_t> distances = forced[kPrefetch] ? std::vector<int64_t>{plan.prefetch}
                                                           : std::vector<int64_t>{0, 256, 512, 1024, 2048};
  const std::vector<int> hints = forced[kHint] ? std::vector<int>{plan.hint} : std::vector<int>{0, 3};
  std::vector<Alternative> grid = {{"", plan.streaming, plan.prefetch, plan.hint}};
  for (int64_t d : distances)
    for (int hint : hints) {
      if (d == 0 && hint != plan.hint) continue;  // no prefetch: the hint is moot
      if (d == plan.prefetch && hint == plan.hint) continue;  // the default, already first
      grid.push_back({"", plan.streaming, d, hint});
    }
  return grid;
}

// Measures the prefetch distance and hint (with the default store kind), then the store kind at
// the prefetch chosen, for the choices `forced` leaves open. In that order because the store kind
// depends on the prefetching: on this project's Xeon, streaming FLOAT16 outputs without software
// prefetch took twice as long as with ordinary stores (LogSigmoid, 16M elements, one thread: 18.5
// vs 9.6 ms), with prefetcht0 1 KiB ahead 15% less (7.7 vs 9.0 ms).
void measure(PlanReport& report, const bool* forced) {
  const Buffers buffers(probe_bytes(report));
  MemoryPlan& plan = report.plan;
  if (!forced[kPrefetch] || !forced[kHint]) {
    const std::optional<Alternative> best = measure_grid("prefetch: ", buffers, prefetch_grid(plan, forced), report);
    if (!best) return;
    plan.prefetch = best->prefetch, plan.hint = best->hint;
    if (!forced[kPrefetch]) report.source[kPrefetch] = "measured";
    if (!forced[kHint]) report.source[kHint] = plan.prefetch ? "measured" : "default";  // moot without prefetch
  }
  if (!forced[kStreaming]) {
    const std::optional<Alternative> best =
        measure_grid("stores: ", buffers,
                     {{"", plan.streaming, plan.prefetch, plan.hint}, {"", !plan.streaming, plan.prefetch, plan.hint}},
                     report);
    if (!best) return;
    plan.streaming = best->streaming;
    report.source[kStreaming] = "measured";
  }
}

// The whole planning: defaults, then the caches, the measurements, and the environment's forced
// choices over them all.
PlanReport make_report() {
  PlanReport report;  // the defaults, with the environment's choices over them
  std::vector<std::string> given;
  if (const char* spec = std::getenv("NPUEMU_MEMORY_PLAN")) parse_memory_plan(spec, report.plan, given);
  bool forced[kChoices] = {};
  for (int c = 0; c < kChoices; ++c) {
    forced[c] = std::find(given.begin(), given.end(), kNames[c]) != given.end();
    report.source[c] = forced[c] ? "environment" : "default";
  }
  read_caches(report);
  if (!forced[kThreshold]) report.plan.threshold = threshold_from_caches(report), report.source[kThreshold] = "caches";
  if (!forced[kBlock]) report.plan.block = block_from_caches(report), report.source[kBlock] = "caches";
  if (!forced[kStreaming] || !forced[kPrefetch] || !forced[kHint]) {
    const auto start = std::chrono::steady_clock::now();
    const MemoryPlan before = report.plan;
    measure(report, forced);
    if (!report.fallback.empty()) {  // back to the defaults (or forced values) for everything measured
      report.plan.streaming = before.streaming;
      report.plan.prefetch = before.prefetch, report.plan.hint = before.hint;
      for (int c : {kStreaming, kPrefetch, kHint})
        if (!forced[c]) report.source[c] = "default";
    }
    report.measure_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  }
  return report;
}

void make_plan() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_made.load(std::memory_order_acquire)) return;
  g_report = make_report();  // throws on a bad NPUEMU_MEMORY_PLAN: the next use tries again
  publish(g_report.plan);
  g_made.store(true, std::memory_order_release);
}

// ---- Python ----

py::dict report_dict() {
  const PlanReport r = memory_plan_report();
  py::dict sources, caches, timings;
  for (int c = 0; c < kChoices; ++c) sources[kNames[c]] = r.source[c];
  caches["l1d"] = r.l1d, caches["l2"] = r.l2, caches["llc_reported"] = r.llc_reported;
  caches["llc_effective"] = r.llc_effective;
  for (const auto& [name, rate] : r.timings) timings[py::str(name)] = rate;
  py::dict d;
  d["streaming"] = r.plan.streaming, d["threshold"] = r.plan.threshold, d["prefetch"] = r.plan.prefetch;
  d["hint"] = kHints[r.plan.hint], d["block"] = r.plan.block;
  d["source"] = sources, d["measure_ms"] = r.measure_ms, d["caches"] = caches;
  d["timings_gbps"] = timings, d["fallback"] = r.fallback;
  return d;
}

// Forces the choices given (None: left as they are), each checked as NPUEMU_MEMORY_PLAN's.
py::dict set_plan(std::optional<bool> streaming, std::optional<int64_t> threshold, std::optional<int64_t> prefetch,
                  std::optional<std::string> hint, std::optional<int64_t> block) {
  without_gil([] { memory_plan(); });  // planned first, so that the forced choices are not overwritten later
  std::string spec;
  if (streaming) spec += std::string(",streaming=") + (*streaming ? "on" : "off");
  if (threshold) spec += ",threshold=" + std::to_string(*threshold);
  if (prefetch) spec += ",prefetch=" + std::to_string(*prefetch);
  if (hint) spec += ",hint=" + *hint;
  if (block) spec += ",block=" + std::to_string(*block);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    std::vector<std::string> given;
    MemoryPlan plan = g_report.plan;
    if (!spec.empty()) parse_memory_plan(spec.substr(1), plan, given);
    for (const std::string& name : given)
      g_report.source[std::find(kNames, kNames + kChoices, name) - kNames] = "forced";
    g_report.plan = plan;
    publish(plan);
  }
  return report_dict();
}

py::dict parse_for_python(const std::string& spec) {
  MemoryPlan plan;
  std::vector<std::string> given;
  parse_memory_plan(spec, plan, given);
  py::dict d;
  for (const std::string& name : given) {
    if (name == "streaming") d["streaming"] = plan.streaming;
    if (name == "threshold") d["threshold"] = plan.threshold;
    if (name == "prefetch") d["prefetch"] = plan.prefetch;
    if (name == "hint") d["hint"] = kHints[plan.hint];
    if (name == "block") d["block"] = plan.block;
  }
  return d;
}

void bind(py::module_& m) {
  m.def("memory_plan", [] {
          without_gil([] { memory_plan(); });  // the first use measures for a few milliseconds
          return report_dict();
        },
        "The memory plan in force (made on first use): choices, their sources, caches, timings");
  m.def("set_memory_plan", &set_plan, py::kw_only(), py::arg("streaming") = py::none(), py::arg("threshold") = py::none(),
        py::arg("prefetch") = py::none(), py::arg("hint") = py::none(), py::arg("block") = py::none(),
        "Forces choices of the memory plan (checked as NPUEMU_MEMORY_PLAN's); returns the plan");
  m.def("pick_memory_alternative",
        [](const std::vector<std::pair<int64_t, std::string>>& prefetches, const std::vector<double>& rates) {
          if (prefetches.size() != rates.size() || rates.empty())
            throw std::invalid_argument("expected one rate per alternative, at least one");
          std::vector<Alternative> grid;
          for (const auto& [distance, hint] : prefetches) {
            const int locality = hint_named(hint);
            if (locality < 0) throw std::invalid_argument("hint: expected nta, t2, t1 or t0, found " + hint);
            grid.push_back({"", true, distance, locality});
          }
          return pick(grid, rates);
        },
        py::arg("prefetches"), py::arg("rates"),
        "The index the planner keeps among (distance, hint) alternatives timed at `rates` GB/s, the default first");
  m.def("parse_memory_plan", &parse_for_python, py::arg("spec"),
        "The choices a NPUEMU_MEMORY_PLAN value sets (ValueError naming a bad entry)");
}

NPUEMU_REGISTER_OP(bind);

}  // namespace

void parse_memory_plan(const std::string& spec, MemoryPlan& plan, std::vector<std::string>& given) {
  size_t start = 0;
  while (start <= spec.size()) {
    const size_t comma = std::min(spec.find(',', start), spec.size());
    const std::string entry = spec.substr(start, comma - start);
    if (entry.empty()) {
      if (spec.empty()) return;  // an empty variable forces nothing
      bad_entry(entry, "name=value (no empty entry between commas)");
    }
    const std::string name = kNames[apply_entry(entry, plan)];
    if (std::find(given.begin(), given.end(), name) != given.end()) bad_entry(entry, "each name once");
    given.push_back(name);
    start = comma + 1;
  }
}

MemoryPlan memory_plan() {
  if (!g_made.load(std::memory_order_acquire)) make_plan();
  MemoryPlan plan;
  plan.streaming = g_streaming.load(std::memory_order_relaxed);
  plan.threshold = g_threshold.load(std::memory_order_relaxed);
  plan.prefetch = g_prefetch.load(std::memory_order_relaxed);
  plan.hint = g_hint.load(std::memory_order_relaxed);
  plan.block = g_block.load(std::memory_order_relaxed);
  return plan;
}

PlanReport memory_plan_report() {
  memory_plan();
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_report;
}

}  // namespace npuemu
