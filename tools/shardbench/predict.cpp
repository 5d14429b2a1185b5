#include "tools/shardbench/predict.h"

#include <algorithm>
#include <map>
#include <variant>

namespace tessera::shardbench {

namespace {

// A parameter's shape on a tensor-parallel rank 0 (torch.chunk: rank 0 holds the largest chunk).
struct ParamShape {
  int64_t rows = 0;
  int64_t row_numel = 1;
};

// The parameters of one fully_shard unit (or the root's own) on tp rank 0 of `t` ranks.
std::vector<ParamShape> unit_params(const ModelConfig& c, const std::string& unit, int64_t t) {
  const int64_t h = c.hidden, f = 4 * c.hidden;
  if (c.preset == "mlp") {
    if (unit == "0") return {{ceil_div(f, t), h}, {ceil_div(f, t), 1}};
    if (unit == "2") return {{h, ceil_div(f, t)}, {h, 1}};
    return {};
  }
  if (unit == "embed" || unit == "head") return {{ceil_div(c.vocab, t), h}};
  if (unit == "root") return {{h, 1}, {h, 1}};  // the final norm
  const ParamShape norm{h, 1}, col_w{ceil_div(h, t), h}, col_b{ceil_div(h, t), 1};
  return {norm,
          norm,
          col_w,
          col_b,
          col_w,
          col_b,
          col_w,
          col_b,
          {h, ceil_div(h, t)},
          {h, 1},
          norm,
          norm,
          {ceil_div(f, t), h},
          {ceil_div(f, t), 1},
          {h, ceil_div(f, t)},
          {h, 1}};
}

// Elements of a unit's flat buffer over n data-parallel ranks (every parameter padded to n
// chunks of ceil(rows / n) rows).
int64_t padded(const std::vector<ParamShape>& params, int64_t n) {
  int64_t total = 0;
  for (const ParamShape& p : params) total += ceil_div(p.rows, n) * n * p.row_numel;
  return total;
}

class Totals {
 public:
  void add(const std::string& kind, const std::string& dim, int group, int64_t count,
           int64_t bytes) {
    if (count == 0) return;
    CollectiveTotal& t = by_[{kind, dim}];
    t.kind = kind;
    t.mesh_dim = dim;
    t.group_size = group;
    t.count += count;
    t.bytes += bytes;
  }
  std::vector<CollectiveTotal> list() const {
    std::vector<CollectiveTotal> out;
    for (const auto& [key, t] : by_) out.push_back(t);
    return out;
  }

 private:
  std::map<std::pair<std::string, std::string>, CollectiveTotal> by_;
};

constexpr const char* kAR = "all_reduce";
constexpr const char* kAG = "all_gather_into_tensor";
constexpr const char* kRS = "reduce_scatter_tensor";

// fully_shard over n ranks (mesh dim `dim`) of tp rank 0's shards: every unit gathered in forward
// and again in backward, the root (holding the rest) once; each reduce_scattered once.
void fsdp_collectives(Totals& out, const ModelConfig& c, const std::string& dim, int64_t n,
                      int64_t t, int64_t b) {
  std::vector<std::string> units = fsdp_units(c);
  int64_t unit_elems = 0;
  for (const std::string& u : units) {
    if (u.rfind("blocks.", 0) == 0) {
      unit_elems += padded(unit_params(c, "block", t), n);
    } else {
      unit_elems += padded(unit_params(c, u, t), n);
    }
  }
  const int64_t root_elems = padded(unit_params(c, "root", t), n);
  const int64_t nunits = static_cast<int64_t>(units.size()), root = root_elems > 0 ? 1 : 0;
  const int g = static_cast<int>(n);
  out.add(kAG, dim, g, 2 * nunits + root, (2 * unit_elems + root_elems) * b);
  out.add(kRS, dim, g, nunits + root, (unit_elems + root_elems) * b);
}

// Tensor parallel over t ranks (mesh dim `dim`) on `tokens` rows of the batch.
void tp_collectives(Totals& out, const ModelConfig& c, const std::string& dim, int64_t t,
                    int64_t tokens, int64_t b) {
  const int g = static_cast<int>(t);
  const int64_t act = tokens * c.hidden * b;
  if (t == 1) {
    // A group of one rank: redistributes issue nothing, but loss parallel calls its three
    // all_reduces itself (FSDP x TP on 2 ranks has a tp group of one).
    if (c.preset != "mlp") out.add(kAR, dim, g, 3, 3 * tokens * b);
    return;
  }
  if (c.preset == "mlp") {
    out.add(kAR, dim, g, 1, act);  // the Rowwise output
    return;
  }
  // Embedding output (forward), per block wo and down outputs (forward) and the gradients of
  // the q, k, v and up inputs (backward), the head input's gradient, loss parallel's three
  // all_reduces of one value per row (max, sum of exponentials, the target logit).
  out.add(kAR, dim, g, 2 + 6 * c.layers + 3, (2 + 6 * c.layers) * act + 3 * tokens * b);
}

// The parts of the model an explicit plan shards whole on every rank (Note [Predicting a plan]):
// the attention where every block's q, k and v are Colwise and its output projection Rowwise, the
// MLP where every block's up is Colwise and down Rowwise (the MLP model's first and last Linear),
// the vocabulary where the head is Colwise.
ShardedParts plan_sharded_parts(const Strategy& s, const ModelConfig& c) {
  const auto has = [&s](const std::string& path, auto style) {
    for (const auto& [key, planned] : s.plan) {
      if (tessera::detail::plan_key_matches(tessera::detail::split_module_path(key), path)) {
        return std::holds_alternative<decltype(style)>(planned);
      }
    }
    return false;
  };
  ShardedParts parts;
  if (c.preset == "mlp") {
    parts = {false, has("0", ColwiseParallel{}) && has("2", RowwiseParallel{}), false};
  } else {
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string block = "blocks." + std::to_string(i) + ".";
      parts.attention = parts.attention && has(block + "wq", ColwiseParallel{}) &&
                        has(block + "wk", ColwiseParallel{}) &&
                        has(block + "wv", ColwiseParallel{}) &&
                        has(block + "wo", RowwiseParallel{});
      parts.mlp = parts.mlp && has(block + "up", ColwiseParallel{}) &&
                  has(block + "down", RowwiseParallel{});
    }
    parts.vocab = has("head", ColwiseParallel{});
  }
  return parts;
}

}  // namespace

