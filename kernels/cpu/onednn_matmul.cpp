// oneDNN matmul: per-thread engine, stream and cache of primitives keyed by geometry. Also the
// one seam where oneDNN's errors become tessera::Error (TS_DNNL_CALL).

#include "tessera/kernels/cpu/onednn_matmul.h"

#include <omp.h>
#include <oneapi/dnnl/dnnl_debug.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <list>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::cpu {

namespace detail {

// Throws OutOfMemoryError for dnnl_out_of_memory, Error otherwise; both start with "[op]".
[[noreturn]] void throw_dnnl_error(const char* op, const char* expr, const dnnl::error& e) {
  std::string msg =
      tessera::detail::concat_message("[", op, "] oneDNN call `", expr, "` failed: ", e.what(),
                                      " (status ", dnnl_status2str(e.status), ")");
  if (e.status == dnnl_out_of_memory) throw OutOfMemoryError(msg);
  throw Error(msg);
}

template <typename F>
auto dnnl_call(const char* op, const char* expr, F&& f) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw_dnnl_error(op, expr, e);
  }
}

}  // namespace detail

// Evaluates `expr` (a oneDNN call) and returns its value; a dnnl::error it throws becomes a
// tessera::Error naming `op`, the failing expression and oneDNN's status.
#define TS_DNNL_CALL(op, expr) ::tessera::cpu::detail::dnnl_call(op, #expr, [&]() { return expr; })

namespace {

using dnnl::memory;

constexpr const char* kOp = "matmul";
// Distinct geometries one thread keeps primitives for; a training step uses a few dozen.
constexpr size_t kCacheCapacity = 64;

memory::data_type dnnl_dtype(DType t) {
  if (t == kFloat32) return memory::data_type::f32;
  if (t == kBFloat16) return memory::data_type::bf16;
  TS_INTERNAL_ASSERT(t == kFloat16, "[matmul] oneDNN path called with dtype ", t);
  return memory::data_type::f16;
}

// Note [oneDNN matmul geometry]
// oneDNN broadcasts a batch dim of size 1 in src or weights and accepts any strides in batch dims
// (its gemm-based kernel handles gaps and interleaved batches). So batch dims are merged where all
// three tensors are contiguous across them (fewer dims, more cache hits), a batch dim of stride 0
// becomes size 1, and size-1 dims get canonical strides so that equal problems get equal keys.
struct Geometry {
  std::array<memory::dims, 3> dims;     // out, a, b
  std::array<memory::dims, 3> strides;  // out, a, b
};

std::optional<Geometry> describe(const Tensor& out, const Tensor& a, const Tensor& b) {
  const std::array<const Tensor*, 3> ts{&out, &a, &b};
  struct BatchDim {
    int64_t size;
    std::array<int64_t, 3> stride;
  };
  std::vector<BatchDim> batch;
  for (int64_t d = 0; d < out.dim() - 2; ++d) {
    const int64_t size = out.size(d);
    if (size == 1) continue;
    const std::array<int64_t, 3> st{out.stride(d), a.stride(d), b.stride(d)};
    if (!batch.empty()) {
      BatchDim& outer = batch.back();
      bool mergeable = true;
      for (size_t k = 0; k < 3; ++k) mergeable = mergeable && outer.stride[k] == st[k] * size;
      if (mergeable) {
        outer.size *= size;
        outer.stride = st;
        continue;
      }
    }
    batch.push_back({size, st});
  }
  if (batch.size() + 2 > DNNL_MAX_NDIMS) return std::nullopt;

  Geometry g;
  for (size_t k = 0; k < 3; ++k) {
    const Tensor& t = *ts[k];
    const int64_t rows = t.size(-2), cols = t.size(-1);
    memory::dims& dims = g.dims[k];
    memory::dims& strides = g.strides[k];
    for (const BatchDim& bd : batch) {
      dims.push_back(k > 0 && bd.stride[k] == 0 ? 1 : bd.size);
      strides.push_back(bd.stride[k]);
    }
    const auto [rs, cs] = normalized_strides(rows, cols, t.stride(-2), t.stride(-1));
    dims.insert(dims.end(), {rows, cols});
    strides.insert(strides.end(), {rs, cs});
    // Broadcast batch dims: the span of the dims inside them, as if the tensor were dense.
    int64_t span = std::max(rs * rows, cs * cols);
    for (size_t d = batch.size(); d-- > 0;) {
      if (dims[d] == 1) strides[d] = span;
      span = std::max(span, strides[d] * dims[d]);
    }
  }
  return g;
}

struct CachedMatmul {
  bool supported = false;
  dnnl::matmul primitive;
  std::array<memory, 3> mem;  // out, a, b: their data handles are set per call
  memory bias;                // likewise, when the primitive adds a bias
  memory scratchpad;          // likewise; empty when the primitive needs none
  std::unordered_map<int, memory> args;
};

// A bias row [1, ..., 1, N] broadcast over out's other dims, as oneDNN's bias argument expects.
memory::desc bias_desc(const memory::dims& out_dims, memory::data_type type) {
  memory::dims dims(out_dims.size(), 1);
  dims.back() = out_dims.back();
  memory::dims strides(out_dims.size(), out_dims.back());
  strides.back() = 1;
  return TS_DNNL_CALL(kOp, memory::desc(dims, type, strides));
}

CachedMatmul create(const Geometry& g, memory::data_type type, bool with_bias,
                    const dnnl::engine& engine) {
  CachedMatmul entry;
  std::array<memory::desc, 3> mds;
  for (size_t k = 0; k < 3; ++k) {
    mds[k] = TS_DNNL_CALL(kOp, memory::desc(g.dims[k], type, g.strides[k]));
  }
  const memory::desc bias_md = with_bias ? bias_desc(g.dims[0], type) : memory::desc();
  const auto desc = TS_DNNL_CALL(kOp, dnnl::matmul::desc(mds[1], mds[2], bias_md, mds[0]));
  // The scratchpad (AMX and brgemm kernels copy blocks of the operands into it) comes from
  // Tessera's caching allocator per call: in oneDNN's own mode it is allocated and freed by every
  // execution, which took 1024^3 bf16 products on one Xeon thread from 2.64 to 2.79 ms (median
  // execution times, ONEDNN_VERBOSE), 5% behind libtorch, whose ideep passes its own.
  dnnl::primitive_attr attr;
  TS_DNNL_CALL(kOp, attr.set_scratchpad_mode(dnnl::scratchpad_mode::user));
  const auto pd = TS_DNNL_CALL(kOp, dnnl::matmul::primitive_desc(desc, attr, engine, true));
  if (!pd || std::string_view(pd.impl_info_str()).starts_with("ref")) return entry;
  entry.primitive = TS_DNNL_CALL(kOp, dnnl::matmul(pd));
  for (size_t k = 0; k < 3; ++k) {
    entry.mem[k] = TS_DNNL_CALL(kOp, memory(mds[k], engine, DNNL_MEMORY_NONE));
  }
  entry.args = {
      {DNNL_ARG_DST, entry.mem[0]}, {DNNL_ARG_SRC, entry.mem[1]}, {DNNL_ARG_WEIGHTS, entry.mem[2]}};
  if (with_bias) {
    entry.bias = TS_DNNL_CALL(kOp, memory(bias_md, engine, DNNL_MEMORY_NONE));
    entry.args.emplace(DNNL_ARG_BIAS, entry.bias);
  }
  const memory::desc scratchpad_md = TS_DNNL_CALL(kOp, pd.scratchpad_desc());
  if (scratchpad_md.get_size() > 0) {
    entry.scratchpad = TS_DNNL_CALL(kOp, memory(scratchpad_md, engine, DNNL_MEMORY_NONE));
    entry.args.emplace(DNNL_ARG_SCRATCHPAD, entry.scratchpad);
  }
  entry.supported = true;
  return entry;
}

using Key = std::vector<int64_t>;

struct KeyHash {
  size_t operator()(const Key& key) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t v : key) h = (h ^ static_cast<uint64_t>(v)) * 1099511628211ull;
    return static_cast<size_t>(h);
  }
};

