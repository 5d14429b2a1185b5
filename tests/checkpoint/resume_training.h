#pragma once
// A small training run for the resume tests: a transformer block, dropout (so the generator's
// state matters) and a linear head, trained with AdamW under FSDP, TP or FSDP x TP on the
// calling rank's world (rank threads or MPI processes); what a run ends with, gathered whole.

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "examples/transformer_block.h"
#include "tessera/tessera.h"

namespace tessera::checkpoint_test {

constexpr int64_t kBatch = 4, kSeq = 4, kModel = 8;

class DropoutNet : public nn::Module {
 public:
  DropoutNet() : Module("DropoutNet") {
    block =
        register_module("block", std::make_shared<examples::TransformerBlock>(examples::BlockConfig{
                                     .model = kModel, .heads = 4, .hidden = 16}));
    drop = register_module("drop", std::make_shared<nn::Dropout>(0.25));
    head = register_module("head", std::make_shared<nn::Linear>(kModel, kModel, true, kFloat64));
  }
  Tensor forward(const Tensor& x) override { return (*head)((*drop)((*block)(x))); }

  std::shared_ptr<examples::TransformerBlock> block;
  std::shared_ptr<nn::Dropout> drop;
  std::shared_ptr<nn::Linear> head;
};

struct ResumeStrategy {
  std::string name;
  Shape mesh_shape;
  std::vector<std::string> dim_names;
  std::function<void(DropoutNet&, const DeviceMesh&)> shard;
  bool batch_sharded;  // each data-parallel rank trains on its rows
};

inline std::vector<ResumeStrategy> resume_strategies() {
  const auto fsdp_block = [](DropoutNet& net, const DeviceMesh& dp) {
    fully_shard(*net.block, dp);
    fully_shard(net, dp);
  };
  return {
      {"FSDP",
       {4},
       {"dp"},
       [=](DropoutNet& net, const DeviceMesh& mesh) { fsdp_block(net, mesh); },
       true},
      {"TP",
       {4},
       {"tp"},
       [](DropoutNet& net, const DeviceMesh& mesh) {
         parallelize_module(*net.block, mesh, examples::block_tensor_parallel_plan());
       },
       false},
      {"FSDP x TP",
       {2, 2},
       {"dp", "tp"},
       [=](DropoutNet& net, const DeviceMesh& mesh) {
         parallelize_module(*net.block, mesh["tp"], examples::block_tensor_parallel_plan());
         fsdp_block(net, mesh["dp"]);
       },
       true},
  };
}

// What a run ends with: the loss of each step, and the whole state dict (full tensors).
struct RunResult {
  std::vector<double> losses;
  checkpoint::StateDict full_state;
};

class ResumeRun {
 public:
  // Builds the model from `init_seed` and shards it on this rank's world.
  ResumeRun(const ResumeStrategy& strategy, uint64_t init_seed)
      : strategy_(strategy),
        mesh_(DeviceType::CPU, strategy.mesh_shape, strategy.dim_names),
        net_((manual_seed(init_seed), std::make_shared<DropoutNet>())) {
    strategy.shard(*net_, mesh_);
    optimizer_ =
        std::make_unique<optim::AdamW>(net_->parameters(), optim::AdamWOptions{.lr = 1e-2});
  }

  void train(int64_t first_step, int64_t steps, std::vector<double>& losses) {
    for (int64_t step = first_step; step < first_step + steps; ++step) {
      Generator data(1000 + static_cast<uint64_t>(step));
      Tensor x = randn({kBatch, kSeq, kModel}, kFloat64, &data);
      Tensor target = randn({kBatch, kSeq, kModel}, kFloat64, &data);
      if (strategy_.batch_sharded) {
        const int64_t dp = mesh_.size(0), rank = mesh_.get_local_rank(0);
        x = x.narrow(0, rank * kBatch / dp, kBatch / dp);
        target = target.narrow(0, rank * kBatch / dp, kBatch / dp);
      }
      Tensor out = (*net_)(x);
      if (out.is_distributed()) out = DTensor(out).full_tensor();
      const Tensor diff = out - target;
      const Tensor loss = (diff * diff).mean();
      loss.backward();
      optimizer_->step();
      optimizer_->zero_grad();
      losses.push_back(loss.item<double>());
    }
  }

  checkpoint::StateDict state_dict(bool full = false) {
    return checkpoint::get_state_dict(*net_, optimizer_.get(), {.full_state_dict = full});
  }
  void set_state(const checkpoint::StateDict& sd) {
    checkpoint::set_state_dict(*net_, optimizer_.get(), sd);
  }

 private:
  ResumeStrategy strategy_;
  DeviceMesh mesh_;
  std::shared_ptr<DropoutNet> net_;
  std::unique_ptr<optim::AdamW> optimizer_;
};

// Differences between two runs' results, bitwise: losses, every tensor, every scalar.
inline std::vector<std::string> compare_runs(const RunResult& a, const RunResult& b) {
  std::vector<std::string> f;
  if (a.losses != b.losses) {
    std::string s = "losses differ:";
    for (size_t i = 0; i < a.losses.size() && i < b.losses.size(); ++i) {
      s += fmt::format(" {} vs {}", a.losses[i], b.losses[i]);
    }
    f.push_back(s);
  }
  for (const auto& [key, t] : a.full_state.tensors) {
    auto it = b.full_state.tensors.find(key);
    if (it == b.full_state.tensors.end()) {
      f.push_back("\"" + key + "\" missing");
      continue;
    }
    const Tensor x = t.contiguous(), y = it->second.contiguous();
    if (x.shape() != y.shape() || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0) {
      f.push_back("tensor \"" + key + "\" differs");
    }
  }
  if (a.full_state.scalars != b.full_state.scalars) f.push_back("scalars differ");
  return f;
}

}  // namespace tessera::checkpoint_test
