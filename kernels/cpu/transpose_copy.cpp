#include "tessera/kernels/cpu/transpose_copy.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

#include "tessera/kernels/cpu/loops.h"
#include "tessera/kernels/cpu/stream_copy.h"
#include "tessera/runtime/parallel.h"

namespace tessera::cpu {

namespace {

// Note [Tiled transposed copies]
// When dst is contiguous along axis a and src along axis b != a, walking either operand in order
// strides through the other: each element read (or written) lands on a new cache line, which must
// survive until the walk comes back for its neighbours; with 16 KiB rows (a [4096, 4096] float32
// matrix) they all share one L1 set and do not. The element-wise walk took 100 ms there on one
// thread; tiles take 10. Each tile of edge x edge units is transposed from src, whose rows it reads
// in order, into an L1 buffer of at most kTileBytes, whose rows are then written whole to dst: both
// operands move in whole lines, and dst of kStreamBytes or more is written around the cache
// (Note [Streaming stores]; 16 ms instead of 10 without). Units of 2 bytes or more get tile rows of
// 256 bytes or more: on a 2-core AMD EPYC (32 KiB L1), 128-byte rows took twice as long for float32
// (edge 32) and bfloat16 (edge 64). Same-dtype copies move bytes, so the unit is the innermost run
// both operands share (one element for t(), 64 for the head split permute(0, 2, 1, 3) of
// [8, 512, 16, 64]) whatever the dtype; units of 2, 4 and 8 bytes are transposed in SSE2 registers,
// and units of a cache line or more go straight from src to dst (through the buffer, the head split
// took a third longer). Runs over kMaxUnitBytes are left to the strided loop, which copies each
// with memcpy. Tiles are split across threads in chunks of at least kGrainBytes, so small copies
// stay on the calling thread.
constexpr int64_t kTileBytes = int64_t{32} << 10;
constexpr int64_t kDirectUnitBytes = 64;
constexpr int64_t kMaxUnitBytes = 1024;
constexpr int64_t kGrainBytes = int64_t{256} << 10;

struct TransposePlan {
  int64_t unit = 0;                                   // bytes moved as one
  int64_t size_a = 0, size_b = 0;                     // a: dst's contiguous axis; b: src's
  int64_t src_a = 0, dst_b = 0;                       // byte strides off the contiguous axes
  std::vector<int64_t> batch_sizes;                   // the other dims, outermost first
  std::vector<std::array<int64_t, 2>> batch_strides;  // bytes, {dst, src}
  std::array<char*, 2> base{};
  bool stream = false;
};

// The plan of a copy whose operands are contiguous along different axes, or false.
bool make_plan(const Tensor& dst, const Tensor& src, TransposePlan& plan) {
  StridedGeometry<2> g = make_geometry<2>({&dst, &src});
  plan.unit = static_cast<int64_t>(dst.element_size());
  if (g.strides.back()[0] == plan.unit && g.strides.back()[1] == plan.unit) {
    plan.unit *= g.sizes.back();  // coalesced, so this is the whole run both operands share
    g.sizes.pop_back();
    g.strides.pop_back();
  }
  int64_t a = -1, b = -1;
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.strides[d][0] == plan.unit) a = static_cast<int64_t>(d);
    if (g.strides[d][1] == plan.unit) b = static_cast<int64_t>(d);
  }
  if (a < 0 || b < 0 || a == b || plan.unit > kMaxUnitBytes) return false;
  const auto ua = static_cast<size_t>(a), ub = static_cast<size_t>(b);
  plan.size_a = g.sizes[ua];
  plan.size_b = g.sizes[ub];
  plan.src_a = g.strides[ua][1];
  plan.dst_b = g.strides[ub][0];
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (d == ua || d == ub) continue;
    plan.batch_sizes.push_back(g.sizes[d]);
    plan.batch_strides.push_back(g.strides[d]);
  }
  plan.base = g.base;
  plan.stream = static_cast<int64_t>(dst.nbytes()) >= kStreamBytes;
  return true;
}

