// The strategy validator (as torch 2.15's strategy_validation): every entry of the op table
// (tests/dtensor/op_cases.h) on meshes 4, 2x2 and 2x3, for input placements drawn from every
// list of R, S(d), P(sum/avg/max/min) and StridedShard per mesh dim, on uneven shapes, with
// lopsided Partial inputs (each rank's part differs; only their reduction is the value, so a
// wrong linearity claim cannot pass by luck). The DTensor result's full tensor must equal the
// op on the plain full inputs, and the gradients of the DTensor inputs the plain gradients.
// The references come from the plain runtime only.

#include <fmt/format.h>

#include <mutex>

#include "tests/dtensor/op_cases.h"
#include "tests/dtensor/placement_cases.h"

namespace tessera::dtensor_test {
namespace {

#ifdef TESSERA_TEST_UNDER_SANITIZER
constexpr int64_t kMaxCombinations = 6;
#else
constexpr int64_t kMaxCombinations = 40;
#endif

Tensor make_input(const InputSpec& in, uint64_t seed) {
  Generator gen(seed);
  const Tensor ints = randint(-20, 21, in.shape, kInt64, &gen).to(kFloat64);
  switch (in.kind) {
    case InputKind::kValue:
      return ints;
    case InputKind::kSmall:
      return ints / 10;
    case InputKind::kPositive:
      return abs(ints) + 1;
    case InputKind::kBool:
      return ints > 0;
    case InputKind::kIndex:
      return randint(0, 3, in.shape, kInt64, &gen);
  }
  return ints;
}

// "add_", "fill_", "mul_.scalar": the op writes its first input.
bool writes_in_place(const OpCase& c) {
  return c.op.back() == '_' || c.op.find("_.") != std::string::npos;
}

bool floating(InputKind k) { return k != InputKind::kBool && k != InputKind::kIndex; }

std::vector<Placements> lists_for(const InputSpec& in, int64_t mesh_ndim) {
  std::vector<Placements> lists =
      all_placement_lists(mesh_ndim, static_cast<int64_t>(in.shape.size()), /*strided=*/true);
  if (!floating(in.kind)) {
    std::erase_if(lists, has_partial);
    return lists;
  }
  // P(min) too: each list with P(max), with P(min) in its place.
  const size_t n = lists.size();
  for (size_t i = 0; i < n; ++i) {
    Placements with_min = lists[i];
    bool changed = false;
    for (Placement& p : with_min) {
      if (p.is_partial(ReduceOp::Max)) {
        p = Partial(ReduceOp::Min);
        changed = true;
      }
    }
    if (changed) lists.push_back(std::move(with_min));
  }
  return lists;
}

bool same_values(const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes() || got.dtype() != want.dtype()) return false;
  if (!is_floating_point(want.dtype())) return equal(got, want);
  return allclose(got.to(kFloat64), want.to(kFloat64), 1e-9, 1e-9, true);
}

std::string describe(const std::vector<Placements>& ps) {
  std::string s;
  for (const Placements& p : ps) s += (s.empty() ? "" : ", ") + to_string(p);
  return s;
}

struct Reference {
  Tensor out;
  std::vector<Tensor> grads;
};

Reference reference(const OpCase& c, const std::vector<Tensor>& full, const Tensor& weight) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < full.size(); ++i) {
    Tensor t = full[i].clone();
    if (c.grad && floating(c.inputs[i].kind)) t.requires_grad_();
    leaves.push_back(t);
  }
  Reference r;
  r.out = c.fn(leaves);
  if (c.grad && is_floating_point(r.out.dtype())) {
    sum(r.out.to(kFloat64) * weight).backward();
    for (const Tensor& l : leaves) r.grads.push_back(l.requires_grad() ? l.grad() : Tensor());
  }
  return r;
}

