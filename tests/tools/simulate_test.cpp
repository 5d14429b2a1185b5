// tessera-shardbench --simulate: the simulator's collectives against the closed forms that the
// measured runs check (expected_collectives), memory per GPU on a hand-computed case, infeasible
// plans, the best plan, published measurements, and the errors of cluster files and flags.

#include "tools/shardbench/simulate.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <map>

#include "tests/tools/small_model.h"
#include "tools/shardbench/options.h"
#include "tools/shardbench/predict.h"

namespace tessera::shardbench {
namespace {

// Ring traffic per rank of each collective kind.
std::map<std::string, double> traffic(const std::vector<CollectiveTotal>& list) {
  std::map<std::string, double> out;
  for (const CollectiveTotal& t : list) {
    out[t.kind] += ring_traffic(t.kind, t.group_size, static_cast<double>(t.bytes));
  }
  return out;
}
std::map<std::string, double> traffic(const std::vector<SimCollective>& list) {
  std::map<std::string, double> out;
  for (const SimCollective& t : list) {
    out[t.kind] += ring_traffic(t.kind, t.group_size, static_cast<double>(t.bytes));
  }
  return out;
}

TEST_CASE("ring traffic: all_reduce 2(N-1)/N, all_gather and reduce_scatter (N-1)/N",
          "[simulate]") {
  CHECK(ring_traffic("all_reduce", 4, 1000.0) == Approx(1500.0));
  CHECK(ring_traffic("all_gather_into_tensor", 4, 1000.0) == Approx(750.0));
  CHECK(ring_traffic("reduce_scatter_tensor", 8, 800.0) == Approx(700.0));
  CHECK(ring_traffic("all_reduce", 1, 1000.0) == 0.0);
}

TEST_CASE("the simulator's collectives equal the measured strategies' closed forms", "[simulate]") {
  const ModelConfig c = small_model("transformer", 2);
  const SimModel m = sim_model_from(c);
  CHECK(sim_parameter_count(m) == parameter_count(c));
  SimOptions o;
  o.param_bytes = 8;  // float64, as the measured run
  o.seq = c.seq;
  const int64_t b = 8, params = parameter_count(c);
  struct Case {
    const char* measured;
    SimPlan plan;
  };
  for (const Case& k :
       {Case{"dp", {SimStrategy::DP, 4, 1}}, Case{"fsdp", {SimStrategy::FSDP, 4, 1}},
        Case{"tp", {SimStrategy::TP, 1, 4}}, Case{"fsdp_tp", {SimStrategy::FSDP_TP, 2, 2}}}) {
    INFO(k.measured);
    const std::vector<CollectiveTotal> expected =
        expected_collectives(strategy_named(k.measured, 4), c);
    const std::vector<SimCollective> sim = sim_collectives(m, k.plan, c.batch / k.plan.dp, o);
    std::map<std::string, double> want = traffic(expected);
    if (k.plan.kind == SimStrategy::DP) {
      // The measured DP also all_reduces cross_entropy's count of rows: one int64.
      want["all_reduce"] -= ring_traffic("all_reduce", 4, 8.0);
      CHECK(traffic(sim)["all_reduce"] ==
            Approx(2.0 * 3.0 / 4.0 * static_cast<double>(params * b)));
    }
    const std::map<std::string, double> got = traffic(sim);
    REQUIRE(got.size() == want.size());
    for (const auto& [kind, bytes] : want) CHECK(got.at(kind) == Approx(bytes).epsilon(1e-12));
    // Whole messages and counts too, where the simulator does not bucket (DP does).
    for (const SimCollective& s : sim) {
      for (const CollectiveTotal& e : expected) {
        if (e.kind != s.kind || k.plan.kind == SimStrategy::DP) continue;
        CHECK(e.group_size == s.group_size);
        CHECK(e.count == s.count);
        CHECK(e.bytes == s.bytes);
      }
    }
  }
}

// Two RMSNorm blocks without biases: norms 2 x 1024, attention 4 x 1024^2, MLP 2 x 1024 x 4096.
SimModel hand_model() {
  SimModel m;
  m.name = "hand";
  m.layers = 2;
  m.hidden = 1024;
  m.heads = 16;
  m.kv_heads = 16;
  m.ffn_hidden = 4096;
  m.vocab = 1000;
  m.seq = 1024;
  return m;
}

TEST_CASE("memory per GPU on a hand-computed case", "[simulate]") {
  const SimModel m = hand_model();
  const double layer = 2 * 1024 + 4.0 * 1024 * 1024 + 2.0 * 1024 * 4096;  // 12,584,960
  const double params = 2 * layer + 1000 * 1024 + 1000 * 1024 + 1024;     // 27,219,944
  CHECK(static_cast<double>(sim_parameter_count(m)) == params);
  SimOptions o;  // bf16, micro batch 1, flash attention, no recomputation
  const SimMemory dp = sim_memory(m, {SimStrategy::DP, 8, 1}, 4, o);
  CHECK(dp.params == 2 * params);
  CHECK(dp.grads == 2 * params);
  CHECK(dp.optimizer == 12 * params);
  // s b h (10 + 24/t) per layer, two layers, plus fp32 logits s b V.
  CHECK(dp.activations == Approx(2 * 1024.0 * 1024 * 34 + 4.0 * 1024 * 1000));
  // Without flash attention the scores add 5 a s / h = 80 per layer.
  o.flash_attention = false;
  CHECK(sim_memory(m, {SimStrategy::DP, 8, 1}, 4, o).activations ==
        Approx(2 * 1024.0 * 1024 * 114 + 4.0 * 1024 * 1000));
  // Tensor parallel 2 without flash: s b h (10 + 12 + 40) per layer, logits halved.
  CHECK(sim_memory(m, {SimStrategy::DP_TP, 4, 2}, 4, o).activations ==
        Approx(2 * 1024.0 * 1024 * 62 + 2.0 * 1024 * 1000));
  o.flash_attention = true;
  // Full recomputation: 2 s b h per layer kept, plus one layer's whole.
  o.recompute = true;
  CHECK(sim_memory(m, {SimStrategy::DP, 8, 1}, 4, o).activations ==
        Approx(2 * 2 * 1024.0 * 1024 + 1024.0 * 1024 * 34 + 4.0 * 1024 * 1000));
  o.recompute = false;
  // FSDP over 8: an eighth of everything plus two gathered units (the largest is a block).
  const SimMemory fsdp = sim_memory(m, {SimStrategy::FSDP, 8, 1}, 4, o);
  CHECK(fsdp.params == Approx(2 * (params / 8 + 2 * layer)));
  CHECK(fsdp.grads == Approx(2 * params / 8));
  CHECK(fsdp.optimizer == Approx(12 * params / 8));
}

TEST_CASE("infeasible plans are flagged and the best plan is feasible", "[simulate]") {
  SimOptions o;
  const Cluster h100 = cluster_preset("8xH100");
  const std::vector<SimResult> r70 = simulate(sim_model_preset("70b"), h100, {8, 64, 512}, o);
  for (const SimResult& r : r70) {
    INFO(r.gpus << " " << sim_strategy_name(r.plan.kind) << " " << r.plan.dp << "x" << r.plan.tp);
    if (r.gpus == 8 && r.plan.kind == SimStrategy::DP) {
      // 69 B parameters x 16 bytes (bf16 weights and gradients, AdamW fp32) > 80 GB.
      CHECK_FALSE(r.feasible);
      CHECK(r.memory.total() > 16 * 68e9);
      CHECK_THAT(r.note, Catch::Contains("of 80"));
    }
    if (r.best) CHECK(r.feasible);
    if (!r.feasible) CHECK_FALSE(r.best);
  }
  for (int64_t n : {64, 512}) {
    int bests = 0;
    for (const SimResult& r : r70) bests += r.gpus == n && r.best ? 1 : 0;
    CHECK(bests == 1);
  }
  // 7B fits on one node under FSDP; the best there is the fastest feasible plan.
  const std::vector<SimResult> r7 = simulate(sim_model_preset("7b"), h100, {8}, o);
  const SimResult* best = nullptr;
  for (const SimResult& r : r7) {
    if (r.best) best = &r;
  }
  REQUIRE(best != nullptr);
  for (const SimResult& r : r7) {
    if (r.feasible) CHECK(best->step_s <= r.step_s);
  }
  // A global batch dp does not divide is not a plan.
  o.global_batch = 12;
  for (const SimResult& r : simulate(sim_model_preset("7b"), h100, {8}, o)) {
    if (r.plan.dp == 8) CHECK_THAT(r.note, Catch::Contains("not a multiple of dp 8"));
  }
}

// Narayanan et al. 2021, Table 1 (A100, activation recomputation, sequence 2048): the rows
// without pipeline parallelism, within 25% of the reported teraFLOP/s per GPU.
TEST_CASE("the simulator reproduces Megatron-LM's reported throughput within 25%", "[simulate]") {
  struct Row {
    const char* model;
    int64_t gpus, dp, tp, batch;
    double reported;
  };
  const Cluster a100 = cluster_preset("A100");
  for (const Row& row :
       {Row{"gpt-1.7b", 32, 32, 1, 512, 137}, Row{"gpt-3.6b", 64, 32, 2, 512, 138},
        Row{"gpt-7.5b", 128, 32, 4, 512, 142}, Row{"gpt-18.4b", 256, 32, 8, 1024, 135}}) {
    INFO(row.model);
    SimOptions o;
    o.global_batch = row.batch;
    o.recompute = true;
    const SimStrategy kind = row.tp == 1 ? SimStrategy::DP : SimStrategy::DP_TP;
    bool found = false;
    for (const SimResult& r : simulate(sim_model_preset(row.model), a100, {row.gpus}, o)) {
      if (r.plan.kind != kind || r.plan.tp != row.tp) continue;
      found = true;
      CHECK(r.feasible);
      CHECK(r.hardware_tflops_per_gpu == Approx(row.reported).epsilon(0.25));
    }
    CHECK(found);
  }
}

// A second, independent source: OPT-175B (Zhang et al. 2022, arXiv 2205.01068, section 2.4 and
// Table 1): GPT-3's shape on 992 80GB A100s with FSDP and Megatron tensor parallelism (8, inside
// a node), 2M-token batches of 2048-token sequences, activation checkpointing, "up to 147 TFLOP/s
// per GPU".
TEST_CASE("the simulator reproduces OPT-175B's reported throughput within 25%", "[simulate]") {
  SimOptions o;
  o.global_batch = 992;  // 124 dp ranks x 8 sequences: 2.03M tokens
  o.recompute = true;
  bool found = false;
  for (const SimResult& r : simulate(sim_model_preset("175b"), cluster_preset("A100"), {992}, o)) {
    if (r.plan.kind != SimStrategy::FSDP_TP || r.plan.tp != 8) continue;
    found = true;
    CHECK(r.plan.dp == 124);
    CHECK(r.feasible);
    CHECK(r.hardware_tflops_per_gpu == Approx(147).epsilon(0.25));
  }
  CHECK(found);
}

TEST_CASE("cluster files and simulation flags: errors say what is valid", "[simulate]") {
  using V = std::vector<std::string>;
  const Options o = parse_options(V{"--simulate", "--cluster", "A100", "--gpus", "8,64",
                                    "--sim-model", "70b", "--global-batch", "64", "--recompute",
                                    "--seq", "2048", "--efficiency", "0.4"});
  CHECK(o.simulate);
  CHECK(o.gpus == std::vector<int64_t>{8, 64});
  CHECK(o.sim.recompute);
  CHECK(o.sim.seq == 2048);
  CHECK(o.sim.efficiency == 0.4);
  CHECK_THROWS_WITH(parse_options(V{"--sim-model", "13b"}),
                    Catch::Contains("valid: 7b, 70b, 175b"));
  CHECK_THROWS_WITH(parse_options(V{"--gpus", "8,x"}), Catch::Contains("expects an integer"));
  CHECK_THROWS_WITH(parse_options(V{"--gpus", "0"}), Catch::Contains("must be >= 1"));
  CHECK_THROWS_WITH(parse_options(V{"--efficiency", "1.5"}), Catch::Contains("(0, 1]"));
  CHECK_THROWS_WITH(parse_options(V{"--efficiency", "1e-300"}), Catch::Contains("at least 1e-06"));
  for (const char* flag : {"--gpus", "--global-batch", "--micro-batch", "--seq"}) {
    INFO(flag);
    CHECK_THROWS_WITH(parse_options(V{flag, "4611686018427387904"}),
                      Catch::Contains(flag) && Catch::Contains("must be <= "));
  }
  CHECK_THROWS_WITH(parse_options(V{"--global-batch"}), Catch::Contains("expects a value"));
  CHECK_THROWS_WITH(cluster_named("8xB200"), Catch::Contains("valid --cluster values: 8xH100"));
  CHECK_THROWS_WITH(cluster_preset("8xB200"), Catch::Contains("valid: 8xH100, 8xH200, A100"));

  const std::string path = "simulate_test_cluster.txt";
  const std::string good =
      "# two nodes of four\nname = mine\ngpus_per_node = 4\nintra_node_GBps = 100\n"
      "intra_node_latency_us = 2\ninter_node_GBps = 12.5\ninter_node_latency_us = 10\n"
      "bf16_TFLOPs = 100\nmemory_TBps = 1\nmemory_GB = 40\n";
  { std::ofstream(path) << good; }
  const Cluster c = cluster_named(path);
  CHECK(c.name == "mine");
  CHECK(c.gpus_per_node == 4);
  CHECK(c.inter_bytes_per_s == Approx(12.5e9));
  CHECK(c.memory_bytes == Approx(40e9));
  CHECK(c.compute_efficiency == 0.5);
  { std::ofstream(path) << "name = x\nnvlink = 900\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path),
                    Catch::Contains(path + ":2") && Catch::Contains("unknown key 'nvlink'") &&
                        Catch::Contains("valid keys: name, gpus_per_node, intra_node_GBps"));
  { std::ofstream(path) << "gpus_per_node 8\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path),
                    Catch::Contains(path + ":1") && Catch::Contains("expected 'key = value'"));
  { std::ofstream(path) << "\n\nmemory_GB = lots\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path),
                    Catch::Contains(path + ":3") && Catch::Contains("positive number, got 'lots'"));
  { std::ofstream(path) << good << "compute_efficiency = 2\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path), Catch::Contains("(0, 1]"));
  // Absurd values (issue 52, rows 3 and 12): refused with the valid range, never a SIGFPE from
  // a doubling loop that overflows or a negative time.
  for (const char* absurd : {"gpus_per_node = 4611686018427387904", "memory_GB = inf",
                             "bf16_TFLOPs = 1e308", "inter_node_GBps = 1e300"}) {
    INFO(absurd);
    const std::string key = std::string(absurd).substr(0, std::string(absurd).find(' '));
    std::string text = good;
    const size_t at = text.find(key + " = ");
    if (at == std::string::npos) {
      text += std::string(absurd) + "\n";
    } else {
      text.replace(at, text.find('\n', at) - at, absurd);
    }
    { std::ofstream(path) << text; }
    CHECK_THROWS_WITH(cluster_from_file(path),
                      Catch::Contains(key) && Catch::Contains("is out of range; valid: (0, "));
  }
  { std::ofstream(path) << good << "compute_efficiency = 1e-300\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path), Catch::Contains("at least 1e-06"));
  { std::ofstream(path) << good << "memory_GB = 80\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path), Catch::Contains("memory_GB is given twice"));
  { std::ofstream(path) << "name = partial\ngpus_per_node = 8\n"; }
  CHECK_THROWS_WITH(cluster_from_file(path), Catch::Contains("lacks intra_node_GBps"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(cluster_from_file("no/such/cluster"), Catch::Contains("cannot read"));
}

}  // namespace
}  // namespace tessera::shardbench
