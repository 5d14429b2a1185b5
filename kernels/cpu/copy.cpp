// Strided copy with dtype conversion, and fill.

#include <cstring>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/loops.h"
#include "tessera/kernels/cpu/transpose_copy.h"

namespace tessera::cpu {

namespace {

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, Half> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Half> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

void copy_kernel(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous()) {
    const size_t bytes = dst.nbytes();
    char* d = static_cast<char*>(dst.raw_data());
    const char* s = static_cast<const char*>(src.raw_data());
    if (d == s) return;
    parallel_for(0, static_cast<int64_t>(bytes), int64_t{1} << 20, [&](int64_t b, int64_t e) {
      std::memcpy(d + b, s + b, static_cast<size_t>(e - b));
    });
    return;
  }
  if (transpose_copy(dst, src)) return;
  visit_dtype(dst.dtype(), [&](auto dst_tag) {
    using To = decltype(dst_tag);
    visit_dtype(src.dtype(), [&](auto src_tag) {
      using From = decltype(src_tag);
      for_each_strided<2>({&dst, &src},
                          [](std::array<char*, 2> p, std::array<int64_t, 2> s, int64_t n) {
                            if constexpr (std::is_same_v<To, From>) {
                              // Contiguous runs of one dtype (blocks of a larger tensor): memcpy
                              // per run.
                              if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
                                std::memcpy(p[0], p[1], static_cast<size_t>(n) * sizeof(To));
                                return;
                              }
                            }
                            if (s[0] == sizeof(To) && s[1] == sizeof(From)) {
                              To* d = reinterpret_cast<To*>(p[0]);
                              const From* f = reinterpret_cast<const From*>(p[1]);
                              for (int64_t i = 0; i < n; ++i) d[i] = convert<To>(f[i]);
                            } else {
                              for (int64_t i = 0; i < n; ++i) {
                                *reinterpret_cast<To*>(p[0] + i * s[0]) =
                                    convert<To>(*reinterpret_cast<const From*>(p[1] + i * s[1]));
                              }
                            }
                          });
    });
  });
}

void fill_kernel(const Tensor& dst, const Scalar& value) {
  visit_dtype(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T v = value.to<T>();
    for_each_strided<1>({&dst}, [v](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
      if (s[0] == sizeof(T)) {
        T* d = reinterpret_cast<T*>(p[0]);
        for (int64_t i = 0; i < n; ++i) d[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
      }
    });
  });
}

}  // namespace

void register_copy_kernels(KernelTable& table) {
  table.copy = copy_kernel;
  table.fill = fill_kernel;
}

}  // namespace tessera::cpu