// out[j][i] = in[i][j] for i in [i0, i1), j in [j0, j1): rows of in are in_row bytes apart, rows
// of out out_row bytes apart, entries unit bytes wide (kUnit when known).
template <int64_t kUnit>
void transpose_units(char* out, int64_t out_row, const char* in, int64_t in_row, int64_t unit,
                     int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  const int64_t u = kUnit > 0 ? kUnit : unit;
  for (int64_t i = i0; i < i1; ++i) {
    for (int64_t j = j0; j < j1; ++j) {
      std::memcpy(out + j * out_row + i * u, in + i * in_row + j * u, static_cast<size_t>(u));
    }
  }
}

#if defined(__SSE2__)
// Square blocks of kM x kM units transposed in registers: one load per row of in, one store per
// row of out.
template <int64_t kUnit>
struct Micro;

template <>
struct Micro<8> {
  static constexpr int64_t kM = 2;
  static void run(char* out, int64_t out_row, const char* in, int64_t in_row) {
    const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + in_row));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(r0, r1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + out_row), _mm_unpackhi_epi64(r0, r1));
  }
};

template <>
struct Micro<4> {
  static constexpr int64_t kM = 4;
  static void run(char* out, int64_t out_row, const char* in, int64_t in_row) {
    // Shuffles move bits unchanged, so float lanes carry any 4-byte dtype.
    __m128 r0 = _mm_loadu_ps(reinterpret_cast<const float*>(in));
    __m128 r1 = _mm_loadu_ps(reinterpret_cast<const float*>(in + in_row));
    __m128 r2 = _mm_loadu_ps(reinterpret_cast<const float*>(in + 2 * in_row));
    __m128 r3 = _mm_loadu_ps(reinterpret_cast<const float*>(in + 3 * in_row));
    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
    _mm_storeu_ps(reinterpret_cast<float*>(out), r0);
    _mm_storeu_ps(reinterpret_cast<float*>(out + out_row), r1);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 2 * out_row), r2);
    _mm_storeu_ps(reinterpret_cast<float*>(out + 3 * out_row), r3);
  }
};

template <>
struct Micro<2> {
  static constexpr int64_t kM = 8;
  static void run(char* out, int64_t out_row, const char* in, int64_t in_row) {
    __m128i r[8];
    for (int k = 0; k < 8; ++k) {
      r[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + k * in_row));
    }
    // Interleave pairs of rows at 2, then 4, then 8 bytes: column c of in ends in r[c].
    __m128i p[8], q[8];
    for (int k = 0; k < 4; ++k) {
      p[2 * k] = _mm_unpacklo_epi16(r[2 * k], r[2 * k + 1]);
      p[2 * k + 1] = _mm_unpackhi_epi16(r[2 * k], r[2 * k + 1]);
    }
    for (int h = 0; h < 2; ++h) {  // rows 0-3, then 4-7
      q[4 * h] = _mm_unpacklo_epi32(p[4 * h], p[4 * h + 2]);
      q[4 * h + 1] = _mm_unpackhi_epi32(p[4 * h], p[4 * h + 2]);
      q[4 * h + 2] = _mm_unpacklo_epi32(p[4 * h + 1], p[4 * h + 3]);
      q[4 * h + 3] = _mm_unpackhi_epi32(p[4 * h + 1], p[4 * h + 3]);
    }
    for (int k = 0; k < 4; ++k) {
      r[2 * k] = _mm_unpacklo_epi64(q[k], q[k + 4]);
      r[2 * k + 1] = _mm_unpackhi_epi64(q[k], q[k + 4]);
    }
    for (int k = 0; k < 8; ++k) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k * out_row), r[k]);
    }
  }
};
#endif

