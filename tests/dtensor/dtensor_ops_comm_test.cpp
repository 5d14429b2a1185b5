// Collective counts of canonical ops on DTensors (Note [Choosing placements for an op] in
// dtensor/sharding_rule.h): for each case, the collectives the op issues (counted with
// CommDebugMode), the placements of its result, and that the result's full_tensor() equals the
// single-device op on the inputs' full tensors. Inputs are float64 with small integer values, so
// every comparison is exact.

#include <catch2/catch.hpp>
#include <map>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

using Counts = std::map<std::string, int64_t>;

std::string describe(const Counts& counts) {
  std::ostringstream os;
  os << "{";
  for (const auto& [name, n] : counts) os << " " << name << ": " << n;
  os << " }";
  return os.str();
}

// The counts `mode` saw must be exactly `expected` (names with a zero count may be left out).
void expect_counts(Failures& f, const std::string& what, const debug::CommDebugMode& mode,
                   const Counts& expected) {
  Counts got;
  for (const auto& [name, n] : mode.get_comm_counts()) {
    if (n != 0) got[name] = n;
  }
  if (got != expected) {
    f.push_back(what + ": collectives " + describe(got) + ", expected " + describe(expected) +
                "\n" + mode.tracing_table());
  }
}

TEST_CASE("ops comm: mm(S(0), R) runs locally and stays S(0)", "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 6}, 1), b = ints({6, 5}, 2);
    const DTensor da = distribute_tensor(a, mesh, {Shard(0)});
    const DTensor db = distribute_tensor(b, mesh, {Replicate()});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = mm(da, db);
      expect_counts(f, "mm(S(0), R)", mode, {});
    }
    expect_placements(f, "mm(S(0), R)", out, {Shard(0)});
    expect_equal(f, "mm(S(0), R)", out.full_tensor(), mm(a, b));
    return f;
  });
}

TEST_CASE("ops comm: mm(S(1), S(0)) is P(sum) for free; full_tensor is one all_reduce",
          "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 8}, 3), b = ints({8, 5}, 4);
    const DTensor da = distribute_tensor(a, mesh, {Shard(1)});
    const DTensor db = distribute_tensor(b, mesh, {Shard(0)});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = mm(da, db);
      expect_counts(f, "mm(S(1), S(0))", mode, {});
    }
    expect_placements(f, "mm(S(1), S(0))", out, {Partial()});
    Tensor full;
    {
      debug::CommDebugMode mode;
      full = out.full_tensor();
      expect_counts(f, "full_tensor of P(sum)", mode, {{"all_reduce", 1}});
    }
    expect_equal(f, "mm(S(1), S(0))", full, mm(a, b));
    return f;
  });
}

TEST_CASE("ops comm: sum over the sharded dim is P(sum) without a collective",
          "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 5}, 5);
    const DTensor da = distribute_tensor(a, mesh, {Shard(0)});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = sum(da, {0});
      expect_counts(f, "sum(S(0), dim 0)", mode, {});
    }
    expect_placements(f, "sum(S(0), dim 0)", out, {Partial()});
    expect_equal(f, "sum(S(0), dim 0)", out.full_tensor(), sum(a, {0}));
    // Over every dim: a 0-dim P(sum).
    {
      debug::CommDebugMode mode;
      out = sum(da);
      expect_counts(f, "sum(S(0))", mode, {});
    }
    expect_placements(f, "sum(S(0))", out, {Partial()});
    expect_equal(f, "sum(S(0))", out.full_tensor(), sum(a));
    return f;
  });
}

