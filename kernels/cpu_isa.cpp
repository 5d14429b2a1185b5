// Run-time choice among the CPU ISA variants of the vectorized kernel families
// (runtime/cpu_isa.h).
//
// Note [CPU ISA variants]
// The build's baseline is x86-64 (SSE2) so that the library runs on any x86-64 CPU, but Eigen's
// packet math (exp, log, tanh, erf, ...) then works on 4 floats where AVX2 + FMA works on 8 and
// AVX-512 on 16. The families whose time goes into that math (cpu/elementwise.cpp,
// cpu/elementwise_backward.cpp, cpu/reduction.cpp, cpu/softmax.cpp, cpu/norm.cpp) are therefore
// compiled three times on x86-64 (kernels/CMakeLists.txt): as part of tessera_kernels (baseline),
// with -march=x86-64-v3 (AVX2, FMA, F16C, BMI2) and with -march=x86-64-v4 (AVX-512 F/BW/CD/DQ/
// VL). Each copy defines its own specialization register_<family>_kernels<CpuIsa::k...>, and this
// file installs those of the variant chosen at the first op: the best one that
// __builtin_cpu_supports reports (libgcc also checks that the OS saves the AVX / AVX-512
// registers), or the one that TESSERA_CPU_ISA names. Per-function target attributes
// (target_clones) would not do: Eigen picks its packet types from the __AVX2__ / __AVX512F__
// macros, which only -march on the whole translation unit sets.
//
// The trap is the One Definition Rule. Every copy instantiates the same Eigen, std and Tessera
// inline functions and templates: weak symbols of equal names and different machine code. A
// normal link keeps one copy of each, so baseline code could call an AVX-512 copy (SIGILL on an
// older CPU) and AVX-512 code a baseline one (slow). So each variant's objects are linked into one
// relocatable object first (cmake/localize_isa_object.sh): `ld -r --force-group-allocation`
// dissolves the COMDAT groups, then objcopy makes every function, and every vtable (it holds
// function addresses), local to that object except the registration entry points. The variant's
// code then only reaches its own copies. Data stays global but weak (function-local statics,
// guard variables, template static members, inline variables, typeinfo: out of their COMDAT
// groups they would clash with the baseline's copies), so the final link binds every copy's
// references to one definition and a singleton stays single whichever copy of its accessor runs.
// Nothing crosses between variants but Tensors and KernelTable pointers, so Eigen's per-ISA
// alignment settings never meet. Other architectures build the baseline only.
//
// Checked on the linked library: `nm -C libtessera.so | grep 'Tensor::impl() const'` shows one
// global (W) copy, the baseline's, and one local (t) copy per variant.

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/runtime/error.h"

namespace tessera {

namespace {

constexpr std::array<CpuIsa, 3> kAllIsas = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};

// TS_CPU_ISA_AVX2 / TS_CPU_ISA_AVX512 are defined by kernels/CMakeLists.txt when the variant is
// compiled into this build.
constexpr bool compiled(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
    case CpuIsa::kAvx2:
#if defined(TS_CPU_ISA_AVX2)
      return true;
#else
      return false;
#endif
    case CpuIsa::kAvx512:
#if defined(TS_CPU_ISA_AVX512)
      return true;
#else
      return false;
#endif
  }
  return false;
}

bool cpu_supports(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return true;
#if defined(TS_CPU_ISA_AVX2) || defined(TS_CPU_ISA_AVX512)
    // The micro-architecture levels that the variants are compiled for (-march=x86-64-v3/v4).
    case CpuIsa::kAvx2:
      return __builtin_cpu_supports("x86-64-v3");
    case CpuIsa::kAvx512:
      return __builtin_cpu_supports("x86-64-v4");
#else
    default:
      return false;
#endif
  }
  return false;
}

bool available(CpuIsa isa) { return compiled(isa) && cpu_supports(isa); }

std::string valid_names() {
  std::string s;
  for (CpuIsa isa : compiled_cpu_isas()) s += std::string(s.empty() ? "" : ", ") + to_string(isa);
  return s;
}

template <CpuIsa isa>
void install_variant(KernelTable& table) {
  cpu::register_elementwise_kernels<isa>(table);
  cpu::register_elementwise_backward_kernels<isa>(table);
  cpu::register_reduction_kernels<isa>(table);
  cpu::register_softmax_kernels<isa>(table);
  cpu::register_norm_kernels<isa>(table);
}

void install(CpuIsa isa, KernelTable& table) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return install_variant<CpuIsa::kBaseline>(table);
    case CpuIsa::kAvx2:
#if defined(TS_CPU_ISA_AVX2)
      return install_variant<CpuIsa::kAvx2>(table);
#else
      break;
#endif
    case CpuIsa::kAvx512:
#if defined(TS_CPU_ISA_AVX512)
      return install_variant<CpuIsa::kAvx512>(table);
#else
      break;
#endif
  }
  TS_INTERNAL_ASSERT(false, "[set_cpu_isa] variant ", to_string(isa), " is not compiled");
}

CpuIsa initial_isa() {
  const char* env = std::getenv("TESSERA_CPU_ISA");
  if (env != nullptr && *env != '\0') {
    const CpuIsa isa = parse_cpu_isa(env, "environment variable TESSERA_CPU_ISA");
    TS_CHECK(available(isa), "[TESSERA_CPU_ISA] the environment variable TESSERA_CPU_ISA is '", env,
             "', a variant that ",
             compiled(isa) ? "this CPU does not support" : "this build does not include",
             "; valid values on this machine: ", valid_names());
    return isa;
  }
  return compiled_cpu_isas().back();
}

std::atomic<CpuIsa> g_active{CpuIsa::kBaseline};
std::mutex g_set_mutex;  // orders concurrent set_cpu_isa calls (not ops: see cpu_isa.h)

}  // namespace

const char* to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kBaseline:
      return "baseline";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

CpuIsa parse_cpu_isa(std::string_view name, std::string_view what) {
  for (CpuIsa isa : kAllIsas) {
    if (name == to_string(isa)) return isa;
  }
  throw Error(detail::concat_message("[cpu_isa] ", what, " is '", name,
                                     "', not a CPU ISA variant; valid values: baseline, avx2, "
                                     "avx512 (available on this machine: ",
                                     valid_names(), ")"));
}

std::vector<CpuIsa> compiled_cpu_isas() {
  std::vector<CpuIsa> v;
  for (CpuIsa isa : kAllIsas) {
    if (available(isa)) v.push_back(isa);
  }
  return v;
}

CpuIsa active_cpu_isa() {
  kernels(DeviceType::CPU, "active_cpu_isa");  // the first op's installation decides
  return g_active.load();
}

void set_cpu_isa(CpuIsa isa) {
  TS_CHECK(available(isa), "[set_cpu_isa] variant ", to_string(isa), " is ",
           compiled(isa) ? "not supported by this CPU" : "not compiled into this build",
           "; available: ", valid_names());
  KernelTable& table = detail::mutable_kernels(DeviceType::CPU);
  const std::lock_guard<std::mutex> lock(g_set_mutex);
  install(isa, table);
  g_active.store(isa);
}

void detail::install_cpu_isa_kernels(KernelTable& table) {
  const CpuIsa isa = initial_isa();
  install(isa, table);
  g_active.store(isa);
}

}  // namespace tessera
