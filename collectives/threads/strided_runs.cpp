#include "collectives/threads/strided_runs.h"

#include <algorithm>
#include <utility>

#include "collectives/local_kernels.h"
#include "runtime/strided_dims.h"

namespace tessera::dist::detail {

RunCursor::RunCursor(const Tensor& t, int64_t begin)
    : base_(static_cast<char*>(t.storage()->data()) +
            t.storage_offset() * static_cast<int64_t>(t.element_size())),
      element_size_(static_cast<int64_t>(t.element_size())),
      numel_(t.numel()),
      index_(begin) {
  // Merge dims that are contiguous with their inner neighbour; size-1 dims never matter.
  ::tessera::detail::Dims dims;
  for (size_t d = 0; d < t.sizes().size(); ++d) {
    if (t.sizes()[d] != 1) dims.append(t.sizes()[d], t.strides()[d]);
  }
  // An innermost dim that is not unit-stride becomes an outer dim of runs of one element.
  if (dims.sizes.empty() || dims.strides.back() != 1) dims.append(1, 1);
  sizes_ = std::move(dims.sizes);
  strides_ = std::move(dims.strides);
  if (index_ < numel_) seek();
}

void RunCursor::seek() {
  const int64_t inner = sizes_.back();
  int64_t run = index_ / inner;
  const int64_t within = index_ - run * inner;
  coords_.assign(sizes_.size() - 1, 0);
  run_offset_ = 0;
  for (size_t d = sizes_.size() - 1; d-- > 0;) {
    const int64_t q = run / sizes_[d];
    coords_[d] = run - q * sizes_[d];
    run_offset_ += coords_[d] * strides_[d];
    run = q;
  }
  ptr_ = base_ + (run_offset_ + within) * element_size_;
  left_ = inner - within;
}

// The next run starts at the inner dim's first element: step the outer coordinates like an
// odometer (a division per dim, as seek does, costs more than a short run's copy).
void RunCursor::next_run() {
  for (size_t d = coords_.size(); d-- > 0;) {
    run_offset_ += strides_[d];
    if (++coords_[d] < sizes_[d]) break;
    run_offset_ -= sizes_[d] * strides_[d];
    coords_[d] = 0;
  }
  ptr_ = base_ + run_offset_ * element_size_;
  left_ = sizes_.back();
}

LogicalCopy::LogicalCopy(const Tensor& dst, int64_t dst_begin, const Tensor& src, int64_t src_begin,
                         size_t transfer_bytes)
    : to_(dst, dst_begin),
      from_(src, src_begin),
      element_size_(static_cast<int64_t>(dst.element_size())),
      transfer_bytes_(transfer_bytes) {}

void LogicalCopy::run(int64_t count) {
  while (count > 0) {
    const int64_t k = std::min({count, to_.run_left(), from_.run_left()});
    copy_bytes(to_.data(), from_.data(), static_cast<size_t>(k * element_size_), transfer_bytes_,
               false);
    to_.advance(k);
    from_.advance(k);
    count -= k;
  }
}

ByteRun LogicalCopy::next(int64_t max_count) {
  const int64_t k = std::min({max_count, to_.run_left(), from_.run_left()});
  const ByteRun run{to_.data(), from_.data(), static_cast<size_t>(k * element_size_)};
  to_.advance(k);
  from_.advance(k);
  return run;
}

void copy_interleaved(std::vector<LogicalCopy>& blocks, const std::vector<int64_t>& counts,
                      size_t transfer_bytes) {
  std::vector<int64_t> left = counts;
  std::vector<ByteRun> runs;
  // A round takes the next run of every block; with fewer than four blocks, rounds repeat until
  // four runs stream together (copy_runs).
  runs.reserve(std::max<size_t>(4, 2 * blocks.size()));
  while (true) {
    runs.clear();
    bool more = true;
    while (more && runs.size() < 4) {
      more = false;
      for (size_t q = 0; q < blocks.size(); ++q) {
        if (left[q] == 0) continue;
        runs.push_back(blocks[q].next(left[q]));
        left[q] -= static_cast<int64_t>(runs.back().bytes) / blocks[q].element_size();
        more = true;
      }
    }
    if (runs.empty()) return;
    copy_runs(runs, transfer_bytes);
  }
}

LogicalReduce::LogicalReduce(ReduceOp op, const Tensor& out, int64_t out_begin,
                             const std::vector<const Tensor*>& ins,
                             const std::vector<int64_t>& in_begins)
    : op_(op), dtype_(out.dtype()), to_(out, out_begin), pointers_(ins.size()) {
  from_.reserve(ins.size());
  for (size_t k = 0; k < ins.size(); ++k) from_.emplace_back(*ins[k], in_begins[k]);
}

void LogicalReduce::run(int64_t count) {
  while (count > 0) {
    int64_t step = std::min(count, to_.run_left());
    for (const RunCursor& c : from_) step = std::min(step, c.run_left());
    for (size_t k = 0; k < from_.size(); ++k) pointers_[k] = from_[k].data();
    reduce_n(dtype_, op_, to_.data(), pointers_.data(), static_cast<int>(from_.size()), step);
    to_.advance(step);
    for (RunCursor& c : from_) c.advance(step);
    count -= step;
  }
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
  LogicalCopy(dst, dst_begin, src, src_begin,
              std::max(transfer_bytes, static_cast<size_t>(count * es)))
      .run(count);
  store_fence();
}

void reduce_logical(ReduceOp op, const Tensor& out, int64_t out_begin,
                    const std::vector<const Tensor*>& ins, const std::vector<int64_t>& in_begins,
                    int64_t count) {
  LogicalReduce(op, out, out_begin, ins, in_begins).run(count);
}

}  // namespace tessera::dist::detail
