// Float32 products with at most 16 output columns, in AVX-512 (kernels/cpu/narrow_matmul.h).
//
// Note [Narrow float32 products]
// oneDNN 2.6 and OpenBLAS 0.3.21 block for wide outputs: on an output 10 columns wide (the MLP's
// classifier layer and its gradients) both ran at 33-47 GFLOP/s on one EPYC thread, against
// ~105 on the large products (bench/gemm_backends_bench), so those layers cost about as much as
// their 100x larger neighbours' tenth. These kernels keep the whole narrow output of a block of
// rows in registers, one pass over a, in either of a's layouts:
// - a column-major (autograd's x^T @ dy): a's rows are contiguous along M, so a block of 16 or 32
//   output rows is one or two vectors per column, accumulated over K as out[rows, j] +=
//   a[rows, p] * b[p, j] with b[p, j] broadcast: every lane useful, up to 24 accumulators.
// - a row-major (h @ w2): K is contiguous, so each output is a dot product of a row of a with a
//   column of b (b packed as b^T first unless it is column-major already), 4 rows x up to 5
//   columns of accumulators, each summed across its lanes at the end.
// They take every shape with N <= 16 and are one more candidate of the measured choice
// (Note [CPU float32 GEMM choice] in linalg.cpp), which keeps them only where they win.
// Written with intrinsics under function target attributes rather than as an ISA variant
// (Note [CPU ISA variants]): they use no Eigen, so nothing depends on -march, and they run only
// when the CPU reports AVX-512F. `#pragma GCC unroll` keeps the accumulator arrays in registers
// (without it GCC stored them to the stack on every step of K, at half the speed).

#include "tessera/kernels/cpu/narrow_matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tessera/kernels/cpu/avx512_lanes.h"
#include "tessera/kernels/cpu/gemm_tasks.h"
#include "tessera/kernels/cpu/onednn_matmul.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TS_NARROW_GEMM 1
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's own avx512fintrin.h trips these wherever its intrinsics inline (`__m512 __Y = __Y;`
// in _mm512_undefined_ps, GCC PR 105593, fixed in GCC 13), as in the AVX-512 kernel variant
// (kernels/CMakeLists.txt).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define TS_NARROW_GEMM 0
#endif

namespace tessera::cpu {

#if TS_NARROW_GEMM

namespace {

#define TS_AVX512 __attribute__((target("avx512f,fma")))

// ---- a column-major: a(i, p) at a[p * lda + i]; b(p, j) at b[p * sbk + j * sbn] ----

// c[0, rows) x [0, C) = a[0, rows) x [0, k) @ b[0, k) x [0, C), rows <= 16 V, c row-major (ldc).
template <int V, int C>
TS_AVX512 void columns_block(const float* a, int64_t lda, const float* b, int64_t sbk, int64_t sbn,
                             int64_t k, float* c, int64_t ldc, int64_t rows) {
  __mmask16 mask[V];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) mask[v] = first_lanes(std::max<int64_t>(0, rows - 16 * v));
  __m512 acc[V][C];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) acc[v][j] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 av[V];
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) av[v] = _mm512_maskz_loadu_ps(mask[v], a + p * lda + 16 * v);
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) {
      const __m512 bj = _mm512_set1_ps(b[p * sbk + j * sbn]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) acc[v][j] = _mm512_fmadd_ps(av[v], bj, acc[v][j]);
    }
  }
  // The accumulators hold columns of c: through a tile to c's rows.
  alignas(64) float tile[C][16 * V];
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) _mm512_store_ps(&tile[j][16 * v], acc[v][j]);
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int j = 0; j < C; ++j) c[i * ldc + j] = tile[j][i];
  }
}

// Rows [0, m) of c, C columns; up to 24 accumulators (two vectors of rows up to 12 columns).
template <int C>
TS_AVX512 void columns_rows(const float* a, int64_t lda, const float* b, int64_t sbk, int64_t sbn,
                            int64_t m, int64_t k, float* c) {
  constexpr int kVectors = C <= 12 ? 2 : 1;
  constexpr int64_t kRows = 16 * kVectors;
  for (int64_t i = 0; i < m; i += kRows) {
    columns_block<kVectors, C>(a + i, lda, b, sbk, sbn, k, c + i * C, C, std::min(kRows, m - i));
  }
}

template <int C>
TS_AVX512 void run_columns(const float* a, int64_t lda, const float* b, int64_t sbk, int64_t sbn,
                           int64_t m, int64_t n, int64_t k, float* c) {
  if constexpr (C > 1) {
    if (n < C) return run_columns<C - 1>(a, lda, b, sbk, sbn, m, n, k, c);
  }
  columns_rows<C>(a, lda, b, sbk, sbn, m, k, c);
}

// ---- a row-major: a(i, p) at a[i * lda + p]; bt(j, p) = b(p, j) at bt[j * ldbt + p] ----

