#pragma once
// Internal: walking strided tensors in logical (row-major) element order as contiguous runs, so
// the threads backend reads and writes blocks of larger tensors (e.g. a shard along an inner dim)
// where they lie, without packing them first.
//
// A RunCursor stands at one logical element of a tensor and knows how many elements follow it
// contiguously in memory. copy_logical and reduce_logical advance several cursors together by the
// shortest run among them, so each step is one memcpy or one reduce_n call; a contiguous tensor
// is a single run.

#include <cstdint>
#include <vector>

#include "collectives/reduce_op.h"
#include "runtime/tensor.h"

namespace tessera::dist::detail {

class RunCursor {
 public:
  // At logical element `begin` of t (CPU, any strides).
  RunCursor(const Tensor& t, int64_t begin);

  char* data() const { return ptr_; }
  // Elements from data() on that are contiguous in memory (at least 1 while inside t).
  int64_t run_left() const { return left_; }
  // Moves k <= run_left() elements ahead.
  void advance(int64_t k);

 private:
  void seek();

  char* base_;
  int64_t element_size_;
  int64_t numel_;
  std::vector<int64_t> sizes_;    // collapsed dims, outermost first; the last has stride 1
  std::vector<int64_t> strides_;  // in elements
  int64_t index_;                 // logical element
  int64_t left_ = 0;
  char* ptr_ = nullptr;
};

// Logical elements [dst_begin, dst_begin + count) of dst = [src_begin, ...) of src (same dtype).
// transfer_bytes: the size of the collective this copy belongs to (see copy_bytes).
void copy_logical(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                  int64_t count, size_t transfer_bytes = 0);

// out[out_begin + i] = op over k of ins[k][in_begins[k] + i], for i in [0, count) (see reduce_n).
void reduce_logical(ReduceOp op, const Tensor& out, int64_t out_begin,
                    const std::vector<const Tensor*>& ins, const std::vector<int64_t>& in_begins,
                    int64_t count);

}  // namespace tessera::dist::detail
