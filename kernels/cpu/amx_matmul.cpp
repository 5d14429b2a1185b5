// Bfloat16 products on Intel AMX tiles (kernels/cpu/amx_matmul.h).
//
// Note [AMX bfloat16 products]
// On a Xeon with AMX, oneDNN 2.6 runs a 1024^3 bfloat16 product on its AMX kernel
// (brg:avx512_core_amx) at ~0.8 TFLOP/s on one thread and 2048^3 at ~0.63, falling off as b
// outgrows the L2, where the tiles multiply at ~3.2 TFLOP/s (TDPBF16PS on four accumulator
// tiles, operands in registers); libtorch runs the same oneDNN kernel. These kernels:
// - Output blocks of 32 x 32 in the four float32 accumulator tiles (two 16-row tiles of a times two
//   16-column tiles of b, the 2 x 2 of eight tile registers), rounded once to bfloat16 at the end
//   of K (round to nearest even, as oneDNN and Tessera's conversions: the results matched
//   oneDNN's bit for bit in bench/vs_libtorch).
// - a packed once per product (per thread's rows): each 16 x 32 tile contiguous (1 KiB), steps of
//   K in order, the two 16-row halves of a 32-row block side by side, K padded with zeros to a
//   multiple of 32. Contiguous, 64-byte aligned tiles: tile rows across two cache lines ran the
//   tiles at half speed, and rows of a row-major a 2 or 4 KiB apart would share one L1 set.
// - b packed per block of columns (half the core's L2, swept by every 32-row block of a) into the
//   tiles' pair-interleaved layout: row q of a tile holds K = 2q and 2q + 1 of 16 columns.
// - K in depths of 8 steps (256): a's 16 KiB at that depth stays in L1 while it sweeps b's
//   panels, the sums kept in float32 between depths. With the whole of K from L2 the products ran
//   ~16% slower (1024^3 2.07 against 1.78 ms on one thread).
// - Both layouts of each operand packed with vector loads (pairs of rows interleaved, or 16 x 16
//   transposes of value pairs for the other layout), zeros past every edge, so the tiles never
//   read outside the operands and edges cost only wasted multiplies.
// They reach ~1.2 TFLOP/s per thread with random operands (the tiles' rate depends on the data:
// zeros ran 1.5-2x faster), where oneDNN's kernel does better on smaller products (256^3 - 512^3:
// 1.2-1.35 TFLOP/s) and worse once b outgrows the L2. Measured on one Xeon with 2 MiB of L2 per
// core (bench/gemm_backends_bench's bfloat16 table, 1 and 2 threads, squares and rectangles from
// 64 to 2048), they won every product of at least 2^29 multiply-adds (512 x 1024 x 1024 and up:
// 0.52-0.95 of oneDNN's time) with at least 256 rows per thread, and lost most below (up to 1.3x
// slower); amx_bf16_preferred sends those to them and the rest to oneDNN. The bench prints both
// on every run, and which one matmul takes, to re-check the line on another CPU.

#include "tessera/kernels/cpu/amx_matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "tessera/kernels/cpu/gemm_tasks.h"
#include "tessera/kernels/cpu/onednn_matmul.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define TS_AMX_GEMM 1
#include <immintrin.h>
#include <sys/syscall.h>

#include "tessera/kernels/cpu/avx512_lanes.h"
#include "tessera/kernels/cpu/avx512_transpose.h"
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
// GCC 12's avx512fintrin.h trips these wherever its intrinsics inline (GCC PR 105593), as in
// tile_matmul.cpp.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#else
#define TS_AMX_GEMM 0
#endif

