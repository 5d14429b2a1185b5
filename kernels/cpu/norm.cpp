// layer_norm and rms_norm over the trailing norm_ndim dims of each row. Statistics are computed in
// the accumulation type with two passes (mean, then centered squares) so that a large mean does
// not cancel the variance. Their backward reuses the statistics (Note [Fused nn backward] in
// runtime/ops/nn_backward.cpp). See Note [Row kernels] in kernels/cpu/nn_rows.h.

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <vector>

#include "tessera/kernels/cpu/cpu_kernels.h"
#include "tessera/kernels/cpu/nn_rows.h"
#include "tessera/runtime/ops.h"

namespace tessera::cpu {

namespace {

template <typename A>
using Vec = Eigen::Array<A, Eigen::Dynamic, 1>;

// weight / bias (any floating dtype and strides) as a contiguous tensor of the accumulation type,
// or undefined when absent.
template <typename A>
Tensor param_as(const Tensor& p) {
  return p.defined() ? p.to(dtype_of<A>).contiguous() : Tensor();
}

template <typename A>
const A* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_ptr<A>() : nullptr;
}

// Writes a statistic into a float32 or float64 tensor element.
template <typename A>
void store_stat(char* p, DType dtype, A v) {
  if (dtype == kFloat64) {
    *reinterpret_cast<double*>(p) = static_cast<double>(v);
  } else {
    *reinterpret_cast<float*>(p) = static_cast<float>(v);
  }
}

// The normalizing pass shared by both norms: a row x of n elements of T at px is turned into
// y = f(xs) at py. Rows that are contiguous and already of type A are used in place.
template <typename T, typename A, typename F>
void normalize_row(const RowLayout& ri, const RowLayout& ro, const char* px, char* py, int64_t n,
                   const F& f) {
  const auto es = static_cast<int64_t>(sizeof(T));
  const A* x;
  A* y;
  if constexpr (std::is_same_v<T, A>) {
    const bool in_place_x = ri.contiguous(es);
    const bool in_place_y = ro.contiguous(es);
    if (in_place_x) {
      x = reinterpret_cast<const A*>(px);
    } else {
      A* buf = scratch_row<A>(n);
      load_row<T>(ri, px, buf);
      x = buf;
    }
    y = in_place_y ? reinterpret_cast<A*>(py) : scratch_row<A>(n, 1);
    f(Eigen::Map<const Vec<A>>(x, n), Eigen::Map<Vec<A>>(y, n));
    if (!in_place_y) store_row<T>(ro, py, y);
  } else {
    A* buf = scratch_row<A>(n);
    load_row<T>(ri, px, buf);
    f(Eigen::Map<const Vec<A>>(buf, n), Eigen::Map<Vec<A>>(buf, n));
    store_row<T>(ro, py, buf);
  }
}

template <typename T>
void layer_norm_impl(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                     const Tensor& weight, const Tensor& bias, int64_t k, double eps) {
  using A = acc_t<T>;
  const Tensor in_rows = leading_view(in, k);
  const Tensor out_rows = leading_view(out, k);
  const Tensor mean_rows = mean.view(in_rows.sizes());
  const Tensor rstd_rows = rstd.view(in_rows.sizes());
  const int64_t n = in.numel() / std::max<int64_t>(in_rows.numel(), 1);
  const RowLayout ri = row_layout(in, k);
  const RowLayout ro = row_layout(out, k);
  const Tensor w = param_as<A>(weight);
  const Tensor b = param_as<A>(bias);
  const A* wp = data_or_null<A>(w);
  const A* bp = data_or_null<A>(b);
  const DType stat = mean.dtype();
  const A e = static_cast<A>(eps);
  for_each_row<4>({&out_rows, &in_rows, &mean_rows, &rstd_rows}, n, [&](std::array<char*, 4> p) {
    normalize_row<T, A>(ri, ro, p[1], p[0], n, [&](const auto& xs, auto ys) {
      const A mu = xs.sum() / static_cast<A>(n);
      const A var = (xs - mu).square().sum() / static_cast<A>(n);
      const A r = A(1) / std::sqrt(var + e);
      store_stat(p[2], stat, mu);
      store_stat(p[3], stat, r);
      if (wp && bp) {
        ys = (xs - mu) * r * Eigen::Map<const Vec<A>>(wp, n) + Eigen::Map<const Vec<A>>(bp, n);
      } else if (wp) {
        ys = (xs - mu) * r * Eigen::Map<const Vec<A>>(wp, n);
      } else if (bp) {
        ys = (xs - mu) * r + Eigen::Map<const Vec<A>>(bp, n);
      } else {
        ys = (xs - mu) * r;
      }
    });
  });
}

template <typename T>
void rms_norm_impl(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                   int64_t k, double eps) {
  using A = acc_t<T>;
  const Tensor in_rows = leading_view(in, k);
  const Tensor out_rows = leading_view(out, k);
  const Tensor rstd_rows = rstd.view(in_rows.sizes());
  const int64_t n = in.numel() / std::max<int64_t>(in_rows.numel(), 1);
  const RowLayout ri = row_layout(in, k);
  const RowLayout ro = row_layout(out, k);
  const Tensor w = param_as<A>(weight);
  const A* wp = data_or_null<A>(w);
  const DType stat = rstd.dtype();
  const A e = static_cast<A>(eps);
  for_each_row<3>({&out_rows, &in_rows, &rstd_rows}, n, [&](std::array<char*, 3> p) {
    normalize_row<T, A>(ri, ro, p[1], p[0], n, [&](const auto& xs, auto ys) {
      const A r = A(1) / std::sqrt(xs.square().sum() / static_cast<A>(n) + e);
      store_stat(p[2], stat, r);
      if (wp) {
        ys = xs * r * Eigen::Map<const Vec<A>>(wp, n);
      } else {
        ys = xs * r;
      }
    });
  });
}

// A statistic written by the forward (float32 or float64, contiguous), element i.
template <typename A>
A load_stat(const Tensor& t, int64_t i) {
  if (t.dtype() == kFloat64) return static_cast<A>(t.data_ptr<double>()[i]);
  return static_cast<A>(t.data_ptr<float>()[i]);
}

// Rows per block of the weight and bias gradient sums: at most kMaxBlocks blocks, whose partial
// sums are added in block order, so the result depends on the shape only.
constexpr int64_t kMaxBlocks = 64;

template <typename T>
void norm_backward_impl(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                        const Tensor& grad, const Tensor& in, const Tensor& weight,
                        const Tensor& mean, const Tensor& rstd) {
  using A = acc_t<T>;
  const int64_t rows = rstd.numel();
  const int64_t n = in.numel() / rows;
  const Tensor w = param_as<A>(weight);
  const A* wp = data_or_null<A>(w);
  const T* g_all = grad.data_ptr<T>();
  const T* x_all = in.data_ptr<T>();
  T* dx_all = grad_in.defined() ? grad_in.data_ptr<T>() : nullptr;
  const bool centered = mean.defined();
  const bool sums = grad_weight.defined() || grad_bias.defined();
  const int64_t block_rows =
      std::max<int64_t>((rows + kMaxBlocks - 1) / kMaxBlocks,
                        std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(n, 1)));
  const int64_t blocks = (rows + block_rows - 1) / block_rows;
  // Per block: sum of grad * xhat, then sum of grad.
  std::vector<A> partial(sums ? static_cast<size_t>(blocks * 2 * n) : 0, A(0));
  const A inv_n = A(1) / static_cast<A>(n);
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    A* xhat = scratch_row<A>(n, 0);
    A* gbuf = scratch_row<A>(n, 1);
    for (int64_t b = b0; b < b1; ++b) {
      A* pw = sums ? partial.data() + b * 2 * n : nullptr;
      for (int64_t r = b * block_rows; r < std::min(rows, (b + 1) * block_rows); ++r) {
        const T* gr = g_all + r * n;
        const T* xr = x_all + r * n;
        const A* g;
        if constexpr (std::is_same_v<T, A>) {
          g = gr;
        } else {
          for (int64_t j = 0; j < n; ++j) gbuf[j] = static_cast<A>(gr[j]);
          g = gbuf;
        }
        for (int64_t j = 0; j < n; ++j) xhat[j] = static_cast<A>(xr[j]);
        const A mu = centered ? load_stat<A>(mean, r) : A(0);
        const A rs = load_stat<A>(rstd, r);
        Eigen::Map<Vec<A>> xh(xhat, n);
        Eigen::Map<const Vec<A>> gs(g, n);
        xh = (xh - mu) * rs;
        if (sums) {
          Eigen::Map<Vec<A>>(pw, n) += gs * xh;
          Eigen::Map<Vec<A>>(pw + n, n) += gs;
        }
        if (!dx_all) continue;
        // dx = rs * (gw - mean(gw) - xhat * mean(gw * xhat)), gw = g * w.
        T* dxr = dx_all + r * n;
        A* dx = std::is_same_v<T, A> ? reinterpret_cast<A*>(dxr) : gbuf;
        Eigen::Map<Vec<A>> dxs(dx, n);
        if (wp) {
          Eigen::Map<const Vec<A>> ws(wp, n);
          const A a = centered ? (gs * ws).sum() * inv_n : A(0);
          const A c = (gs * ws * xh).sum() * inv_n;
          dxs = rs * (gs * ws - a - xh * c);
        } else {
          const A a = centered ? gs.sum() * inv_n : A(0);
          const A c = (gs * xh).sum() * inv_n;
          dxs = rs * (gs - a - xh * c);
        }
        if constexpr (!std::is_same_v<T, A>) {
          for (int64_t j = 0; j < n; ++j) dxr[j] = static_cast<T>(dx[j]);
        }
      }
    }
  });
  if (!sums) return;
  // Block order, one parameter element at a time (each a column of the partials).
  std::vector<A> total(static_cast<size_t>(2 * n), A(0));
  for (int64_t b = 0; b < blocks; ++b) {
    Eigen::Map<Vec<A>>(total.data(), 2 * n) +=
        Eigen::Map<const Vec<A>>(partial.data() + b * 2 * n, 2 * n);
  }
  const Tensor sums_t = from_vector(total, {2, n});
  if (grad_weight.defined()) grad_weight.view({n}).copy_(sums_t.select(0, 0));
  if (grad_bias.defined()) grad_bias.view({n}).copy_(sums_t.select(0, 1));
}

