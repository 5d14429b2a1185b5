#pragma once
// Internal: the local work of the CPU backends' collectives: n-way reductions (used instead of
// MPI's ops, which know neither bfloat16 / float16 nor Avg) and copies.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/collectives/reduce_op.h"
#include "tessera/runtime/dtype.h"

namespace tessera::dist::detail {

// out[i] = op(ins[0][i], ins[1][i], ..., ins[n-1][i]) for i in [0, count), combined in rank
// order: Half and BFloat16 accumulate in float and round once, Avg divides the sum by n, integers
// wrap on overflow. `op` must be valid for `dtype` (check_reduce_op). `out` may be one of the
// inputs (the same pointer) but must not partly overlap any. Parallel over the calling rank's
// intra-op threads.
void reduce_n(DType dtype, ReduceOp op, void* out, const void* const* ins, int n, int64_t count);

// reduce_n's work for one dtype and op, resolved once for many short reductions: elements
// [begin, end) of out and the inputs, on the calling thread.
using ReduceKernel = void (*)(void* out, const void* const* ins, int n, int64_t begin, int64_t end);
ReduceKernel reduce_kernel(DType dtype, ReduceOp op);

// The dtype in which partial reductions travel between ranks: float for Half and BFloat16 (they
// accumulate in float and round once), the dtype itself otherwise.
DType accumulator_dtype(DType dtype);
// dst (accumulator_dtype(dtype)) = src (dtype), elementwise.
void to_accumulator(DType dtype, void* dst, const void* src, int64_t count);
// dst (dtype) = src (accumulator_dtype(dtype)) / divisor, rounded once; dst may be src.
void from_accumulator(DType dtype, void* dst, const void* src, int64_t count, int divisor);

// Start (in elements) of chunk i of `count` elements split among n ranks for all_reduce's
// reduce-scatter: equal chunks rounded up to a cache line, so the last ones may be short or empty.
int64_t chunk_begin(int64_t count, int n, int i, size_t element_size);

// memcpy split over the calling rank's intra-op threads; nothing to do when dst == src.
// `transfer_bytes`: the size of the whole transfer this copy is part of (a block of a collective,
// a row of a strided view), which decides whether it streams past the cache (Note [Streaming
// copies] in local_kernels.cpp); 0 means this copy alone. fence = false leaves the calling
// thread's streaming stores unordered until it calls store_fence() (one fence after many short
// copies instead of one each).
void copy_bytes(void* dst, const void* src, size_t nbytes, size_t transfer_bytes = 0,
                bool fence = true);
// Orders the calling thread's earlier streaming stores before its later stores (sfence).
void store_fence();

// Short copies that lie side by side in memory (the rows of interleaved blocks): copied together,
// a line of each in turn, so that memory sees one sweep rather than short bursts. Streams past
// the cache as copy_bytes would for a transfer of `transfer_bytes`; unfenced (store_fence).
// Consumes `runs`: their entries are unspecified afterwards.
struct ByteRun {
  char* dst;
  const char* src;
  size_t bytes;
};
void copy_runs(std::vector<ByteRun>& runs, size_t transfer_bytes);

}  // namespace tessera::dist::detail
