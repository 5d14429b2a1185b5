#pragma once
// Run-time choice of the CPU instruction set for the vectorized CPU kernels (elementwise and its
// backward, reductions, softmax, layer_norm / rms_norm). The build compiles those families once
// per variant: a baseline that runs on any x86-64 (SSE2) or other CPU, and on x86-64 also AVX2 +
// FMA (x86-64-v3) and AVX-512 (x86-64-v4). At the first op, the best variant that this CPU
// supports is installed, unless the environment variable TESSERA_CPU_ISA names one (baseline,
// avx2 or avx512; empty counts as unset): any other value, or a variant this build or CPU lacks,
// makes that op throw Error naming the variable. The variants' results differ only in rounding
// (each is tested against a float64 reference). Implemented in kernels/cpu_isa.cpp; see Note [CPU
// ISA variants] there.

#include <string_view>
#include <vector>

namespace tessera {

enum class CpuIsa { kBaseline, kAvx2, kAvx512 };

// "baseline", "avx2" or "avx512": the names TESSERA_CPU_ISA accepts.
const char* to_string(CpuIsa isa);

// The variant named `name` (as to_string spells it). Throws Error naming `what` (e.g. the
// environment variable it came from), the value and the valid names for any other string.
CpuIsa parse_cpu_isa(std::string_view name, std::string_view what = "cpu isa");

// The variants compiled into this build that this CPU (and its OS) can run, baseline first.
std::vector<CpuIsa> compiled_cpu_isas();

// The variant whose kernels the CPU kernel table holds now.
CpuIsa active_cpu_isa();

// Installs the kernels of variant `isa` into the CPU kernel table. Throws Error when `isa` is not
// in compiled_cpu_isas(). Not synchronized with ops: call it while no op runs on any thread
// (tests call it between ops on one thread).
void set_cpu_isa(CpuIsa isa);

}  // namespace tessera
