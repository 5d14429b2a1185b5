// Views: new geometry over the same storage, never a copy (reshape copies only when it must).
// On a tensor that requires grad, each view records through its slot in ViewGradHooks;
// narrow, flatten, chunk, split and unbind are made of the recorded ones.

#include <algorithm>
#include <optional>

#include "tessera/runtime/autograd_hooks.h"
#include "tessera/runtime/distributed.h"
#include "tessera/runtime/ops/view_grad.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

namespace {

// A view never inherits autograd state: the slots give views of tensors that require grad their
// own history, and views of the others carry none.
Tensor view_of(const Tensor& t, Shape sizes, Shape strides, int64_t offset) {
  Tensor v =
      Tensor::make_view(t.storage(), std::move(sizes), std::move(strides), offset, t.dtype());
  v.unsafe_impl()->autograd_meta = nullptr;
  return v;
}

// Resolves a single -1 in `sizes` against numel; checks the product.
Shape infer_size(const Shape& sizes, int64_t numel, const char* op, const Shape& from) {
  Shape out = sizes;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TS_CHECK_SHAPE(infer_at < 0, "[", op, "] only one dimension can be -1, got ", sizes);
      infer_at = static_cast<int>(i);
    } else {
      TS_CHECK_SHAPE(out[i] >= 0, "[", op, "] invalid size ", out[i], " in ", sizes);
    }
  }
  // The known sizes must make a valid shape on their own: a product that wraps around int64 could
  // otherwise land on numel by accident.
  Shape known_sizes;
  for (int64_t s : out) {
    if (s != -1) known_sizes.push_back(s);
  }
  const int64_t known = checked_numel(known_sizes, op);
  if (infer_at >= 0) {
    TS_CHECK_SHAPE(known != 0 && numel % known == 0, "[", op, "] shape ", sizes,
                   " is invalid for input of size ", numel, " (shape ", from, ")");
    out[infer_at] = numel / known;
  } else {
    TS_CHECK_SHAPE(known == numel, "[", op, "] shape ", sizes, " is invalid for input of size ",
                   numel, " (shape ", from, ")");
  }
  return out;
}

Shape squeezed_shape(Shape sizes, int64_t d) {
  sizes.erase(sizes.begin() + d);
  return sizes;
}

}  // namespace

