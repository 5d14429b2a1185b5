// fully_shard (FSDP2): data-parallel training with sharded parameters equals one device on the
// whole batch, with one all_gather per module forward and one reduce_scatter per module backward
// of the bytes the formula gives.

#include <catch2/catch.hpp>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

// 8 -> 12 -> 3: the last layer's 3 rows leave one of 4 ranks without a row.
std::shared_ptr<nn::MLP> make_mlp() {
  manual_seed(11);
  return std::make_shared<nn::MLP>(
      std::vector<int64_t>{8, 12, 3},
      nn::MLPOptions{.activation = nn::Activation::GELU, .tensor_options = kFloat64});
}

Tensor step_loss(nn::Module& m, const Tensor& x, const Tensor& y) {
  const Tensor d = m(x) - y;
  return mean(d * d);
}

TEST_CASE("fully_shard: data-parallel AdamW steps equal one device on the whole batch",
          "[dtensor][fsdp]") {
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
    fully_shard(*(*mlp).named_children()[0].second, mesh);
    fully_shard(*(*mlp).named_children()[2].second, mesh);
    fully_shard(*mlp, mesh);
    for (const auto& [name, p] : mlp->named_parameters()) {
      if (!p.is_distributed()) f.push_back(name + " is not a DTensor");
    }
    const int64_t r = mesh.get_coordinate()->at(0);
    const Tensor xl = x.narrow(0, 2 * r, 2);
    const Tensor yl = y.narrow(0, 2 * r, 2);
    optim::AdamW opt(mlp->parameters(), {.lr = 0.05});
    for (int i = 0; i < 3; ++i) {
      opt.zero_grad();
      debug::CommDebugMode mode;
      const Tensor loss = step_loss(*mlp, xl, yl);
      const auto forward = mode.get_comm_counts();
      loss.backward();
      const auto all = mode.get_comm_counts();
      if (forward != std::map<std::string, int64_t>{{"all_gather_into_tensor", 2}} ||
          all != std::map<std::string, int64_t>{{"all_gather_into_tensor", 4},
                                                {"reduce_scatter_tensor", 2}}) {
        f.push_back("step " + std::to_string(i) + " collectives:\n" + mode.tracing_table());
      }
      // Bytes (whole gathered output / whole reduce_scatter input): each rank's flat buffer holds
      // every parameter's chunk padded to torch.chunk's ceil(rows / 4) rows: layer 0 weight
      // 3 x 8 + bias 3, layer 2 weight 1 x 12 + bias 1, float64, times 4 ranks.
      const int64_t flat_bytes = 4 * ((3 * 8 + 3) + (1 * 12 + 1)) * 8;
      const auto bytes = mode.get_comm_bytes();
      if (bytes.at("all_gather_into_tensor") != 2 * flat_bytes ||
          bytes.at("reduce_scatter_tensor") != flat_bytes) {
        f.push_back("step " + std::to_string(i) + " bytes:\n" + mode.tracing_table());
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

TEST_CASE("fully_shard: param_dtype gathers and computes in float32, shards stay float64",
          "[dtensor][fsdp]") {
  const Tensor x = ints({8, 8}, 3) / 10;
  const Tensor y = ints({8, 3}, 4) / 10;
  auto reference = make_mlp();
  const Tensor want = step_loss(*reference, x, y);
  on_mesh({4}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    fully_shard(*mlp, mesh, {.param_dtype = kFloat32});
    const int64_t r = mesh.get_coordinate()->at(0);
    debug::CommDebugMode mode;
    const Tensor loss =
        step_loss(*mlp, x.narrow(0, 2 * r, 2).to(kFloat32), y.narrow(0, 2 * r, 2).to(kFloat32));
    loss.backward();
    // One module, the root: every parameter in one flat float32 buffer (27 + 13 elements per
    // rank), gathered once (a root keeps its parameters from forward to backward).
    const auto bytes = mode.get_comm_bytes();
    if (bytes.at("all_gather_into_tensor") != 4 * 40 * 4 ||
        bytes.at("reduce_scatter_tensor") != 4 * 40 * 4) {
      f.push_back("bytes:\n" + mode.tracing_table());
    }
    for (const auto& [name, p] : mlp->named_parameters()) {
      if (p.dtype() != kFloat64) f.push_back(name + " is not float64");
      if (!p.grad().defined() || p.grad().dtype() != kFloat64) {
        f.push_back(name + ": no float64 gradient");
      }
    }
    // The mean of the ranks' losses is the whole batch's (float32 arithmetic).
    const Tensor mean_loss = loss.detach().to(kFloat64).reshape({1}).clone();
    mesh.get_group(0)->all_reduce(mean_loss, dist::ReduceOp::Avg)->wait();
    if (std::abs(mean_loss.item<double>() - want.item<double>()) > 1e-5) {
      f.push_back("mean loss " + std::to_string(mean_loss.item<double>()) + ", one device " +
                  std::to_string(want.item<double>()));
    }
    return f;
  });
}

TEST_CASE("fully_shard: without reshard_after_forward backward gathers nothing",
          "[dtensor][fsdp]") {
  const Tensor x = ints({8, 8}, 5) / 10;
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    auto reference = make_mlp();
    const Tensor want_loss = sum((*reference)(x));
    want_loss.backward();
    auto mlp = make_mlp();
    fully_shard(*mlp, mesh, {.reshard_after_forward = false});
    debug::CommDebugMode mode;
    // Every rank the whole batch: the averaged gradient is the single-device one.
    sum((*mlp)(x)).backward();
    if (mode.get_comm_counts() != std::map<std::string, int64_t>{{"all_gather_into_tensor", 1},
                                                                 {"reduce_scatter_tensor", 1}}) {
      f.push_back("collectives:\n" + mode.tracing_table());
    }
    const auto want = reference->named_parameters();
    const auto got = mlp->named_parameters();
    for (size_t i = 0; i < got.size(); ++i) {
      if (!allclose(got[i].second.grad().full_tensor(), want[i].second.grad(), 1e-12, 1e-14)) {
        f.push_back(got[i].first + ": gradient differs");
      }
    }
    return f;
  });
}

