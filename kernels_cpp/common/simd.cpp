#include "common/simd.h"

#include <algorithm>
#include <atomic>

namespace npuemu {
namespace simd {
namespace {

Isa detect() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return __builtin_cpu_supports("avx512bf16") ? Isa::kAvx512Bf16 : Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
  return Isa::kScalar;
}

const Isa kMachineIsa = detect();
std::atomic<Isa> g_isa{kMachineIsa};

}  // namespace

Isa machine_isa() { return kMachineIsa; }

Isa isa() { return g_isa.load(std::memory_order_relaxed); }

void limit_isa(Isa widest) { g_isa.store(std::min(widest, kMachineIsa)); }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16: return "avx512_bf16";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

}  // namespace simd
}  // namespace npuemu
