// cross_entropy inside a LossParallelGuard (torch loss_parallel, Note [Loss parallel
// cross_entropy] in dtensor/loss_parallel.cpp): on logits sharded on the class dim, the loss and
// the logits' gradient equal the single-device op's on the full float64 logits, forward issues
// exactly three small all_reduces and backward none; bad arguments raise an Error naming the op.

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <map>
#include <sstream>
#include <thread>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

using Catch::Matchers::Contains;
using Counts = std::map<std::string, int64_t>;

#ifdef TESSERA_TEST_UNDER_SANITIZER
const std::vector<DType> kDTypes = {kFloat64};
#else
const std::vector<DType> kDTypes = {kFloat64, kFloat32};
#endif
const std::vector<Reduction> kReductions = {Reduction::None, Reduction::Sum, Reduction::Mean};

std::string name_of(Reduction r) {
  return r == Reduction::None ? "none" : r == Reduction::Sum ? "sum" : "mean";
}

// One call: the logits' shape and layout, the options, and what the result must look like.
struct Case {
  Shape shape;
  Placements placements;
  CrossEntropyOptions options;
  DType dtype = kFloat64;
  // The loss's placements for reduction none and for sum / mean.
  Placements rows_placements;
  Placements reduced_placements;
  // How the target is passed: plain (nullopt) or a DTensor with these placements.
  std::optional<Placements> target_placements = std::nullopt;
  int64_t forward_all_reduces = 3;
  uint64_t seed = 1;
};

std::string describe(const Case& c) {
  std::ostringstream os;
  os << "logits " << c.shape << " " << c.dtype << " " << c.placements << ", reduction "
     << name_of(c.options.reduction) << ", ignore_index " << c.options.ignore_index
     << ", label_smoothing " << c.options.label_smoothing;
  return os.str();
}

Shape rows_of(const Shape& logits) {
  Shape rows;
  for (size_t d = 0; d < logits.size(); ++d) {
    if (d != (logits.size() == 1 ? 0 : 1)) rows.push_back(logits[d]);
  }
  return rows;
}

// Logits of a few units, the same on every rank.
Tensor make_logits(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  return randn(shape, kFloat64, &gen) * 3.0;
}

// Class indices, every third row set to ignore_index.
Tensor make_target(const Shape& rows, int64_t classes, int64_t ignore_index, uint64_t seed) {
  Generator gen(seed + 100);
  Tensor t = randint(0, classes, rows, kInt64, &gen).contiguous();
  int64_t* p = t.data_ptr<int64_t>();
  for (int64_t i = 1; i < t.numel(); i += 3) p[i] = ignore_index;
  return t;
}

void expect_counts(Failures& f, const std::string& what, const debug::CommDebugMode& mode,
                   const Counts& expected) {
  Counts got;
  for (const auto& [name, n] : mode.get_comm_counts()) {
    if (n != 0) got[name] = n;
  }
  if (got != expected) f.push_back(what + ": unexpected collectives\n" + mode.tracing_table());
}

void expect_close(Failures& f, const std::string& what, const Tensor& got, const Tensor& expected,
                  DType dtype) {
  const double tol = dtype == kFloat64 ? 1e-12 : 2e-5;
  const Tensor g = got.to(kFloat64);
  if (got.sizes() != expected.sizes() || !allclose(g, expected, tol, tol)) {
    std::ostringstream os;
    os << what << ": differs from the single-device float64 op\n got " << g << "\n expected "
       << expected;
    f.push_back(os.str());
  }
}

// The single-device float64 loss and logits gradient (`upstream` for reduction none).
std::pair<Tensor, Tensor> reference(const Tensor& logits, const Tensor& target,
                                    const CrossEntropyOptions& options, const Tensor& upstream) {
  const Tensor x = logits.to(kFloat64).detach().clone();
  x.requires_grad_();
  const Tensor loss = cross_entropy(x, target, options);
  loss.backward(options.reduction == Reduction::None ? upstream : Tensor());
  return {loss.detach(), x.grad()};
}