void norm_backward_kernel(const Tensor& grad_in, const Tensor& grad_weight, const Tensor& grad_bias,
                          const Tensor& grad, const Tensor& in, const Tensor& weight,
                          const Tensor& mean, const Tensor& rstd) {
  if (in.numel() == 0) return;
  visit_floating(in.dtype(), "norm_backward", [&](auto tag) {
    norm_backward_impl<decltype(tag)>(grad_in, grad_weight, grad_bias, grad, in, weight, mean,
                                      rstd);
  });
}

void layer_norm_kernel(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& in,
                       const Tensor& weight, const Tensor& bias, int64_t norm_ndim, double eps) {
  if (in.numel() == 0) return;
  // Note [Rows read across the grain] in kernels/cpu/nn_rows.h.
  const Tensor x = rows_in_order(in, norm_ndim);
  visit_floating(in.dtype(), "layer_norm", [&](auto tag) {
    layer_norm_impl<decltype(tag)>(out, mean, rstd, x, weight, bias, norm_ndim, eps);
  });
}

void rms_norm_kernel(const Tensor& out, const Tensor& rstd, const Tensor& in, const Tensor& weight,
                     int64_t norm_ndim, double eps) {
  if (in.numel() == 0) return;
  const Tensor x = rows_in_order(in, norm_ndim);
  visit_floating(in.dtype(), "rms_norm", [&](auto tag) {
    rms_norm_impl<decltype(tag)>(out, rstd, x, weight, norm_ndim, eps);
  });
}

}  // namespace

template <>
void register_norm_kernels<kThisCpuIsa>(KernelTable& table) {
  table.layer_norm = layer_norm_kernel;
  table.rms_norm = rms_norm_kernel;
  table.norm_backward = norm_backward_kernel;
}

}  // namespace tessera::cpu