TEST_CASE("ops comm: add of matching shards, and of a broadcast Replicate, is local",
          "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 5}, 6), b = ints({8, 5}, 7), row = ints({1, 5}, 8);
    const DTensor da = distribute_tensor(a, mesh, {Shard(0)});
    const DTensor db = distribute_tensor(b, mesh, {Shard(0)});
    const DTensor drow = distribute_tensor(row, mesh, {Replicate()});
    DTensor same, bcast;
    {
      debug::CommDebugMode mode;
      same = add(da, db);
      expect_counts(f, "add(S(0), S(0))", mode, {});
    }
    {
      debug::CommDebugMode mode;
      bcast = add(da, drow);
      expect_counts(f, "add(S(0) [8, 5], R [1, 5])", mode, {});
    }
    expect_placements(f, "add(S(0), S(0))", same, {Shard(0)});
    expect_placements(f, "add(S(0) [8, 5], R [1, 5])", bcast, {Shard(0)});
    expect_equal(f, "add(S(0), S(0))", same.full_tensor(), add(a, b));
    expect_equal(f, "add(S(0) [8, 5], R [1, 5])", bcast.full_tensor(), add(a, row));
    return f;
  });
}

TEST_CASE("ops comm: relu of P(sum) reduces once (reduce_scatter), exactly",
          "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor full = ints({8, 5}, 9), noise = ints({8, 5}, 10);
    // Lopsided partial values (rank 0: full - 3 noise, the others: noise), so relu of each part
    // summed would differ from relu of the sum.
    const int64_t rank = mesh.get_local_rank(0);
    const Tensor local = rank == 0 ? full - noise * 3.0 : noise.clone();
    const DTensor p = DTensor::from_local(local, mesh, {Partial()});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = relu(p);
      // relu keeps no P(sum) (Note [Partial linearity]); of the inputs relu accepts, S(0) is the
      // cheapest to reach from P(sum): one reduce_scatter (an all_reduce to R moves more).
      expect_counts(f, "relu(P(sum))", mode, {{"reduce_scatter_tensor", 1}});
    }
    expect_placements(f, "relu(P(sum))", out, {Shard(0)});
    expect_equal(f, "relu(P(sum))", out.full_tensor(), relu(full));
    // The same Partial made by distribute_tensor.
    const DTensor q = distribute_tensor(full, mesh, {Partial()});
    {
      debug::CommDebugMode mode;
      out = relu(q);
      expect_counts(f, "relu(distributed P(sum))", mode, {{"reduce_scatter_tensor", 1}});
    }
    expect_placements(f, "relu(distributed P(sum))", out, {Shard(0)});
    expect_equal(f, "relu(distributed P(sum))", out.full_tensor(), relu(full));
    return f;
  });
}

TEST_CASE("ops comm: view merging a sharded dim with its neighbour", "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 4}, 11);
    // S(0) of [8, 4] is the first dim of the merged group and splits evenly: each rank's rows
    // are one contiguous range of the 32 elements.
    {
      const DTensor da = distribute_tensor(a, mesh, {Shard(0)});
      DTensor out;
      {
        debug::CommDebugMode mode;
        out = da.view({32});
        expect_counts(f, "[8, 4] S(0) view [32]", mode, {});
      }
      expect_placements(f, "[8, 4] S(0) view [32]", out, {Shard(0)});
      expect_equal(f, "[8, 4] S(0) view [32]", out.full_tensor(), a.view({32}));
    }
    // S(1) is not the group's first dim: the view needs the dim whole or moved to dim 0; moving
    // the shard to dim 0 (one all_to_all) costs less than gathering (one all_gather), and the
    // result is then S(0).
    {
      const DTensor da = distribute_tensor(a, mesh, {Shard(1)});
      DTensor out;
      {
        debug::CommDebugMode mode;
        out = da.view({32});
        expect_counts(f, "[8, 4] S(1) view [32]", mode, {{"all_to_all_single", 1}});
      }
      expect_placements(f, "[8, 4] S(1) view [32]", out, {Shard(0)});
      expect_equal(f, "[8, 4] S(1) view [32]", out.full_tensor(), a.view({32}));
    }
    return f;
  });
}