// Runs one case on this rank: loss, gradient, placements and collective counts.
void check_case(Failures& f, const DeviceMesh& mesh, const Case& c) {
  const std::string what = describe(c);
  const int64_t classes = c.shape[c.shape.size() == 1 ? 0 : 1];
  const Shape rows = rows_of(c.shape);
  const Tensor logits = make_logits(c.shape, c.seed).to(c.dtype);
  const Tensor target = make_target(rows, classes, c.options.ignore_index, c.seed);
  const Tensor upstream = ints(rows, c.seed + 7);
  const auto [ref_loss, ref_grad] = reference(logits, target, c.options, upstream);

  const DTensor dx = distribute_tensor(logits, mesh, c.placements, std::nullopt);
  dx.requires_grad_();
  const Tensor dtarget =
      c.target_placements.has_value()
          ? Tensor(distribute_tensor(target, mesh, *c.target_placements, std::nullopt))
          : target;
  const LossParallelGuard guard;
  DTensor loss;
  {
    debug::CommDebugMode mode;
    loss = cross_entropy(dx, dtarget, c.options);
    expect_counts(f, what + " forward", mode, {{"all_reduce", c.forward_all_reduces}});
  }
  const bool none = c.options.reduction == Reduction::None;
  expect_placements(f, what + " loss", loss, none ? c.rows_placements : c.reduced_placements);
  const DTensor grad_out =
      none ? distribute_tensor(upstream.to(c.dtype), mesh, loss.placements(), std::nullopt)
           : DTensor();
  {
    debug::CommDebugMode mode;
    loss.backward(grad_out);
    expect_counts(f, what + " backward", mode, {});
  }
  expect_close(f, what + " loss", loss.full_tensor(), ref_loss, c.dtype);
  const DTensor grad = dx.grad();
  if (!grad.defined()) {
    f.push_back(what + ": the logits got no gradient");
    return;
  }
  expect_placements(f, what + " gradient", grad, c.placements);
  expect_close(f, what + " gradient", grad.full_tensor(), ref_grad, c.dtype);
}

// Every reduction and dtype of `base`, on this rank.
Failures check_all(const DeviceMesh& mesh, Case base) {
  Failures f;
  for (const DType dtype : kDTypes) {
    for (const Reduction r : kReductions) {
      base.dtype = dtype;
      base.options.reduction = r;
      check_case(f, mesh, base);
    }
  }
  return f;
}