namespace tessera::cpu {

namespace {

// Where the AMX kernels beat oneDNN (amx_bf16_preferred): at least this many rows per thread and
// multiply-adds per product (Note [AMX bfloat16 products]).
constexpr int64_t kPreferredRowsPerThread = 256;
constexpr int64_t kPreferredWork = int64_t{1} << 29;

}  // namespace

bool amx_bf16_preferred(int64_t m, int64_t n, int64_t k, int64_t batch, int threads) {
  if (!amx_bf16_matmul_available()) return false;
  const int64_t rows_per_thread = batch >= threads ? m : (m + threads - 1) / threads;
  return rows_per_thread >= kPreferredRowsPerThread && m * n * k >= kPreferredWork;
}

#if TS_AMX_GEMM

namespace {

#define TS_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
// Helpers that take or return vectors, inlined into their callers (as calls they would pass
// vectors in a way the baseline ABI does not define).
#define TS_AMX_INLINE TS_AMX inline __attribute__((always_inline))

constexpr int64_t kBlockRows = 32;  // output rows per block: two 16-row tiles of a
constexpr int64_t kBlockCols = 32;  // output columns per block: two 16-column tiles of b
constexpr int64_t kStep = 32;       // K per tile: 32 bfloat16 values (64 bytes) per row
constexpr int64_t kTileValues = 512;
constexpr int64_t kStepValues = 2 * kTileValues;  // one step of K of a 32-row or 32-column block
// Steps of K per pass of a 32-row block of a over b's panels: 16 KiB of a, which stays in L1
// (in a standalone loop 32 KiB ran ~20% slower; the whole of K from L2 took 1024^3 from 1.78 to
// 2.07 ms: operands in L2 throttle the tiles).
constexpr int64_t kDepthSteps = 8;

// Lanes [0, count) of a 32-lane vector of 16-bit values.
__mmask32 first_lanes32(int64_t count) {
  if (count <= 0) return 0;
  return count >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << count) - 1u);
}

// Columns of b per block: the block (K deep, padded) fills half of this core's L2.
int64_t column_block(int64_t steps) {
  const int64_t bytes_per_column = steps * kStep * 2;
  return std::max<int64_t>(kBlockCols,
                           core_l2_bytes() / 2 / bytes_per_column / kBlockCols * kBlockCols);
}

// The tile configuration every kernel here uses: eight tiles of 16 rows x 64 bytes (tiles 0-3
// float32 accumulators, 4-5 a, 6-7 b).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

TS_AMX void configure_tiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.bytes_per_row[t] = 64;
    config.rows[t] = 16;
  }
  // GCC 12's _tile_loadconfig tells the compiler it reads only a pointer's worth of the
  // configuration, which then drops the stores of the rest (a SIGILL at the first tile
  // instruction): make them all visible first.
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

// One 32-bit lane per value pair: lo in the low half, hi in the high half (the tiles' layout of
// K = 2q, 2q + 1).
TS_AMX_INLINE __m512 interleave_pairs(__m256i lo, __m256i hi) {
  return _mm512_castsi512_ps(
      _mm512_or_si512(_mm512_cvtepu16_epi32(lo), _mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16)));
}

// 16 values of row p (of `depth` rows, ld apart) from column 0, the first `width` of them; zeros
// past either edge.
TS_AMX_INLINE __m256i row_values(const uint16_t* m, int64_t ld, int64_t p, int64_t depth,
                                 __mmask16 width) {
  return p < depth ? _mm256_maskz_loadu_epi16(width, m + p * ld) : _mm256_setzero_si256();
}

