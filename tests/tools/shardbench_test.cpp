// tessera-shardbench's parts: the alpha-beta fit, the closed-form collectives of every strategy
// against what a measured run issues (CommDebugMode's counting), the losses of every strategy
// against one device, and the command line's errors.

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>

#include "tests/tools/small_model.h"
#include "tools/shardbench/options.h"
#include "tools/shardbench/predict.h"
#include "tools/shardbench/report.h"

namespace tessera::shardbench {
namespace {

TEST_CASE("fit_alpha_beta recovers the line of synthetic timings", "[shardbench]") {
  const double alpha = 12e-6, beta = 1.0 / 3e9;
  std::vector<double> bytes, exact, noisy;
  for (double b : {16e3, 128e3, 1e6, 4e6, 16e6}) {
    bytes.push_back(b);
    exact.push_back(alpha + beta * b);
  }
  const CollectiveLine fit = fit_alpha_beta(bytes, exact);
  CHECK(fit.alpha_s == Approx(alpha).epsilon(1e-9));
  CHECK(fit.beta_s_per_byte == Approx(beta).epsilon(1e-9));
  // +-1% alternating noise moves the slope by about as much.
  for (size_t i = 0; i < exact.size(); ++i) noisy.push_back(exact[i] * (i % 2 ? 1.01 : 0.99));
  const CollectiveLine rough = fit_alpha_beta(bytes, noisy);
  CHECK(rough.beta_s_per_byte == Approx(beta).epsilon(0.02));
  // A negative intercept from noise becomes 0 and the slope goes through the origin.
  const CollectiveLine origin = fit_alpha_beta({1e6, 2e6}, {0.9e-3, 2.0e-3});
  CHECK(origin.alpha_s == 0.0);
  CHECK(origin.beta_s_per_byte == Approx((0.9e-3 * 1e6 + 2.0e-3 * 2e6) / (1e12 + 4e12)));
  CHECK_THROWS_WITH(fit_alpha_beta({1.0}, {1.0}), Catch::Contains("at least two"));
  CHECK_THROWS_WITH(fit_alpha_beta({1.0, 1.0}, {1.0, 2.0}), Catch::Contains("different"));
}

TEST_CASE("every strategy's collectives equal its closed form and its loss one device's",
          "[shardbench]") {
  for (const std::string preset : {"mlp", "transformer"}) {
    const ModelConfig c = small_model(preset, 1);
    const RunOptions run{.steps = 1, .warmup = 1};
    const Measurement one = measure(strategy_named("single", 4), c, run, {});
    for (const char* name : {"dp", "tp", "sp", "fsdp", "fsdp_tp"}) {
      const Strategy s = strategy_named(name, 4);
      INFO(preset << " " << s.name);
      const Measurement m = measure(s, c, run, {});
      CHECK(m.collectives == expected_collectives(s, c));
      for (size_t i = 0; i < one.losses.size(); ++i) {
        CHECK(m.losses[i] == Approx(one.losses[i]).epsilon(1e-12));
      }
    }
  }
}

TEST_CASE("a tensor-parallel rank's share is a model of tensor-parallel rank 0's local shapes",
          "[shardbench]") {
  for (const std::string preset : {"mlp", "transformer"}) {
    const ModelConfig c = small_model(preset, 2);
    const ModelConfig share = tensor_parallel_share(c, 4);
    std::map<std::string, Shape> expected;
    for (const auto& [name, p] : make_model(share)->named_parameters()) expected[name] = p.sizes();
    CHECK(parameter_count(share) < parameter_count(c));
    int64_t share_numel = 0;
    for (const auto& [name, sizes] : expected) share_numel += sizes.numel();
    CHECK(share_numel == parameter_count(share));
    // TP on 4 rank threads: rank 0's local parameters, name by name.
    std::map<std::string, Shape> rank0;
    dist::run_threads(4, [&](const dist::ProcessGroupPtr& world) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      const std::shared_ptr<nn::Module> model = make_model(c);
      apply_strategy(strategy_named("tp", 4), c, *model, mesh, make_batch(c));
      if (world->rank() != 0) return;
      for (const auto& [name, p] : model->named_parameters()) {
        rank0[name] = p.is_distributed() ? DTensor(p).to_local().sizes() : p.sizes();
      }
    });
    INFO(preset);
    CHECK(rank0 == expected);
  }
}

TEST_CASE("step_gemm_flops counts the products of forward and backward", "[shardbench]") {
  // MLP: X [T, h] W1^T [h, f], then [T, f] W2^T [f, h]; backward: both weight gradients and the
  // hidden activation's gradient (X takes none).
  ModelConfig mlp = small_model("mlp", 1);
  const double t = 4 * 8, h = 16, f = 64;
  CHECK(step_gemm_flops(mlp) == Approx(2 * (t * h * f * 2 + t * h * f * 3)));
  // Transformer, per token and layer: q, k, v, o (4 h^2), up and down (2 h f), scores and values
  // (2 s h); the head h V; three times (forward, input and weight gradients).
  const ModelConfig tf = small_model("transformer", 2);
  const double per_token = 2 * (4 * h * h + 2 * h * f + 2 * 8 * h) + h * 32;
  CHECK(step_gemm_flops(tf) == Approx(3 * 2 * t * per_token));
  // A 4-way share: a quarter of every width but the hidden one.
  const ModelConfig share = tensor_parallel_share(tf, 4);
  const double share_per_token = 2 * (4 * h * h / 4 + 2 * h * f / 4 + 2 * 8 * h / 4) + h * 32 / 4;
  CHECK(step_gemm_flops(share) == Approx(3 * 2 * t * share_per_token));
}

TEST_CASE("float32 DP: the count all_reduce of cross_entropy stays int64", "[shardbench]") {
  ModelConfig c = small_model("transformer", 1);
  c.dtype = kFloat32;
  const Strategy s = strategy_named("dp", 4);
  CHECK(measure(s, c, {.steps = 1, .warmup = 0}, {}).collectives == expected_collectives(s, c));
}

// The formulas of the issue, written independently of expected_collectives for the cases where
// they are one line (float64: 8 bytes; 4 ranks; sizes divisible by 4).
TEST_CASE("closed forms: DP all_reduces the gradients, FSDP gathers twice and reduce_scatters once",
          "[shardbench]") {
  const ModelConfig c = small_model("mlp", 1);
  const int64_t params = parameter_count(c), b = 8;
  CHECK(params == 16 * 64 + 64 + 64 * 16 + 16);
  auto find = [](const std::vector<CollectiveTotal>& list, const std::string& kind) {
    for (const CollectiveTotal& t : list) {
      if (t.kind == kind) return t;
    }
    return CollectiveTotal{};
  };
  const auto dp = expected_collectives(strategy_named("dp", 4), c);
  CHECK(find(dp, "all_reduce").bytes == params * b);  // ring traffic 2 (N-1)/N of it
  const auto fsdp = expected_collectives(strategy_named("fsdp", 4), c);
  CHECK(find(fsdp, "all_gather_into_tensor").bytes == 2 * params * b);  // forward + backward
  CHECK(find(fsdp, "reduce_scatter_tensor").bytes == params * b);
  const auto tp = expected_collectives(strategy_named("tp", 4), c);
  CHECK(find(tp, "all_reduce").bytes == c.batch * c.seq * c.hidden * b);  // one per MLP
}

TEST_CASE("ranking agreement counts the pairs apart by more than the margin", "[shardbench]") {
  auto result = [](const char* name, double measured, double predicted) {
    StrategyResult r;
    r.strategy.name = name;
    r.measured.step_s = {measured, measured, measured};
    r.predicted.compute_s = predicted;
    return r;
  };
  // a < b < c measured; b and c within 5% of each other (noise: not counted).
  std::vector<StrategyResult> results{result("a", 1.0, 1.5), result("b", 2.0, 1.2),
                                      result("c", 2.05, 3.0)};
  RankingAgreement r = ranking_agreement(results, 0.05);
  CHECK(r.pairs == 2);
  REQUIRE(r.discordant.size() == 1);
  CHECK(r.discordant[0] == "a < b");
  // Steps of constant time: every counted pair's p10-p90 ranges are apart.
  CHECK(r.separated == 2);
  CHECK(r.separated_discordant == 1);
  // a's steps spread up to 2.5: a and b overlap (a's p90 above b's p10), a and c (p10 2.05) too.
  results[0].measured.step_s = {0.9, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 2.5, 2.5};
  r = ranking_agreement(results, 0.05);
  CHECK(r.pairs == 2);
  CHECK(r.separated == 0);
  CHECK(r.separated_discordant == 0);
  REQUIRE(r.discordant.size() == 1);
  results[0].measured.step_s = {1.0, 1.0, 1.0};
  results[1].predicted.compute_s = 1.6;
  CHECK(ranking_agreement(results, 0.05).discordant.empty());
  CHECK(ranking_agreement(results, 0.01).pairs == 3);
  // The tracing share is of the median step.
  results[2].measured.tracing_s = 0.0205;
  CHECK(tracing_overhead(results) == Approx(0.01));
}

TEST_CASE("tessera-shardbench flags and plan files: errors say what is valid", "[shardbench]") {
  using V = std::vector<std::string>;
  CHECK(parse_options({"--layers", "3", "--dtype", "bf16"}).model.layers == 3);
  CHECK_THROWS_WITH(parse_options(V{"--layer", "3"}), Catch::Contains("unknown flag --layer"));
  CHECK_THROWS_WITH(parse_options(V{"--layers"}), Catch::Contains("expects a value"));
  CHECK_THROWS_WITH(parse_options(V{"--layers", "two"}), Catch::Contains("expects an integer"));
  CHECK_THROWS_WITH(parse_options(V{"--batch", "0"}), Catch::Contains("must be >= 1"));
  // Values the program would truncate to int or overflow with (issue 52, row 12).
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--steps", "2147483648"},
                                                        {"--warmup", "2147483648"},
                                                        {"--steps", "4294967297"},
                                                        {"--rounds", "4294967297"},
                                                        {"--ranks", "100000"},
                                                        {"--layers", "1000000000"}}) {
    INFO(flag << " " << value);
    CHECK_THROWS_WITH(parse_options(V{flag, value}),
                      Catch::Contains(flag) && Catch::Contains("must be <= "));
  }
  CHECK_THROWS_WITH(parse_options(V{"--dtype", "f16"}), Catch::Contains("f32, f64 or bf16"));
  CHECK_THROWS_WITH(parse_options(V{"--hidden", "30", "--heads", "8"}),
                    Catch::Contains("must divide --hidden"));
  CHECK_THROWS_WITH(strategy_named("ddp", 4), Catch::Contains("valid: single, dp, tp"));
  CHECK_THROWS_WITH(strategy_named("fsdp_tp", 3), Catch::Contains("odd"));
  const std::string path = "shardbench_test_plan.txt";
  { std::ofstream(path) << "# a plan\n0 colwise\n2 rowwise dtensor\n"; }
  CHECK(plan_from_file(path, 4).plan.size() == 2);
  { std::ofstream(path) << "0 colwise\n2 diagonal\n"; }
  CHECK_THROWS_WITH(plan_from_file(path, 4),
                    Catch::Contains(path + ":2") && Catch::Contains("valid: colwise, rowwise"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(plan_from_file("no/such/plan", 4), Catch::Contains("cannot read"));
}

}  // namespace
}  // namespace tessera::shardbench
