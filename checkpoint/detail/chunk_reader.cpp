#include "tessera/checkpoint/detail/chunk_reader.h"

#include <algorithm>
#include <memory>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/checkpoint/detail/checksum.h"

namespace tessera::checkpoint::detail {

namespace {
// The most bytes one read brings in (a slab of rows of one chunk).
constexpr int64_t kSlabBytes = int64_t{64} << 20;
}  // namespace

std::string describe_box(const Shape& offsets, const Shape& sizes) {
  return tessera::detail::concat_message("offsets ", offsets, " sizes ", sizes);
}

void ChunkReader::read_overlap(const std::string& key, const TensorRecord& tensor,
                               const ChunkRecord& chunk, const Box& overlap,
                               const LocalBlock& block, std::byte* dst, const Shape& dst_sizes) {
  const size_t element = element_size(tensor.dtype);
  const size_t ndim = overlap.sizes.size();
  Shape src_start(ndim, 0), dst_start(ndim, 0);
  for (size_t d = 0; d < ndim; ++d) {
    src_start[d] = overlap.offsets[d] - chunk.offsets[d];
    dst_start[d] = block.local_offsets[d] + overlap.offsets[d] - block.global.offsets[d];
  }
  int64_t row_bytes = static_cast<int64_t>(element);
  for (size_t d = 1; d < ndim; ++d) row_bytes *= chunk.sizes[d];
  const int64_t rows = ndim == 0 ? 1 : overlap.sizes[0];
  const int64_t rows_per_slab = std::max<int64_t>(1, kSlabBytes / std::max<int64_t>(row_bytes, 1));
  const File& file = open(chunk.file);
  for (int64_t first = 0; first < rows; first += rows_per_slab) {
    Shape region = overlap.sizes;
    Shape src_at = src_start, dst_at = dst_start;
    if (ndim > 0) {
      region[0] = std::min(rows_per_slab, rows - first);
      src_at[0] += first;
      dst_at[0] += first;
    }
    const ArrayRegion src{chunk.sizes, src_at};
    auto [lo, hi] = byte_span(src, region, element);
    const bool checked = !chunk.block_xxh3.empty();
    if (checked) {
      const auto block_bytes = static_cast<int64_t>(chunk.block_bytes);
      lo = lo / block_bytes * block_bytes;
      hi = std::min<int64_t>((hi + block_bytes - 1) / block_bytes * block_bytes,
                             static_cast<int64_t>(chunk.nbytes));
    }
    std::byte* data = buffer(static_cast<size_t>(hi - lo));
    const std::string what =
        "the chunk of \"" + key + "\" at " + describe_box(chunk.offsets, chunk.sizes);
    file.pread_exact(data, static_cast<size_t>(hi - lo),
                     chunk.file_offset + static_cast<uint64_t>(lo), what);
    if (checked) verify_blocks(key, chunk, data, lo, hi);
    copy_region(data, lo, src, dst, ArrayRegion{dst_sizes, dst_at}, region, element);
  }
}

void ChunkReader::verify_chunk(const std::string& key, const ChunkRecord& chunk) {
  const File& file = open(chunk.file);
  // Whole checksum blocks per read, as many as fit a slab.
  const auto block_bytes = static_cast<int64_t>(chunk.block_bytes);
  const int64_t step = std::max<int64_t>(kSlabBytes / block_bytes, 1) * block_bytes;
  const auto nbytes = static_cast<int64_t>(chunk.nbytes);
  Xxh3Stream whole;
  for (int64_t at = 0; at < nbytes; at += step) {
    const int64_t hi = std::min(at + step, nbytes);
    std::byte* data = buffer(static_cast<size_t>(hi - at));
    file.pread_exact(data, static_cast<size_t>(hi - at),
                     chunk.file_offset + static_cast<uint64_t>(at),
                     "the chunk of \"" + key + "\" at " + describe_box(chunk.offsets, chunk.sizes));
    verify_blocks(key, chunk, data, at, hi);
    whole.update(data, static_cast<size_t>(hi - at));
  }
  const uint64_t sum = whole.digest();
  if (sum != chunk.xxh3) {
    throw CheckpointError(tessera::detail::concat_message(
        "[", op_, "] checksum mismatch in ", dir_, "/", chunk.file, ": tensor \"", key,
        "\", chunk at ", describe_box(chunk.offsets, chunk.sizes), ": XXH3 ", hex64(sum),
        ", expected ", hex64(chunk.xxh3), "; the file is corrupted"));
  }
}

std::byte* ChunkReader::buffer(size_t n) {
  thread_local std::unique_ptr<std::byte[]> held;
  thread_local size_t capacity = 0;
  if (capacity < n) {
    held.reset();  // the old one first: never both
    held.reset(new std::byte[n]);
    capacity = n;
  }
  return held.get();
}

const File& ChunkReader::open(const std::string& name) {
  auto it = files_.find(name);
  if (it == files_.end()) it = files_.emplace(name, File::open_read(dir_ + "/" + name)).first;
  return it->second;
}

void ChunkReader::verify_blocks(const std::string& key, const ChunkRecord& chunk,
                                const std::byte* data, int64_t lo, int64_t hi) const {
  const auto block_bytes = static_cast<int64_t>(chunk.block_bytes);
  for (int64_t at = lo; at < hi; at += block_bytes) {
    const int64_t n = std::min(block_bytes, hi - at);
    const size_t index = static_cast<size_t>(at / block_bytes);
    const uint64_t sum = xxh3(data + (at - lo), static_cast<size_t>(n));
    if (sum != chunk.block_xxh3[index]) {
      throw CheckpointError(tessera::detail::concat_message(
          "[", op_, "] checksum mismatch in ", dir_, "/", chunk.file, ": tensor \"", key,
          "\", chunk at ", describe_box(chunk.offsets, chunk.sizes), ", bytes [", at, ", ", at + n,
          ") of it (file bytes from ", chunk.file_offset + static_cast<uint64_t>(at), "): XXH3 ",
          hex64(sum), ", expected ", hex64(chunk.block_xxh3[index]), "; the file is corrupted"));
    }
  }
}

}  // namespace tessera::checkpoint::detail