std::vector<CollectiveTotal> expected_collectives(const Strategy& s, const ModelConfig& c) {
  Totals out;
  const int64_t b = static_cast<int64_t>(element_size(c.dtype));
  const int64_t tokens = c.batch * c.seq, h = c.hidden;
  const int64_t n = s.mesh_shape.empty() ? 1 : s.mesh_shape.numel();
  const int g = static_cast<int>(n);
  switch (s.kind) {
    case StrategyKind::Single:
    case StrategyKind::Plan:
      break;
    case StrategyKind::DP: {
      // Every gradient comes out Partial(sum) and is all_reduced when the optimizer reads it;
      // cross_entropy's mean over the sharded batch all_reduces its count of rows (one int64).
      if (c.preset == "mlp") {
        out.add(kAR, "0", g, 4, parameter_count(c) * b);
      } else {
        out.add(kAR, "0", g, 1 + 16 * c.layers + 2 + 1 + 1, parameter_count(c) * b + 8);
      }
      break;
    }
    case StrategyKind::TP:
      tp_collectives(out, c, "0", n, tokens, b);
      break;
    case StrategyKind::SP: {
      const int64_t act = tokens * h * b;
      if (c.preset == "mlp") {
        // Input rows gathered forward, the output reduce_scattered forward and its gradient
        // gathered backward.
        out.add(kAG, "0", g, 2, 2 * act);
        out.add(kRS, "0", g, 1, act);
        break;
      }
      // Per block: the Colwise inputs gathered (forward; q, k and v share one gather), wo and down
      // outputs reduce_scattered (forward) and their gradients gathered (backward), the Colwise
      // input gradients reduce_scattered into their sequence shards (backward; q, k and v's
      // summed into one) and the two norms' weight and bias gradients all_reduced. Around them:
      // the embedding output reduce_scattered and its gradient gathered, the final norm's weight
      // and bias gradients, the head input gathered and its gradient reduce_scattered, loss
      // parallel.
      const int64_t L = c.layers;
      out.add(kAG, "0", g, 4 * L + 2, (4 * L + 2) * act);
      out.add(kRS, "0", g, 4 * L + 2, (4 * L + 2) * act);
      out.add(kAR, "0", g, 4 * L + 2 + 3, (4 * L + 2) * h * b + 3 * tokens * b);
      break;
    }
    case StrategyKind::FSDP:
      fsdp_collectives(out, c, "0", n, 1, b);
      break;
    case StrategyKind::FSDP_TP: {
      const int64_t dp = s.mesh_shape[0], tp = s.mesh_shape[1];
      fsdp_collectives(out, c, "dp", dp, tp, b);
      tp_collectives(out, c, "tp", tp, tokens / dp, b);
      break;
    }
  }
  return out.list();
}

std::optional<TensorParallelShare> tensor_parallel_share_of(const Strategy& s,
                                                            const ModelConfig& c) {
  switch (s.kind) {
    case StrategyKind::TP:
    case StrategyKind::SP:
      return TensorParallelShare{s.mesh_shape.numel(), c.batch, {}};
    case StrategyKind::FSDP_TP:
      return TensorParallelShare{
          s.mesh_shape[1], std::max<int64_t>(1, c.batch / s.mesh_shape[0]), {}};
    case StrategyKind::Plan:
      return TensorParallelShare{s.mesh_shape.numel(), c.batch, plan_sharded_parts(s, c)};
    default:
      return std::nullopt;
  }
}

