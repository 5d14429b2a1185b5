// Modules on meshes, first part: Module::register_parameter swapping DTensors in,
// distribute_module, the tensor/sequence parallel styles and parallelize_module
// (torch.distributed.tensor.parallel semantics). Every sharded run is compared with the same
// module on one device: outputs, gradients and AdamW-updated parameters, and the collectives
// counted by CommDebugMode.

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

std::shared_ptr<nn::MLP> make_mlp() {
  manual_seed(5);
  return std::make_shared<nn::MLP>(
      std::vector<int64_t>{8, 12, 4},
      nn::MLPOptions{.activation = nn::Activation::GELU, .tensor_options = kFloat64});
}

void expect_close(Failures& f, const std::string& what, const Tensor& got, const Tensor& want) {
  if (got.sizes() != want.sizes() || !allclose(got, want, 1e-10, 1e-12)) {
    std::ostringstream os;
    os << what << " differs from one device\n got " << got << "\n want " << want;
    f.push_back(os.str());
  }
}

Tensor whole(const Tensor& t) { return t.is_distributed() ? t.full_tensor() : t; }

// Three AdamW steps of mean((mlp(x) - y)^2); returns the losses.
std::vector<Tensor> train(nn::Module& mlp, const Tensor& x, const Tensor& y) {
  optim::AdamW opt(mlp.parameters(), {.lr = 0.05});
  std::vector<Tensor> losses;
  for (int step = 0; step < 3; ++step) {
    opt.zero_grad();
    const Tensor out = mlp(x);
    const Tensor loss = mean((out - y) * (out - y));
    loss.backward();
    opt.step();
    losses.push_back(whole(loss).detach());
  }
  return losses;
}

TEST_CASE("tensor-parallel MLP with a hidden width the ranks do not divide",
          "[dtensor][parallel]") {
  // 6 hidden features on 4 ranks: Colwise leaves local widths 2, 2, 2, 0, which Rowwise's input
  // must take as shards of 6 (its in_features), not of an even 4 x 2 = 8.
  const auto make = [] {
    manual_seed(9);
    return std::make_shared<nn::MLP>(std::vector<int64_t>{8, 6, 4},
                                     nn::MLPOptions{.tensor_options = kFloat64});
  };
  const Tensor x = ints({5, 8}, 3) / 10;
  const Tensor y = ints({5, 4}, 4) / 10;
  auto reference = make();
  const std::vector<Tensor> want = train(*reference, x, y);
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make();
    parallelize_module(*mlp, mesh, {{"0", ColwiseParallel{}}, {"2", RowwiseParallel{}}});
    const std::vector<Tensor> got = train(*mlp, x, y);
    for (size_t i = 0; i < want.size(); ++i) {
      expect_close(f, "loss of step " + std::to_string(i), got[i], want[i]);
    }
    return f;
  });
}

TEST_CASE("tensor-parallel MLP (Colwise up, Rowwise down) trains as on one device",
          "[dtensor][parallel]") {
  const Tensor x = ints({6, 8}, 1) / 10;
  const Tensor y = ints({6, 4}, 2) / 10;
  auto reference = make_mlp();
  const std::vector<Tensor> want = train(*reference, x, y);
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    const Tensor up_weight = mlp->named_parameters()[0].second;  // held across the swap
    parallelize_module(*mlp, mesh, {{"0", ColwiseParallel{}}, {"2", RowwiseParallel{}}});
    const std::map<std::string, Placements> expected{{"0.weight", {Shard(0)}},
                                                     {"0.bias", {Shard(0)}},
                                                     {"2.weight", {Shard(1)}},
                                                     {"2.bias", {Replicate()}}};
    for (const auto& [name, p] : mlp->named_parameters()) {
      if (!p.is_distributed()) {
        f.push_back(name + " is not a DTensor");
        continue;
      }
      expect_placements(f, name, DTensor(p), expected.at(name));
    }
    if (!up_weight.is_distributed()) f.push_back("a handle held before the swap is not a DTensor");
    {
      debug::CommDebugMode mode;
      const Tensor out = (*mlp)(x);
      if (out.is_distributed()) f.push_back("use_local_output: the output is a DTensor");
      expect_close(f, "forward", out, (*make_mlp())(x));
      if (mode.get_comm_counts() != std::map<std::string, int64_t>{{"all_reduce", 1}}) {
        f.push_back("forward collectives:\n" + mode.tracing_table());
      }
    }
    const std::vector<Tensor> got = train(*mlp, x, y);
    for (size_t i = 0; i < got.size(); ++i) {
      expect_close(f, "loss of step " + std::to_string(i), got[i], want[i]);
    }
    const auto ref_params = reference->named_parameters();
    const auto params = mlp->named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      expect_close(f, params[i].first + " after 3 AdamW steps", whole(params[i].second),
                   ref_params[i].second);
    }
    return f;
  });
}

