// fully_shard with parameters reached more than once: tied weights (an embedding and the output
// head sharing one weight, torch's test_train_parity_with_shared_params) and one module object
// at two paths. Each stays one parameter, sharded once, and training equals one device bitwise.

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

constexpr int64_t kVocab = 10, kDim = 6;

// logits = h W^T with the embedding's W: the head holds the embedding's weight tensor itself.
class TiedHead : public nn::Module {
 public:
  explicit TiedHead(const Tensor& weight) : Module("TiedHead") {
    register_parameter("weight", weight);
  }
  Tensor forward(const Tensor& h) override { return matmul(h, parameter("weight").t()); }
};

class TiedLM : public nn::Module {
 public:
  TiedLM() : Module("TiedLM") {
    manual_seed(5);
    emb_ = register_module("emb", std::make_shared<nn::Embedding>(kVocab, kDim, kFloat64));
    for (const char* name : {"0", "1"}) {
      blocks_.push_back(
          register_module(name, std::make_shared<nn::Linear>(kDim, kDim, true, kFloat64)));
    }
    head_ = register_module("head", std::make_shared<TiedHead>(emb_->weight()));
  }
  Tensor forward(const Tensor& ids) override {
    Tensor h = (*emb_)(ids);
    for (const auto& b : blocks_) h = tanh((*b)(h));
    return (*head_)(h);
  }

 private:
  std::shared_ptr<nn::Embedding> emb_;
  std::vector<std::shared_ptr<nn::Linear>> blocks_;
  std::shared_ptr<TiedHead> head_;
};

Tensor lm_loss(nn::Module& m, const Tensor& ids, const Tensor& targets) {
  return cross_entropy(m(ids).reshape({-1, kVocab}), targets.reshape({-1}));
}

std::vector<double> train_lm(nn::Module& m, const Tensor& ids, const Tensor& targets) {
  optim::AdamW opt(m.parameters(), {.lr = 0.05});
  std::vector<double> losses;
  for (int step = 0; step < 4; ++step) {
    opt.zero_grad();
    const Tensor loss = lm_loss(m, ids, targets);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

Tensor token_ids(int64_t seed) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < 15; ++i) ids.push_back((7 * i + 3 * seed) % kVocab);
  return from_vector(ids, {3, 5});
}

// Two ranks, each the whole batch: the averaged gradient (g + g) / 2 is g exactly, so the
// comparison with one device is bitwise.
TEST_CASE("fully_shard: tied weights stay one parameter and train bitwise as one device",
          "[dtensor][fsdp]") {
  const Tensor ids = token_ids(1), targets = token_ids(2);
  TiedLM reference;
  REQUIRE(reference.parameters().size() == 5);  // emb (= head), two Linear weights and biases
  const std::vector<double> want = train_lm(reference, ids, targets);
  const auto want_params = reference.named_parameters();
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    TiedLM model;
    fully_shard(*model.named_children()[1].second, mesh);
    fully_shard(*model.named_children()[2].second, mesh);
    fully_shard(model, mesh);
    const auto params = model.named_parameters();
    if (params.size() != want_params.size()) {
      f.push_back("the model has " + std::to_string(params.size()) + " parameters, one device " +
                  std::to_string(want_params.size()));
      return f;
    }
    const std::vector<double> got = train_lm(model, ids, targets);
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) {
        f.push_back("step " + std::to_string(i) + " loss " + std::to_string(got[i]) +
                    ", one device " + std::to_string(want[i]));
      }
    }
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor g = params[i].second.full_tensor();
      if (params[i].first != want_params[i].first || !equal(g, want_params[i].second)) {
        std::ostringstream os;
        os << params[i].first << " after training differs from one device's "
           << want_params[i].first << "\n got " << g << "\n want " << want_params[i].second;
        f.push_back(os.str());
      }
    }
    return f;
  });
}

TEST_CASE("fully_shard: a tied weight inside an inner unit moves to the common ancestor's unit",
          "[dtensor][fsdp]") {
  const Tensor ids = token_ids(3), targets = token_ids(4);
  TiedLM reference;
  const std::vector<double> want = train_lm(reference, ids, targets);
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    TiedLM model;
    // The embedding first: its unit takes the weight, which the root then finds in the head too.
    fully_shard(*model.named_children()[0].second, mesh);
    fully_shard(model, mesh);
    if (model.parameters().size() != 5) {
      f.push_back(std::to_string(model.parameters().size()) + " parameters, want 5");
      return f;
    }
    debug::CommDebugMode mode;
    const std::vector<double> got = train_lm(model, ids, targets);
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != want[i]) {
        f.push_back("step " + std::to_string(i) + " loss " + std::to_string(got[i]) +
                    ", one device " + std::to_string(want[i]));
      }
    }
    // Per step: the root's gather (it keeps its parameters until backward) and one
    // reduce_scatter; the embedding's unit has nothing left to gather.
    const auto counts = mode.get_comm_counts();
    if (counts != std::map<std::string, int64_t>{{"all_gather_into_tensor", 4},
                                                 {"reduce_scatter_tensor", 4}}) {
      f.push_back("collectives:\n" + mode.tracing_table());
    }
    return f;
  });
}

TEST_CASE("fully_shard: one module at two paths is sharded once", "[dtensor][fsdp]") {
  auto make = [] {
    manual_seed(9);
    auto shared = std::make_shared<nn::Linear>(4, 4, true, kFloat64);
    auto seq = std::make_shared<nn::Sequential>();
    for (nn::ModulePtr m :
         std::vector<nn::ModulePtr>{shared, std::make_shared<nn::GELU>(), shared,
                                    std::make_shared<nn::Linear>(4, 2, true, kFloat64)}) {
      seq->push_back(m);
    }
    return seq;
  };
  const Tensor x = ints({4, 4}, 5) / 10;
  const Tensor y = ints({4, 2}, 6) / 10;
  auto step = [&](nn::Module& m) {
    optim::AdamW opt(m.parameters(), {.lr = 0.05});
    std::vector<double> losses;
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      const Tensor d = m(x) - y;
      const Tensor loss = sum(d * d);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    return losses;
  };
  auto reference = make();
  REQUIRE(reference->parameters().size() == 4);
  const std::vector<double> want = step(*reference);
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto model = make();
    fully_shard(*model, mesh);
    if (model->parameters().size() != 4) {
      f.push_back(std::to_string(model->parameters().size()) + " parameters, want 4");
      return f;
    }
    const std::vector<double> got = step(*model);
    if (got != want) {
      std::ostringstream os;
      for (size_t i = 0; i < got.size(); ++i) os << got[i] << " vs " << want[i] << "; ";
      f.push_back("losses differ from one device: " + os.str());
    }
    return f;
  });
}

TEST_CASE("fully_shard: a parameter shared by two inner units is an Error naming both",
          "[dtensor][fsdp]") {
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    TiedLM model;
    fully_shard(*model.named_children()[0].second, mesh);
    try {
      fully_shard(*model.named_children()[3].second, mesh);
      f.push_back("no error");
    } catch (const Error& e) {
      const std::string what = e.what();
      for (const char* part : {"[fully_shard]", "weight", "common ancestor"}) {
        if (what.find(part) == std::string::npos)
          f.push_back("message lacks " + std::string(part) + ": " + what);
      }
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
