// Float32 products on register tiles, in AVX-512 (kernels/cpu/tile_matmul.h).
//
// Note [Register-tile float32 products]
// A training step's products are shaped by its model, not by a library's blocking: a transformer
// block's are 512 tokens deep or 256 features deep, attention's are 64 x 32 x 64 on heads that
// are strided views of one fused qkv tensor. On one EPYC (Zen 4) thread oneDNN 2.6 and OpenBLAS
// 0.3.21 ran the block's large products at 79-88% of the FMA peak (106-116 GFLOP/s, measured by
// bench/fma_peak.h) and attention's strided q @ k^T at 40-50%, while the 14 x 32 register tile
// below runs at ~99% of the peak when its operands sit in cache. These kernels:
// - The tile: 14 rows x 32 columns of the output in 28 accumulators; per step of K, two vectors of
//   a row of b and 14 broadcasts from a (28 FMAs for 16 loads, within a Zen 4 or Skylake-X core's
//   load ports), written back once per block of K, the bias added on the first.
// - a is read in place in either layout (14 streams along K, or 14 adjacent floats per step)
//   unless its lines would crowd one L1 set: rows a multiple of 2 KiB apart (the K = 1024
//   products ran at half speed in place), or a column-major block deeper than 64 steps. Then each
//   14-row block is copied first (pack_row_block, pack_column_chunk), the copy staying in L1
//   while the tiles sweep b. A full row-major block at least 128 deep that at least 8 tiles
//   read is copied step by step instead (transpose_strip; Note [a's rows copied step by
//   step]).
// - b is packed per block of K and columns into panels of 32 columns (copies of rows, or 16 x 16
//   transposes in registers for a column-major b: linear's weight, k^T in attention), except a
//   row-major b with rows not 2 KiB multiples apart under fewer than 128 output rows (attention's
//   v), read in place where the copy would not pay for itself. A row-major b that fits in one
//   core's L2 is packed by the first row block's tiles as they read it (Note [b packed by the
//   first row block]).
// - Blocks: 256 of K by as many columns of b as fill half the core's L2 (512 on a Zen 4, 1024 on
//   a Xeon with 2 MiB; column_block), the block reused there by every 14 rows. The other
//   order (b's panel kept in L1 across a's 14-row slivers packed K-major, as BLIS and GotoBLAS
//   block) ran linear's products up to 7% slower here (none faster) and p @ v 28% slower.
// - In a batch of small products (attention's heads) the next product's operands and output are
//   asked for while one runs (next_product_ahead).
// - Threads take whole products of a batch; one product they split by columns where each gets at
//   least 256 (each packs only its part of b), else by rows (See tile_matmul).
// In whole products they won attention's strided heads (q @ k^T 71-81 GFLOP/s against oneDNN's
// 40-51 and OpenBLAS's 54-59), tied linear's x @ W^T, and stayed 3-8% behind oneDNN on large
// row-major products, where the two packs cost 5% and 3% (perf) and oneDNN reads in place
// (bench/gemm_backends_bench prints each). They take every shape and layout, and are one more
// candidate of the measured choice (Note [CPU float32 GEMM choice] in linalg.cpp), which keeps
// them only where they win. Written with intrinsics under function target attributes, as the
// narrow kernels (Note [Narrow float32 products] in narrow_matmul.cpp).

#include "tessera/kernels/cpu/tile_matmul.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "tessera/kernels/cpu/avx512_lanes.h"
#include "tessera/kernels/cpu/avx512_transpose.h"
#include "tessera/kernels/cpu/gemm_tasks.h"
#include "tessera/kernels/cpu/onednn_matmul.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TS_TILE_GEMM 1
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's avx512fintrin.h trips these wherever its intrinsics inline (GCC PR 105593), as in
// narrow_matmul.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define TS_TILE_GEMM 0
#endif