// Tensor-parallel parameters sharded again over dp: DTensors on the 2-D mesh whose whole tensors
// are the original parameters, with torch's placements for either mesh order.
TEST_CASE("fully_shard x tensor parallel: parameters on the 2-D mesh", "[dtensor][fsdp]") {
  for (const std::vector<std::string>& names :
       {std::vector<std::string>{"dp", "tp"}, std::vector<std::string>{"tp", "dp"}}) {
    const bool dp_first = names[0] == "dp";
    on_mesh(
        {2, 2},
        [&](const DeviceMesh& mesh) {
          Failures f;
          auto reference = make_mlp();
          auto mlp = make_mlp();
          parallelize_module(*mlp, mesh["tp"],
                             {{"0", ColwiseParallel{}}, {"2", RowwiseParallel{}}});
          fully_shard(*mlp->named_children()[0].second, mesh["dp"]);
          fully_shard(*mlp->named_children()[2].second, mesh["dp"]);
          fully_shard(*mlp, mesh["dp"]);
          // Colwise rows: dp chunks tp's chunks (StridedShard when dp is the first mesh dim).
          const Placement rows_of_rows =
              dp_first ? Placement(StridedShard(0, 2)) : Placement(Shard(0));
          auto on = [&](const Placement& dp, const Placement& tp) {
            return dp_first ? Placements{dp, tp} : Placements{tp, dp};
          };
          const std::map<std::string, Placements> want{{"0.weight", on(rows_of_rows, Shard(0))},
                                                       {"0.bias", on(rows_of_rows, Shard(0))},
                                                       {"2.weight", on(Shard(0), Shard(1))},
                                                       {"2.bias", on(Shard(0), Replicate())}};
          const auto ref = reference->named_parameters();
          const auto got = mlp->named_parameters();
          for (size_t i = 0; i < got.size(); ++i) {
            const DTensor p = got[i].second;
            if (p.device_mesh() != mesh || p.placements() != want.at(got[i].first)) {
              std::ostringstream os;
              os << got[i].first << " on " << p.device_mesh().to_string() << " with "
                 << p.placements();
              f.push_back(os.str());
            } else if (!allclose(p.full_tensor(), ref[i].second, 0, 0)) {
              f.push_back(got[i].first + ": full_tensor is not the parameter");
            }
          }
          return f;
        },
        names);
  }
}

TEST_CASE("fully_shard: errors", "[dtensor][fsdp]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    try {
      fully_shard(*mlp, mesh);
      f.push_back("a 2-D mesh did not raise");
    } catch (const Error& e) {
      if (std::string(e.what()).find("1-D mesh") == std::string::npos) f.push_back(e.what());
    }
    return f;
  });
  // A tensor-parallel parameter whose dp chunks StridedShard cannot describe: 7 rows on tp 2
  // are 4 + 3, cut over dp 3 as 2 + 2 + 0 and 1 + 1 + 1; every rank raises.
  on_mesh({3, 2},
          [](const DeviceMesh& mesh) {
            Failures f;
            nn::Linear layer(4, 7, true, kFloat64);
            parallelize_module(layer, mesh["tp"], ColwiseParallel{});
            expect_error(f, "uneven tp rows", [&] { fully_shard(layer, mesh["dp"]); },
                         {"weight", "do not describe", "divisible"});
            return f;
          },
          {"dp", "tp"});
  // A DTensor parameter on the same mesh fully_shard is given.
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    nn::Linear layer(4, 6, true, kFloat64);
    parallelize_module(layer, mesh, ColwiseParallel{});
    expect_error(f, "tp param on the dp mesh", [&] { fully_shard(layer, mesh); },
                 {"weight", "is a DTensor on", "other dim of the 2-D mesh"});
    return f;
  });
  // Fewer rows than ranks: trailing ranks hold empty shards (3 rows on 4 ranks: 1, 1, 1, 0).
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    nn::Linear layer(2, 3, true, kFloat64);
    fully_shard(layer, mesh);
    const int64_t rows = DTensor(layer.named_parameters()[0].second).to_local().size(0);
    if (rows != (mesh.get_local_rank(0) < 3 ? 1 : 0)) {
      f.push_back("rank holds " + std::to_string(rows) + " rows");
    }
    return f;
  });
  on_mesh({2}, [](const DeviceMesh& mesh) {
    Failures f;
    auto mlp = make_mlp();
    fully_shard(*mlp, mesh);
    try {
      fully_shard(*mlp, mesh);
      f.push_back("a second fully_shard did not raise");
    } catch (const Error& e) {
      if (std::string(e.what()).find("before") == std::string::npos) f.push_back(e.what());
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
