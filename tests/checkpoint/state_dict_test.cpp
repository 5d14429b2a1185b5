// get_state_dict / set_state_dict: keys as named_parameters() prints them, optimizer state under
// "optim.", full or sharded, copied back resharded; materializing the optimizer's state before
// its first step (what a load needs) leaves the training exactly as it was.

#include <catch2/catch.hpp>
#include <mutex>

#include "tests/checkpoint/checkpoint_test_util.h"

namespace tessera::checkpoint_test {
namespace {

using checkpoint::StateDict;

std::shared_ptr<nn::MLP> small_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::MLP>(std::vector<int64_t>{3, 4, 2},
                                   nn::MLPOptions{.tensor_options = kFloat64});
}

// One step of a least-squares loss on fixed data.
void step(nn::Module& m, optim::Optimizer& opt) {
  Generator gen(5);
  const Tensor x = randn({6, 3}, kFloat64, &gen);
  const Tensor t = randn({6, 2}, kFloat64, &gen);
  const Tensor d = m(x) - t;
  (d * d).mean().backward();
  opt.step();
  opt.zero_grad();
}

TEST_CASE("state dict keys: parameters, optimizer state and options, generator", "[checkpoint]") {
  auto m = small_mlp(1);
  optim::AdamW adamw(m->parameters(), {.lr = 0.5, .amsgrad = true});
  const StateDict sd = checkpoint::get_state_dict(*m, &adamw);
  std::vector<std::string> keys;
  for (const auto& [k, t] : sd.tensors) keys.push_back(k);
  const std::vector<std::string> expected = {"0.bias",
                                             "0.weight",
                                             "2.bias",
                                             "2.weight",
                                             "optim.0.bias.exp_avg",
                                             "optim.0.bias.exp_avg_sq",
                                             "optim.0.bias.max_exp_avg_sq",
                                             "optim.0.weight.exp_avg",
                                             "optim.0.weight.exp_avg_sq",
                                             "optim.0.weight.max_exp_avg_sq",
                                             "optim.2.bias.exp_avg",
                                             "optim.2.bias.exp_avg_sq",
                                             "optim.2.bias.max_exp_avg_sq",
                                             "optim.2.weight.exp_avg",
                                             "optim.2.weight.exp_avg_sq",
                                             "optim.2.weight.max_exp_avg_sq"};
  CHECK(keys == expected);
  CHECK(sd.scalars.at("optim.0.weight.step") == checkpoint::Scalar(int64_t{0}));
  CHECK(sd.scalars.at("optim.param_groups.0.lr") == checkpoint::Scalar(0.5));
  CHECK(sd.scalars.at("optim.param_groups.0.amsgrad") == checkpoint::Scalar(int64_t{1}));
  CHECK(sd.scalars.count("rng.seed") == 1);
  CHECK(sd.scalars.count("rng.offset") == 1);
  // Sharded state aliases the live tensors: a load fills them in place.
  CHECK(sd.tensors.at("0.weight").raw_data() == m->named_parameters()[0].second.raw_data());
}

TEST_CASE("materializing the optimizer state before the first step changes nothing",
          "[checkpoint]") {
  for (const bool sgd : {true, false}) {
    INFO((sgd ? "SGD with momentum and dampening" : "AdamW with amsgrad"));
    auto a = small_mlp(2), b = small_mlp(2);
    std::unique_ptr<optim::Optimizer> oa, ob;
    if (sgd) {
      oa = std::make_unique<optim::SGD>(
          a->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3});
      ob = std::make_unique<optim::SGD>(
          b->parameters(), optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.3});
    } else {
      oa = std::make_unique<optim::AdamW>(a->parameters(),
                                          optim::AdamWOptions{.lr = 0.1, .amsgrad = true});
      ob = std::make_unique<optim::AdamW>(b->parameters(),
                                          optim::AdamWOptions{.lr = 0.1, .amsgrad = true});
    }
    const StateDict held = checkpoint::get_state_dict(*b, ob.get());  // materializes b's state
    for (int i = 0; i < 3; ++i) {
      step(*a, *oa);
      step(*b, *ob);
    }
    const StateDict sa = checkpoint::get_state_dict(*a, oa.get());
    const StateDict sb = checkpoint::get_state_dict(*b, ob.get());
    for (const auto& [key, t] : sa.tensors) {
      INFO(key);
      CHECK(same_bits(t, sb.tensors.at(key)));
      // The state dict taken before the steps still aliases the state (updated in place).
      CHECK(same_bits(held.tensors.at(key), sb.tensors.at(key)));
    }
    CHECK(sa.scalars == sb.scalars);
  }
}