// Packs rows [0, rows) x K [0, k) of a (a(i, p) at a[i * lda + p] when row-major, a[p * lda + i]
// otherwise) as 32-row blocks: block r / 32, step s, half (r / 16) % 2 is the 16 x 32 tile at
// packed + ((block * steps + s) * 2 + half) * 512, row r % 16 of it 32 values of K.
TS_AMX void pack_a(const uint16_t* a, int64_t lda, bool row_major, int64_t rows, int64_t k,
                   int64_t steps, uint16_t* packed) {
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    uint16_t* half = packed + (r0 / kBlockRows) * steps * kStepValues + (r0 / 16) % 2 * kTileValues;
    const int64_t height = std::min<int64_t>(16, rows - r0);
    if (row_major) {  // rows copied along K, in order
      for (int64_t r = 0; r < 16; ++r) {
        for (int64_t s = 0; s < steps; ++s) {
          const __m512i v = r < height ? _mm512_maskz_loadu_epi16(first_lanes32(k - s * kStep),
                                                                  a + (r0 + r) * lda + s * kStep)
                                       : _mm512_setzero_si512();
          _mm512_storeu_si512(half + s * kStepValues + r * kStep, v);
        }
      }
      continue;
    }
    // Column-major: 16 rows' value pairs per two columns of a, transposed to 16 tile rows.
    const __mmask16 width = first_lanes(height);
    for (int64_t s = 0; s < steps; ++s) {
      __m512 v[16];
      for (int64_t q = 0; q < 16; ++q) {
        const int64_t p = s * kStep + 2 * q;
        v[q] = interleave_pairs(row_values(a + r0, lda, p, k, width),
                                row_values(a + r0, lda, p + 1, k, width));
      }
      transpose16(v);
      for (int64_t r = 0; r < 16; ++r) {
        _mm512_storeu_ps(half + s * kStepValues + r * kStep, v[r]);
      }
    }
  }
  // The last block's missing half, when its rows end within the first.
  if (rows % kBlockRows != 0 && rows % kBlockRows <= 16) {
    uint16_t* half = packed + (rows / kBlockRows) * steps * kStepValues + kTileValues;
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t r = 0; r < 16; ++r) {
        _mm512_storeu_si512(half + s * kStepValues + r * kStep, _mm512_setzero_si512());
      }
    }
  }
}

// Packs K [0, k) x columns [0, cols) of b (b(p, j) at b[p * ldb + j] when row-major, b[j * ldb + p]
// otherwise) as 32-column panels: panel j / 32, step s, half (j / 16) % 2 is the tile at packed +
// ((panel * steps + s) * 2 + half) * 512, its row q holding K = 2q, 2q + 1 of 16 columns.
TS_AMX void pack_b(const uint16_t* b, int64_t ldb, bool row_major, int64_t k, int64_t cols,
                   int64_t steps, uint16_t* packed) {
  const int64_t padded = (cols + kBlockCols - 1) / kBlockCols * kBlockCols;
  auto tile = [&](int64_t j0, int64_t s) {
    return packed + (j0 / kBlockCols) * steps * kStepValues + (j0 / 16) % 2 * kTileValues +
           s * kStepValues;
  };
  if (row_major) {  // pairs of rows along the columns, in order
    for (int64_t s = 0; s < steps; ++s) {
      for (int64_t q = 0; q < 16; ++q) {
        const int64_t p = s * kStep + 2 * q;
        for (int64_t j0 = 0; j0 < padded; j0 += 16) {
          const __mmask16 width = first_lanes(cols - j0);
          _mm512_storeu_ps(tile(j0, s) + q * kStep,
                           interleave_pairs(row_values(b + j0, ldb, p, k, width),
                                            row_values(b + j0, ldb, p + 1, k, width)));
        }
      }
    }
    return;
  }
  // Column-major: each column's 32 values of a step are 16 pairs; 16 columns transposed.
  for (int64_t j0 = 0; j0 < padded; j0 += 16) {
    for (int64_t s = 0; s < steps; ++s) {
      const __mmask32 depth = first_lanes32(k - s * kStep);
      __m512 v[16];
      for (int64_t c = 0; c < 16; ++c) {
        v[c] = j0 + c < cols ? _mm512_castsi512_ps(
                                   _mm512_maskz_loadu_epi16(depth, b + (j0 + c) * ldb + s * kStep))
                             : _mm512_setzero_ps();
      }
      transpose16(v);
      for (int64_t q = 0; q < 16; ++q) _mm512_storeu_ps(tile(j0, s) + q * kStep, v[q]);
    }
  }
}