// Least-recently-used cache of primitives. Creating one costs tens of microseconds, executing a
// small one a few: reuse is what makes small matmuls cheap.
class MatmulCache {
 public:
  template <typename Make>
  CachedMatmul& get(Key key, const Make& make) {
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    CachedMatmul entry = make();
    lru_.emplace_front(key, std::move(entry));
    index_.emplace(std::move(key), lru_.begin());
    if (lru_.size() > kCacheCapacity) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return lru_.front().second;
  }

 private:
  using Entry = std::pair<Key, CachedMatmul>;
  std::list<Entry> lru_;
  std::unordered_map<Key, std::list<Entry>::iterator, KeyHash> index_;
};

struct DnnlContext {
  dnnl::engine engine;
  dnnl::stream stream;
  MatmulCache cache;
  DnnlContext()
      : engine(TS_DNNL_CALL(kOp, dnnl::engine(dnnl::engine::kind::cpu, 0))),
        stream(TS_DNNL_CALL(kOp, dnnl::stream(engine))) {}
};

DnnlContext& context() {
  thread_local DnnlContext ctx;
  return ctx;
}

}  // namespace

bool onednn_available() { return true; }

bool onednn_matmul(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias) {
  const std::optional<Geometry> g = describe(out, a, b);
  if (!g) return false;
  const memory::data_type type = dnnl_dtype(out.dtype());
  const bool with_bias = bias.defined();
  TS_INTERNAL_ASSERT(!with_bias || (bias.dim() == 1 && bias.size(0) == out.size(-1) &&
                                    bias.is_contiguous() && bias.dtype() == out.dtype()),
                     "[matmul] oneDNN bias of shape ", bias.sizes(), " for an output of shape ",
                     out.sizes());
  // Primitives pick their blocking for the thread count they are created under.
  Key key{static_cast<int64_t>(type), omp_get_max_threads(), with_bias ? 1 : 0};
  for (size_t k = 0; k < 3; ++k) {
    key.push_back(static_cast<int64_t>(g->dims[k].size()));
    key.insert(key.end(), g->dims[k].begin(), g->dims[k].end());
    key.insert(key.end(), g->strides[k].begin(), g->strides[k].end());
  }
  DnnlContext& ctx = context();
  CachedMatmul& entry =
      ctx.cache.get(std::move(key), [&] { return create(*g, type, with_bias, ctx.engine); });
  if (!entry.supported) return false;
  const std::array<const Tensor*, 3> ts{&out, &a, &b};
  for (size_t k = 0; k < 3; ++k) {
    TS_DNNL_CALL(kOp, entry.mem[k].set_data_handle(ts[k]->raw_data()));
  }
  if (with_bias) TS_DNNL_CALL(kOp, entry.bias.set_data_handle(bias.raw_data()));
  Tensor scratchpad;  // held until the execution is done
  if (entry.scratchpad) {
    const int64_t bytes = static_cast<int64_t>(entry.scratchpad.get_desc().get_size());
    scratchpad = Tensor::make_empty({bytes}, kUInt8, Device::cpu());
    TS_DNNL_CALL(kOp, entry.scratchpad.set_data_handle(scratchpad.raw_data()));
  }
  TS_DNNL_CALL(kOp, entry.primitive.execute(ctx.stream, entry.args));
  TS_DNNL_CALL(kOp, ctx.stream.wait());
  return true;
}

}  // namespace tessera::cpu
