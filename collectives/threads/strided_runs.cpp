#include "collectives/threads/strided_runs.h"

#include <algorithm>

#include "collectives/local_kernels.h"

namespace tessera::dist::detail {

RunCursor::RunCursor(const Tensor& t, int64_t begin)
    : base_(static_cast<char*>(t.storage()->data()) +
            t.storage_offset() * static_cast<int64_t>(t.element_size())),
      element_size_(static_cast<int64_t>(t.element_size())),
      numel_(t.numel()),
      index_(begin) {
  // Merge dims that are contiguous with their inner neighbour; size-1 dims never matter.
  for (size_t d = 0; d < t.sizes().size(); ++d) {
    const int64_t size = t.sizes()[d];
    const int64_t stride = t.strides()[d];
    if (size == 1) continue;
    if (!sizes_.empty() && strides_.back() == stride * size) {
      sizes_.back() *= size;
      strides_.back() = stride;
    } else {
      sizes_.push_back(size);
      strides_.push_back(stride);
    }
  }
  // An innermost dim that is not unit-stride becomes an outer dim of runs of one element.
  if (sizes_.empty() || strides_.back() != 1) {
    sizes_.push_back(1);
    strides_.push_back(1);
  }
  if (index_ < numel_) seek();
}

void RunCursor::seek() {
  const int64_t inner = sizes_.back();
  int64_t run = index_ / inner;
  const int64_t within = index_ - run * inner;
  int64_t offset = within;
  for (size_t d = sizes_.size() - 1; d-- > 0;) {
    const int64_t q = run / sizes_[d];
    offset += (run - q * sizes_[d]) * strides_[d];
    run = q;
  }
  ptr_ = base_ + offset * element_size_;
  left_ = inner - within;
}

void RunCursor::advance(int64_t k) {
  index_ += k;
  left_ -= k;
  ptr_ += k * element_size_;
  if (left_ == 0 && index_ < numel_) seek();
}

void copy_logical(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                  int64_t count, size_t transfer_bytes) {
  const auto es = static_cast<int64_t>(dst.element_size());
  if (dst.is_contiguous() && src.is_contiguous()) {
    copy_bytes(
        static_cast<char*>(dst.storage()->data()) + (dst.storage_offset() + dst_begin) * es,
        static_cast<const char*>(src.storage()->data()) + (src.storage_offset() + src_begin) * es,
        static_cast<size_t>(count * es), transfer_bytes);
    return;
  }
  RunCursor to(dst, dst_begin);
  RunCursor from(src, src_begin);
  const size_t transfer = std::max(transfer_bytes, static_cast<size_t>(count * es));
  while (count > 0) {
    const int64_t k = std::min({count, to.run_left(), from.run_left()});
    copy_bytes(to.data(), from.data(), static_cast<size_t>(k * es), transfer, false);
    to.advance(k);
    from.advance(k);
    count -= k;
  }
  store_fence();
}

void reduce_logical(ReduceOp op, const Tensor& out, int64_t out_begin,
                    const std::vector<const Tensor*>& ins, const std::vector<int64_t>& in_begins,
                    int64_t count) {
  RunCursor to(out, out_begin);
  std::vector<RunCursor> from;
  from.reserve(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) from.emplace_back(*ins[k], in_begins[k]);
  std::vector<const void*> pointers(ins.size());
  while (count > 0) {
    int64_t step = std::min(count, to.run_left());
    for (const RunCursor& c : from) step = std::min(step, c.run_left());
    for (size_t k = 0; k < from.size(); ++k) pointers[k] = from[k].data();
    reduce_n(out.dtype(), op, to.data(), pointers.data(), static_cast<int>(from.size()), step);
    to.advance(step);
    for (RunCursor& c : from) c.advance(step);
    count -= step;
  }
}

}  // namespace tessera::dist::detail
