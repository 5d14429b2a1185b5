#include "tessera/collectives/local_kernels.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "tessera/runtime/dispatch.h"
#include "tessera/runtime/half_convert.h"
#include "tessera/runtime/parallel.h"

namespace tessera::dist::detail {

namespace {

using ::tessera::detail::floats_to_halves;
using ::tessera::detail::halves_to_floats;

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>, float, T>;

// Signed overflow wraps (as two's complement) instead of being undefined.
template <typename T>
T wrapping(auto f, T a, T b) {
  if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(f(static_cast<U>(a), static_cast<U>(b)));
  } else {
    return static_cast<T>(f(a, b));
  }
}

struct SumOp {
  template <typename A>
  static A apply(A a, A b) {
    return wrapping([](auto x, auto y) { return x + y; }, a, b);
  }
};
struct ProductOp {
  template <typename A>
  static A apply(A a, A b) {
    return wrapping([](auto x, auto y) { return x * y; }, a, b);
  }
};
// NaN propagates, as torch.minimum / torch.maximum (`b != b` is false for integers).
struct MinOp {
  template <typename A>
  static A apply(A a, A b) {
    return (b < a || b != b) ? b : a;
  }
};
struct MaxOp {
  template <typename A>
  static A apply(A a, A b) {
    return (b > a || b != b) ? b : a;
  }
};
struct BAndOp {
  template <typename A>
  static A apply(A a, A b) {
    return static_cast<A>(a & b);
  }
};
struct BOrOp {
  template <typename A>
  static A apply(A a, A b) {
    return static_cast<A>(a | b);
  }
};
struct BXorOp {
  template <typename A>
  static A apply(A a, A b) {
    return static_cast<A>(a ^ b);
  }
};

// Blocks between T and its accumulator type; float16 converts in bulk (runtime/half_convert.h):
// Half's own conversion, one element at a time, kept float16 reductions ~8x slower than bfloat16.
template <typename T>
void load_acc(const T* in, Acc<T>* out, int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    halves_to_floats(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Acc<T>>(in[i]);
  }
}

// `out` may be `in` (same start): each element is read before any write reaches it.
template <typename T>
void store_acc(const Acc<T>* in, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, Half>) {
    floats_to_halves(in, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<T>(in[i]);
  }
}

// Other group sizes, and float16: blocks small enough that the accumulator stays in L1 while
// every input streams through once.
constexpr int64_t kBlock = 1024;
constexpr int64_t kGrain = 64 * kBlock;

template <typename T, typename Op, bool kAvg>
void reduce_range(T* out, const T* const* ins, int n, int64_t begin, int64_t end) {
  using A = Acc<T>;
  A acc[kBlock];
  A next[kBlock];
  for (int64_t b = begin; b < end; b += kBlock) {
    const int64_t len = std::min(kBlock, end - b);
    load_acc(ins[0] + b, acc, len);
    for (int r = 1; r < n; ++r) {
      load_acc(ins[r] + b, next, len);
      for (int64_t j = 0; j < len; ++j) acc[j] = Op::apply(acc[j], next[j]);
    }
    if constexpr (kAvg) {
      const A divisor = static_cast<A>(n);
      for (int64_t j = 0; j < len; ++j) acc[j] = acc[j] / divisor;
    }
    store_acc(acc, out + b, len);
  }
}

// The common group sizes: every input streams once and the accumulator stays in registers.
// `ivdep`: out may be one of the inputs, but only element j of it is read before j is written.
template <typename T, typename Op, bool kAvg, int N>
void reduce_fixed(T* out, const T* const* ins, int64_t begin, int64_t end) {
  using A = Acc<T>;
  const T* in[N];
  for (int r = 0; r < N; ++r) in[r] = ins[r];
#pragma GCC ivdep
  for (int64_t j = begin; j < end; ++j) {
    A acc = static_cast<A>(in[0][j]);
    for (int r = 1; r < N; ++r) acc = Op::apply(acc, static_cast<A>(in[r][j]));
    if constexpr (kAvg) acc = acc / static_cast<A>(N);
    out[j] = static_cast<T>(acc);
  }
}

// Elements [begin, end) of out and the inputs, on the calling thread.
template <typename T, typename Op, bool kAvg = false>
void reduce_serial(void* out, const void* const* ins, int n, int64_t begin, int64_t end) {
  T* o = static_cast<T*>(out);
  const T* const* in = reinterpret_cast<const T* const*>(ins);
  if constexpr (std::is_same_v<T, Half>) return reduce_range<T, Op, kAvg>(o, in, n, begin, end);
  switch (n) {
    case 2:
      return reduce_fixed<T, Op, kAvg, 2>(o, in, begin, end);
    case 3:
      return reduce_fixed<T, Op, kAvg, 3>(o, in, begin, end);
    case 4:
      return reduce_fixed<T, Op, kAvg, 4>(o, in, begin, end);
    case 8:
      return reduce_fixed<T, Op, kAvg, 8>(o, in, begin, end);
    default:
      return reduce_range<T, Op, kAvg>(o, in, n, begin, end);
  }
}

}  // namespace

