#include "tools/shardbench/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "tools/shardbench/json_writer.h"

namespace tessera::shardbench {

// Note [Simulator assumptions]
// - Compute: a step's FLOPs are 3 x the forward's (6 x params x tokens plus attention's
//   4 x seq^2 x hidden per sequence and layer, the full square as Megatron-LM counts it), 4 x with
//   full recomputation; every GPU does 1/N of them at `efficiency` x its bf16 peak
//   (Note [Compute efficiency]).
// - Collectives are rings: all_reduce sends 2 (N-1)/N of the message per rank and takes 2 (N-1)
//   latency steps, all_gather and reduce_scatter (N-1)/N and N-1. A group inside a node runs on
//   NVLink; a group spanning nodes with k members per node runs at min(NVLink, k x the per-GPU
//   NIC) (NCCL's rings spread over every NIC of a node) with the inter-node latency.
// - TP (Megatron layout): per layer the attention and MLP outputs are all_reduced forward (again
//   when recomputed), the attention and MLP input gradients backward (one per projection: q, k, v
//   separately unless fused), plus the vocabulary-parallel embedding's output, the head input's
//   gradient and loss parallel's three all_reduces of one value per row. On the critical path.
// - DP: the gradients are all_reduced in 25 MB buckets (DDP's default) while backward runs;
//   exposed is what backward cannot hide plus the last bucket.
// - FSDP (fully_shard per block, PyTorch's prefetching): each unit is gathered forward and again
//   backward (the root once: it stays unsharded after forward) and its gradient reduce_scattered;
//   exposed is the first unit's gather, what forward cannot hide of the forward gathers, what
//   backward cannot hide of the backward gathers and reduce_scatters, and the last unit's
//   reduce_scatter. With gradient accumulation (micro batches) the collectives run once per step.
//   Unit padding to a multiple of the group is not counted.
// - Optimizer: AdamW on fp32 master weights and moments, memory-bound: 28 bytes moved per
//   parameter the GPU updates (reads master, m, v 12 + bf16 gradient 2; writes 12 + bf16 weight 2).
// - Memory per GPU: bf16 parameters and gradients (FSDP: the shard plus two units gathered, the
//   current and the prefetched one), AdamW state 12 bytes per parameter of the shard, and
//   activations per micro batch after Korthikanti et al. 2022 ("Reducing Activation
//   Recomputation in Large Transformer Models", Table 2, tensor parallel without sequence
//   parallel): s b h (10 + 24/t + 5 a s / (h t)) bytes per layer, without the 5 a s / (h t) term
//   under flash attention, and with full recomputation 2 s b h per layer plus one layer's whole;
//   plus fp32 logits s b V / t x 4 bytes. The constants are the paper's for a 4h GeLU MLP.
//   Allocator fragmentation, workspaces and NCCL buffers are not counted.
//
// Note [Compute efficiency]
// The fraction of peak a step's compute reaches is an assumption: 0.5 by default (every preset),
// set by --efficiency or a cluster file's compute_efficiency. Large bf16 GEMMs reach 70-80% of
// peak on A100 and H100; attention, norms, elementwise ops and kernel launches bring whole steps
// to 40-55% of peak in published runs (Megatron-LM 44-52% on A100, Llama 3 38-43% on H100).

namespace {

// Parameters on tensor-parallel rank 0 of t, split by where fully_shard puts them.
struct RankParams {
  int64_t layer = 0;  // one block
  int64_t embed = 0;  // the embedding unit (with learned positions)
  int64_t head = 0;   // the head unit (0 when tied)
  int64_t root = 0;   // the final norm
  int64_t total(int64_t layers) const { return layers * layer + embed + head + root; }
  int64_t units(int64_t layers) const { return 1 + layers + (head > 0 ? 1 : 0); }
};

RankParams rank_params(const SimModel& m, int64_t t) {
  const int64_t h = m.hidden, f = m.ffn_hidden, kv = m.kv_heads * (m.hidden / m.heads);
  const int64_t norm = m.norm_bias ? 2 * h : h, bias = m.biases ? 1 : 0;
  // Column-parallel: rows sharded (weight and bias); row-parallel: columns sharded, bias whole.
  auto colwise = [&](int64_t rows) { return ceil_div(rows, t) * (h + bias); };
  auto rowwise = [&](int64_t cols) { return h * ceil_div(cols, t) + bias * h; };
  int64_t attention = 0, mlp = 0;
  if (m.fused_qkv) {
    attention = colwise(h + 2 * kv);
  } else {
    attention = colwise(h) + 2 * colwise(kv);
  }
  attention += rowwise(h);
  if (m.gated_mlp) {
    mlp = m.fused_qkv ? colwise(2 * f) : 2 * colwise(f);
  } else {
    mlp = colwise(f);
  }
  mlp += rowwise(f);
  RankParams r;
  r.layer = 2 * norm + attention + mlp;
  r.embed = ceil_div(m.vocab, t) * h + (m.position_embeddings ? m.seq * h : 0);
  r.head = m.tied_embeddings ? 0 : ceil_div(m.vocab, t) * h;
  r.root = norm;
  return r;
}

struct Link {
  double bytes_per_s = 0.0;
  double latency_s = 0.0;
};

// A group of `size` ranks at `stride` (TP groups are contiguous, DP groups stride over TP).
Link link_for(const Cluster& c, int64_t size, int64_t stride) {
  if (size * stride <= c.gpus_per_node) return {c.intra_bytes_per_s, c.intra_latency_s};
  const int64_t per_node = std::clamp<int64_t>(c.gpus_per_node / stride, 1, size);
  return {std::min(c.intra_bytes_per_s, static_cast<double>(per_node) * c.inter_bytes_per_s),
          c.inter_latency_s};
}

double collective_s(const Link& l, const std::string& kind, int64_t group, int64_t count,
                    double bytes) {
  if (group <= 1 || count == 0) return 0.0;
  const double steps = (kind == "all_reduce" ? 2.0 : 1.0) * static_cast<double>(group - 1);
  return ring_traffic(kind, group, bytes) / l.bytes_per_s +
         static_cast<double>(count) * steps * l.latency_s;
}

constexpr const char* kAR = "all_reduce";
constexpr const char* kAG = "all_gather_into_tensor";
constexpr const char* kRS = "reduce_scatter_tensor";

bool has_dp(SimStrategy s) { return s != SimStrategy::TP; }
bool sharded(SimStrategy s) { return s == SimStrategy::FSDP || s == SimStrategy::FSDP_TP; }

int64_t seq_of(const SimModel& m, const SimOptions& o) { return o.seq > 0 ? o.seq : m.seq; }

double forward_flops_per_sequence(const SimModel& m, int64_t s) {
  // Every weight matrix's multiply-adds (the embedding lookup is none; a tied head still is), and
  // attention's scores and values: 2 s^2 h multiply-adds per layer.
  const RankParams p = rank_params(m, 1);
  const double norms_and_biases =
      static_cast<double>(m.layers * (2 * (m.norm_bias ? 2 : 1) * m.hidden) + p.root);
  const double matmul = static_cast<double>(p.total(m.layers) - p.embed) - norms_and_biases +
                        static_cast<double>(m.vocab * m.hidden) * (m.tied_embeddings ? 1 : 0);
  const double sd = static_cast<double>(s);
  return 2.0 * sd * matmul +
         4.0 * sd * sd * static_cast<double>(m.hidden) * static_cast<double>(m.layers);
}

}  // namespace

std::vector<std::string> sim_model_presets() {
  return {"7b", "70b", "175b", "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18.4b"};
}

SimModel sim_model_preset(const std::string& name) {
  // LLaMA-2 (Touvron et al. 2023, "Llama 2", Table 1 and the released configs): RMSNorm, SwiGLU,
  // no biases, untied head, vocabulary 32000, context 4096; 70B uses 8 key/value heads.
  SimModel llama{.name = name,
                 .gated_mlp = true,
                 .biases = false,
                 .norm_bias = false,
                 .tied_embeddings = false,
                 .position_embeddings = false,
                 .fused_qkv = false};
  llama.vocab = 32000;
  llama.seq = 4096;
  // GPT as Megatron-LM trains it (Narayanan et al. 2021): LayerNorm, biases, tied embedding,
  // learned positions, fused qkv; vocabulary 51200, sequence 2048, MLP 4h.
  SimModel gpt{.name = name,
               .gated_mlp = false,
               .biases = true,
               .norm_bias = true,
               .tied_embeddings = true,
               .position_embeddings = true,
               .fused_qkv = true};
  gpt.vocab = 51200;
  gpt.seq = 2048;
  auto shape = [](SimModel m, int64_t layers, int64_t hidden, int64_t heads, int64_t kv_heads,
                  int64_t ffn) {
    m.layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.kv_heads = kv_heads;
    m.ffn_hidden = ffn;
    return m;
  };
  if (name == "7b") return shape(llama, 32, 4096, 32, 32, 11008);
  if (name == "70b") return shape(llama, 80, 8192, 64, 8, 28672);
  // GPT-3 175B (Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048).
  if (name == "175b") return shape(gpt, 96, 12288, 96, 96, 4 * 12288);
  // Megatron-LM (Narayanan et al. 2021) Table 1, the rows with pipeline-parallel size 1.
  if (name == "gpt-1.7b") return shape(gpt, 24, 2304, 24, 24, 4 * 2304);
  if (name == "gpt-3.6b") return shape(gpt, 30, 3072, 32, 32, 4 * 3072);
  if (name == "gpt-7.5b") return shape(gpt, 36, 4096, 32, 32, 4 * 4096);
  if (name == "gpt-18.4b") return shape(gpt, 40, 6144, 48, 48, 4 * 6144);
  TS_CHECK(false, "[tessera-shardbench] unknown --sim-model '", name,
           "'; valid: 7b, 70b, 175b, gpt-1.7b, gpt-3.6b, gpt-7.5b, gpt-18.4b");
  return {};
}

SimModel sim_model_from(const ModelConfig& c) {
  TS_CHECK(c.preset == "transformer", "[tessera-shardbench] the simulator models transformers, ",
           "not '", c.preset, "'");
  // examples/transformer_block.h: LayerNorm with bias, separate q, k, v, o with biases, a 4h GeLU
  // MLP with biases; an untied head without bias, no position embeddings.
  return {.name = "measured transformer",
          .layers = c.layers,
          .hidden = c.hidden,
          .heads = c.heads,
          .kv_heads = c.heads,
          .ffn_hidden = 4 * c.hidden,
          .vocab = c.vocab,
          .seq = c.seq,
          .gated_mlp = false,
          .biases = true,
          .norm_bias = true,
          .tied_embeddings = false,
          .position_embeddings = false,
          .fused_qkv = false};
}

int64_t sim_parameter_count(const SimModel& m) { return rank_params(m, 1).total(m.layers); }

std::string sim_strategy_name(SimStrategy s) {
  switch (s) {
    case SimStrategy::DP:
      return "DP";
    case SimStrategy::FSDP:
      return "FSDP";
    case SimStrategy::TP:
      return "TP";
    case SimStrategy::DP_TP:
      return "DP x TP";
    case SimStrategy::FSDP_TP:
      return "FSDP x TP";
  }
  return "";
}

double ring_traffic(const std::string& kind, int64_t group_size, double bytes) {
  const double n = static_cast<double>(group_size);
  return (kind == kAR ? 2.0 : 1.0) * (n - 1.0) / n * bytes;
}

std::vector<SimCollective> sim_collectives(const SimModel& m, const SimPlan& p, int64_t sequences,
                                           const SimOptions& o) {
  std::vector<SimCollective> out;
  const RankParams r = rank_params(m, p.tp);
  const int64_t b = o.param_bytes, L = m.layers;
  if (p.dp > 1 && sharded(p.kind)) {
    const int64_t units = r.units(L), unit_elems = r.total(L) - r.root;
    out.push_back({kAG, "dp", p.dp, 2 * units + 1, (2 * unit_elems + r.root) * b});
    out.push_back({kRS, "dp", p.dp, units + 1, r.total(L) * b});
  } else if (p.dp > 1 && has_dp(p.kind)) {
    const int64_t bytes = r.total(L) * b, bucket = 25 * 1000 * 1000;
    out.push_back({kAR, "dp", p.dp, ceil_div(bytes, bucket), bytes});
  }
  if (p.tp > 1) {
    const int64_t tokens = sequences * seq_of(m, o), act = tokens * m.hidden * b;
    const int64_t backward = (m.fused_qkv ? 1 : 3) + (m.gated_mlp && !m.fused_qkv ? 2 : 1);
    const int64_t per_layer = 2 + backward + (o.recompute ? 2 : 0);
    out.push_back(
        {kAR, "tp", p.tp, 2 + per_layer * L + 3, (2 + per_layer * L) * act + 3 * tokens * b});
  }
  return out;
}

SimMemory sim_memory(const SimModel& m, const SimPlan& p, int64_t sequences, const SimOptions& o) {
  TS_CHECK(o.micro_batch >= 1 && seq_of(m, o) >= 1, "[tessera-shardbench] micro batch and ",
           "sequence must be >= 1");
  const RankParams r = rank_params(m, p.tp);
  const double total = static_cast<double>(r.total(m.layers)),
               pb = static_cast<double>(o.param_bytes);
  SimMemory mem;
  if (sharded(p.kind)) {
    const double shard = total / static_cast<double>(p.dp);
    const double unit = static_cast<double>(std::max({r.layer, r.embed, r.head}));
    mem.params = (shard + 2.0 * unit) * pb;
    mem.grads = shard * pb;
    mem.optimizer = 12.0 * shard;
  } else {
    mem.params = total * pb;
    mem.grads = total * pb;
    mem.optimizer = 12.0 * total;
  }
  const double s = static_cast<double>(seq_of(m, o)), h = static_cast<double>(m.hidden);
  const double t = static_cast<double>(p.tp), a = static_cast<double>(m.heads);
  const double mb = static_cast<double>(std::min(o.micro_batch, sequences));
  const double scores = o.flash_attention ? 0.0 : 5.0 * a * s / (h * t);
  const double layer = s * mb * h * (10.0 + 24.0 / t + scores);
  const double layers = static_cast<double>(m.layers);
  mem.activations = (o.recompute ? 2.0 * s * mb * h * layers + layer : layer * layers) +
                    4.0 * s * mb * static_cast<double>(m.vocab) / t;
  return mem;
}

std::vector<SimResult> simulate(const SimModel& m, const Cluster& c,
                                const std::vector<int64_t>& gpus, const SimOptions& o) {
  TS_CHECK(!gpus.empty(), "[tessera-shardbench] --gpus is empty");
  TS_CHECK(o.global_batch >= 1, "[tessera-shardbench] --global-batch must be >= 1");
  const double efficiency = o.efficiency > 0.0 ? o.efficiency : c.compute_efficiency;
  const int64_t s = seq_of(m, o);
  const double forward = forward_flops_per_sequence(m, s) * static_cast<double>(o.global_batch);
  const double model_flops = 3.0 * forward,
               hardware_flops = model_flops + (o.recompute ? forward : 0.0);
  std::vector<SimResult> results;
  for (const int64_t n : gpus) {
    TS_CHECK(n >= 1, "[tessera-shardbench] --gpus must be >= 1, got ", n);
    std::vector<SimPlan> plans{{SimStrategy::DP, n, 1}};
    if (n > 1) plans.push_back({SimStrategy::FSDP, n, 1});
    for (int64_t t = 2; t <= std::min(n, c.gpus_per_node); t *= 2) {
      if (n % t != 0 || c.gpus_per_node % t != 0 || m.heads % t != 0 || m.kv_heads % t != 0)
        continue;
      if (t == n) {
        plans.push_back({SimStrategy::TP, 1, t});
      } else {
        plans.push_back({SimStrategy::DP_TP, n / t, t});
        plans.push_back({SimStrategy::FSDP_TP, n / t, t});
      }
    }
    const size_t first = results.size();
    for (const SimPlan& p : plans) {
      SimResult r;
      r.plan = p;
      r.gpus = n;
      if (o.global_batch % p.dp != 0) {
        r.note = "global batch " + std::to_string(o.global_batch) + " is not a multiple of dp " +
                 std::to_string(p.dp);
        results.push_back(r);
        continue;
      }
      const int64_t sequences = o.global_batch / p.dp;
      const double nd = static_cast<double>(n);
      r.compute_s = hardware_flops / nd / (c.peak_flops * efficiency);
      const double forward_s = r.compute_s * forward / hardware_flops;
      const double backward_s = r.compute_s - forward_s;
      const Link dp_link = link_for(c, p.dp, p.tp), tp_link = link_for(c, p.tp, 1);
      const RankParams rp = rank_params(m, p.tp);
      double tp_s = 0.0, ar_s = 0.0, ag_s = 0.0, rs_s = 0.0;
      int64_t buckets = 1;
      for (const SimCollective& col : sim_collectives(m, p, sequences, o)) {
        const bool on_dp = col.mesh_dim == "dp";
        const double t = collective_s(on_dp ? dp_link : tp_link, col.kind, col.group_size,
                                      col.count, static_cast<double>(col.bytes));
        r.comm_s += t;
        if (!on_dp) {
          tp_s += t;
        } else if (col.kind == kAR) {
          ar_s = t;
          buckets = col.count;
        } else {
          (col.kind == kAG ? ag_s : rs_s) = t;
        }
      }
      // See Note [Simulator assumptions]: TP on the critical path, DP behind backward, FSDP's
      // forward gathers behind forward and its backward gathers and reduce_scatters behind
      // backward (half the gathered bytes each way).
      r.exposed_comm_s = tp_s;
      if (ar_s > 0.0) {
        r.exposed_comm_s += std::max(0.0, ar_s - backward_s) + ar_s / static_cast<double>(buckets);
      }
      if (ag_s > 0.0) {
        const double units = static_cast<double>(rp.units(m.layers));
        r.exposed_comm_s += ag_s / (2.0 * units + 1.0) + std::max(0.0, ag_s / 2.0 - forward_s) +
                            std::max(0.0, ag_s / 2.0 + rs_s - backward_s) + rs_s / (units + 1.0);
      }
      const double updated = static_cast<double>(rp.total(m.layers)) /
                             (sharded(p.kind) ? static_cast<double>(p.dp) : 1.0);
      r.optimizer_s = 28.0 * updated / c.memory_bytes_per_s;
      r.step_s = r.compute_s + r.exposed_comm_s + r.optimizer_s;
      r.mfu = model_flops / (r.step_s * nd * c.peak_flops);
      r.hardware_tflops_per_gpu = hardware_flops / (r.step_s * nd) / 1e12;
      r.tokens_per_s_per_gpu = static_cast<double>(o.global_batch * s) / r.step_s / nd;
      r.memory = sim_memory(m, p, sequences, o);
      r.feasible = r.memory.total() <= c.memory_bytes;
      if (!r.feasible) {
        r.note = "needs " +
                 std::to_string(static_cast<int64_t>(std::ceil(r.memory.total() / 1e9))) +
                 " GB of " + std::to_string(static_cast<int64_t>(c.memory_bytes / 1e9));
      }
      results.push_back(r);
    }
    SimResult* best = nullptr;
    for (size_t i = first; i < results.size(); ++i) {
      if (results[i].feasible && (best == nullptr || results[i].step_s < best->step_s))
        best = &results[i];
    }
    if (best != nullptr) best->best = true;
  }
  return results;
}

namespace {

// A figure of the cluster line in whole units, or three significant digits below 100 (a CPU host
// taken as a cluster has GEMM rates of a fraction of a TFLOP/s).
std::string figure(double v) {
  return v >= 100.0 ? fmt::format("{:.0f}", v) : fmt::format("{:.3g}", v);
}

std::string setup_text(const SimModel& m, const Cluster& c, const SimOptions& o) {
  const double eff = o.efficiency > 0.0 ? o.efficiency : c.compute_efficiency;
  return fmt::format(
      "simulated: {} ({:.2f} B parameters: {} layers, hidden {}, {} heads ({} kv), ffn {}, vocab "
      "{}) on {} ({} GPUs per node; NVLink {} GB/s, IB {} GB/s per GPU; bf16 {} "
      "TFLOP/s at {:.0f}% efficiency; {} GB); global batch {} x seq {}, micro batch {}{}{}\n",
      m.name, static_cast<double>(sim_parameter_count(m)) / 1e9, m.layers, m.hidden, m.heads,
      m.kv_heads, m.ffn_hidden, m.vocab, c.name, c.gpus_per_node, figure(c.intra_bytes_per_s / 1e9),
      figure(c.inter_bytes_per_s / 1e9), figure(c.peak_flops / 1e12), 100 * eff,
      figure(c.memory_bytes / 1e9), o.global_batch, seq_of(m, o), o.micro_batch,
      o.recompute ? ", full recomputation" : "", o.flash_attention ? "" : ", no flash attention");
}

}  // namespace

std::string simulation_table(const SimModel& m, const Cluster& c, const SimOptions& o,
                             const std::vector<SimResult>& results) {
  std::string s = setup_text(m, c, o);
  s += fmt::format("{:>6} {:<10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>12} {:>9} {:>9} {:>9}  {}\n",
                   "GPUs", "strategy", "dp x tp", "step s", "compute s", "exp comm s", "MFU",
                   "tok/s/GPU", "TFLOP/s", "mem GB", "feasible", "");
  for (const SimResult& r : results) {
    const std::string mesh = fmt::format("{} x {}", r.plan.dp, r.plan.tp);
    if (r.step_s == 0.0) {
      s += fmt::format("{:>6} {:<10} {:>10} {:>10}  {}\n", r.gpus, sim_strategy_name(r.plan.kind),
                       mesh, "-", r.note);
      continue;
    }
    s += fmt::format(
        "{:>6} {:<10} {:>10} {:>10.3f} {:>10.3f} {:>10.3f} {:>5.1f}% {:>12.0f} {:>9.1f} {:>9.1f} "
        "{:>9}  {}{}\n",
        r.gpus, sim_strategy_name(r.plan.kind), mesh, r.step_s, r.compute_s, r.exposed_comm_s,
        100 * r.mfu, r.tokens_per_s_per_gpu, r.hardware_tflops_per_gpu, r.memory.total() / 1e9,
        r.feasible ? "yes" : "no", r.best ? "<- best" : "", r.note);
  }
  s += "TFLOP/s: per GPU, counting a recomputed forward; exp comm: the collectives' time not "
       "hidden behind compute; memory: parameters, gradients, AdamW state, activations\n";
  return s;
}

std::string simulation_json(const SimModel& m, const Cluster& c, const SimOptions& o,
                            const std::vector<SimResult>& results) {
  JsonObject model;
  model.text("name", m.name)
      .integer("parameters", sim_parameter_count(m))
      .integer("layers", m.layers)
      .integer("hidden", m.hidden)
      .integer("heads", m.heads)
      .integer("kv_heads", m.kv_heads)
      .integer("ffn_hidden", m.ffn_hidden)
      .integer("vocab", m.vocab)
      .integer("seq", seq_of(m, o));
  JsonObject cluster;
  cluster.text("name", c.name)
      .integer("gpus_per_node", c.gpus_per_node)
      .number("intra_bytes_per_s", c.intra_bytes_per_s)
      .number("intra_latency_s", c.intra_latency_s)
      .number("inter_bytes_per_s", c.inter_bytes_per_s)
      .number("inter_latency_s", c.inter_latency_s)
      .number("peak_flops", c.peak_flops)
      .number("memory_bytes_per_s", c.memory_bytes_per_s)
      .number("memory_bytes", c.memory_bytes)
      .number("compute_efficiency", o.efficiency > 0.0 ? o.efficiency : c.compute_efficiency);
  JsonObject options;
  options.integer("global_batch", o.global_batch)
      .integer("micro_batch", o.micro_batch)
      .boolean("recompute", o.recompute)
      .boolean("flash_attention", o.flash_attention);
  Json plans = Json::array();
  for (const SimResult& r : results) {
    JsonObject memory;
    memory.number("params", r.memory.params)
        .number("grads", r.memory.grads)
        .number("optimizer", r.memory.optimizer)
        .number("activations", r.memory.activations)
        .number("total", r.memory.total());
    plans.push_back(JsonObject()
                        .integer("gpus", r.gpus)
                        .text("strategy", sim_strategy_name(r.plan.kind))
                        .integer("dp", r.plan.dp)
                        .integer("tp", r.plan.tp)
                        .number("step_s", r.step_s)
                        .number("compute_s", r.compute_s)
                        .number("comm_s", r.comm_s)
                        .number("exposed_comm_s", r.exposed_comm_s)
                        .number("optimizer_s", r.optimizer_s)
                        .number("mfu", r.mfu)
                        .number("tokens_per_s_per_gpu", r.tokens_per_s_per_gpu)
                        .number("hardware_tflops_per_gpu", r.hardware_tflops_per_gpu)
                        .value("memory_bytes", memory.json())
                        .boolean("feasible", r.feasible)
                        .boolean("best", r.best)
                        .text("note", r.note)
                        .json());
  }
  JsonObject out;
  out.value("model", model.json())
      .value("cluster", cluster.json())
      .value("options", options.json())
      .value("plans", plans);
  return out.str(2) + "\n";
}

}  // namespace tessera::shardbench
