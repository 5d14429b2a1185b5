#pragma once
// Internal: walking strided tensors in logical (row-major) element order as contiguous runs, so
// the threads backend reads and writes blocks of larger tensors (e.g. a shard along an inner dim)
// where they lie, without packing them first.
//
// A RunCursor stands at one logical element of a tensor and knows how many elements follow it
// contiguously in memory. copy_logical and reduce_logical advance several cursors together by the
// shortest run among them, so each step is one memcpy or one reduce_n call; a contiguous tensor
// is a single run.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/collectives/local_kernels.h"
#include "tessera/collectives/reduce_op.h"
#include "tessera/runtime/tensor.h"

namespace tessera::dist::detail {

class RunCursor {
 public:
  // At logical element `begin` of t (CPU, any strides).
  RunCursor(const Tensor& t, int64_t begin);

  char* data() const { return ptr_; }
  // Elements from data() on that are contiguous in memory (at least 1 while inside t).
  int64_t run_left() const { return left_; }
  // Moves k <= run_left() elements ahead.
  void advance(int64_t k) {
    index_ += k;
    left_ -= k;
    ptr_ += k * element_size_;
    if (left_ == 0 && index_ < numel_) next_run();
  }
  // Moves k elements ahead, across runs.
  void skip(int64_t k);
  // How many rows of `length` <= run_left() elements, `stride` elements apart, follow from
  // data() on: the rest of one run cut into rows, or whole runs of exactly `length` along the
  // next dim out; 1 when neither.
  int64_t rows(int64_t length, int64_t& stride) const;

 private:
  void seek();
  void next_run();

  char* base_;
  int64_t element_size_;
  int64_t numel_;
  std::vector<int64_t> sizes_;    // collapsed dims, outermost first; the last has stride 1
  std::vector<int64_t> strides_;  // in elements
  std::vector<int64_t> coords_;   // of the current run in the outer dims (all but the last)
  int64_t run_offset_ = 0;        // elements from base_ to the current run's first element
  int64_t index_;                 // logical element
  int64_t left_ = 0;
  char* ptr_ = nullptr;
};

// Note [Interleaved blocks]
// When the n blocks of a collective interleave in memory (the blocks of a shard along an inner
// dim: block q of row i sits beside block q + 1 of the same row), visiting one block after the
// other walks memory in short runs a stride apart, and on these machines that costs 10-20% over
// a sequential walk of the same bytes. So the threads backend moves such blocks together, in
// memory order: copies take run i of every block at once (copy_runs; blocks pushed into separate
// outputs go four rows of one block at a time instead, see copy_rows in strided_runs.cpp), and
// reductions take the current run of every block in turn, so that one round covers a row of
// every input. (Pieces of a few rows of one block, then of the next, read 3-5% slower at
// 4096 x 4096 float32 on 4 ranks, and pieces cutting rows in two 10% slower: the hardware
// prefetcher follows one sequential stream best.) Where the blocks interleave in the inputs
// (reduce_scatter, all_to_all), each rank walks its own input and writes into the peers' outputs.

// Copies dst's logical elements from dst_begin on from src's from src_begin on (same dtype), a
// `count` at a time: each run() continues where the last stopped, so a caller that moves several
// tensors run by run (Note [Interleaved blocks]) places its cursors once.
// transfer_bytes: the size of the collective this copy belongs to (see copy_bytes).
class LogicalCopy {
 public:
  LogicalCopy(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
              size_t transfer_bytes);
  // Streaming stores are not fenced here: call store_fence() after the last run.
  void run(int64_t count);
  // The next contiguous run, of at most max_count elements, stepping past it without copying.
  ByteRun next(int64_t max_count);
  int64_t element_size() const { return element_size_; }

  // Elements up to the end of the current run of either tensor.
  int64_t run_left() const { return std::min(to_.run_left(), from_.run_left()); }
  // Rows of `length` <= run_left() elements that follow from here at constant strides in both
  // tensors (at least 1); the cursors stay where they are (skip() moves them).
  struct Rows {
    char* dst;
    const char* src;
    int64_t dst_stride;  // bytes
    int64_t src_stride;
    int64_t count;
  };
  Rows rows(int64_t length) const;
  void skip(int64_t count);

 private:
  RunCursor to_;
  RunCursor from_;
  int64_t element_size_;
  size_t transfer_bytes_;
};

// out[out_begin + i] = op over k of ins[k][in_begins[k] + i], for i = 0, 1, ... (see reduce_n),
// a `count` per run(), each continuing where the last stopped.
class LogicalReduce {
 public:
  LogicalReduce(ReduceOp op, const Tensor& out, int64_t out_begin,
                const std::vector<const Tensor*>& ins, const std::vector<int64_t>& in_begins);
  void run(int64_t count);
  // Elements from the current one to the end of the first input's contiguous run.
  int64_t input_run_left() const { return from_.front().run_left(); }
  // Elements up to the end of the current run of the output or any input.
  int64_t run_left() const;
  // Rows of `length` <= run_left() elements that follow from here at constant strides in the
  // output and every input (at least 1); the cursors stay where they are (skip() moves them).
  struct Rows {
    char* out;
    int64_t out_stride;  // bytes
    std::vector<const char*> ins;
    std::vector<int64_t> in_strides;
    int64_t count;
  };
  void rows(int64_t length, Rows& rows) const;
  void skip(int64_t count);
  int inputs() const { return static_cast<int>(from_.size()); }
  ReduceKernel kernel() const { return kernel_; }

 private:
  ReduceOp op_;
  DType dtype_;
  ReduceKernel kernel_;
  RunCursor to_;
  std::vector<RunCursor> from_;
  std::vector<const void*> pointers_;
};

// Reduces `count` elements of every block (each continuing where it stopped) in the inputs'
// memory order: the current input run of every block in turn (Note [Interleaved blocks]), many
// rows per step where the blocks go on in rows of one length at constant strides.
void reduce_interleaved(std::vector<LogicalReduce>& blocks, int64_t count);

// Block q of `blocks` moves counts[q] elements; the blocks interleave in memory, so their runs
// are copied side by side, run i of every block together (Note [Interleaved blocks]).
void copy_interleaved(std::vector<LogicalCopy>& blocks, const std::vector<int64_t>& counts,
                      size_t transfer_bytes);

// One-shot forms of the two above (copy_logical fences its streaming stores).
void copy_logical(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                  int64_t count, size_t transfer_bytes = 0);
void reduce_logical(ReduceOp op, const Tensor& out, int64_t out_begin,
                    const std::vector<const Tensor*>& ins, const std::vector<int64_t>& in_begins,
                    int64_t count);

}  // namespace tessera::dist::detail