TEST_CASE("set_state_dict reshards full and sharded state into the model's layout",
          "[checkpoint]") {
  auto reference = small_mlp(3);
  optim::AdamW ref_opt(reference->parameters(), {.lr = 0.1});
  step(*reference, ref_opt);
  const StateDict full = checkpoint::get_state_dict(*reference, &ref_opt);
  std::mutex mutex;
  std::vector<std::string> failures;
  dist::run_threads(4, [&](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {4});
    auto m = small_mlp(4);  // other weights
    fully_shard(*m, mesh);
    optim::AdamW opt(m->parameters(), {.lr = 0.7});
    checkpoint::set_state_dict(*m, &opt, full);  // plain full tensors into Shard(0) DTensors
    StateDict back = checkpoint::get_state_dict(*m, &opt, {.full_state_dict = true});
    std::vector<std::string> mine;
    for (const auto& [key, t] : full.tensors) {
      if (back.tensors.at(key).is_distributed() || !same_bits(back.tensors.at(key), t)) {
        mine.push_back(key + " differs");
      }
    }
    if (std::get<double>(back.scalars.at("optim.param_groups.0.lr")) != 0.1) mine.push_back("lr");
    // Sharded into sharded under other placements: redistributed.
    StateDict other;
    for (const auto& [key, t] : full.tensors) {
      other.tensors[key] =
          distribute_tensor(t, mesh, {t.dim() > 1 ? Placement(Shard(1)) : Placement(Replicate())});
    }
    other.scalars = full.scalars;
    checkpoint::set_state_dict(*m, &opt, other);
    back = checkpoint::get_state_dict(*m, &opt, {.full_state_dict = true});
    for (const auto& [key, t] : full.tensors) {
      if (!same_bits(back.tensors.at(key), t))
        mine.push_back(key + " differs after a redistribute");
    }
    std::lock_guard<std::mutex> lock(mutex);
    failures.insert(failures.end(), mine.begin(), mine.end());
  });
  for (const auto& f : failures) FAIL_CHECK(f);
}

TEST_CASE("set_state_dict names missing, unexpected and mismatched keys", "[checkpoint]") {
  auto m = small_mlp(5);
  optim::SGD opt(m->parameters(), {.lr = 0.1, .momentum = 0.5});
  StateDict sd = checkpoint::get_state_dict(*m, &opt);
  StateDict missing = sd;
  missing.tensors.erase("2.bias");
  missing.tensors["head.weight"] = zeros({1});
  CHECK_THROWS_WITH(
      checkpoint::set_state_dict(*m, &opt, missing),
      Catch::Contains("missing \"2.bias\"") && Catch::Contains("unexpected \"head.weight\""));
  CHECK_NOTHROW(checkpoint::set_state_dict(*m, &opt, missing, {.strict = false}));
  StateDict wrong = sd;
  wrong.tensors["0.weight"] = zeros({3, 4}, kFloat64);
  CHECK_THROWS_AS(checkpoint::set_state_dict(*m, &opt, wrong), ShapeError);
  CHECK_THROWS_WITH(checkpoint::set_state_dict(*m, &opt, wrong),
                    Catch::Contains("\"0.weight\"") && Catch::Contains("[4, 3]"));
  auto other = small_mlp(6);
  CHECK_THROWS_WITH(checkpoint::get_state_dict(*other, &opt),
                    Catch::Contains("is not a parameter of the model"));
}

// An optimizer written against the bare interface, without checkpoint access.
class BareOptimizer : public optim::Optimizer {
 public:
  explicit BareOptimizer(std::vector<Tensor> params) : params_(std::move(params)) {}
  void step() override {}
  std::vector<Tensor> parameters() const override { return params_; }

 private:
  std::vector<Tensor> params_;
};

TEST_CASE("an optimizer that does not expose its state is an Error, not a silent omission",
          "[checkpoint]") {
  auto m = small_mlp(7);
  BareOptimizer bare(m->parameters());
  CHECK_THROWS_AS(checkpoint::get_state_dict(*m, &bare), NotSupportedError);
  CHECK_THROWS_WITH(checkpoint::get_state_dict(*m, &bare),
                    Catch::Contains("does not expose its state to checkpoints"));
}

}  // namespace
}  // namespace tessera::checkpoint_test