TEST_CASE("Rowwise and Colwise embeddings give the single-device lookup", "[dtensor][parallel]") {
  const Tensor ids = from_vector<int64_t>({0, 9, 3, 3, 7, 1}, {2, 3});
  for (bool rowwise : {true, false}) {
    INFO((rowwise ? "RowwiseParallel (vocabulary sharded)" : "ColwiseParallel"));
    on_mesh({4}, [&](const DeviceMesh& mesh) {
      Failures f;
      manual_seed(3);
      nn::Embedding emb(10, 6, kFloat64);
      const Tensor want = emb(ids).detach().clone();
      if (rowwise) {
        parallelize_module(emb, mesh, RowwiseParallel{});
      } else {
        parallelize_module(emb, mesh, ColwiseParallel{.use_local_output = false});
      }
      debug::CommDebugMode mode;
      const Tensor got = emb(ids);
      const int64_t collectives = mode.get_total_counts();
      expect_close(f, "lookup", whole(got), want);
      // Rowwise: the masked Partial(sum) reduced by one all_reduce; Colwise: none.
      if (collectives != (rowwise ? 1 : 0)) f.push_back("collectives:\n" + mode.tracing_table());
      return f;
    });
  }
}

TEST_CASE("SequenceParallel norms take sequence shards and keep them", "[dtensor][parallel]") {
  const Tensor x = ints({2, 8, 6}, 4) / 10;
  nn::LayerNorm ref({6}, 1e-5, true, true, kFloat64);
  const Tensor want = ref(x);
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    nn::LayerNorm norm({6}, 1e-5, true, true, kFloat64);
    parallelize_module(norm, mesh, SequenceParallel{});
    const Tensor local = x.narrow(1, 2 * mesh.get_coordinate()->at(0), 2);
    debug::CommDebugMode mode;
    const Tensor out = norm(local);
    if (mode.get_total_counts() != 0) f.push_back("collectives:\n" + mode.tracing_table());
    if (!out.is_distributed()) {
      f.push_back("the output is not a DTensor");
      return f;
    }
    expect_placements(f, "output", DTensor(out), {Shard(1)});
    expect_close(f, "layer_norm", out.full_tensor(), want);
    return f;
  });
}

TEST_CASE("PrepareModuleInput / PrepareModuleOutput convert plain tensors and DTensors",
          "[dtensor][parallel]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor full = ints({4, 3}, 6);
    nn::Sequential seq{std::make_shared<nn::Dropout>(0.0)};  // the identity
    parallelize_module(seq, mesh,
                       {{"0", PrepareModuleInput{.input_layouts = Shard(0),
                                                 .desired_input_layouts = Replicate()}}});
    parallelize_module(seq, mesh,
                       PrepareModuleOutput{.output_layouts = Replicate(),
                                           .desired_output_layouts = Shard(1),
                                           .use_local_output = false});
    const int64_t r = mesh.get_coordinate()->at(0);
    const Tensor out = seq(full.narrow(0, 2 * r, 2));
    if (!out.is_distributed()) {
      f.push_back("the output is not a DTensor");
      return f;
    }
    expect_placements(f, "output", DTensor(out), {Shard(1)});
    expect_equal(f, "identity through the conversions", out.full_tensor(), full);
    return f;
  });
}