namespace tessera::cpu {

#if TS_TILE_GEMM

namespace {

#define TS_AVX512 __attribute__((target("avx512f,fma")))

constexpr int kTileRows = 14;
constexpr int64_t kTileCols = 32;
constexpr int64_t kDepthBlock = 256;
// The fewest output columns per thread for which one product is split by columns (tile_matmul).
constexpr int64_t kColumnsPerThread = 256;

// Columns of b per block: the block (kDepthBlock deep) fills half of this core's L2, where every
// 14-row block of a sweeps it, and fewer column blocks mean a packed and c's rows passed fewer
// times: 512 columns on a Zen 4 (1 MiB of L2), 1024 on a Xeon with 2 MiB, where 512 ran 2048^3 at
// 156-161 GFLOP/s on one thread and 1024 at 167-176, 1024^3 at 159-166 against 172-179.
int64_t column_block() {
  static const int64_t columns = [] {
    const int64_t fit = core_l2_bytes() / 2 / (kDepthBlock * int64_t{sizeof(float)});
    return std::clamp<int64_t>(fit / kTileCols * kTileCols, 256, 2048);
  }();
  return columns;
}

// Steps of K ahead that the tiles packing b (kCopyB) ask for b's rows into L2: ~450 cycles of
// FMAs, more than a line's wait in L3 (4 to 64 steps, into L1 or L2, within about 1% of it).
constexpr int64_t kCopyAheadSteps = 32;

// One tile: c[0, R) x [0, cols) = (accumulate ? c : bias or 0) + a[0, R) x [0, kc) @ b[0, kc) x
// [0, cols), cols <= 32. a(r, p) at a[r * lda + p] (kARowMajor) or a[p * lda + r]; b's rows are
// ldb apart, 32 floats each read (kMasked: only the first cols, the rest zero); c row-major (ldc).
// kCopyB: b is read where it lies and each row's 32 floats are also written to b_copy (32 floats
// apart: the tile's panel, the missing columns zero; Note [b packed by the first row block]).
template <int R, bool kARowMajor, bool kMasked, bool kCopyB>
TS_AVX512 void tile(int64_t kc, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                    int64_t ldc, int64_t cols, bool accumulate, const float* bias, float* b_copy) {
  const __mmask16 mask0 = kMasked ? first_lanes(cols) : static_cast<__mmask16>(0xFFFF);
  const __mmask16 mask1 = kMasked ? first_lanes(cols - 16) : static_cast<__mmask16>(0xFFFF);
  __m512 acc[R][2];
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    acc[r][0] = _mm512_setzero_ps();
    acc[r][1] = _mm512_setzero_ps();
  }
  // Two steps per iteration: the loop's own instructions (and the a row pointers that do not fit
  // in registers, reloaded from the stack) take less of the load ports and the front end (~2% on
  // one Xeon thread).
#pragma GCC unroll 2
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * ldb;
    if constexpr (kCopyB) {
      if (p + kCopyAheadSteps < kc) {
        const float* ahead = bp + kCopyAheadSteps * ldb;
        _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(ahead + 16), _MM_HINT_T1);
      }
    }
    const __m512 b0 = kMasked ? _mm512_maskz_loadu_ps(mask0, bp) : _mm512_loadu_ps(bp);
    const __m512 b1 = kMasked ? _mm512_maskz_loadu_ps(mask1, bp + 16) : _mm512_loadu_ps(bp + 16);
    if constexpr (kCopyB) {
      _mm512_storeu_ps(b_copy + p * kTileCols, b0);
      _mm512_storeu_ps(b_copy + p * kTileCols + 16, b1);
    }
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(kARowMajor ? a[r * lda + p] : a[p * lda + r]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
    }
  }
  __m512 base0 = _mm512_setzero_ps(), base1 = _mm512_setzero_ps();
  if (bias != nullptr) {
    base0 = _mm512_maskz_loadu_ps(mask0, bias);
    base1 = _mm512_maskz_loadu_ps(mask1, bias + 16);
  }