// c (32 x 32 float32, row-major) = (accumulate ? c : 0) + `steps` steps of K of the packed 32-row
// block of a @ the packed 32-column panel of b. Each operand tile is reloaded as soon as the
// products that read it have issued, the next step's load overlapping the products still running
// (the tile registers are not renamed: loading them all after the four products ran ~10% slower on
// one Xeon thread).
TS_AMX void block_product(int64_t steps, const uint16_t* a, const uint16_t* b, float* c,
                          bool accumulate) {
  constexpr int64_t kRowBytes = kBlockCols * sizeof(float);
  if (accumulate) {
    _tile_loadd(0, c, kRowBytes);
    _tile_loadd(1, c + 16, kRowBytes);
    _tile_loadd(2, c + 16 * kBlockCols, kRowBytes);
    _tile_loadd(3, c + 16 * kBlockCols + 16, kRowBytes);
  } else {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
  }
  _tile_loadd(4, a, 64);
  _tile_loadd(6, b, 64);
  _tile_loadd(5, a + kTileValues, 64);
  _tile_loadd(7, b + kTileValues, 64);
  for (int64_t s = 1; s < steps; ++s) {
    const uint16_t* as = a + s * kStepValues;
    const uint16_t* bs = b + s * kStepValues;
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_loadd(4, as, 64);
    _tile_dpbf16ps(2, 5, 6);
    _tile_loadd(6, bs, 64);
    _tile_dpbf16ps(3, 5, 7);
    _tile_loadd(5, as + kTileValues, 64);
    _tile_loadd(7, bs + kTileValues, 64);
  }
  _tile_dpbf16ps(0, 4, 6);
  _tile_dpbf16ps(1, 4, 7);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
  _tile_stored(0, c, kRowBytes);
  _tile_stored(1, c + 16, kRowBytes);
  _tile_stored(2, c + 16 * kBlockCols, kRowBytes);
  _tile_stored(3, c + 16 * kBlockCols + 16, kRowBytes);
}

// out[0, rows) x [0, cols) (row-major, ldo) = c rounded to bfloat16.
TS_AMX void store_block(const float* c, int64_t rows, int64_t cols, uint16_t* out, int64_t ldo) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < 2; ++h) {
      const __mmask16 width = first_lanes(cols - h * 16);
      if (width == 0) break;
      const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(c + r * kBlockCols + h * 16));
      // A vector cast (std::bit_cast would be a call returning a 256-bit vector).
      _mm256_mask_storeu_epi16(out + r * ldo + h * 16, width, (__m256i)v);
    }
  }
}

struct Operand {
  const uint16_t* data;
  int64_t ld;
  bool row_major;
};

// Elements of bfloat16 scratch one thread needs: a's packed rows, a block of b's panels, and the
// float32 sums of one 32-row block of the output across a block of columns.
struct Scratch {
  int64_t a_values, b_values, c_values;
  int64_t total() const { return a_values + b_values + c_values; }
};

Scratch scratch_for(int64_t rows, int64_t n, int64_t steps) {
  const int64_t row_blocks = (rows + kBlockRows - 1) / kBlockRows;
  const int64_t panels = (std::min(column_block(steps), n) + kBlockCols - 1) / kBlockCols;
  return {row_blocks * steps * kStepValues, panels * steps * kStepValues,
          panels * kBlockRows * kBlockCols * 2};
}