// One placement combination: the failures it shows (empty when the DTensor path is right).
std::vector<std::string> check_one(const OpCase& c, const DeviceMesh& mesh,
                                   const std::vector<Tensor>& full,
                                   const std::vector<Placements>& ps, const Reference& ref,
                                   const Tensor& weight) {
  const std::string what =
      fmt::format("{} on mesh {} with inputs [{}]: ", c.op, mesh.shape(), describe(ps));
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < full.size(); ++i) {
    const Shape& shape = c.inputs[i].shape;
    DTensor d = DTensor::from_local(make_local(full[i], mesh, ps[i]), mesh, ps[i],
                                    {.shape = shape, .stride = contiguous_strides(shape)});
    if (c.grad && floating(c.inputs[i].kind)) d.requires_grad_();
    inputs.push_back(d);
  }
  const Tensor out = c.fn(inputs);
  if (!out.is_distributed()) return {what + "the result is not a DTensor"};
  const Tensor whole = out.full_tensor();
  if (!same_values(whole, ref.out)) {
    return {fmt::format("{}result {} ({}) differs from the plain op's:\n{}\nwant\n{}", what,
                        to_string(DTensor(out).placements()), whole.dtype(), whole, ref.out)};
  }
  if (ref.grads.empty()) return {};
  const DTensor w = distribute_tensor(weight, mesh);
  sum(out.to(kFloat64) * w).backward();
  std::vector<std::string> f;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!ref.grads[i].defined()) continue;
    const Tensor g = inputs[i].grad();
    if (!g.defined()) {
      f.push_back(fmt::format("{}input {} got no gradient", what, i));
    } else if (!g.is_distributed()) {
      f.push_back(fmt::format("{}the gradient of input {} is not a DTensor", what, i));
    } else if (const Tensor gw = g.full_tensor(); !same_values(gw, ref.grads[i])) {
      f.push_back(fmt::format("{}gradient of input {} ({}) differs:\n{}\nwant\n{}", what, i,
                              to_string(DTensor(g).placements()), gw, ref.grads[i]));
    }
  }
  return f;
}

// Every combination of the inputs' placement lists when there are at most max_combinations,
// else an evenly strided sample of them (every list of each input still appears when the
// stride allows).
std::vector<std::vector<Placements>> combinations(const OpCase& c, int64_t mesh_ndim,
                                                  int64_t max_combinations) {
  std::vector<std::vector<Placements>> lists;
  int64_t total = 1;
  for (const InputSpec& in : c.inputs) {
    lists.push_back(lists_for(in, mesh_ndim));
    total *= static_cast<int64_t>(lists.back().size());
  }
  int64_t step = std::max<int64_t>(1, total / max_combinations);
  if (step > 1 && step % 2 == 0) ++step;  // odd: walks every input's lists, not a sublattice
  std::vector<std::vector<Placements>> out;
  for (int64_t k = 0; k < total; k += step) {
    std::vector<Placements> pick;
    int64_t rest = k;
    for (const auto& l : lists) {
      pick.push_back(l[static_cast<size_t>(rest % static_cast<int64_t>(l.size()))]);
      rest /= static_cast<int64_t>(l.size());
    }
    out.push_back(std::move(pick));
  }
  return out;
}

struct ValidatorRun {
  int64_t checked = 0;
  int64_t refusals = 0;
  std::vector<std::string> failures;
};

