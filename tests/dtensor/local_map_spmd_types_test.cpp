// local_map(..., spmd_types = true) (seeds/torch-local-map-source.py.txt; Note [Local SPMD
// types] in dtensor/spmd_types/local_types.h): the seed's docstring example with typed
// collectives equals one device, forward and backward; the notes' typing pattern; the gradient
// placements each output type gives (checked through gradients equal to one device's); the
// typed collectives' backward; and every typing Error, naming the op and the mesh dim.

#include <catch2/catch.hpp>

#include "tessera/dtensor/spmd_types/collectives.h"
#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

using spmd::LocalType;
using spmd::LocalTypes;
using Specs = std::vector<std::optional<Placements>>;

void expect_types(Failures& f, const std::string& what, const Tensor& t,
                  const LocalTypes& expected) {
  const std::optional<LocalTypes> got = spmd::local_types(t);
  if (!got.has_value()) {
    f.push_back(what + ": untyped, expected " + spmd::to_string(expected));
  } else if (*got != expected) {
    f.push_back(what + ": types " + spmd::to_string(*got) + ", expected " +
                spmd::to_string(expected));
  }
}

TEST_CASE("local_map spmd_types: the seed's mm with an all_reduce equals one device",
          "[dtensor][local_map][spmd_types]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor w = ints({12, 8}, 1);
    const Tensor x = ints({8, 16}, 2);
    const Placements col_wise{Shard(1)};
    const Placements row_wise{Shard(0)};
    const LocalFn mm_allreduce = local_map(
        [&f](const std::vector<Tensor>& a) {
          expect_types(f, "W", a[0], {LocalType::kV});
          expect_types(f, "X", a[1], {LocalType::kV});
          // Contracting the sharded dim of V x V gives this rank's part: V read as P.
          const Tensor partial_sum = mm(a[0], a[1]);
          expect_types(f, "mm", partial_sum, {LocalType::kV});
          return std::vector{spmd::all_reduce(partial_sum, 0, LocalType::kV, LocalType::kR)};
        },
        {.out_placements = {Placements{Replicate()}},
         .in_placements = Specs{col_wise, row_wise},
         .device_mesh = mesh,
         .spmd_types = true});
    const DTensor dw = distribute_tensor(w, mesh, col_wise);
    const DTensor dx = distribute_tensor(x, mesh, row_wise);
    dw.requires_grad_();
    dx.requires_grad_();
    const DTensor y = mm_allreduce({dw, dx})[0];
    expect_placements(f, "output", y, {Replicate()});
    expect_equal(f, "forward", y.full_tensor(), mm(w, x));
    // R output -> gradient Partial: the all_reduce's backward sums the ranks' parts once.
    sum(y * y).backward();
    const Tensor wr = w.clone().requires_grad_();
    const Tensor xr = x.clone().requires_grad_();
    sum(mm(wr, xr) * mm(wr, xr)).backward();
    expect_equal(f, "grad W", dw.grad().full_tensor(), wr.grad());
    expect_equal(f, "grad X", dx.grad().full_tensor(), xr.grad());
    return f;
  });
}