#pragma GCC unroll 14
  for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc;
    if (accumulate) {
      base0 = _mm512_maskz_loadu_ps(mask0, cr);
      base1 = _mm512_maskz_loadu_ps(mask1, cr + 16);
    }
    _mm512_mask_storeu_ps(cr, mask0, _mm512_add_ps(base0, acc[r][0]));
    _mm512_mask_storeu_ps(cr + 16, mask1, _mm512_add_ps(base1, acc[r][1]));
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                        int64_t, bool, const float*, float*);

// tile<R, ...> for R = 1 .. kTileRows, indexed by R - 1.
template <bool kARowMajor, bool kMasked, bool kCopyB, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> tiles_by_rows(std::index_sequence<I...>) {
  return {&tile<static_cast<int>(I) + 1, kARowMajor, kMasked, kCopyB>...};
}

template <bool kCopyB>
TileFn tile_for(int64_t rows, bool a_row_major, bool masked) {
  constexpr auto idx = std::make_index_sequence<kTileRows>();
  static constexpr auto kRowMasked = tiles_by_rows<true, true, kCopyB>(idx);
  static constexpr auto kRowFull = tiles_by_rows<true, false, kCopyB>(idx);
  static constexpr auto kColMasked = tiles_by_rows<false, true, kCopyB>(idx);
  static constexpr auto kColFull = tiles_by_rows<false, false, kCopyB>(idx);
  const auto& table =
      a_row_major ? (masked ? kRowMasked : kRowFull) : (masked ? kColMasked : kColFull);
  return table[static_cast<size_t>(rows - 1)];
}

TileFn tile_for(int64_t rows, bool a_row_major, bool masked, bool copy_b) {
  return copy_b ? tile_for<true>(rows, a_row_major, masked)
                : tile_for<false>(rows, a_row_major, masked);
}

// Writes `count` <= 16 vectors of kc floats, src + i * ld (i < count), transposed: kc rows of 16
// floats, dst_ld apart, the lanes past count zero. Through 16 x 16 transposes in registers.
TS_AVX512 void transpose_strip(const float* src, int64_t ld, int64_t count, int64_t kc, float* dst,
                               int64_t dst_ld) {
  for (int64_t p0 = 0; p0 < kc; p0 += 16) {
    const __mmask16 depth = first_lanes(kc - p0);
    __m512 v[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      v[i] = i < count ? _mm512_maskz_loadu_ps(depth, src + i * ld + p0) : _mm512_setzero_ps();
    }
    transpose16(v);
    const int64_t steps = std::min<int64_t>(16, kc - p0);
    for (int64_t p = 0; p < steps; ++p) _mm512_storeu_ps(dst + (p0 + p) * dst_ld, v[p]);
  }
}

// Packs b(p, j), p < kc, j < nc, into panels of 32 columns: panel[(j / 32) * kc * 32 + p * 32 +
// j % 32], the last panel's missing columns zero. b(p, j) at b[p * ldb + j] (row-major: copies of
// rows) or b[j * ldb + p] (column-major: 16 x 16 transposes).
TS_AVX512 void pack_panels(const float* b, int64_t ldb, bool row_major, int64_t kc, int64_t nc,
                           float* panels) {
  if (row_major) {
    // Along b's rows, so that its lines are read in order: a strip of 16 columns taken down the
    // rows touched one line per row, each in another page for rows 4 KiB apart, which the
    // prefetchers did not follow (the pack took 10% of a 256 x 512 x 1024 product on one Xeon
    // thread).
    for (int64_t p = 0; p < kc; ++p) {
      for (int64_t j0 = 0; j0 < nc; j0 += 16) {
        float* panel = panels + (j0 / kTileCols) * kc * kTileCols + j0 % kTileCols;
        _mm512_storeu_ps(panel + p * kTileCols,
                         _mm512_maskz_loadu_ps(first_lanes(nc - j0), b + p * ldb + j0));
      }
    }
  } else {
    for (int64_t j0 = 0; j0 < nc; j0 += 16) {
      float* panel = panels + (j0 / kTileCols) * kc * kTileCols + j0 % kTileCols;
      transpose_strip(b + j0 * ldb, ldb, std::min<int64_t>(16, nc - j0), kc, panel, kTileCols);
    }
  }
  if (nc % kTileCols != 0 && nc % kTileCols <= 16) {  // the last panel's second half
    float* panel = panels + (nc / kTileCols) * kc * kTileCols + 16;
    for (int64_t p = 0; p < kc; ++p) _mm512_storeu_ps(panel + p * kTileCols, _mm512_setzero_ps());
  }
}

