// A transformer block (pre-norm attention + MLP with residuals), written once against Tensor,
// on DTensors: batch-sharded (data parallel), head- and hidden-sharded (tensor parallel, with
// manual placements: the parallel styles come with the modules-on-meshes issue) and both on a
// 2x2 mesh. Loss and every parameter gradient must equal the single-device run, and
// head-sharded attention must run without a collective.

#include <catch2/catch.hpp>
#include <map>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

constexpr int64_t kBatch = 4, kSeq = 5, kModel = 8, kHeads = 4, kHidden = 12;

struct Params {
  std::map<std::string, Tensor> t;
  const Tensor& operator[](const std::string& name) const { return t.at(name); }
};

// Small values (multiples of 0.1) so that softmax and gelu stay in their interesting ranges.
Params make_params() {
  Params p;
  uint64_t seed = 100;
  auto add = [&](const std::string& name, const Shape& shape) {
    p.t[name] = ints(shape, seed++) / 10;
  };
  add("ln1.w", {kModel});
  add("ln1.b", {kModel});
  add("wq", {kModel, kModel});
  add("wk", {kModel, kModel});
  add("wv", {kModel, kModel});
  add("wo", {kModel, kModel});
  add("ln2.w", {kModel});
  add("ln2.b", {kModel});
  add("up", {kModel, kHidden});
  add("down", {kHidden, kModel});
  return p;
}

// [B, S, D] -> [B, H, S, D / H] and back; sizes are the global ones, so the same code runs on
// plain tensors and DTensors.
Tensor split_heads(const Tensor& t) {
  return t.view({t.size(0), t.size(1), kHeads, kModel / kHeads}).transpose(1, 2);
}
Tensor merge_heads(const Tensor& t) {
  return t.transpose(1, 2).reshape({t.size(0), t.size(2), kModel});
}

Tensor block(const Tensor& x, const Params& p) {
  const Tensor h = layer_norm(x, {kModel}, p["ln1.w"], p["ln1.b"]);
  const Tensor q = split_heads(matmul(h, p["wq"]));
  const Tensor k = split_heads(matmul(h, p["wk"]));
  const Tensor v = split_heads(matmul(h, p["wv"]));
  const Tensor attn = scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
  const Tensor x1 = x + matmul(merge_heads(attn), p["wo"]);
  const Tensor h2 = layer_norm(x1, {kModel}, p["ln2.w"], p["ln2.b"]);
  return x1 + matmul(gelu(matmul(h2, p["up"])), p["down"]);
}

Tensor loss_of(const Tensor& y) { return sum(y * y) / 7; }

struct Layout {
  std::string name;
  Shape mesh;
  Placements x;                              // the input's
  std::map<std::string, Placements> params;  // absent: Replicate on every mesh dim
};

// Tensor-parallel placements on mesh dim `tp` of an n-D mesh (Replicate elsewhere): q/k/v and
// up column-sharded (heads / hidden), wo and down row-sharded.
std::map<std::string, Placements> tensor_parallel(size_t ndim, size_t tp) {
  auto on_tp = [&](Placement p) {
    Placements ps(ndim, Replicate());
    ps[tp] = p;
    return ps;
  };
  return {{"wq", on_tp(Shard(1))}, {"wk", on_tp(Shard(1))}, {"wv", on_tp(Shard(1))},
          {"wo", on_tp(Shard(0))}, {"up", on_tp(Shard(1))}, {"down", on_tp(Shard(0))}};
}

Failures run_layout(const DeviceMesh& mesh, const Layout& layout) {
  Failures f;
  const Params p = make_params();
  const Tensor x = ints({kBatch, kSeq, kModel}, 7) / 10;
  // Single device.
  Params leaves;
  for (const auto& [name, t] : p.t) leaves.t[name] = t.clone().requires_grad_();
  const Tensor want = loss_of(block(x, leaves));
  want.backward();
  // Sharded.
  Params sharded;
  const Placements all_r(static_cast<size_t>(mesh.ndim()), Replicate());
  for (const auto& [name, t] : p.t) {
    const auto it = layout.params.find(name);
    const DTensor d = distribute_tensor(t, mesh, it == layout.params.end() ? all_r : it->second);
    d.requires_grad_();
    sharded.t[name] = d;
  }
  const Tensor got = loss_of(block(distribute_tensor(x, mesh, layout.x), sharded));
  got.backward();
  auto close = [&](const std::string& what, const Tensor& a, const Tensor& b) {
    if (!allclose(a, b, 1e-10, 1e-12)) {
      std::ostringstream os;
      os << layout.name << ": " << what << " differs from one device\n got " << a << "\n want "
         << b;
      f.push_back(os.str());
    }
  };
  close("loss", got.full_tensor(), want);
  for (const auto& [name, t] : sharded.t) {
    const Tensor g = t.grad();
    if (!g.defined()) {
      f.push_back(layout.name + ": " + name + " got no gradient");
      continue;
    }
    close("grad " + name, g.full_tensor(), leaves[name].grad());
  }
  return f;
}

TEST_CASE("transformer block: batch-, head/hidden- and 2-D-sharded equal one device",
          "[dtensor][ops][transformer]") {
  const std::vector<Layout> layouts{
      {"data parallel (mesh 4, batch sharded)", {4}, {Shard(0)}, {}},
      {"tensor parallel (mesh 4, heads and hidden sharded)",
       {4},
       {Replicate()},
       tensor_parallel(1, 0)},
      {"2-D (mesh 2x2: batch on dim 0, heads and hidden on dim 1)",
       {2, 2},
       {Shard(0), Replicate()},
       tensor_parallel(2, 1)},
  };
  for (const Layout& layout : layouts) {
    INFO(layout.name);
    on_mesh(layout.mesh, [&](const DeviceMesh& mesh) { return run_layout(mesh, layout); });
  }
}

TEST_CASE("head-sharded and batch-sharded attention run without a collective",
          "[dtensor][ops][transformer][comm]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor q = ints({2, 4, 5, 3}, 1) / 10;
    const Tensor k = ints({2, 4, 6, 3}, 2) / 10;
    const Tensor v = ints({2, 4, 6, 2}, 3) / 10;
    const Tensor want = scaled_dot_product_attention(q, k, v);
    const Placements ps{Shard(0), Shard(1)};
    const DTensor dq = distribute_tensor(q, mesh, ps);
    const DTensor dk = distribute_tensor(k, mesh, ps);
    const DTensor dv = distribute_tensor(v, mesh, ps);
    debug::CommDebugMode mode;
    const DTensor got(scaled_dot_product_attention(dq, dk, dv));
    if (mode.get_total_counts() != 0) {
      f.push_back("attention issued collectives:\n" + mode.tracing_table());
    }
    expect_placements(f, "attention output", got, ps);
    if (!allclose(got.full_tensor(), want, 1e-12, 1e-14)) f.push_back("attention differs");
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
