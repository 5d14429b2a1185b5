#pragma once
// tessera-shardbench --simulate: training steps of a large transformer on a cluster that is not
// here, per strategy (DP, FSDP, TP, DP x TP, FSDP x TP; TP inside a node) and number of GPUs, in
// closed form: compute at a fraction of the cluster's peak, ring collectives on the links their
// groups use, what of them the strategy hides behind compute, the optimizer step on memory
// bandwidth, and memory per GPU (infeasible plans marked). See Note [Simulator assumptions] in
// simulate.cpp for every assumption.

#include <string>
#include <vector>

#include "tools/shardbench/cluster.h"
#include "tools/shardbench/model.h"

namespace tessera::shardbench {

// A decoder-only transformer's shape: embedding, `layers` blocks (norm, attention, norm, MLP),
// final norm, vocabulary head.
struct SimModel {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;  // grouped-query attention: k and v have kv_heads x head size columns
  int64_t ffn_hidden = 0;
  int64_t vocab = 0;
  int64_t seq = 0;
  bool gated_mlp = false;            // SwiGLU: gate and up (h x f) then down (f x h)
  bool biases = false;               // every linear has a bias
  bool norm_bias = false;            // LayerNorm (weight and bias) rather than RMSNorm (weight)
  bool tied_embeddings = false;      // the head reuses the embedding
  bool position_embeddings = false;  // learned, seq x hidden
  bool fused_qkv = false;            // one qkv projection (and one gate+up): one gradient each
};

// "7b", "70b" (LLaMA-2 shapes), "175b" (GPT-3), "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b"
// (Megatron-LM's Table 1 rows without pipeline parallelism). Errors list the valid names.
SimModel sim_model_preset(const std::string& name);
std::vector<std::string> sim_model_presets();
// The transformer tessera-shardbench measures (ModelConfig, preset "transformer"), as a shape.
SimModel sim_model_from(const ModelConfig& c);
int64_t sim_parameter_count(const SimModel& m);

enum class SimStrategy { DP, FSDP, TP, DP_TP, FSDP_TP };
std::string sim_strategy_name(SimStrategy s);

struct SimPlan {
  SimStrategy kind = SimStrategy::DP;
  int64_t dp = 1;
  int64_t tp = 1;
};

struct SimOptions {
  int64_t global_batch = 1024;  // sequences per step
  int64_t micro_batch = 1;      // sequences per forward/backward (gradient accumulation)
  int64_t seq = 0;              // 0: the model's
  bool recompute = false;       // full activation recomputation (one more forward)
  bool flash_attention = true;  // attention keeps no s x s scores
  double efficiency = 0.0;      // 0: the cluster's compute_efficiency
  int64_t param_bytes = 2;      // bf16 parameters, gradients and activations
};

// One rank's collectives of one step by kind and mesh dim ("dp", "tp"), bytes as whole messages
// (as CommDebugMode and expected_collectives count them). `sequences` is the dp rank's batch.
struct SimCollective {
  std::string kind;  // "all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor"
  std::string mesh_dim;
  int64_t group_size = 0;
  int64_t count = 0;
  int64_t bytes = 0;
};
std::vector<SimCollective> sim_collectives(const SimModel& m, const SimPlan& p, int64_t sequences,
                                           const SimOptions& o);
// The bytes one rank sends in a ring for a collective of `bytes` whole: all_reduce
// 2 (N-1)/N bytes, all_gather and reduce_scatter (N-1)/N bytes.
double ring_traffic(const std::string& kind, int64_t group_size, double bytes);

struct SimMemory {
  double params = 0, grads = 0, optimizer = 0, activations = 0;  // bytes per GPU
  double total() const { return params + grads + optimizer + activations; }
};
// Errors: a micro batch or sequence < 1.
SimMemory sim_memory(const SimModel& m, const SimPlan& p, int64_t sequences, const SimOptions& o);

struct SimResult {
  SimPlan plan;
  int64_t gpus = 0;
  double compute_s = 0, comm_s = 0, exposed_comm_s = 0, optimizer_s = 0, step_s = 0;
  double mfu = 0;  // model FLOPs (3 x forward) / (step x GPUs x peak)
  double tokens_per_s_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;  // counting the recomputed forward, as Megatron-LM does
  SimMemory memory;
  bool feasible = false;
  bool best = false;  // the fastest feasible plan for its number of GPUs
  std::string note;   // why infeasible
};

// Every plan for every GPU count (TP degrees: powers of two up to gpus_per_node dividing the
// heads). Errors: an empty GPU list or a count < 1, global batch < 1.
std::vector<SimResult> simulate(const SimModel& m, const Cluster& c,
                                const std::vector<int64_t>& gpus, const SimOptions& o);

std::string simulation_table(const SimModel& m, const Cluster& c, const SimOptions& o,
                             const std::vector<SimResult>& results);
std::string simulation_json(const SimModel& m, const Cluster& c, const SimOptions& o,
                            const std::vector<SimResult>& results);

}  // namespace tessera::shardbench