// Packs the 14-row block of a row-major a the tiles read, rows [0, rows) x depth [0, kc), into
// `block` so that it stays in L1 as they sweep b's columns: rows copied `ld` floats apart, ld one
// odd number of cache lines (read in place, rows a multiple of 4 KiB apart, such as K = 1024,
// fall into one L1 set and evict each other: the K = 1024 products ran at half speed). Returns
// ld.
TS_AVX512 int64_t pack_row_block(const float* a, int64_t lda, int64_t rows, int64_t kc,
                                 float* block) {
  const int64_t ld = (kc + 15) / 32 * 32 + 16;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t p = 0; p < kc; p += 16) {
      _mm512_storeu_ps(block + r * ld + p,
                       _mm512_maskz_loadu_ps(first_lanes(kc - p), a + r * lda + p));
    }
  }
  return ld;
}

// Note [a's rows copied step by step]
// The tile reads a row-major a as 14 streams, one float of each per step: 14 row pointers, which
// with b's pointer and the loop's own outgrow the 16 general registers, so some are reloaded
// from the stack every step, and 14 lines of a in L1 per 16 steps. Copied so that each step's 14
// floats are adjacent (16 apart, the column-major tiles' layout), the tile reads them from one
// pointer and one line. On one Xeon thread, alternating in one process (medians of 21 rounds,
// the tile kernels forced): 1024^3 168 -> 180 GFLOP/s, 2048^3 164 -> 171, 256 x 512 x 1024
// 163 -> 168, 512 x 1024 x 256 (x @ W^T) 162 -> 168, the other linear products of the
// transformer block +0.4-1%; the same at two threads (on a faster hour of the same VM, 0-3%).
// The copy (16 x 16 transposes) costs more than a row copy and pays only for full 14-row blocks
// that are deep and swept by many tiles: copied so, attention's heads (64 or 32 output columns)
// ran 6% and 17% slower, 4 x 1024 x 256 11%, 7 x 512 x 1024 5% (few rows: no pointers to
// spare), a batch of 32 x 64 x 256 products 5% (64 deep); under these thresholds they are
// within the noise of the old path.
constexpr int64_t kStepsCopyColumns = 8 * kTileCols;
constexpr int64_t kStepsCopyDepth = 128;

// Row blocks of a column-major a packed at once (kChunkBlocks x 14 rows).
constexpr int64_t kChunkBlocks = 16;
constexpr int64_t kChunkRows = kChunkBlocks * kTileRows;

// Packs rows [0, rows) x depth [0, kc) of a column-major a (a(i, p) at a[p * lda + i]), rows <=
// kChunkRows, as 14-row blocks, block b at chunk[b * kc * 16], its steps of K 16 floats apart (the
// tiles' column-major layout, ld 16). Along a's columns, so that its lines are read in order: a
// block packed alone took a strip of 14 floats down kc columns a page apart each for the wide
// products (M = 768, 1024: autograd's weight gradients x^T @ dy), which the prefetchers did not
// follow (11% of a 1024 x 512 x 256 product on one Xeon thread).
TS_AVX512 void pack_column_chunk(const float* a, int64_t lda, int64_t rows, int64_t kc,
                                 float* chunk) {
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t i0 = 0; i0 < rows; i0 += kTileRows) {
      _mm512_storeu_ps(chunk + (i0 / kTileRows) * kc * 16 + p * 16,
                       _mm512_maskz_loadu_ps(first_lanes(std::min<int64_t>(kTileRows, rows - i0)),
                                             a + p * lda + i0));
    }
  }
}