TEST_CASE("local_map spmd_types: input types and propagation as the notes' pattern",
          "[dtensor][local_map][spmd_types]") {
  on_mesh({2},
          [](const DeviceMesh& mesh) {
            Failures f;
            const Tensor x = ints({6, 4}, 3);
            const Tensor w = ints({4, 3}, 4);
            const Tensor p = ints({3, 2}, 5);
            const Tensor r = ints({3, 2}, 6);
            // X S0 (grad S0) -> V, W R (grad P) -> R, mm -> V (out S0: gradient V -> Shard).
            const LocalFn row_mm = local_map(
                [&f](const std::vector<Tensor>& a) {
                  expect_types(f, "X", a[0], {LocalType::kV});
                  expect_types(f, "W", a[1], {LocalType::kR});
                  const Tensor y = mm(a[0], a[1]);
                  expect_types(f, "mm(V, R)", y, {LocalType::kV});
                  return std::vector{y};
                },
                {.out_placements = {Placements{Shard(0)}},
                 .in_placements = Specs{Placements{Shard(0)}, Placements{Replicate()}},
                 .in_grad_placements = Specs{Placements{Shard(0)}, Placements{Partial()}},
                 .spmd_types = true});
            const DTensor dx = distribute_tensor(x, mesh, {Shard(0)});
            const DTensor dw = distribute_tensor(w, mesh, {Replicate()});
            dx.requires_grad_();
            dw.requires_grad_();
            const DTensor y = row_mm({dx, dw})[0];
            expect_equal(f, "mm", y.full_tensor(), mm(x, w));
            sum(y * y).backward();
            const Tensor xr = x.clone().requires_grad_();
            const Tensor wr = w.clone().requires_grad_();
            sum(mm(xr, wr) * mm(xr, wr)).backward();
            expect_equal(f, "grad X", dx.grad().full_tensor(), xr.grad());
            expect_equal(f, "grad W", dw.grad().full_tensor(), wr.grad());

            // P input (grad R): x * 2 -> P, P * R -> P, P + P -> P (out Partial: gradient
            // Replicate); R with grad Replicate -> I, I * I -> I (out Replicate: gradient
            // Replicate); a Replicate without in_grad_placements -> R, its gradient summed.
            const LocalFn typed = local_map(
                [&f](const std::vector<Tensor>& a) {
                  expect_types(f, "P input", a[0], {LocalType::kP});
                  expect_types(f, "I input", a[1], {LocalType::kI});
                  expect_types(f, "R input", a[2], {LocalType::kR});
                  const Tensor doubled = a[0] * 2.0;
                  expect_types(f, "P * 2", doubled, {LocalType::kP});
                  const Tensor scaled = doubled * a[2] + a[0];
                  expect_types(f, "P * R + P", scaled, {LocalType::kP});
                  const Tensor inv = a[1] * a[1];
                  expect_types(f, "I * I", inv, {LocalType::kI});
                  return std::vector{scaled, inv};
                },
                {.out_placements = {Placements{Partial()}, Placements{Replicate()}},
                 .in_placements =
                     Specs{Placements{Partial()}, Placements{Replicate()}, Placements{Replicate()}},
                 .in_grad_placements =
                     Specs{Placements{Replicate()}, Placements{Replicate()}, Placements{Partial()}},
                 .spmd_types = true});
            const DTensor dp = distribute_tensor(p, mesh, {Partial()});
            const DTensor di = distribute_tensor(r, mesh, {Replicate()});
            const DTensor dr = distribute_tensor(r, mesh, {Replicate()});
            dp.requires_grad_();
            di.requires_grad_();
            dr.requires_grad_();
            const std::vector<Tensor> out = typed({dp, di, dr});
            expect_placements(f, "P output", DTensor(out[0]), {Partial()});
            expect_equal(f, "P * 2 * R + P", out[0].full_tensor(), p * 2.0 * r + p);
            expect_equal(f, "I * I", out[1].full_tensor(), r * r);
            sum(out[0] * out[0] + out[1]).backward();
            const Tensor pr = p.clone().requires_grad_();
            const Tensor ir = r.clone().requires_grad_();
            const Tensor rr = r.clone().requires_grad_();
            const Tensor s = pr * 2.0 * rr + pr;
            sum(s * s + ir * ir).backward();
            expect_equal(f, "grad P input", dp.grad().full_tensor(), pr.grad());
            expect_equal(f, "grad I input", di.grad().full_tensor(), ir.grad());
            expect_equal(f, "grad R input", dr.grad().full_tensor(), rr.grad());
            return f;
          },
          {"tp"});
}