// c (m x n, row-major, ldc) = a (m x k) @ b (k x n). Per block of b's columns (in L2) and 32-row
// block of a, K runs in depths of kDepthSteps, the block of a's 32 rows at that depth (16 KiB)
// staying in L1 while it sweeps the panels, the sums kept in float32 between depths.
TS_AMX void product(int64_t m, int64_t n, int64_t k, Operand a, Operand b, uint16_t* c, int64_t ldc,
                    uint16_t* scratch, const Scratch& sizes) {
  const int64_t steps = (k + kStep - 1) / kStep;
  uint16_t* packed_a = scratch;
  uint16_t* panels = scratch + sizes.a_values;
  float* sums = reinterpret_cast<float*>(panels + sizes.b_values);
  configure_tiles();
  pack_a(a.data, a.ld, a.row_major, m, k, steps, packed_a);
  const int64_t columns = column_block(steps);
  for (int64_t jc = 0; jc < n; jc += columns) {
    const int64_t nc = std::min(columns, n - jc);
    pack_b(b.row_major ? b.data + jc : b.data + jc * b.ld, b.ld, b.row_major, k, nc, steps, panels);
    for (int64_t i0 = 0; i0 < m; i0 += kBlockRows) {
      const uint16_t* a_block = packed_a + i0 / kBlockRows * steps * kStepValues;
      for (int64_t s0 = 0; s0 < steps; s0 += kDepthSteps) {
        const int64_t depth = std::min(kDepthSteps, steps - s0);
        const bool last = s0 + depth == steps;
        for (int64_t j0 = 0; j0 < nc; j0 += kBlockCols) {
          float* block_sums = sums + j0 * kBlockRows;
          block_product(depth, a_block + s0 * kStepValues,
                        panels + (j0 / kBlockCols * steps + s0) * kStepValues, block_sums, s0 > 0);
          if (last) {
            store_block(block_sums, std::min(kBlockRows, m - i0), std::min(kBlockCols, nc - j0),
                        c + i0 * ldc + jc + j0, ldc);
          }
        }
      }
    }
  }
  _tile_release();  // back to the initial state: no tile data for the kernel to save
}

#undef TS_AMX_INLINE
#undef TS_AMX

// Linux grants a process the AMX tile data state (8 KiB more per thread's saved context) only
// when asked (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); a tile instruction before
// that raises SIGILL.
bool tile_data_granted() {
  constexpr long kRequestPermission = 0x1023;  // ARCH_REQ_XCOMP_PERM
  constexpr long kTileData = 18;               // XFEATURE_XTILEDATA
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
}

}  // namespace

bool amx_bf16_matmul_available() {
  static const bool available =
      __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
      __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && tile_data_granted();
  return available;
}

bool amx_bf16_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  if (out.dtype() != kBFloat16 || !amx_bf16_matmul_available()) return false;
  const MatrixProducts<uint16_t> p(out, a, b);
  const int64_t steps = (p.k + kStep - 1) / kStep;
  const int threads = omp_get_max_threads();
  // A thread's rows: the whole product, or its share of one.
  const Scratch sizes = scratch_for(gemm_piece_length(p.batch, p.m, kBlockRows), p.n, steps);
  // From the caching allocator, one region per OpenMP thread (fresh pages are slow).
  const Tensor scratch = Tensor::make_empty({threads, sizes.total()}, kBFloat16, Device::cpu());
  auto* pscratch = static_cast<uint16_t*>(scratch.raw_data());

  for_each_gemm_piece(p.batch, p.m, kBlockRows, [&](int64_t i, int64_t begin, int64_t rows) {
    const Operand oa{p.a_matrix(i) + (p.la.row_major ? begin * p.la.ld : begin), p.la.ld,
                     p.la.row_major};
    const Operand ob{p.b_matrix(i), p.lb.ld, p.lb.row_major};
    product(rows, p.n, p.k, oa, ob, p.out_matrix(i) + begin * p.n, p.n,
            pscratch + omp_get_thread_num() * sizes.total(), sizes);
  });
  return true;
}

#else  // not x86-64 Linux with GCC or Clang

bool amx_bf16_matmul_available() { return false; }

bool amx_bf16_matmul(const Tensor&, const Tensor&, const Tensor&) { return false; }

#endif

}  // namespace tessera::cpu