// Floats the packed a needs for a depth of kc: a row-major block (copied by rows or by steps), or
// a column-major chunk.
constexpr int64_t block_floats(int64_t kc) {
  return std::max<int64_t>(kChunkBlocks * kc * 16, kTileRows * ((kc + 15) / 32 * 32 + 16));
}

struct Matrix {
  const float* data;
  int64_t ld;
  bool row_major;
};

// Note [b packed by the first row block]
// b's block was packed before any tile ran, a copy with no FMAs beside it: 8% of 256 x 512 x 1024
// (X W1) and 4% of 512 x 256 x 1024 (X^T dH) on one Xeon thread (bounded by a build that skipped
// it). A row-major b is instead read in place by the first 14-row block's tiles, which write each
// row of their 32 columns to the panel as they go (kCopyB), the rows asked for 32 steps ahead;
// the other row blocks read the panels. Alternating in one process (medians of 21 rounds, one
// Xeon thread, tiles forced, two runs): X W1 +1.3 to +1.8%, X^T dH +1.0 to +1.8%, the MLP step
// +1.3 to +1.9%; at two threads the two products +1 to +4% (there the same code alternated
// against itself moved by up to 2%). The first row block reads b down 32-column strips, a line pair
// per row, which the hardware prefetchers do not follow across rows; from beyond the caches that
// ran slower than the packing copy, which reads b's rows in order: 2048^3 -1% (b 16 MiB), 1024^3
// -1.5 to +0.5% (4 MiB). So b is packed so only when all of it fits in one core's L2 (a layer's
// weight, the gradient just written), where its lines are likely to be in cache.
bool b_packed_by_first_row_block(bool b_row_major, int64_t k, int64_t n) {
  return b_row_major && k * n * int64_t{sizeof(float)} <= core_l2_bytes();
}

// Whether the tiles read a's 14-row block in place rather than from a packed copy: row-major
// rows not a multiple of 2 KiB apart (at most 4 of the 14 in one L1 set), or column-major blocks
// shallow enough (64 steps, one line each) that their lines cannot crowd a set.
bool a_in_place(const Matrix& a, int64_t kc) { return a.row_major ? a.ld % 512 != 0 : kc <= 64; }

// Whether the tiles read b in place rather than from pack_panels's copy: row-major, rows not a
// multiple of 2 KiB apart, and too few output rows (fewer than 128: attention's heads) for the
// copy to pay for itself (reading v in place ran p @ v at 94 GFLOP/s on one EPYC thread, packed
// at 76).
bool b_in_place(const Matrix& b, int64_t m) { return b.row_major && b.ld % 512 != 0 && m < 128; }