TEST_CASE("local_map spmd_types: V as a Partial output, inputs without grad placements",
          "[dtensor][local_map][spmd_types]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor w = ints({3, 4}, 7);
    const Tensor x = ints({4, 2}, 8);
    const Tensor b = ints({3, 2}, 9);
    const Tensor c = ints({3, 2}, 16);
    // V as Partial: gradient Replicate. Without in_grad_placements the R bias's local gradient
    // is each rank's part (type R, gradient P), which the boundary sums, and the P input's is
    // whole (type P, gradient R).
    const LocalFn partial_mm = local_map(
        [](const std::vector<Tensor>& a) {
          return std::vector{mm(a[0], a[1]) * a[2], a[3] * 3.0};
        },
        {.out_placements = {Placements{Partial()}, Placements{Partial()}},
         .in_placements = Specs{Placements{Shard(1)}, Placements{Shard(0)}, Placements{Replicate()},
                                Placements{Partial()}},
         .spmd_types = true});
    const DTensor dw = distribute_tensor(w, mesh, {Shard(1)});
    const DTensor dx = distribute_tensor(x, mesh, {Shard(0)});
    const DTensor db = distribute_tensor(b, mesh, {Replicate()});
    const DTensor dc = distribute_tensor(c, mesh, {Partial()});
    dw.requires_grad_();
    db.requires_grad_();
    dc.requires_grad_();
    const std::vector<Tensor> out = partial_mm({dw, dx, db, dc});
    expect_placements(f, "output", DTensor(out[0]), {Partial()});
    // The parts mm(w_r, x_r) * b sum to mm(w, x) * b.
    expect_equal(f, "forward", out[0].full_tensor(), mm(w, x) * b);
    expect_equal(f, "P * 3", out[1].full_tensor(), c * 3.0);
    sum(out[0] * out[0] + out[1] * out[1]).backward();
    const Tensor wr = w.clone().requires_grad_();
    const Tensor br = b.clone().requires_grad_();
    const Tensor cr = c.clone().requires_grad_();
    sum((mm(wr, x) * br) * (mm(wr, x) * br) + (cr * 3.0) * (cr * 3.0)).backward();
    expect_equal(f, "grad W", dw.grad().full_tensor(), wr.grad());
    expect_equal(f, "grad b", db.grad().full_tensor(), br.grad());
    expect_equal(f, "grad c", dc.grad().full_tensor(), cr.grad());
    return f;
  });
}

TEST_CASE("local_map spmd_types: all_gather, reduce_scatter and convert differentiate as typed",
          "[dtensor][local_map][spmd_types]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor x = ints({4, 3}, 10);
    const Tensor w = ints({4, 3}, 11);
    // all_gather V -> R (backward reduce_scatter), R * R -> R, out Replicate.
    const LocalFn gathered = local_map(
        [&f](const std::vector<Tensor>& a) {
          const Tensor full = spmd::all_gather(a[0], 0, LocalType::kV, LocalType::kR, 0);
          expect_types(f, "all_gather", full, {LocalType::kR});
          // reduce_scatter P -> V of a P made by convert(R, P): this rank's rows of w.
          const Tensor rows =
              spmd::reduce_scatter(spmd::convert(a[1], 0, LocalType::kR, LocalType::kP), 0,
                                   LocalType::kP, LocalType::kV, 0);
          // convert(R, V): this rank's rows, whose gradient is zeros but this rank's block.
          const Tensor mine = spmd::convert(a[1], 0, LocalType::kR, LocalType::kV, 0);
          expect_types(f, "convert(R, V)", mine, {LocalType::kV});
          return std::vector{full * a[1], rows * mine};
        },
        {.out_placements = {Placements{Replicate()}, Placements{Shard(0)}},
         .in_placements = Specs{Placements{Shard(0)}, Placements{Replicate()}},
         .spmd_types = true});
    const DTensor dx = distribute_tensor(x, mesh, {Shard(0)});
    const DTensor dw = distribute_tensor(w, mesh, {Replicate()});
    dx.requires_grad_();
    dw.requires_grad_();
    const std::vector<Tensor> out = gathered({dx, dw});
    expect_equal(f, "all_gather", out[0].full_tensor(), x * w);
    expect_equal(f, "reduce_scatter * convert", out[1].full_tensor(), w * w);
    sum(out[0] * out[0] + out[1]).backward();
    const Tensor xr = x.clone().requires_grad_();
    const Tensor wr = w.clone().requires_grad_();
    sum((xr * wr) * (xr * wr) + wr * wr).backward();
    expect_equal(f, "grad x", dx.grad().full_tensor(), xr.grad());
    expect_equal(f, "grad w", dw.grad().full_tensor(), wr.grad());
    return f;
  });
}