ReduceKernel reduce_kernel(DType dtype, ReduceOp op) {
  ReduceKernel kernel = nullptr;
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      // Logical or / and, as NCCL maps bool Sum / Max and Product / Min.
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Max:
        case ReduceOp::BOr:
          kernel = &reduce_serial<T, BOrOp>;
          return;
        case ReduceOp::Product:
        case ReduceOp::Min:
        case ReduceOp::BAnd:
          kernel = &reduce_serial<T, BAndOp>;
          return;
        case ReduceOp::BXor:
          kernel = &reduce_serial<T, BXorOp>;
          return;
        case ReduceOp::Avg:
          break;
      }
    } else {
      switch (op) {
        case ReduceOp::Sum:
          kernel = &reduce_serial<T, SumOp>;
          return;
        case ReduceOp::Product:
          kernel = &reduce_serial<T, ProductOp>;
          return;
        case ReduceOp::Min:
          kernel = &reduce_serial<T, MinOp>;
          return;
        case ReduceOp::Max:
          kernel = &reduce_serial<T, MaxOp>;
          return;
        case ReduceOp::Avg:
          if constexpr (!std::is_integral_v<T>) {
            kernel = &reduce_serial<T, SumOp, true>;
            return;
          }
          break;
        case ReduceOp::BAnd:
        case ReduceOp::BOr:
        case ReduceOp::BXor:
          if constexpr (std::is_integral_v<T>) {
            if (op == ReduceOp::BAnd) {
              kernel = &reduce_serial<T, BAndOp>;
            } else if (op == ReduceOp::BOr) {
              kernel = &reduce_serial<T, BOrOp>;
            } else {
              kernel = &reduce_serial<T, BXorOp>;
            }
            return;
          }
          break;
      }
    }
    TS_INTERNAL_ASSERT(false, "reduce op ", reduce_op_name(op), " on ", dtype,
                       " should have been rejected by check_reduce_op");
  });
  return kernel;
}

void reduce_n(DType dtype, ReduceOp op, void* out, const void* const* ins, int n, int64_t count) {
  TS_INTERNAL_ASSERT(n >= 1 && count >= 0);
  if (count == 0) return;
  const ReduceKernel kernel = reduce_kernel(dtype, op);
  parallel_for(0, count, kGrain,
               [&](int64_t begin, int64_t end) { kernel(out, ins, n, begin, end); });
}

DType accumulator_dtype(DType dtype) { return is_reduced_float(dtype) ? kFloat32 : dtype; }

void to_accumulator(DType dtype, void* dst, const void* src, int64_t count) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src);
    Acc<T>* out = static_cast<Acc<T>*>(dst);
    if (static_cast<const void*>(in) == static_cast<void*>(out)) return;
    load_acc(in, out, count);
  });
}

void from_accumulator(DType dtype, void* dst, const void* src, int64_t count, int divisor) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const A* in = static_cast<const A*>(src);
    T* out = static_cast<T*>(dst);
    if (divisor == 1) {
      if (std::is_same_v<T, A> && static_cast<const void*>(in) == static_cast<void*>(out)) return;
      store_acc(in, out, count);
    } else if constexpr (!std::is_integral_v<T>) {
      // In place too: each block is read (and divided) before its results are written.
      const auto d = static_cast<A>(divisor);
      A block[kBlock];
      for (int64_t b = 0; b < count; b += kBlock) {
        const int64_t len = std::min(kBlock, count - b);
        for (int64_t j = 0; j < len; ++j) block[j] = in[b + j] / d;
        store_acc(block, out + b, len);
      }
    } else {
      TS_INTERNAL_ASSERT(false, "integers are never averaged");
    }
  });
}

int64_t chunk_begin(int64_t count, int n, int i, size_t element_size) {
  const auto align = static_cast<int64_t>(std::max<size_t>(1, 64 / element_size));
  const int64_t chunk = ((count + n - 1) / n + align - 1) / align * align;
  return std::min(count, chunk * i);
}

