#pragma once
// oneDNN's matmul primitive for the CPU matmul kernel (kernels/cpu/linalg.cpp), and the one seam
// where oneDNN's errors become tessera::Error (TS_DNNL_CALL).

#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>

#include "runtime/tensor.h"

namespace tessera::cpu {

namespace detail {

// Throws OutOfMemoryError for dnnl_out_of_memory, Error otherwise; both start with "[op]".
[[noreturn]] void throw_dnnl_error(const char* op, const char* expr, const dnnl::error& e);

template <typename F>
auto dnnl_call(const char* op, const char* expr, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw_dnnl_error(op, expr, e);
  }
}

}  // namespace detail

// Evaluates `expr` (a oneDNN call) and returns its value; a dnnl::error it throws becomes a
// tessera::Error naming `op`, the failing expression and oneDNN's status.
#define TS_DNNL_CALL(op, expr) ::tessera::cpu::detail::dnnl_call(op, #expr, [&]() { return expr; })

// How the last two dims of t lie in memory, when oneDNN and BLAS-style kernels can read them in
// place: one unit stride, the other (the leading dimension) at least the matrix's extent along it.
// Size-1 dims may have any stride. nullopt for other layouts (a slice with a step, an expand).
struct MatrixLayout {
  bool row_major;  // unit stride along the columns
  int64_t ld;      // stride between rows (row-major) or columns (column-major)
};
std::optional<MatrixLayout> blas_layout(const Tensor& t);

// out = a @ b with oneDNN, for float32, bfloat16 and float16 (all three of one dtype).
// Shapes as KernelTable::matmul: a [batch..., M, K], b [batch..., K, N], out [batch..., M, N]
// contiguous, batch dims already broadcast (stride 0). Requires K > 0 and out non-empty, each
// matrix of a and b with a unit stride in one of its two dims, and no batch dim broadcast in both
// a and b. Uses the calling thread's OpenMP thread count.
// Returns false, computing nothing, when oneDNN has no optimized implementation for this dtype
// and layout on this CPU (its reference implementation is far slower than converting).
bool onednn_matmul(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace tessera::cpu