TEST_CASE("ops comm: a view leaving an unevenly sharded dim as it is keeps the shard",
          "[dtensor][ops][comm]") {
  // [d0, 2, 2, 2] S(0) viewed as [d0, 2, 4], d0 = 1 or 5 on 4 ranks (uneven, some ranks
  // empty): the sharded dim is a group of its own on both sides, so each rank views its own
  // block, with no collective, and the result shares the input's data (as PyTorch).
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    for (const int64_t d0 : {int64_t{1}, int64_t{5}}) {
      const std::string what = "[" + std::to_string(d0) + ", 2, 2, 2] S(0) view [d0, 2, 4]";
      const Tensor a = ints({d0, 2, 2, 2}, 17);
      const DTensor da = distribute_tensor(a, mesh, {Shard(0)});
      DTensor out;
      {
        debug::CommDebugMode mode;
        out = da.view({d0, 2, 4});
        expect_counts(f, what, mode, {});
      }
      expect_placements(f, what, out, {Shard(0)});
      expect_equal(f, what, out.full_tensor(), a.view({d0, 2, 4}));
      if (!out.to_local().is_alias_of(da.to_local())) {
        f.push_back(what + ": the local result does not share the input's data");
      }
    }
    return f;
  });
}

TEST_CASE("ops comm: on a mesh dim of size 1 an op keeps the placements it can keep",
          "[dtensor][ops][comm]") {
  // Every transition is free on one rank, so cost alone cannot choose: [S(2)] viewed as
  // [16, 4] must stay a shard of the dim its elements land on (S(1)), not move to an equivalent
  // S(0) that a later op (cross_entropy under loss parallel) refuses.
  on_mesh({1}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({2, 8, 4}, 13);
    const DTensor da = distribute_tensor(a, mesh, {Shard(2)});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = da.reshape({-1, 4});
      expect_counts(f, "[2, 8, 4] S(2) reshape [16, 4]", mode, {});
    }
    expect_placements(f, "[2, 8, 4] S(2) reshape [16, 4]", out, {Shard(1)});
    expect_equal(f, "[2, 8, 4] S(2) reshape [16, 4]", out.full_tensor(), a.reshape({16, 4}));
    const DTensor sum = da + da;
    expect_placements(f, "[2, 8, 4] S(2) + S(2)", sum, {Shard(2)});
    return f;
  });
}

TEST_CASE("ops comm: [12, 8] S(1) viewed as [16, 6] equals the single-device view",
          "[dtensor][ops][comm]") {
  // torch's known wrong case (Note [Sharded reshape] in dtensor/rules/view.cpp): the local
  // [12, 2] shards cannot be viewed as [16, 6] pieces.
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({12, 8}, 12);
    const DTensor da = distribute_tensor(a, mesh, {Shard(1)});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = da.view({16, 6});
      // As above: the shard moves to dim 0 (one all_to_all), where the view keeps it.
      expect_counts(f, "[12, 8] S(1) view [16, 6]", mode, {{"all_to_all_single", 1}});
    }
    expect_placements(f, "[12, 8] S(1) view [16, 6]", out, {Shard(0)});
    expect_equal(f, "[12, 8] S(1) view [16, 6]", out.full_tensor(), a.view({16, 6}));
    return f;
  });
}

