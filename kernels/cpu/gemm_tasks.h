#pragma once
// How the CPU GEMM backends that multiply one matrix at a time (openblas_matmul.cpp,
// narrow_matmul.cpp) spread a batch of products over the calling thread's OpenMP threads.

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace tessera::cpu {

// Calls piece(i, begin, len) over the `batch` products, in parallel on the calling thread's
// OpenMP threads. With at least as many products as threads each piece is a whole product
// (begin 0, len extent); otherwise each product's `extent` (the output dim the backend splits)
// is cut into one block per thread, block lengths a multiple of `align` so that no thread ends
// on a ragged edge of the backend's micro-kernel it need not have.
template <typename Piece>
void for_each_gemm_piece(int64_t batch, int64_t extent, int64_t align, const Piece& piece) {
  const int threads = omp_get_max_threads();
  int64_t block = extent;
  if (batch < threads) {
    block = std::max(align, (extent + threads - 1) / threads);
    block = (block + align - 1) / align * align;
  }
  const int64_t parts = (extent + block - 1) / block;
  const int64_t tasks = batch * parts;
  const auto run = [&](int64_t task) {
    const int64_t begin = task % parts * block;
    piece(task / parts, begin, std::min(block, extent - begin));
  };
  if (threads == 1 || tasks == 1) {
    for (int64_t t = 0; t < tasks; ++t) run(t);
  } else {
#pragma omp parallel for num_threads(static_cast <int>(std::min <int64_t>(threads, tasks))) \
    schedule(static)
    for (int64_t t = 0; t < tasks; ++t) run(t);
  }
}

}  // namespace tessera::cpu