TEST_CASE("local_map spmd_types: typing errors name the op and the mesh dim",
          "[dtensor][local_map][spmd_types]") {
  on_mesh(
      {2},
      [](const DeviceMesh& mesh) {
        Failures f;
        const DTensor s = distribute_tensor(ints({4, 2}, 12), mesh, {Shard(0)});
        // Local shapes all [2, 2].
        const DTensor r = distribute_tensor(ints({2, 2}, 13), mesh, {Replicate()});
        const DTensor p = distribute_tensor(ints({2, 2}, 14), mesh, {Partial()});
        const Placements kS{Shard(0)};
        const Placements kR{Replicate()};
        const Placements kP{Partial()};
        // Runs fn on (a, b) typed by in_placements (and in_grad_placements), out_placements
        // `out` for its one output.
        const auto call = [](const DTensor& a, const Placements& pa, const DTensor& b,
                             const Placements& pb, const Placements& out,
                             const std::function<Tensor(const Tensor&, const Tensor&)>& fn,
                             std::optional<Specs> grads = std::nullopt) {
          local_map([fn](const std::vector<Tensor>& in) { return std::vector{fn(in[0], in[1])}; },
                    {.out_placements = {out},
                     .in_placements = Specs{pa, pb},
                     .in_grad_placements = std::move(grads),
                     .spmd_types = true})({a, b});
        };
        expect_error(
            f, "P + R",
            [&] { call(p, kP, r, kR, kP, [](const Tensor& a, const Tensor& b) { return a + b; }); },
            {"[add]", "mesh dim 'tp'", "[P, R]", "linear", "all_reduce"});
        expect_error(
            f, "P * P",
            [&] { call(p, kP, p, kP, kP, [](const Tensor& a, const Tensor& b) { return a * b; }); },
            {"[mul]", "mesh dim 'tp'", "[P, P]"});
        expect_error(
            f, "P * V",
            [&] { call(p, kP, s, kS, kP, [](const Tensor& a, const Tensor& b) { return a * b; }); },
            {"[mul]", "mesh dim 'tp'", "[P, V]"});
        expect_error(
            f, "exp(P)",
            [&] { call(p, kP, r, kR, kP, [](const Tensor& a, const Tensor&) { return exp(a); }); },
            {"[exp]", "mesh dim 'tp'", "[P]"});
        expect_error(f, "I with V",
                     [&] {
                       call(
                           r, kR, s, kS, kS, [](const Tensor& a, const Tensor& b) { return a * b; },
                           Specs{kR, kS});
                     },
                     {"[mul]", "Invariant type on mesh dim 'tp' cannot mix with other types",
                      "Found types: [I, V]", "spmd::convert"});
        expect_error(f, "untyped with typed (strict)",
                     [&] {
                       call(s, kS, r, kR, kS, [](const Tensor& a, const Tensor&) {
                         return a + ones({2, 2}, kFloat64);
                       });
                     },
                     {"[add]", "argument 1 is an untyped tensor", "strict mode", "assert_type"});
        expect_error(f, "in-place changing the type",
                     [&] {
                       call(r, kR, s, kS, kR, [](const Tensor& a, const Tensor& b) {
                         Tensor c = a.clone();
                         c += b;
                         return c;
                       });
                     },
                     {"[add_]", "in place", "[R]", "[V]"});
        expect_error(f, "all_reduce of R",
                     [&] {
                       call(r, kR, s, kS, kR, [](const Tensor& a, const Tensor&) {
                         return spmd::all_reduce(a, 0, LocalType::kR, LocalType::kR);
                       });
                     },
                     {"[spmd::all_reduce]", "mesh dim 'tp'", "replicated/invariant", "src=R"});
        expect_error(f, "collective src not the type",
                     [&] {
                       call(s, kS, r, kR, kR, [](const Tensor& a, const Tensor&) {
                         return spmd::all_reduce(a, 0, LocalType::kP, LocalType::kR);
                       });
                     },
                     {"[spmd::all_reduce]", "mesh dim 'tp'", "type is V, not src=P"});
        expect_error(f, "full_tensor inside fn",
                     [&] {
                       call(s, kS, r, kR, kR,
                            [](const Tensor& a, const Tensor&) { return a.full_tensor(); });
                     },
                     {"[full_tensor]", "local SPMD-typed tensor [V]"});
        expect_error(
            f, "output type against out_placements",
            [&] { call(s, kS, r, kR, kR, [](const Tensor& a, const Tensor& b) { return a * b; }); },
            {"Output tensor placement mismatch on mesh dim 'tp'", "out_placements=R",
             "spmd_types inferred V"});
        expect_error(f, "untyped output",
                     [&] {
                       call(s, kS, r, kR, kR, [](const Tensor&, const Tensor&) {
                         return ones({2, 2}, kFloat64);
                       });
                     },
                     {"has no spmd_types annotation but out_placements expects one"});
        expect_error(
            f, "in_grad_placements not representable",
            [&] {
              call(
                  s, kS, r, kR, kS, [](const Tensor& a, const Tensor&) { return a; },
                  Specs{kS, kS});
            },
            {"cannot represent this forward/backward placement pair",
             "in_placements=R, in_grad_placements=S(0)",
             "valid grad placements are Partial (R) or Replicate (I)", "tied FWD-BWD typing"});
        expect_error(f, "Partial input with a Partial gradient",
                     [&] {
                       call(
                           p, kP, s, kS, kP, [](const Tensor& a, const Tensor&) { return a; },
                           Specs{kP, kS});
                     },
                     {"cannot represent", "valid grad placements are Replicate (P)"});
        const DTensor pmax =
            distribute_tensor(ints({2, 2}, 15), mesh, {Partial(dist::ReduceOp::Max)});
        expect_error(f, "unsupported placement type",
                     [&] {
                       call(pmax, {Partial(dist::ReduceOp::Max)}, s, kS, kS,
                            [](const Tensor&, const Tensor& b) { return b; });
                     },
                     {"does not support placement type Partial", "P(max)"});
        // A factory's result typed by hand mixes; assert_type checks a typed tensor's types.
        const LocalFn annotated = local_map(
            [](const std::vector<Tensor>& a) {
              const Tensor one = spmd::assert_type(ones({2, 2}, kFloat64), {LocalType::kR});
              return std::vector{spmd::assert_type(a[0] + one, {LocalType::kV})};
            },
            {.out_placements = {kS}, .in_placements = Specs{kS}, .spmd_types = true});
        expect_equal(f, "annotated factory", annotated({s})[0].full_tensor(),
                     s.full_tensor() + 1.0);
        expect_error(f, "assert_type mismatch",
                     [&] {
                       call(s, kS, r, kR, kS, [](const Tensor& a, const Tensor&) {
                         return spmd::assert_type(a, {LocalType::kR});
                       });
                     },
                     {"[spmd::assert_type]", "types [V]", "not [R]"});
        return f;
      },
      {"tp"});
}

}  // namespace
}  // namespace tessera::dtensor_test