namespace {

// Note [Streaming copies]
// A collective's output is rarely read again by the copying core before it leaves the cache, and
// a plain store first reads the destination line (read for ownership): three memory transfers per
// byte instead of two. glibc's memcpy switches to non-temporal stores only above a threshold tied
// to the cache size, so the one large memcpy that the benchmark compares against streams while the
// per-rank blocks of an all_gather, or the short rows of a strided block, do not. Copies that
// belong to a transfer of at least kStreamingBytes therefore store around the cache whatever
// their own size.
constexpr size_t kStreamingBytes = size_t{4} << 20;

#if defined(__SSE2__)
// One 64-byte line: four 16-byte loads, four streaming stores.
inline void stream_line(char* dst, const char* src) {
  const auto* from = reinterpret_cast<const __m128i*>(src);
  auto* to = reinterpret_cast<__m128i*>(dst);
  const __m128i a = _mm_loadu_si128(from);
  const __m128i b = _mm_loadu_si128(from + 1);
  const __m128i c = _mm_loadu_si128(from + 2);
  const __m128i d = _mm_loadu_si128(from + 3);
  _mm_stream_si128(to, a);
  _mm_stream_si128(to + 1, b);
  _mm_stream_si128(to + 2, c);
  _mm_stream_si128(to + 3, d);
}

// Copies the bytes before r's destination reaches a 16-byte boundary plainly and moves r past
// them: streaming stores need aligned destinations.
void copy_head(ByteRun& r) {
  const size_t head = std::min(r.bytes, (16 - reinterpret_cast<uintptr_t>(r.dst) % 16) % 16);
  if (head > 0) std::memcpy(r.dst, r.src, head);
  r.dst += head;
  r.src += head;
  r.bytes -= head;
}

// Streams the whole lines of M runs (aligned destinations), a line of each in turn. The pointers
// live in registers: reloading them from the runs on every line costs ~10% of the copy when four
// ranks share two cores. Returns the bytes done in each (the shortest body).
template <int M>
size_t stream_group(const ByteRun* r) {
  char* dst[M];
  const char* src[M];
  size_t common = r[0].bytes;
  for (int k = 0; k < M; ++k) {
    dst[k] = r[k].dst;
    src[k] = r[k].src;
    common = std::min(common, r[k].bytes);
  }
  common &= ~size_t{63};
  for (size_t line = 0; line < common; line += 64) {
    for (int k = 0; k < M; ++k) stream_line(dst[k] + line, src[k] + line);
  }
  return common;
}

// Finishes r (aligned destination) from byte `done` on: whole lines streamed, the tail copied.
void stream_rest(const ByteRun& r, size_t done) {
  const size_t body = r.bytes & ~size_t{63};
  for (size_t line = done; line < body; line += 64) stream_line(r.dst + line, r.src + line);
  if (body < r.bytes) std::memcpy(r.dst + body, r.src + body, r.bytes - body);
}

// Large copies walk four pages at once, a line of each in turn, prefetching the next four: on
// these machines four ranks streaming one page at a time each reach ~0.75 of what glibc's large
// memcpy (which interleaves pages the same way) reaches, and the interleaved walk matches it.
constexpr size_t kPageBytes = 4096;
constexpr int kPagesAtOnce = 4;
#endif

void stream_copy(char* dst, const char* src, size_t nbytes) {
#if defined(__SSE2__)
  ByteRun r{dst, src, nbytes};
  copy_head(r);
  constexpr size_t kGroup = kPageBytes * kPagesAtOnce;
  size_t done = 0;
  for (; done + kGroup <= r.bytes; done += kGroup) {
    ByteRun pages[kPagesAtOnce];
    for (int p = 0; p < kPagesAtOnce; ++p) {
      const size_t at = done + static_cast<size_t>(p) * kPageBytes;
      _mm_prefetch(r.src + at + kGroup, _MM_HINT_T0);
      pages[p] = {r.dst + at, r.src + at, kPageBytes};
    }
    stream_group<kPagesAtOnce>(pages);
  }
  stream_rest(r, done);
#else
  std::memcpy(dst, src, nbytes);
#endif
}

}  // namespace

void copy_runs(std::vector<ByteRun>& runs, size_t transfer_bytes) {
#if defined(__SSE2__)
  if (transfer_bytes >= kStreamingBytes) {
    for (ByteRun& r : runs) copy_head(r);
    // Four streams at a time, as the four-page walk of stream_copy; what remains goes two or
    // three at a time, and a single run alone as stream_copy walks it.
    for (size_t k = 0; k < runs.size();) {
      const size_t m = std::min<size_t>(4, runs.size() - k);
      size_t common = 0;
      if (m == 4) common = stream_group<4>(&runs[k]);
      if (m == 3) common = stream_group<3>(&runs[k]);
      if (m == 2) common = stream_group<2>(&runs[k]);
      if (m == 1) {
        stream_copy(runs[k].dst, runs[k].src, runs[k].bytes);
      } else {
        for (size_t j = k; j < k + m; ++j) stream_rest(runs[j], common);
      }
      k += m;
    }
    return;
  }
#endif
  for (const ByteRun& r : runs) std::memcpy(r.dst, r.src, r.bytes);
}

void store_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

void copy_bytes(void* dst, const void* src, size_t nbytes, size_t transfer_bytes, bool fence) {
  if (dst == src || nbytes == 0) return;
  const bool streaming = std::max(nbytes, transfer_bytes) >= kStreamingBytes;
  constexpr int64_t kCopyGrain = int64_t{1} << 20;
  parallel_for(0, static_cast<int64_t>(nbytes), kCopyGrain, [&](int64_t begin, int64_t end) {
    char* to = static_cast<char*>(dst) + begin;
    const char* from = static_cast<const char*>(src) + begin;
    if (!streaming) {
      std::memcpy(to, from, static_cast<size_t>(end - begin));
      return;
    }
    stream_copy(to, from, static_cast<size_t>(end - begin));
    // Streaming stores are weakly ordered: a worker thread publishes its own before it reports
    // back; the calling thread may leave that to its caller (store_fence).
    if (fence || end - begin != static_cast<int64_t>(nbytes)) store_fence();
  });
}

}  // namespace tessera::dist::detail