// The torch "computeStride" rule: each run of merged old dims must be contiguous among itself.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides,
                                  const Shape& new_sizes) {
  Shape new_strides(new_sizes.size());
  if (sizes.numel() == 0 || sizes.empty()) {
    return contiguous_strides(new_sizes);
  }
  int64_t view_d = static_cast<int64_t>(new_sizes.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1;
  int64_t view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || new_sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= new_sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return new_strides;
}

Tensor Tensor::view(const Shape& new_sizes) const {
  if (any_distributed(*this)) {
    return distributed_op(
        "view", {*this}, {.ints = infer_size(new_sizes, numel(), "view", sizes())},
        [](const LocalCall& c) { return std::vector{c.in[0].view(c.out_shapes[0])}; });
  }
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().view(*this, new_sizes);
  Shape target = infer_size(new_sizes, numel(), "view", sizes());
  auto st = view_strides(sizes(), strides(), target);
  TS_CHECK_SHAPE(st.has_value(), "[view] size ", new_sizes,
                 " is not compatible with input of shape ", sizes(), " and strides ", strides(),
                 " (at least one dimension spans across two contiguous subspaces); use reshape()");
  return view_of(*this, target, *st, storage_offset());
}

Tensor Tensor::reshape(const Shape& new_sizes) const {
  if (any_distributed(*this)) {
    return distributed_op(
        "reshape", {*this}, {.ints = infer_size(new_sizes, numel(), "reshape", sizes())},
        [](const LocalCall& c) { return std::vector{c.in[0].reshape(c.out_shapes[0])}; });
  }
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().reshape(*this, new_sizes);
  Shape target = infer_size(new_sizes, numel(), "reshape", sizes());
  if (auto st = view_strides(sizes(), strides(), target)) {
    return view_of(*this, target, *st, storage_offset());
  }
  return clone().view(target);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().transpose(*this, a, b);
  int64_t n = dim();
  a = wrap_dim(a, n, "transpose");
  b = wrap_dim(b, n, "transpose");
  if (any_distributed(*this)) {
    return distributed_op("transpose", {*this}, {.ints = {a, b}}, [a, b](const LocalCall& c) {
      return std::vector{c.in[0].transpose(a, b)};
    });
  }
  Shape sz = sizes(), st = strides();
  if (n == 0) return view_of(*this, sz, st, storage_offset());
  std::swap(sz[a], sz[b]);
  std::swap(st[a], st[b]);
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::t() const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().t(*this);
  TS_CHECK_SHAPE(dim() <= 2, "[t] expects a tensor with <= 2 dimensions, got ", dim(), " (shape ",
                 sizes(), "); use transpose(a, b) or permute");
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::permute(const Shape& dims) const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().permute(*this, dims);
  int64_t n = dim();
  TS_CHECK_SHAPE(dims.ndim() == n, "[permute] number of dims ", dims, " does not match the ", n,
                 " dims of input shape ", sizes());
  Shape sz(n), st(n);
  std::vector<bool> seen(n, false);
  Shape wrapped(n);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    TS_CHECK_INDEX(!seen[d], "[permute] dim ", d, " repeated in ", dims);
    seen[d] = true;
    wrapped[i] = d;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
  }
  if (any_distributed(*this)) {
    return distributed_op("permute", {*this}, {.ints = wrapped}, [wrapped](const LocalCall& c) {
      return std::vector{c.in[0].permute(wrapped)};
    });
  }
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TS_CHECK_INDEX(dim() > 0, "[narrow] cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "narrow");
  int64_t n = sizes()[d];
  if (start < 0) start += n;
  // length <= n - start: start + length could overflow.
  TS_CHECK_INDEX(start >= 0 && start <= n && length >= 0 && length <= n - start, "[narrow] start ",
                 start, " + length ", length, " exceeds dimension size ", n, " of dim ", d,
                 " (shape ", sizes(), ")");
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().select(*this, d, index);
  TS_CHECK_INDEX(dim() > 0, "[select] cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "select");
  int64_t n = sizes()[d];
  TS_CHECK_INDEX(index >= -n && index < n, "[select] index ", index, " out of range for dim ", d,
                 " of size ", n, " (shape ", sizes(), ")");
  if (index < 0) index += n;
  if (any_distributed(*this)) {
    return distributed_op("select", {*this}, {.ints = {d, index}}, [d, index](const LocalCall& c) {
      return std::vector{c.in[0].select(d, index)};
    });
  }
  Shape sz = sizes(), st = strides();
  int64_t offset = storage_offset() + index * st[d];
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return view_of(*this, sz, st, offset);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  if (any_requires_grad(*this))
    return grad_hooks<ViewGradHooks>().slice(*this, d, start, end, step);
  TS_CHECK_INDEX(dim() > 0, "[slice] cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "slice");
  TS_CHECK_INDEX(step > 0, "[slice] step must be positive, got ", step);
  int64_t n = sizes()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  if (any_distributed(*this)) {
    return distributed_op("slice", {*this}, {.ints = {d, start, end, step}},
                          [d, start, end, step](const LocalCall& c) {
                            return std::vector{c.in[0].slice(d, start, end, step)};
                          });
  }
  Shape sz = sizes(), st = strides();
  int64_t offset = storage_offset() + start * st[d];
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return view_of(*this, sz, st, offset);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().unsqueeze(*this, d);
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  if (any_distributed(*this)) {
    return distributed_op("unsqueeze", {*this}, {.ints = {d}},
                          [d](const LocalCall& c) { return std::vector{c.in[0].unsqueeze(d)}; });
  }
  Shape sz = sizes(), st = strides();
  int64_t new_stride = d < dim() ? sz[d] * st[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::squeeze() const {
  if (any_distributed(*this)) {
    // Squeezing the global size-1 dims, named explicitly: a local shard may have other ones.
    Shape kept;
    for (int64_t i = 0; i < dim(); ++i) {
      if (sizes()[i] != 1) kept.push_back(sizes()[i]);
    }
    return reshape(kept);
  }
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().squeeze(*this);
  Shape sz, st;
  for (int64_t i = 0; i < dim(); ++i) {
    if (sizes()[i] != 1) {
      sz.push_back(sizes()[i]);
      st.push_back(strides()[i]);
    }
  }
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().squeeze_dim(*this, d);
  d = wrap_dim(d, dim(), "squeeze");
  if (any_distributed(*this))
    return sizes()[d] == 1 ? reshape(squeezed_shape(sizes(), d)) : view(sizes());
  if (sizes()[d] != 1) return view_of(*this, sizes(), strides(), storage_offset());
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::expand(const Shape& target) const {
  if (any_requires_grad(*this)) return grad_hooks<ViewGradHooks>().expand(*this, target);
  int64_t n = target.ndim();
  TS_CHECK_SHAPE(n >= dim(), "[expand] the number of sizes provided (", n,
                 ") must be greater or equal to the number of dimensions in the tensor (", dim(),
                 "): cannot expand ", sizes(), " to ", target);
  Shape sz(n), st(n);
  int64_t lead = n - dim();
  for (int64_t i = n - 1; i >= 0; --i) {
    if (i >= lead) {
      int64_t own = sizes()[i - lead];
      int64_t want = target[i] == -1 ? own : target[i];
      TS_CHECK_SHAPE(want >= 0, "[expand] invalid size ", target[i], " at dim ", i,
                     ": sizes must be >= 0, or -1 to keep the existing size; cannot expand ",
                     sizes(), " to ", target);
      TS_CHECK_SHAPE(own == want || own == 1, "[expand] the expanded size of the tensor (", want,
                     ") must match the existing size (", own, ") at non-singleton dimension ", i,
                     ": cannot expand ", sizes(), " to ", target);
      sz[i] = want;
      st[i] = own == want ? strides()[i - lead] : 0;
    } else {
      TS_CHECK_SHAPE(target[i] >= 0, "[expand] invalid size ", target[i],
                     " in a new leading dim (-1 is not allowed there): cannot expand ", sizes(),
                     " to ", target);
      sz[i] = target[i];
      st[i] = 0;
    }
  }
  checked_numel(sz, "expand");
  if (any_distributed(*this)) {
    return distributed_op("expand", {*this}, {.ints = sz}, [](const LocalCall& c) {
      return std::vector{c.in[0].expand(c.out_shapes[0])};
    });
  }
  return view_of(*this, sz, st, storage_offset());
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  TS_CHECK_INDEX(start_dim <= end_dim, "[flatten] start_dim ", start_dim,
                 " cannot come after end_dim ", end_dim);
  Shape sz;
  int64_t merged = 1;
  for (int64_t i = 0; i < dim(); ++i) {
    if (i < start_dim || i > end_dim) {
      sz.push_back(sizes()[i]);
    } else {
      merged *= sizes()[i];
      if (i == end_dim) sz.push_back(merged);
    }
  }
  return reshape(sz);
}

std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t d) const {
  TS_CHECK(chunks > 0, "[chunk] number of chunks must be greater than 0, got ", chunks);
  TS_CHECK_INDEX(dim() > 0, "[chunk] expects at least a 1-dimensional tensor");
  d = wrap_dim(d, dim(), "chunk");
  int64_t n = sizes()[d];
  if (n == 0) {
    // torch.chunk keeps the requested count when the dim is empty: `chunks` empty pieces.
    return split(std::vector<int64_t>(static_cast<size_t>(chunks), 0), d);
  }
  // torch.chunk: pieces of ceil(n / chunks), so possibly fewer than `chunks` of them.
  return split(n / chunks + (n % chunks != 0 ? 1 : 0), d);
}

std::vector<Tensor> Tensor::split(int64_t split_size, int64_t d) const {
  TS_CHECK_INDEX(dim() > 0, "[split] expects at least a 1-dimensional tensor");
  d = wrap_dim(d, dim(), "split");
  TS_CHECK(split_size >= 0, "[split] split_size must be non-negative, got ", split_size);
  int64_t n = sizes()[d];
  TS_CHECK(split_size > 0 || n == 0, "[split] split_size can only be 0 if dimension size is 0, ",
           "but got dimension size ", n);
  std::vector<Tensor> out;
  if (n == 0) {
    out.push_back(narrow(d, 0, 0));
    return out;
  }
  // Stepping by the piece taken, not by split_size: start + split_size may overflow.
  for (int64_t start = 0; start < n;) {
    const int64_t length = std::min(split_size, n - start);
    out.push_back(narrow(d, start, length));
    start += length;
  }
  return out;
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& split_sizes, int64_t d) const {
  TS_CHECK_INDEX(dim() > 0, "[split] expects at least a 1-dimensional tensor");
  d = wrap_dim(d, dim(), "split");
  int64_t total = 0;
  for (int64_t s : split_sizes) {
    TS_CHECK(s >= 0, "[split] split sizes must be non-negative, got ", Shape(split_sizes));
    TS_CHECK_SHAPE(!__builtin_add_overflow(total, s, &total), "[split] split sizes ",
                   Shape(split_sizes), " sum past int64");
  }
  TS_CHECK_SHAPE(total == sizes()[d], "[split] split sizes ", Shape(split_sizes), " sum to ", total,
                 " but dim ", d, " has size ", sizes()[d], " (shape ", sizes(), ")");
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : split_sizes) {
    out.push_back(narrow(d, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> Tensor::unbind(int64_t d) const {
  TS_CHECK_INDEX(dim() > 0, "[unbind] cannot be applied to a 0-dim tensor");
  d = wrap_dim(d, dim(), "unbind");
  std::vector<Tensor> out;
  for (int64_t i = 0; i < sizes()[d]; ++i) out.push_back(select(d, i));
  return out;
}

}  // namespace tessera