TEST_CASE("distribute_module replicates by default and runs partition, input and output fns",
          "[dtensor][parallel]") {
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    std::vector<std::string> partitioned;
    int64_t inputs = 0;
    int64_t outputs = 0;
    distribute_module(
        *mlp, mesh,
        [&](const std::string& path, nn::Module& m, const DeviceMesh& msh) {
          partitioned.push_back(path);
          if (path == "2") {
            const Tensor w = m.named_parameters(false)[0].second;
            m.register_parameter("weight", distribute_tensor(w.detach(), msh, {Shard(0)}));
          }
        },
        [&](nn::Module&, const Tensor& x, const DeviceMesh& msh) {
          ++inputs;
          return Tensor(distribute_tensor(x, msh));
        },
        [&](nn::Module&, const Tensor& y, const DeviceMesh&) {
          ++outputs;
          return y.full_tensor();
        });
    if (partitioned != std::vector<std::string>{"", "0", "1", "2"}) {
      std::string seen;
      for (const std::string& p : partitioned) seen += " '" + p + "'";
      f.push_back("partition_fn saw" + seen);
    }
    for (const auto& [name, p] : mlp->named_parameters()) {
      if (!p.is_distributed()) {
        f.push_back(name + " is not a DTensor");
        continue;
      }
      if (!p.requires_grad()) f.push_back(name + " lost requires_grad");
      expect_placements(f, name, DTensor(p),
                        name == "2.weight" ? Placements{Shard(0)} : Placements{Replicate()});
    }
    const Tensor x = ints({3, 8}, 9) / 10;
    const Tensor got = (*mlp)(x);
    expect_close(f, "forward", got, (*make_mlp())(x));
    if (inputs != 1 || outputs != 1) f.push_back("input_fn / output_fn did not run once each");
    try {
      distribute_module(*mlp, mesh);
      f.push_back("a second distribute_module did not raise");
    } catch (const Error& e) {
      if (std::string(e.what()).find("distributed before") == std::string::npos) {
        f.push_back(std::string("second call: ") + e.what());
      }
    }
    return f;
  });
}

TEST_CASE("parallelize_module errors name the key, the module and the mesh",
          "[dtensor][parallel]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    expect_error(f, "2-D mesh",
                 [&] {
                   parallelize_module(*mlp, mesh, {{"0", ColwiseParallel{}}});
                 },
                 {"1-D mesh", "[2, 2]", "mesh[\"tp\"]"});
    return f;
  });
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    expect_error(f, "unknown key",
                 [&] {
                   parallelize_module(*mlp, mesh, {{"fc9", ColwiseParallel{}}});
                 },
                 {"'fc9'", "matches no submodule", "0, 1, 2"});
    expect_error(f, "a GELU",
                 [&] {
                   parallelize_module(*mlp, mesh, {{"1", RowwiseParallel{}}});
                 },
                 {"RowwiseParallel", "module '1'", "GELU", "Linear and Embedding"});
    nn::LayerNorm norm({4});
    expect_error(f, "a LayerNorm", [&] { parallelize_module(norm, mesh, ColwiseParallel{}); },
                 {"ColwiseParallel", "LayerNorm"});
    // '*' matches one level: "*" alone names every child.
    auto seq = make_mlp();
    expect_error(f, "wildcard over a GELU",
                 [&] {
                   parallelize_module(*seq, mesh, {{"*", ColwiseParallel{}}});
                 },
                 {"GELU"});
    // All or nothing: "*" matched the Linear '0' before the GELU, and "0" sorts before "fc9".
    auto other = make_mlp();
    expect_error(
        f, "a good key beside an unknown one",
        [&] {
          parallelize_module(*other, mesh, {{"0", ColwiseParallel{}}, {"fc9", RowwiseParallel{}}});
        },
        {"'fc9'", "nothing was changed"});
    for (nn::Module* m : {seq.get(), other.get()}) {
      for (const auto& [name, p] : m->named_parameters()) {
        if (p.is_distributed()) f.push_back("a rejected plan converted parameter " + name);
      }
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