// Note [Validating without autograd]
// While autograd records, the dispatcher offers Partial outputs of kind sum only (Note [Partial
// outputs under autograd] in dtensor/dispatch.cpp), so a rule's avg, max and min claims would
// never run on a differentiable entry. Each such entry therefore runs twice: with gradients
// (values and gradients checked, sum claims exercised) and without (values only, every Partial
// claim exercised). `recorded_only` keeps the first pass alone, to show what it cannot see.
ValidatorRun run_validator(const std::function<bool(const OpCase&)>& select,
                           bool recorded_only = false,
                           int64_t max_combinations = kMaxCombinations) {
  const std::vector<OpCase> cases = op_cases();
  ValidatorRun total;
  std::mutex mutex;
  for (const Shape& mesh_shape : std::vector<Shape>{{4}, {2, 2}, {2, 3}}) {
    dist::run_threads(static_cast<int>(mesh_shape.numel()), [&](dist::ProcessGroupPtr world) {
      const DeviceMesh mesh(DeviceType::CPU, mesh_shape);
      std::vector<std::string> failures;
      int64_t n = 0;
      int64_t refused = 0;
      uint64_t seed = 11;
      for (const OpCase& entry : cases) {
        if (!select(entry)) continue;
        std::vector<Tensor> full;
        for (const InputSpec& in : entry.inputs) full.push_back(make_input(in, seed++));
        Reference ref;
        Tensor weight;
        {
          const Tensor probe = entry.fn(full);
          Generator gen(seed++);
          weight = randint(-3, 4, probe.sizes(), kInt64, &gen).to(kFloat64);
          ref = reference(entry, full, weight);
        }
        std::vector<OpCase> passes{entry};
        if (entry.grad && !recorded_only) {
          passes.push_back(entry);
          passes.back().grad = false;
        }
        for (const OpCase& c : passes) {
          Reference r = ref;
          if (!c.grad) r.grads.clear();
          int64_t case_failures = 0;
          for (const auto& ps : combinations(c, mesh.ndim(), max_combinations)) {
            ++n;
            std::vector<std::string> f;
            try {
              f = check_one(c, mesh, full, ps, r, weight);
            } catch (const Error& e) {
              // An in-place op keeps the written tensor's placements: on a Partial one, ops that
              // are not linear in it (x += 1 on P(sum), maximum_ on P(avg)) must refuse, as torch.
              if (writes_in_place(c) && has_partial(ps[0]) &&
                  std::string(e.what()).find("in place") != std::string::npos) {
                ++refused;
                continue;
              }
              f.push_back(fmt::format("{} on mesh {} with inputs [{}] threw: {}", c.op,
                                      mesh.shape(), describe(ps), e.what()));
            }
            for (std::string& one : f) {
              if (!c.grad && entry.grad) one += " (checked without autograd recording)";
            }
            case_failures += static_cast<int64_t>(!f.empty());
            failures.insert(failures.end(), f.begin(), f.end());
            if (case_failures >= 3) break;  // enough to see the pattern
          }
        }
      }
      std::lock_guard<std::mutex> lock(mutex);
      for (std::string& f : failures) {
        total.failures.push_back("rank " + std::to_string(world->rank()) + ": " + f);
      }
      if (world->rank() == 0) {
        total.checked += n;
        total.refusals += refused;
      }
    });
  }
  return total;
}

void validate(const std::string& family) {
  const ValidatorRun run = run_validator([&](const OpCase& c) { return c.family == family; });
  for (const std::string& f : run.failures) FAIL_CHECK(f);
  const bool sampled = kMaxCombinations < 10;
  WARN(family << ": " << run.checked << " placement combinations checked (differentiable entries "
              << "twice: with and without autograd recording), of which " << run.refusals
              << " in-place ops on Partial inputs refused as expected"
              << (sampled ? " (sampled under sanitizers: at most 6 per op entry and mesh)" : ""));
  CHECK(run.checked > 0);
}

// A rule claiming op(P(max)) = P(max) for an op that is not monotone increasing.
void plant_max_claim(const std::string& op) {
  register_sharding(op, [](const ShardingCall&) {
    return std::vector<ShardingStrategy>{{{Partial(ReduceOp::Max)}, {Partial(ReduceOp::Max)}}};
  });
}

}  // namespace

TEST_CASE("strategy validator: pointwise ops", "[dtensor][ops][validator]") {
  validate("pointwise");
}
TEST_CASE("strategy validator: reductions", "[dtensor][ops][validator]") { validate("reduction"); }
TEST_CASE("strategy validator: matmul", "[dtensor][ops][validator]") { validate("matmul"); }
TEST_CASE("strategy validator: views and joins", "[dtensor][ops][validator]") { validate("view"); }
TEST_CASE("strategy validator: nn functions", "[dtensor][ops][validator]") { validate("nn"); }

// Mutation checks (Note [Validating without autograd]): a wrong Partial(max) claim planted on
// neg (max of negated parts is minus their min) and on gelu (not monotone below -0.75) fails the
// validator, and the pass with gradients alone would let it through.
TEST_CASE("strategy validator: a planted Partial(max) claim fails it",
          "[dtensor][ops][validator]") {
  for (const std::string op : {"neg", "gelu"}) {
    INFO("planted on " << op);
    plant_max_claim(op);
    const auto only = [&](const OpCase& c) { return c.op == op; };
    // Every combination, sanitizers or not: the planted claim needs a P(max) input drawn.
    constexpr int64_t kAll = 1 << 20;
    const ValidatorRun recorded = run_validator(only, /*recorded_only=*/true, kAll);
    const ValidatorRun both = run_validator(only, /*recorded_only=*/false, kAll);
    unregister_sharding(op);
    CHECK(recorded.checked > 0);
    CHECK(recorded.failures.empty());  // the blind spot the second pass closes
    REQUIRE_FALSE(both.failures.empty());
    CHECK_THAT(both.failures[0], Catch::Contains("checked without autograd recording"));
  }
}

}  // namespace tessera::dtensor_test