// Note [Predicting a step]
// A step is predicted as compute + collectives + the copies around them, the threads backend
// overlapping none of them. Compute comes from what the calibration trained on the same rank
// threads, each round beside the strategies: replicas of the whole model on every rank at once
// (DP's and FSDP's compute, DP's optimizer step), replicas of a tensor-parallel rank's share of
// the model under the TP plan on a mesh of its own (TP's, SP's and FSDP x TP's compute: narrow
// GEMMs, the norms, residuals and loss every rank repeats, DTensor dispatch), and the one-thread
// step (one device: its GEMM FLOPs sped up as the GEMM is, the rest as a pointwise op is).
// Collectives come from the alpha-beta lines of the shared cost model applied to the closed-form
// collectives, copies from the copy bandwidth. Known gaps, visible in
// bench/RESULTS.md: SP is predicted from TP's share (its norms on sequence shards are not
// separated); on a shared machine the calibration and the measured steps each move 10-20% from
// run to run, and a calibration round that meets a slow spell shows as a prediction 10-25% high.
// Note [Predicting a plan]
// An explicit plan is predicted as the built-in strategies are where it can be: its collectives
// are those its measured steps issued (a trace of what ran, not a timing: the plan has no closed
// form), priced on the same lines; its compute is the calibrated share of a tensor-parallel rank
// holding 1/n of the parts the plan shards whole (attention, MLP, vocabulary: plan_sharded_parts),
// timed beside the built-in shares. What it shards outside those parts (the embedding, one Linear
// of a pair) is timed whole, as if replicated: an upper bound of that part's compute, which the
// report says beside the share.
Prediction predict(const Strategy& s, const ModelConfig& c, const Calibration& cal,
                   const std::vector<CollectiveTotal>& collectives) {
  const Measurement& one = cal.one_thread;
  Prediction p;
  if (s.kind == StrategyKind::Single) {
    // One device on every intra-op thread: the step's GEMMs (their FLOPs at the one-thread GEMM
    // rate) sped up as the GEMM is, the rest of the step and the optimizer as a pointwise op on
    // the model's activations is; neither past the number of cores.
    const double cores = static_cast<double>(cal.cores);
    const double step = cal.compute.seconds(static_cast<double>(cal.batch));
    const double gemm = std::min(step, step_gemm_flops(c) / cal.gemm_flops_one_thread);
    p.compute_s = gemm / std::min(cores, cal.gemm_flops_per_s / cal.gemm_flops_one_thread) +
                  (step - gemm + one.optimizer_s) / std::min(cores, cal.pointwise_speedup);
    return p;
  }
  const double n = static_cast<double>(s.mesh_shape.numel());
  const double time_shared = n / std::min(n, static_cast<double>(cal.cores));
  // Each rank thread computes on one intra-op thread and the rank threads share the cores, as the
  // calibration's replicas on every rank thread did: under tensor parallelism (TP, SP, FSDP x TP)
  // replicas of a rank's share of the model (narrower GEMMs, the repeated norms, residuals and
  // loss) on its batch; under DP and FSDP of the whole model on 1/n of the batch (n copies of the
  // weights and gradients contending for the cache); an explicit plan as the share of the parts
  // it shards (Note [Predicting a plan]).
  if (const std::optional<TensorParallelShare> share = tensor_parallel_share_of(s, c)) {
    const auto found = cal.tp_share_s.find(*share);
    TS_CHECK(found != cal.tp_share_s.end(), "[tessera-shardbench] no calibration of a ",
             share->degree, "-way tensor-parallel rank on ", share->batch, " sequences for ",
             s.name);
    p.compute_s = found->second;
  } else {  // DP, FSDP
    const double alone = cal.compute.seconds(static_cast<double>(cal.batch) / n) * time_shared;
    p.compute_s = std::max(cal.replicated_compute_s, alone);
  }
  // The optimizer updates 1/n of the parameters; under DP all of them on every rank at once, as
  // the calibration's replicas did (n copies of the optimizer state streaming through memory:
  // 60 ms against the 47 that the one-thread update times the sharing predicted at hidden 512).
  p.compute_s += s.kind == StrategyKind::DP
                     ? std::max(cal.replicated_optimizer_s, one.optimizer_s * time_shared)
                     : one.optimizer_s / n * time_shared;
  // Each rank also copies every message once around its collective: FSDP packs its shards into
  // the flat buffer and cuts the gathered buffer into parameters, writes the gradients into the
  // flat buffer to reduce_scatter; redistributes concatenate or chunk around theirs. All ranks
  // copy at once: the machine's copy bandwidth (read + write) carries n ranks' bytes.
  int64_t message_bytes = 0;
  for (const CollectiveTotal& t : collectives) {
    p.comm_s += cal.line(t.kind, t.group_size).seconds(t.count, t.bytes);
    message_bytes += t.bytes;
  }
  p.local_s = 2.0 * n * static_cast<double>(message_bytes) / cal.model.local_bytes_per_s;
  return p;
}

}  // namespace tessera::shardbench