// out (nb rows of na units, packed) = the transpose of in (na rows of nb units, in_row apart).
template <int64_t kUnit>
void transpose_block(char* out, const char* in, int64_t in_row, int64_t unit, int64_t na,
                     int64_t nb) {
  const int64_t out_row = na * unit;
  int64_t ma = 0, mb = 0;  // the part covered by register blocks
#if defined(__SSE2__)
  if constexpr (kUnit == 2 || kUnit == 4 || kUnit == 8) {
    constexpr int64_t kM = Micro<kUnit>::kM;
    ma = na / kM * kM;
    mb = nb / kM * kM;
    for (int64_t i = 0; i < ma; i += kM) {
      for (int64_t j = 0; j < mb; j += kM) {
        Micro<kUnit>::run(out + j * out_row + i * kUnit, out_row, in + i * in_row + j * kUnit,
                          in_row);
      }
    }
  }
#endif
  transpose_units<kUnit>(out, out_row, in, in_row, unit, 0, ma, mb, nb);
  transpose_units<kUnit>(out, out_row, in, in_row, unit, ma, na, 0, nb);
}

// Copies the tile of na units along a by nb along b at d (dst) and s (src).
template <int64_t kUnit>
void copy_tile(const TransposePlan& p, char* d, const char* s, int64_t na, int64_t nb, char* buf) {
  const int64_t unit = p.unit;
  const auto put = [&](char* to, const char* from, int64_t bytes) {
    if (p.stream) {
      stream_copy(to, from, bytes);
    } else {
      std::memcpy(to, from, static_cast<size_t>(bytes));
    }
  };
  if (unit >= kDirectUnitBytes) {
    for (int64_t j = 0; j < nb; ++j) {
      for (int64_t i = 0; i < na; ++i) {
        put(d + j * p.dst_b + i * unit, s + i * p.src_a + j * unit, unit);
      }
    }
    return;
  }
  transpose_block<kUnit>(buf, s, p.src_a, unit, na, nb);
  for (int64_t j = 0; j < nb; ++j) put(d + j * p.dst_b, buf + j * na * unit, na * unit);
}

template <int64_t kUnit>
void run_tiles(const TransposePlan& p) {
  const int64_t unit = p.unit;
  const auto edge = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(
      std::sqrt(static_cast<double>(kTileBytes / unit)))));  // edge * edge * unit <= kTileBytes
  const int64_t tiles_a = (p.size_a + edge - 1) / edge;
  const int64_t tiles_b = (p.size_b + edge - 1) / edge;
  int64_t batch = 1;
  for (int64_t s : p.batch_sizes) batch *= s;
  const int64_t grain = std::max<int64_t>(1, kGrainBytes / (edge * edge * unit));
  parallel_for(0, batch * tiles_a * tiles_b, grain, [&](int64_t begin, int64_t end) {
    alignas(64) std::array<char, kTileBytes> buf;
    for (int64_t t = begin; t < end; ++t) {
      const int64_t a0 = t % tiles_a * edge;
      const int64_t b0 = t / tiles_a % tiles_b * edge;
      const int64_t na = std::min(edge, p.size_a - a0);
      const int64_t nb = std::min(edge, p.size_b - b0);
      char* d = p.base[0] + a0 * unit + b0 * p.dst_b;
      const char* s = p.base[1] + a0 * p.src_a + b0 * unit;
      int64_t rem = t / tiles_a / tiles_b;
      for (size_t k = p.batch_sizes.size(); k-- > 0;) {
        const int64_t i = rem % p.batch_sizes[k];
        rem /= p.batch_sizes[k];
        d += i * p.batch_strides[k][0];
        s += i * p.batch_strides[k][1];
      }
      copy_tile<kUnit>(p, d, s, na, nb, buf.data());
    }
    if (p.stream) stream_fence();
  });
}

}  // namespace

bool transpose_copy(const Tensor& dst, const Tensor& src) {
  if (dst.dtype() != src.dtype() || dst.numel() == 0) return false;
  TransposePlan plan;
  if (!make_plan(dst, src, plan)) return false;
  switch (plan.unit) {
    case 1:
      run_tiles<1>(plan);
      break;
    case 2:
      run_tiles<2>(plan);
      break;
    case 4:
      run_tiles<4>(plan);
      break;
    case 8:
      run_tiles<8>(plan);
      break;
    case 16:
      run_tiles<16>(plan);
      break;
    default:
      run_tiles<0>(plan);
      break;
  }
  return true;
}

}  // namespace tessera::cpu