// c[0, R) x [0, C) = dot products of R rows of a with C rows of bt, c row-major (ldc).
template <int R, int C>
TS_AVX512 void dots_block(const float* a, int64_t lda, const float* bt, int64_t ldbt, int64_t k,
                          float* c, int64_t ldc) {
  __m512 acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) acc[r][j] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask = first_lanes(k - p);
    __m512 bv[C];
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) bv[j] = _mm512_maskz_loadu_ps(mask, bt + j * ldbt + p);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
#pragma GCC unroll 16
      for (int j = 0; j < C; ++j) acc[r][j] = _mm512_fmadd_ps(av, bv[j], acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < C; ++j) c[r * ldc + j] = _mm512_reduce_add_ps(acc[r][j]);
  }
}

// dots_block for a block `width` <= C columns wide.
template <int R, int C>
TS_AVX512 void dots_block_of_width(int64_t width, const float* a, int64_t lda, const float* bt,
                                   int64_t ldbt, int64_t k, float* c, int64_t ldc) {
  if constexpr (C > 1) {
    if (width < C) return dots_block_of_width<R, C - 1>(width, a, lda, bt, ldbt, k, c, ldc);
  }
  dots_block<R, C>(a, lda, bt, ldbt, k, c, ldc);
}

// R rows of c, all n columns, in blocks of at most 5 as even as they go (10 = 5 + 5, 16 = 4 x 4):
// 4 rows x 5 columns was the fastest block on 256 x 1024 x 10 (89 GFLOP/s on the EPYC against 75
// for 4 x 4 + 4 x 2), and a ragged last block of 1 or 2 columns would reload the rows for little.
template <int R>
TS_AVX512 void dots_rows(const float* a, int64_t lda, const float* bt, int64_t ldbt, int64_t n,
                         int64_t k, float* c) {
  const int64_t blocks = (n + 4) / 5;
  int64_t j = 0;
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t width = n / blocks + (blk < n % blocks ? 1 : 0);
    dots_block_of_width<R, 5>(width, a, lda, bt + j * ldbt, ldbt, k, c + j, n);
    j += width;
  }
}

TS_AVX512 void run_dots(const float* a, int64_t lda, const float* bt, int64_t ldbt, int64_t m,
                        int64_t n, int64_t k, float* c) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) dots_rows<4>(a + i * lda, lda, bt, ldbt, n, k, c + i * n);
  for (; i < m; ++i) dots_rows<1>(a + i * lda, lda, bt, ldbt, n, k, c + i * n);
}

// bt[j * k + p] = b[p * ldb + j] for p < k, j < n: b^T packed, 16 rows of b per gather.
TS_AVX512 void pack_transposed(const float* b, int64_t ldb, int64_t n, int64_t k, float* bt) {
  if (ldb > INT32_MAX / 16) {  // gather offsets are 32-bit
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < k; ++p) bt[j * k + p] = b[p * ldb + j];
    }
    return;
  }
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(ldb)));
  for (int64_t p = 0; p < k; p += 16) {
    const __mmask16 mask = first_lanes(k - p);
    for (int64_t j = 0; j < n; ++j) {
      const __m512 column =
          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), mask, rows, b + p * ldb + j, 4);
      _mm512_mask_storeu_ps(bt + j * k + p, mask, column);
    }
  }
}

#undef TS_AVX512

// Rows of the output per piece: whole vectors of the column-major kernel's blocks.
constexpr int64_t kRowAlign = 32;

}  // namespace

bool narrow_matmul_available() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

bool narrow_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  TS_INTERNAL_ASSERT(out.dtype() == kFloat32, "[matmul] narrow path called with dtype ",
                     out.dtype());
  if (out.size(-1) > kNarrowGemmMaxN || !narrow_matmul_available()) return false;
  const Float32Products p(out, a, b);
  const int64_t m = p.m, n = p.n, k = p.k;
  const MatrixLayout la = p.la, lb = p.lb;

  // Batches, each cut into blocks of rows when there are fewer batches than threads.
  for_each_gemm_piece(p.batch, m, kRowAlign, [&](int64_t i, int64_t begin, int64_t rows) {
    const float* ai = p.a_matrix(i);
    const float* bi = p.b_matrix(i);
    float* ci = p.out_matrix(i) + begin * n;
    if (!la.row_major) {
      const int64_t sbk = lb.row_major ? lb.ld : 1, sbn = lb.row_major ? 1 : lb.ld;
      run_columns<kNarrowGemmMaxN>(ai + begin, la.ld, bi, sbk, sbn, rows, n, k, ci);
      return;
    }
    if (!lb.row_major) {  // b's columns are bt's rows already
      run_dots(ai + begin * la.ld, la.ld, bi, lb.ld, rows, n, k, ci);
      return;
    }
    // b^T packed per piece: n x k, a k-th of the piece's multiply-adds or less. From the caching
    // allocator, which reuses the block call after call within its bounds (fresh pages are slow).
    const Tensor bt = Tensor::make_empty({n, k}, kFloat32, Device::cpu());
    float* pbt = static_cast<float*>(bt.raw_data());
    pack_transposed(bi, lb.ld, n, k, pbt);
    run_dots(ai + begin * la.ld, la.ld, pbt, k, rows, n, k, ci);
  });
  return true;
}

#else  // not x86-64 with GCC or Clang

bool narrow_matmul_available() { return false; }

bool narrow_matmul(const Tensor&, const Tensor&, const Tensor&) { return false; }

#endif

}  // namespace tessera::cpu
