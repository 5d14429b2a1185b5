// local_map (seeds/torch-local-map-source.py.txt): the seed's docstring example, gradients
// through the local function, plain arguments and outputs, and every error path of the seed
// without spmd_types (with it: local_map_spmd_types_test.cpp).

#include <catch2/catch.hpp>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

TEST_CASE("local_map: the seed's mm with an all_reduce inside equals one device",
          "[dtensor][local_map]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor w = ints({12, 8}, 1);
    const Tensor x = ints({8, 16}, 2);
    const Placements col_wise{Shard(1)};
    const Placements row_wise{Shard(0)};
    const LocalFn mm_allreduce = local_map(
        [&mesh](const std::vector<Tensor>& a) {
          const Tensor partial = mm(a[0], a[1]);
          mesh.get_group(0)->all_reduce(partial)->wait();
          return std::vector{partial};
        },
        {.out_placements = {Placements{Replicate()}},
         .in_placements = std::vector<std::optional<Placements>>{col_wise, row_wise},
         .device_mesh = mesh});
    const std::vector<Tensor> y =
        mm_allreduce({distribute_tensor(w, mesh, col_wise), distribute_tensor(x, mesh, row_wise)});
    if (y.size() != 1 || !y[0].is_distributed()) {
      f.push_back("the output is not one DTensor");
      return f;
    }
    expect_placements(f, "output", DTensor(y[0]), {Replicate()});
    expect_equal(f, "mm with all_reduce", y[0].full_tensor(), mm(w, x));
    return f;
  });
}

TEST_CASE("local_map: gradients, plain arguments and redistribute_inputs", "[dtensor][local_map]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor x = ints({6, 4}, 3);
    const Tensor w = ints({4, 3}, 4);
    // Rows of x times a replicated w, plus a plain bias: Shard(0) rows out.
    const LocalFn row_mm =
        local_map([](const std::vector<Tensor>& a) { return std::vector{mm(a[0], a[1]) + a[2]}; },
                  {.out_placements = {Placements{Shard(0)}},
                   .in_placements =
                       std::vector<std::optional<Placements>>{
                           Placements{Shard(0)}, Placements{Replicate()}, std::nullopt},
                   .redistribute_inputs = true});
    const Tensor bias = ones({3});
    const DTensor dx = distribute_tensor(x, mesh, {Replicate()});  // redistributed to S(0)
    const DTensor dw = distribute_tensor(w, mesh, {Replicate()});
    dx.requires_grad_();
    dw.requires_grad_();
    const std::vector<Tensor> out = row_mm({dx, dw, bias});
    expect_placements(f, "output", DTensor(out[0]), {Shard(0)});
    expect_equal(f, "value", out[0].full_tensor(), mm(x, w) + bias);
    sum(out[0] * out[0]).backward();
    const Tensor xr = x.clone().requires_grad_();
    const Tensor wr = w.clone().requires_grad_();
    sum((mm(xr, wr) + bias) * (mm(xr, wr) + bias)).backward();
    expect_equal(f, "grad x", dx.grad().full_tensor(), xr.grad());
    // w's local gradient on each rank covers its rows only: without an in_grad_placements hint
    // the gradient would be taken as Replicate; Partial(sum) sums the ranks' parts.
    if (!DTensor(dw.grad()).placements()[0].is_replicate()) {
      f.push_back("grad w is not Replicate");
    }
    // Without DTensor arguments local_map is fn itself.
    const std::vector<Tensor> plain = row_mm({x, w, bias});
    if (plain[0].is_distributed()) f.push_back("plain arguments gave a DTensor");
    expect_equal(f, "plain call", plain[0], mm(x, w) + bias);
    return f;
  });
}

TEST_CASE("local_map: in_grad_placements Partial sums the local gradients",
          "[dtensor][local_map]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor x = ints({6, 4}, 5);
    const Tensor w = ints({4, 3}, 6);
    const LocalFn row_mm = local_map(
        [](const std::vector<Tensor>& a) { return std::vector{mm(a[0], a[1])}; },
        {.out_placements = {Placements{Shard(0)}},
         .in_placements =
             std::vector<std::optional<Placements>>{Placements{Shard(0)}, Placements{Replicate()}},
         .in_grad_placements =
             std::vector<std::optional<Placements>>{Placements{Shard(0)}, Placements{Partial()}}});
    const DTensor dx = distribute_tensor(x, mesh, {Shard(0)});
    const DTensor dw = distribute_tensor(w, mesh, {Replicate()});
    dw.requires_grad_();
    sum(row_mm({dx, dw})[0]).backward();
    const Tensor wr = w.clone().requires_grad_();
    sum(mm(x, wr)).backward();
    expect_equal(f, "grad w", dw.grad().full_tensor(), wr.grad());
    return f;
  });
}

TEST_CASE("local_map: the seed's errors", "[dtensor][local_map]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const DTensor a = distribute_tensor(ints({4, 2}, 7), mesh, {Shard(0)});
    const auto identity = [](const std::vector<Tensor>& in) { return in; };
    using Specs = std::vector<std::optional<Placements>>;
    expect_error(f, "in_placements length",
                 [&] {
                   local_map(identity, {.in_placements = Specs{std::nullopt, std::nullopt}})({a});
                 },
                 {"in_placements length 2 does not match the number of input args 1"});
    expect_error(f, "mismatched placements",
                 [&] {
                   local_map(identity, {.out_placements = {Placements{Shard(0)}},
                                        .in_placements = Specs{Placements{Replicate()}}})({a});
                 },
                 {"mismatched placements", "S(0)", "R", "redistribute_inputs"});
    expect_error(f, "DTensor input without placements",
                 [&] { local_map(identity, {.in_placements = Specs{std::nullopt}})({a}); },
                 {"DTensor input 0", "expects placements"});
    expect_error(f, "in_grad_placements entry missing",
                 [&] {
                   local_map(identity, {.out_placements = {Placements{Shard(0)}},
                                        .in_grad_placements = Specs{std::nullopt}})({a});
                 },
                 {"expects in grad placements"});
    expect_error(f, "non-tensor input with placements",
                 [&] {
                   local_map(identity,
                             {.out_placements = {Placements{Shard(0)}, std::nullopt},
                              .in_placements = Specs{Placements{Shard(0)}, Placements{Shard(0)}}})(
                       {a, Tensor()});
                 },
                 {"Non-Tensor input 1", "expects None placements"});
    expect_error(f, "out_placements length",
                 [&] { local_map(identity, {.out_placements = {}})({a}); },
                 {"one PlacementType", "received 0 out_placements but 1 is expected"});
    expect_error(f, "non-tensor output with placements",
                 [&] {
                   local_map(
                       [](const std::vector<Tensor>&) { return std::vector<Tensor>{Tensor()}; },
                       {.out_placements = {Placements{Shard(0)}}})({a});
                 },
                 {"Non-tensor output 0", "expects None placements"});
    expect_error(f, "DTensor output",
                 [&] {
                   local_map([&](const std::vector<Tensor>&) { return std::vector<Tensor>{a}; },
                             {.out_placements = {Placements{Shard(0)}}})({a});
                 },
                 {"output 0 is a DTensor"});
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