TEST_CASE("loss_parallel: [N, C] sharded on the classes over 4 ranks, even and uneven",
          "[dtensor][ops][loss_parallel]") {
  // C = 8: 2 classes per rank; C = 10: 3, 3, 3, 1; C = 3: 1, 1, 1, 0 (a rank without classes).
  for (const int64_t classes : {8, 10, 3}) {
    Case c;
    c.shape = {7, classes};
    c.placements = {Shard(1)};
    c.rows_placements = {Replicate()};
    c.reduced_placements = {Replicate()};
    c.seed = static_cast<uint64_t>(classes);
    on_mesh({4}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
}

TEST_CASE("loss_parallel: ignore_index that is a class index, and label smoothing",
          "[dtensor][ops][loss_parallel]") {
  Case c;
  c.shape = {6, 10};
  c.placements = {Shard(1)};
  c.rows_placements = {Replicate()};
  c.reduced_placements = {Replicate()};
  c.options.ignore_index = 4;
  on_mesh({4}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  // Label smoothing rides in the target logit's all_reduce: still three.
  c.options.ignore_index = -100;
  c.options.label_smoothing = 0.2;
  on_mesh({4}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
}

TEST_CASE("loss_parallel: 2x2 mesh, batch Shard(0) on mesh dim 0, classes Shard(1) on mesh dim 1",
          "[dtensor][ops][loss_parallel]") {
  Case c;
  c.shape = {5, 7};  // rows 3, 2; classes 4, 3
  c.placements = {Shard(0), Shard(1)};
  c.rows_placements = {Shard(0), Replicate()};
  c.reduced_placements = {Partial(), Replicate()};
  SECTION("plain target") {
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
  SECTION("replicated DTensor target") {
    c.target_placements = Placements{Replicate(), Replicate()};
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
  SECTION("batch-sharded DTensor target: mean adds one all_reduce of the count") {
    c.target_placements = Placements{Shard(0), Replicate()};
    c.options.reduction = Reduction::Mean;
    c.forward_all_reduces = 4;
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) {
      Failures f;
      for (const DType dtype : kDTypes) {
        Case mine = c;
        mine.dtype = dtype;
        check_case(f, mesh, mine);
      }
      return f;
    });
  }
}

TEST_CASE("loss_parallel: [N, C, d] with d sharded, [C], and classes over two mesh dims",
          "[dtensor][ops][loss_parallel]") {
  SECTION("[N, C, d]: d Shard(2) on mesh dim 0, classes Shard(1) on mesh dim 1") {
    Case c;
    c.shape = {3, 6, 5};
    c.placements = {Shard(2), Shard(1)};
    c.rows_placements = {Shard(1), Replicate()};
    c.reduced_placements = {Partial(), Replicate()};
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
  SECTION("[C] sharded over 4 ranks") {
    Case c;
    c.shape = {9};
    c.placements = {Shard(0)};
    c.rows_placements = {Replicate()};
    c.reduced_placements = {Replicate()};
    on_mesh({4}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
  SECTION("classes Shard(1) on both mesh dims: the flattened group, still three") {
    Case c;
    c.shape = {4, 11};
    c.placements = {Shard(1), Shard(1)};
    c.rows_placements = {Replicate(), Replicate()};
    c.reduced_placements = {Replicate(), Replicate()};
    on_mesh({2, 2}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
  SECTION("classes on mesh dims 0 and 2, batch on 1: two groups, so 3 all_reduces each") {
    Case c;
    c.shape = {5, 11};
    c.placements = {Shard(1), Shard(0), Shard(1)};
    c.rows_placements = {Replicate(), Shard(0), Replicate()};
    c.reduced_placements = {Replicate(), Partial(), Replicate()};
    c.forward_all_reduces = 6;
    on_mesh({2, 2, 2}, [&](const DeviceMesh& mesh) { return check_all(mesh, c); });
  }
}

TEST_CASE("loss_parallel: forward's all_reduces are MAX, SUM, SUM of one value per local row",
          "[dtensor][ops][loss_parallel]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor logits = make_logits({6, 7}, 3);
    const Tensor target = make_target({6}, 7, -100, 3);
    const DTensor dx = distribute_tensor(logits, mesh, {Shard(0), Shard(1)}, std::nullopt);
    const LossParallelGuard guard;
    debug::CommDebugMode mode;
    cross_entropy(dx, target);
    // 3 local rows of float64 over the class group of 2 ranks (mesh dim 1: one row's ranks).
    const int64_t row = mesh.get_coordinate()->at(0);
    std::string expected;
    for (const char* op : {"max", "sum", "sum"}) {
      expected += fmt::format(
          "{}{{\"collective\": \"all_reduce\", \"ranks\": 2, \"group\": [{}, {}], \"bytes\": 24, "
          "\"dtype\": \"{}\", \"op\": \"{}\"}}",
          expected.empty() ? "" : ", ", 2 * row, 2 * row + 1, kFloat64, op);
    }
    if (mode.json().find("\"trace\": [" + expected + "]") == std::string::npos) {
      f.push_back("unexpected trace\n" + mode.tracing_table());
    }
    return f;
  });
}

TEST_CASE("loss_parallel: the guard nests and belongs to its thread",
          "[dtensor][ops][loss_parallel]") {
  CHECK_FALSE(LossParallelGuard::active());
  {
    const LossParallelGuard outer;
    {
      const LossParallelGuard inner;
      CHECK(LossParallelGuard::active());
    }
    CHECK(LossParallelGuard::active());
    bool elsewhere = true;
    std::thread([&] { elsewhere = LossParallelGuard::active(); }).join();
    CHECK_FALSE(elsewhere);
  }
  CHECK_FALSE(LossParallelGuard::active());
  // Without the guard the op takes the generic path, which moves the logits instead of reducing
  // row maxima.
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor logits = make_logits({4, 8}, 5);
    const Tensor target = make_target({4}, 8, -100, 5);
    const DTensor dx = distribute_tensor(logits, mesh, {Shard(1)}, std::nullopt);
    const DTensor dtarget = distribute_tensor(target, mesh, {Replicate()}, std::nullopt);
    debug::CommDebugMode mode;
    const DTensor loss = cross_entropy(dx, dtarget);
    if (mode.json().find("\"op\": \"max\"") != std::string::npos) {
      f.push_back("without the guard: a MAX all_reduce\n" + mode.tracing_table());
    }
    expect_close(f, "without the guard", loss.full_tensor(), cross_entropy(logits, target),
                 kFloat64);
    return f;
  });
}

// Runs `body` (which must throw) under a guard on every rank of a mesh; on_mesh rethrows.
void raise_on_mesh(const Shape& mesh_shape, const std::function<void(const DeviceMesh&)>& body) {
  on_mesh(mesh_shape, [&](const DeviceMesh& mesh) {
    const LossParallelGuard guard;
    body(mesh);
    return Failures{"no error"};
  });
}

TEST_CASE("loss_parallel: errors name the op, the argument and what is valid",
          "[dtensor][ops][loss_parallel]") {
  // Logits [6, 10] and their target, made on each rank.
  auto sharded = [](const DeviceMesh& mesh, const Placements& ps) {
    return distribute_tensor(make_logits({6, 10}, 9), mesh, ps, std::nullopt);
  };
  auto target = [] { return make_target({6}, 10, -100, 9); };
  CHECK_THROWS_WITH(raise_on_mesh({4},
                                  [&](const DeviceMesh& mesh) {
                                    cross_entropy(sharded(mesh, {Replicate()}), target());
                                  }),
                    Contains("[cross_entropy] argument 0 (logits)") && Contains("[R]") &&
                        Contains("not sharded on the class dim 1") && Contains("loss_parallel"));
  CHECK_THROWS_WITH(
      raise_on_mesh(
          {4}, [&](const DeviceMesh& mesh) { cross_entropy(sharded(mesh, {Shard(0)}), target()); }),
      Contains("[cross_entropy] argument 0 (logits)") && Contains("[S(0)]") &&
          Contains("not sharded on the class dim 1"));
  CHECK_THROWS_WITH(raise_on_mesh({2, 2},
                                  [&](const DeviceMesh& mesh) {
                                    cross_entropy(sharded(mesh, {Partial(), Shard(1)}), target());
                                  }),
                    Contains("[cross_entropy] argument 0 (logits)") && Contains("[P(sum), S(1)]") &&
                        Contains("Partial logits are not supported"));
  CHECK_THROWS_WITH(raise_on_mesh({4},
                                  [&](const DeviceMesh& mesh) {
                                    cross_entropy(sharded(mesh, {Shard(1)}), target().to(kFloat64));
                                  }),
                    Contains("[cross_entropy] expected a target of class indices of dtype int64") &&
                        Contains("argument 1, a plain Tensor"));
  CHECK_THROWS_WITH(
      raise_on_mesh({4},
                    [&](const DeviceMesh& mesh) {
                      cross_entropy(sharded(mesh, {Shard(1)}), make_target({5}, 10, -100, 9));
                    }),
      Contains("[cross_entropy] expected a target of shape [6]") && Contains("got [5]"));
  CHECK_THROWS_WITH(raise_on_mesh({4},
                                  [&](const DeviceMesh& mesh) {
                                    const Tensor t = from_vector<int64_t>({1, 2, 12, 3, 4, 5}, {6});
                                    cross_entropy(sharded(mesh, {Shard(1)}), t);
                                  }),
                    Contains("[cross_entropy] target 12 is out of range for 10 classes"));
  CHECK_THROWS_WITH(raise_on_mesh({2, 2},
                                  [&](const DeviceMesh& mesh) {
                                    const DTensor t = distribute_tensor(
                                        target(), mesh, {Partial(), Replicate()}, std::nullopt);
                                    cross_entropy(sharded(mesh, {Shard(0), Shard(1)}), t);
                                  }),
                    Contains("[cross_entropy] argument 1 (target)") && Contains("[P(sum), R]") &&
                        Contains("cannot be Partial"));
  CHECK_THROWS_WITH(raise_on_mesh({4},
                                  [&](const DeviceMesh& mesh) {
                                    const DTensor t = distribute_tensor(
                                        target(), mesh, {Replicate()}, std::nullopt);
                                    cross_entropy(make_logits({6, 10}, 9), t);
                                  }),
                    Contains("[cross_entropy] argument 0 (logits) is a plain Tensor"));
  CHECK_THROWS_WITH(
      raise_on_mesh(
          {4},
          [&](const DeviceMesh& mesh) {
            const DTensor dx = sharded(mesh, {Shard(1)});
            dx.requires_grad_();
            cross_entropy(dx, target()).backward({}, BackwardOptions{.create_graph = true});
          }),
      Contains("[cross_entropy]") && Contains("first order only"));
}

}  // namespace
}  // namespace tessera::dtensor_test