// c (m x n, row-major, ldc) = a (m x k) @ b (k x n) (+ bias). `panels` holds a block of b:
// min(k, kDepthBlock) x min(n, column_block()) floats, the columns rounded up to 32; `block`
// block_floats(min(k, kDepthBlock)) floats. b_by_first_row_block: see
// b_packed_by_first_row_block.
TS_AVX512 void product(int64_t m, int64_t n, int64_t k, Matrix a, Matrix b, float* c, int64_t ldc,
                       const float* bias, float* panels, float* block, bool b_by_first_row_block) {
  const int64_t column_block_size = column_block();
  for (int64_t jc = 0; jc < n; jc += column_block_size) {
    const int64_t nc = std::min(column_block_size, n - jc);
    for (int64_t pc = 0; pc < k; pc += kDepthBlock) {
      const int64_t kc = std::min(kDepthBlock, k - pc);
      const bool pack_b = !b_in_place(b, m);
      const bool pack_by_tiles = pack_b && b_by_first_row_block;
      // b's block where it lies: kc x nc from row pc, column jc.
      const float* b_here = b.row_major ? b.data + pc * b.ld + jc : b.data + jc * b.ld + pc;
      if (pack_b && !pack_by_tiles) pack_panels(b_here, b.ld, b.row_major, kc, nc, panels);
      const float* b_block = pack_b ? panels : b_here;
      const int64_t ldb = pack_b ? kTileCols : b.ld;
      const bool first = pc == 0;
      const bool pack_a = !a_in_place(a, kc);
      for (int64_t ic = 0; ic < m; ic += kChunkRows) {
        const int64_t chunk_rows = std::min(kChunkRows, m - ic);
        if (pack_a && !a.row_major) {
          pack_column_chunk(a.data + pc * a.ld + ic, a.ld, chunk_rows, kc, block);
        }
        for (int64_t i0 = ic; i0 < ic + chunk_rows; i0 += kTileRows) {
          const int64_t rows = std::min<int64_t>(kTileRows, m - i0);
          const bool a_by_steps =
              a.row_major && rows == kTileRows && nc >= kStepsCopyColumns && kc >= kStepsCopyDepth;
          const float* a_block = a.row_major ? a.data + i0 * a.ld + pc : a.data + pc * a.ld + i0;
          int64_t lda = a.ld;
          if (a_by_steps) {  // step p's 14 floats at block[p * 16]
            transpose_strip(a_block, a.ld, rows, kc, block, 16);
            a_block = block;
            lda = 16;
          } else if (pack_a && a.row_major) {
            lda = pack_row_block(a_block, a.ld, rows, kc, block);
            a_block = block;
          } else if (pack_a) {
            a_block = block + (i0 - ic) / kTileRows * kc * 16;
            lda = 16;
          }
          // a as the tiles read it: rows (in place or copied by rows) or steps.
          const bool tile_a_rows = a.row_major && !a_by_steps;
          // The first row block packs b as it reads it (Note [b packed by the first row block]).
          const bool copy_b = pack_by_tiles && i0 == 0;
          for (int64_t j = 0; j < nc; j += kTileCols) {
            const int64_t cols = std::min(kTileCols, nc - j);
            const TileFn fn = tile_for(rows, tile_a_rows, cols < kTileCols, copy_b);
            const float* b_tile = copy_b ? b_here + j : b_block + (pack_b ? j * kc : j);
            fn(kc, a_block, lda, b_tile, copy_b ? b.ld : ldb, c + i0 * ldc + jc + j, ldc, cols,
               !first, first && bias != nullptr ? bias + jc + j : nullptr,
               copy_b ? panels + j * kc : nullptr);
          }
        }
      }
    }
  }
}

// Asks for `count` lines of `length` floats, `ld` floats apart, into L2 (next_product_ahead).
void prefetch_lines(const float* data, int64_t count, int64_t length, int64_t ld) {
  for (int64_t l = 0; l < count; ++l) {
    for (int64_t off = 0; off < length; off += 16) {
      _mm_prefetch(reinterpret_cast<const char*>(data + l * ld + off), _MM_HINT_T1);
    }
  }
}

// The operands and output of product `next` of the batch, asked for while the one before runs,
// where the products are small (operands of at most kPrefetchFloats together): attention's heads
// (64 x 32 x 64: 16 KiB of operands per head, strided views of a fused qkv tensor written long
// before, and a 16 KiB output) ran inside a transformer block's step at about half the rate they
// reach on operands in cache (bench/step_products_bench beside bench/gemm_backends_bench). On
// one EPYC thread this took the step's six head products from 1.52 to 1.43 ms (alternating
// steps, medians of 100).
constexpr int64_t kPrefetchFloats = 32 * 1024;

// A rows x cols matrix in `layout`: its rows are the lines when row-major, its columns otherwise.
void prefetch_matrix(const float* data, int64_t rows, int64_t cols, const MatrixLayout& layout) {
  if (layout.row_major) {
    prefetch_lines(data, rows, cols, layout.ld);
  } else {
    prefetch_lines(data, cols, rows, layout.ld);
  }
}

