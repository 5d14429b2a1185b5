// Every pair of layouts of the transformer model (one device, DP, FSDP, TP, FSDP x TP on 2x2):
// its parameters and AdamW state, trained a step under one, saved, and loaded under the other,
// equal the saved ones bitwise as full tensors.

#include <catch2/catch.hpp>
#include <mutex>

#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/checkpoint/resume_training.h"

namespace tessera::checkpoint_test {
namespace {

// The layouts: the resume strategies, data parallel (plain replicated parameters on 4 ranks)
// and one device (no world).
struct ModelLayout {
  std::string name;
  std::optional<ResumeStrategy> sharded;  // none: plain parameters
  int ranks = 0;                          // 0: one device
};

std::vector<ModelLayout> model_layouts() {
  std::vector<ModelLayout> out = {{"one device", std::nullopt, 0}, {"DP", std::nullopt, 4}};
  for (const ResumeStrategy& s : resume_strategies()) out.push_back({s.name, s, 4});
  return out;
}

// Runs body(model, optimizer) on the layout's world; failures come back.
std::vector<std::string> on_model(
    const ModelLayout& layout, uint64_t seed,
    const std::function<std::vector<std::string>(DropoutNet&, optim::AdamW&)>& body) {
  const auto run = [&]() {
    manual_seed(seed);
    DropoutNet net;
    if (layout.sharded) {
      const DeviceMesh mesh(DeviceType::CPU, layout.sharded->mesh_shape, layout.sharded->dim_names);
      layout.sharded->shard(net, mesh);
    }
    optim::AdamW opt(net.parameters(), {.lr = 0.01});
    return body(net, opt);
  };
  if (layout.ranks == 0) return run();
  std::mutex mutex;
  std::vector<std::string> failures;
  dist::run_threads(layout.ranks, [&](dist::ProcessGroupPtr world) {
    std::vector<std::string> mine = run();
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& f : mine) failures.push_back("rank " + std::to_string(world->rank()) + ": " + f);
  });
  return failures;
}

// One step on fixed data (every rank the whole batch: the step only has to change the state).
void one_step(DropoutNet& net, optim::AdamW& opt) {
  Generator gen(3);
  const Tensor x = randn({kBatch, kSeq, kModel}, kFloat64, &gen);
  Tensor out = net(x);
  if (out.is_distributed()) out = DTensor(out).full_tensor();
  (out * out).mean().backward();
  opt.step();
  opt.zero_grad();
}

TEST_CASE("the transformer's state saved under any layout loads under any other", "[checkpoint]") {
  for (const ModelLayout& from : model_layouts()) {
    TempDir dir;
    checkpoint::StateDict saved_full;
    std::mutex mutex;
    const auto saved = on_model(from, 7, [&](DropoutNet& net, optim::AdamW& opt) {
      one_step(net, opt);
      checkpoint::save(checkpoint::get_state_dict(net, &opt), dir.path());
      checkpoint::StateDict full = checkpoint::get_state_dict(net, &opt, {.full_state_dict = true});
      std::lock_guard<std::mutex> lock(mutex);
      saved_full = full;  // equal on every rank
      return std::vector<std::string>{};
    });
    for (const auto& f : saved) FAIL_CHECK(from.name << ": " << f);
    for (const ModelLayout& to : model_layouts()) {
      INFO("saved under " << from.name << ", loaded under " << to.name);
      const auto failures = on_model(to, 99, [&](DropoutNet& net, optim::AdamW& opt) {
        checkpoint::StateDict sd = checkpoint::get_state_dict(net, &opt);
        checkpoint::load(sd, dir.path());
        checkpoint::set_state_dict(net, &opt, sd);
        const checkpoint::StateDict got =
            checkpoint::get_state_dict(net, &opt, {.full_state_dict = true});
        RunResult a{{}, saved_full}, b{{}, got};
        a.full_state.scalars.clear();
        b.full_state.scalars.clear();
        std::vector<std::string> f = compare_runs(a, b);
        if (got.tensors.size() != saved_full.tensors.size()) f.push_back("other keys");
        if (got.scalars.at("optim.block.wq.weight.step") != checkpoint::Scalar(int64_t{1}))
          f.push_back("step");
        return f;
      });
      for (const auto& f : failures) FAIL_CHECK(f);
    }
  }
}

}  // namespace
}  // namespace tessera::checkpoint_test