TEST_CASE("ops comm: the gradient of a replicated weight is one all_reduce in backward",
          "[dtensor][ops][comm]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor xf = ints({8, 6}, 13), wf = ints({6, 5}, 14);
    const DTensor x = distribute_tensor(xf, mesh, {Shard(0)});
    const DTensor w = distribute_tensor(wf, mesh, {Replicate()});
    x.requires_grad_();
    w.requires_grad_();
    DTensor y;
    {
      debug::CommDebugMode mode;
      y = mm(x, w).sum();
      expect_counts(f, "forward mm(S(0), R).sum()", mode, {});
    }
    expect_placements(f, "mm(S(0), R).sum()", y, {Partial()});
    {
      // x's gradient stays S(0) (local); w was used whole by every rank for its rows of the
      // result, so its gradient sums over the ranks.
      debug::CommDebugMode mode;
      y.backward();
      expect_counts(f, "backward of mm(S(0), R).sum()", mode, {{"all_reduce", 1}});
    }
    // The single-device gradients.
    const Tensor xr = xf.clone(), wr = wf.clone();
    xr.requires_grad_();
    wr.requires_grad_();
    mm(xr, wr).sum().backward();
    const DTensor wg = w.grad(), xg = x.grad();
    if (!wg.defined() || !xg.defined()) {
      f.push_back("missing gradient");
      return f;
    }
    expect_placements(f, "w.grad()", wg, {Replicate()});
    expect_placements(f, "x.grad()", xg, {Shard(0)});
    expect_equal(f, "w.grad()", wg.full_tensor(), wr.grad());
    expect_equal(f, "x.grad()", xg.full_tensor(), xr.grad());
    return f;
  });
}

TEST_CASE("ops comm: mm on a 2x2 mesh shards both output dims without a collective",
          "[dtensor][ops][comm]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor a = ints({8, 6}, 15), b = ints({6, 4}, 16);
    const DTensor da = distribute_tensor(a, mesh, {Shard(0), Replicate()});
    const DTensor db = distribute_tensor(b, mesh, {Replicate(), Shard(1)});
    DTensor out;
    {
      debug::CommDebugMode mode;
      out = mm(da, db);
      expect_counts(f, "2x2 mm([S(0), R], [R, S(1)])", mode, {});
    }
    expect_placements(f, "2x2 mm([S(0), R], [R, S(1)])", out, {Shard(0), Shard(1)});
    expect_equal(f, "2x2 mm([S(0), R], [R, S(1)])", out.full_tensor(), mm(a, b));
    return f;
  });
}

// Note [Backward in the choice] (dtensor/dispatch.cpp): with the normalized dim sharded and an
// affine weight, PyTorch 2.15 all_gathers x in forward and again in backward (2 collectives,
// measured); Tessera gathers once and its backward communicates nothing (the gradient of the
// all_gather of a Replicate gradient is the local chunk), with the single-device gradients.
TEST_CASE("ops comm: layer_norm over a sharded normalized dim gathers once, backward is local",
          "[dtensor][ops][comm]") {
  const Tensor x = ints({4, 8}, 3) / 10;
  const Tensor w = ints({8}, 4) / 10 + 1;
  const Tensor b = ints({8}, 5) / 10;
  Tensor xr = x.clone().requires_grad_(), wr = w.clone().requires_grad_(),
         br = b.clone().requires_grad_();
  sum(layer_norm(xr, {8}, wr, br) * x).backward();
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    const Tensor xd = distribute_tensor(x, mesh, {Shard(1)}).requires_grad_();
    const Tensor wd = distribute_tensor(w, mesh, {Replicate()}).requires_grad_();
    const Tensor bd = distribute_tensor(b, mesh, {Replicate()}).requires_grad_();
    debug::CommDebugMode mode;
    const Tensor out = layer_norm(xd, {8}, wd, bd);
    const int64_t forward = mode.get_total_counts();
    const Tensor loss = sum(out * distribute_tensor(x, mesh, {Replicate()}));
    const int64_t before_backward = mode.get_total_counts();
    loss.backward();
    if (forward != 1 || mode.get_total_counts() != before_backward) {
      f.push_back("collectives:\n" + mode.tracing_table());
    }
    const std::vector<std::pair<Tensor, Tensor>> grads{
        {xd.grad(), xr.grad()}, {wd.grad(), wr.grad()}, {bd.grad(), br.grad()}};
    for (const auto& [got, want] : grads) {
      if (!allclose(got.full_tensor(), want, 1e-12, 1e-12)) f.push_back("a gradient differs");
    }
    if (DTensor(xd.grad()).placements() != Placements{Shard(1)}) f.push_back("x grad placement");
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
