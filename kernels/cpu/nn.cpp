// embedding, its backward scatter-add, and the per-sample nll_loss. softmax
// (kernels/cpu/softmax.cpp) and the norms (kernels/cpu/norm.cpp) register themselves: they are
// compiled once per CPU ISA variant (Note [CPU ISA variants] in kernels/cpu_isa.cpp).

#include <Eigen/Core>
#include <cstring>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/nn_rows.h"

namespace tessera::cpu {

namespace {

// Copies n elements of one size (U is an unsigned type of that size) between strided runs.
template <typename U>
void copy_run(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * ds, src + i * ss, sizeof(U));
  }
}

void copy_strided(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n, size_t es) {
  switch (es) {
    case 1:
      return copy_run<uint8_t>(dst, ds, src, ss, n);
    case 2:
      return copy_run<uint16_t>(dst, ds, src, ss, n);
    case 4:
      return copy_run<uint32_t>(dst, ds, src, ss, n);
    default:
      return copy_run<uint64_t>(dst, ds, src, ss, n);
  }
}

// Rows are copied bytewise, so every dtype of weight works.
void embedding_kernel(const Tensor& out, const Tensor& weight, const Tensor& indices) {
  const int64_t n = indices.numel();
  const int64_t d = weight.size(1);
  if (n == 0 || d == 0) return;
  const auto es = static_cast<int64_t>(weight.element_size());
  const char* w = static_cast<const char*>(weight.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  const int64_t w_row = weight.stride(0) * es;
  const int64_t w_col = weight.stride(1) * es;
  const int64_t o_row = out.stride(0) * es;
  const int64_t o_col = out.stride(1) * es;
  const bool contiguous_rows = w_col == es && o_col == es;
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / d);
  auto run = [&](auto tag) {
    using I = decltype(tag);
    const I* idx = indices.data_ptr<I>();
    const int64_t is = indices.stride(0);
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const char* src = w + static_cast<int64_t>(idx[i * is]) * w_row;
        char* dst = o + i * o_row;
        if (contiguous_rows) {
          std::memcpy(dst, src, static_cast<size_t>(d * es));
        } else {
          copy_strided(dst, o_col, src, w_col, d, static_cast<size_t>(es));
        }
      }
    });
  };
  if (indices.dtype() == kInt32) {
    run(int32_t{});
  } else {
    run(int64_t{});
  }
}

// Threads split the columns, so that no two of them add into one element whatever the indices.
template <typename T, typename I>
void embedding_backward_impl(const Tensor& out, const Tensor& grad, const Tensor& indices) {
  using A = acc_t<T>;
  const int64_t n = grad.size(0);
  const int64_t d = grad.size(1);
  const int64_t gr = grad.stride(0);
  const int64_t gc = grad.stride(1);
  const I* idx = indices.data_ptr<I>();
  const int64_t is = indices.stride(0);
  const T* g = grad.data_ptr<T>();
  A* o = out.data_ptr<A>();
  const int64_t grain = std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1));
  parallel_for(0, d, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = 0; i < n; ++i) {
      A* dst = o + static_cast<int64_t>(idx[i * is]) * d;
      const T* src = g + i * gr;
      for (int64_t j = b; j < e; ++j) dst[j] += static_cast<A>(src[j * gc]);
    }
  });
}

void embedding_backward_kernel(const Tensor& out, const Tensor& grad, const Tensor& indices) {
  visit_floating(grad.dtype(), "embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    if (indices.dtype() == kInt32) {
      embedding_backward_impl<T, int32_t>(out, grad, indices);
    } else {
      embedding_backward_impl<T, int64_t>(out, grad, indices);
    }
  });
}

template <typename T>
void nll_loss_impl(const Tensor& out, const Tensor& logp, const Tensor& target,
                   int64_t ignore_index, double label_smoothing) {
  using A = acc_t<T>;
  const int64_t c = logp.size(1);
  const int64_t sc = logp.stride(1);
  const Tensor rows = leading_view(logp, 1);
  const A keep = static_cast<A>(1.0 - label_smoothing);
  const A smooth = c > 0 ? static_cast<A>(label_smoothing / static_cast<double>(c)) : A(0);
  const int64_t work = label_smoothing > 0 ? c : 1;
  for_each_row<3>({&out, &rows, &target}, work, [&](std::array<char*, 3> p) {
    const int64_t t = *reinterpret_cast<const int64_t*>(p[2]);
    T* o = reinterpret_cast<T*>(p[0]);
    if (t == ignore_index) {
      *o = T(0);
      return;
    }
    const T* lp = reinterpret_cast<const T*>(p[1]);
    A loss = -static_cast<A>(lp[t * sc]);
    if (label_smoothing > 0) {
      A sum = 0;
      if constexpr (std::is_same_v<T, A>) {
        using Strided =
            Eigen::Map<const Eigen::Array<A, Eigen::Dynamic, 1>, 0, Eigen::InnerStride<>>;
        sum = Strided(lp, c, Eigen::InnerStride<>(sc)).sum();
      } else {
        for (int64_t j = 0; j < c; ++j) sum += static_cast<A>(lp[j * sc]);
      }
      loss = keep * loss - smooth * sum;
    }
    *o = static_cast<T>(loss);
  });
}

void nll_loss_kernel(const Tensor& out, const Tensor& logp, const Tensor& target,
                     int64_t ignore_index, double label_smoothing) {
  if (out.numel() == 0) return;
  visit_floating(logp.dtype(), "nll_loss", [&](auto tag) {
    nll_loss_impl<decltype(tag)>(out, logp, target, ignore_index, label_smoothing);
  });
}

}  // namespace

void register_nn_kernels(KernelTable& table) {
  table.embedding = embedding_kernel;
  table.embedding_backward = embedding_backward_kernel;
  table.nll_loss = nll_loss_kernel;
}

}  // namespace tessera::cpu
