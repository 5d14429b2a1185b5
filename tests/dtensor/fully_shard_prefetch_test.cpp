// fully_shard's prefetch (issue 57, Note [FSDP prefetch] in dtensor/parallel/fully_shard.cpp): from
// the second step on, each unit's all_gather is issued before the previous unit's forward ends
// (asynchronously, on the group's progress thread), backward issues the next resharded unit's
// gather before the current unit's reduce_scatter, every reduce_scatter is asynchronous, and
// training still equals one device.

#include <catch2/catch.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/collectives/observer.h"
#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

// 8 -> 12 -> 12 -> 3: three layers, three units and the root.
std::shared_ptr<nn::MLP> make_mlp() {
  manual_seed(5);
  return std::make_shared<nn::MLP>(
      std::vector<int64_t>{8, 12, 12, 3},
      nn::MLPOptions{.activation = nn::Activation::GELU, .tensor_options = kFloat64});
}

Tensor step_loss(nn::Module& m, const Tensor& x, const Tensor& y) {
  const Tensor d = m(x) - y;
  return mean(d * d);
}

// What rank 0 saw in order: the collectives it issued ("AG" / "RS", async ones marked "~") and
// the ends of the layers' forwards ("end 0").
struct Trace {
  std::vector<std::string> events;
  std::string text() const {
    std::string s;
    for (const std::string& e : events) s += e + " ";
    return s;
  }
};

TEST_CASE("fully_shard prefetches the next unit's all_gather, forward and backward",
          "[dtensor][fsdp][prefetch]") {
  const Tensor x = ints({8, 8}, 1) / 10;
  const Tensor y = ints({8, 3}, 2) / 10;
  auto reference = make_mlp();
  {
    optim::AdamW opt(reference->parameters(), {.lr = 0.05});
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      step_loss(*reference, x, y).backward();
      opt.step();
    }
  }
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    const auto layers = mlp->named_children();  // 0, 1 (GELU), 2, 3 (GELU), 4
    std::vector<std::string> units;
    for (const auto& [name, m] : layers) {
      if (!m->named_parameters().empty()) {
        fully_shard(*m, mesh);
        units.push_back(name);
      }
    }
    fully_shard(*mlp, mesh);
    Trace trace;
    for (const std::string& name : units) {
      for (const auto& [n, m] : layers) {
        if (n != name) continue;
        m->register_forward_hook([&trace, name](nn::Module&, const Tensor&, const Tensor&) {
          trace.events.push_back("end " + name);
          return Tensor();
        });
      }
    }
    const dist::CollectiveObserverGuard observer([&trace](const dist::CollectiveEvent& e) {
      const char* kind = e.kind == dist::CollectiveKind::AllGatherIntoTensor   ? "AG"
                         : e.kind == dist::CollectiveKind::ReduceScatterTensor ? "RS"
                                                                               : "other";
      trace.events.push_back(std::string(e.async_op ? "~" : "") + kind);
    });
    const int64_t r = mesh.get_coordinate()->at(0);
    const Tensor xl = x.narrow(0, 2 * r, 2);
    const Tensor yl = y.narrow(0, 2 * r, 2);
    optim::AdamW opt(mlp->parameters(), {.lr = 0.05});
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      trace.events.clear();
      const Tensor loss = step_loss(*mlp, xl, yl);
      const std::string forward = trace.text();
      trace.events.clear();
      loss.backward();
      const std::string backward = trace.text();
      // The first step records the order, each unit gathering as it starts. From the second,
      // the root's start issues the first unit's gather and each unit's start the next one's,
      // asynchronously: unit k + 1's all_gather is in flight before unit k's forward ends.
      // Backward, from the first step (the order is known once its forward ended): the last
      // unit gathers as backward reaches it and issues the middle unit's gather before its own
      // reduce_scatter; the middle one issues the first's. Every reduce_scatter is in flight
      // while backward goes on (Note [FSDP reduce_scatter in flight]).
      const std::string want_forward =
          i == 0 ? "AG end 0 AG end 2 AG end 4 " : "~AG ~AG end 0 ~AG end 2 end 4 ";
      const std::string want_backward = "AG ~AG ~RS ~AG ~RS ~RS ";
      if (forward != want_forward)
        f.push_back("step " + std::to_string(i) + " forward: " + forward);
      if (backward != want_backward) {
        f.push_back("step " + std::to_string(i) + " backward: " + backward);
      }
      opt.step();
    }
    const auto want = reference->named_parameters();
    const auto got = mlp->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      const Tensor g = got[i].second.full_tensor();
      if (!allclose(g, want[i].second, 1e-10, 1e-12)) {
        std::ostringstream os;
        os << got[i].first << " after 3 steps differs\n got " << g << "\n want " << want[i].second;
        f.push_back(os.str());
      }
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