void next_product_ahead(const Float32Products& p, int64_t next) {
  if (next >= p.batch || p.m * p.k + p.k * p.n > kPrefetchFloats) return;
  prefetch_matrix(p.a_matrix(next), p.m, p.k, p.la);
  prefetch_matrix(p.b_matrix(next), p.k, p.n, p.lb);
  // The output too, for writing: its lines are otherwise read from memory at the first store.
  const float* c = p.out_matrix(next);
  for (int64_t off = 0; off < p.m * p.n; off += 16) __builtin_prefetch(c + off, 1, 2);
}

#undef TS_AVX512

}  // namespace

bool tile_matmul_available() {
  static const bool available = __builtin_cpu_supports("avx512f");
  return available;
}

bool tile_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  TS_INTERNAL_ASSERT(out.dtype() == kFloat32, "[matmul] tile path called with dtype ", out.dtype());
  if (!tile_matmul_available()) return false;
  const Float32Products p(out, a, b);
  const int64_t n = p.n, k = p.k;
  const bool b_by_first_row_block = b_packed_by_first_row_block(p.lb.row_major, k, n);
  const float* pbias = bias.defined() ? static_cast<const float*>(bias.raw_data()) : nullptr;

  // b's panels and a's block, one set per OpenMP thread, from the caching allocator (which
  // reuses the memory call after call; fresh pages are slow).
  const int threads = omp_get_max_threads();
  const int64_t panel_floats = std::min(kDepthBlock, k) *
                               (std::min(column_block(), n) + kTileCols - 1) / kTileCols *
                               kTileCols;
  const int64_t scratch_floats = panel_floats + block_floats(std::min(kDepthBlock, k));
  const Tensor scratch = Tensor::make_empty({threads, scratch_floats}, kFloat32, Device::cpu());
  float* pscratch = static_cast<float*>(scratch.raw_data());

  // One product on several threads: split by columns where each thread gets at least 256 of
  // them, so that each packs only its own part of b (split by rows, every thread packed all of
  // b: at two Xeon threads 2048^3 ran 4% faster by columns, 256 x 512 x 1024 11%, 512 x 256 x 768
  // 4-8%, 512^3 within the noise); else by rows.
  if (p.batch < threads && n >= threads * kColumnsPerThread) {
    for_each_gemm_piece(p.batch, n, kTileCols, [&](int64_t i, int64_t begin, int64_t cols) {
      const Matrix ma{p.a_matrix(i), p.la.ld, p.la.row_major};
      const Matrix mb{p.b_matrix(i) + (p.lb.row_major ? begin : begin * p.lb.ld), p.lb.ld,
                      p.lb.row_major};
      float* own = pscratch + omp_get_thread_num() * scratch_floats;
      product(p.m, cols, k, ma, mb, p.out_matrix(i) + begin, n,
              pbias != nullptr ? pbias + begin : nullptr, own, own + panel_floats,
              b_by_first_row_block);
    });
    return true;
  }
  for_each_gemm_piece(p.batch, p.m, kTileRows, [&](int64_t i, int64_t begin, int64_t rows) {
    const Matrix ma{p.a_matrix(i) + (p.la.row_major ? begin * p.la.ld : begin), p.la.ld,
                    p.la.row_major};
    const Matrix mb{p.b_matrix(i), p.lb.ld, p.lb.row_major};
    // Whole products run one after another on a thread; a product cut between threads does not.
    if (rows == p.m) next_product_ahead(p, i + 1);
    float* own = pscratch + omp_get_thread_num() * scratch_floats;
    product(rows, n, k, ma, mb, p.out_matrix(i) + begin * n, n, pbias, own, own + panel_floats,
            b_by_first_row_block);
  });
  return true;
}

int64_t tile_matmul_column_block() { return column_block(); }

#else  // not x86-64 with GCC or Clang

bool tile_matmul_available() { return false; }

bool tile_matmul(const Tensor&, const Tensor&, const Tensor&, const Tensor&) { return false; }

int64_t tile_matmul_column_block() { return 0; }

#endif

}  // namespace tessera::cpu
