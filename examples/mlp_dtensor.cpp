// One 2-layer MLP, written once against Tensor, run unchanged on plain tensors and on DTensors over
// four rank threads in two layouts:
//   data parallel    x Shard(0) (the batch), every parameter Replicate;
//   tensor parallel  x Replicate, w1 / b1 Shard(0) (column-wise: hidden features), w2 Shard(1)
//                    (row-wise), b2 Replicate (Megatron's MLP).
// Each run computes the loss and its gradients, then takes a few SGD steps in place
// (`w -= lr * w.grad()` under NoGradGuard). The DTensor runs must match the plain run to 1e-5
// relative (float32): the losses, the gradients at the initial values (printed for w1 and w2) and
// the parameters after the steps; gradients and updated parameters must keep the parameters'
// placements. Exits non-zero, naming what differs, when they do not. Also prints the collectives
// each rank issues in the first step.

#include <tessera/tessera.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace ts = tessera;

namespace {

constexpr int64_t kBatch = 16;
constexpr int64_t kIn = 8;
constexpr int64_t kHidden = 32;
constexpr int64_t kOut = 4;
constexpr int kWorld = 4;
constexpr int kSteps = 5;
constexpr double kLr = 0.1;
constexpr double kRelTol = 1e-5;
constexpr uint64_t kSeed = 1234;

// The model: linear -> relu -> linear, loss = mean of the squared outputs. Nothing here knows
// whether its arguments are plain tensors or DTensors.
ts::Tensor mlp_loss(const ts::Tensor& x, const ts::Tensor& w1, const ts::Tensor& b1,
                    const ts::Tensor& w2, const ts::Tensor& b2) {
  const ts::Tensor h = ts::relu(ts::linear(x, w1, b1));
  const ts::Tensor y = ts::linear(h, w2, b2);
  return ts::mean(y * y);
}

// The input and parameters (w1, b1, w2, b2) as full tensors, identical on every call (every rank
// makes them from the same seed).
struct Inputs {
  ts::Tensor x;
  std::vector<ts::Tensor> params;
};

Inputs make_inputs() {
  ts::Generator gen(kSeed);
  Inputs in;
  in.x = ts::randn({kBatch, kIn}, ts::kFloat32, &gen);
  in.params = {
      ts::randn({kHidden, kIn}, ts::kFloat32, &gen) * (1.0 / std::sqrt(static_cast<double>(kIn))),
      ts::randn({kHidden}, ts::kFloat32, &gen) * 0.1,
      ts::randn({kOut, kHidden}, ts::kFloat32, &gen) *
          (1.0 / std::sqrt(static_cast<double>(kHidden))),
      ts::randn({kOut}, ts::kFloat32, &gen) * 0.1,
  };
  return in;
}

const char* const kParamNames[] = {"w1", "b1", "w2", "b2"};

std::string layout_of(const ts::Tensor& t) {
  if (!t.defined()) return "undefined";
  if (!t.is_distributed()) return "plain";
  return ts::to_string(ts::DTensor(t).placements());
}

// The collectives this rank issued under `comm`, as "all_reduce x1, ..." ("none").
std::string describe(const ts::debug::CommDebugMode& comm) {
  std::string out;
  for (const auto& [name, n] : comm.get_comm_counts()) {
    out += (out.empty() ? "" : ", ") + name + " x" + std::to_string(n);
  }
  return out.empty() ? "none" : out;
}

// What a run produced, as full values (the same on every rank).
struct Trace {
  std::vector<double> losses;              // before each step, and after the last
  std::vector<std::vector<float>> grads;   // of each parameter at the initial values
  std::vector<std::string> grad_layouts;   // placements of those gradients
  std::vector<std::vector<float>> params;  // after the steps
  std::vector<std::string> param_layouts;  // placements of the parameters after the steps
  std::vector<std::string> comms;          // collectives of the first step, by phase
};

// The training loop, also written once against Tensor.
Trace train(const ts::Tensor& x, const std::vector<ts::Tensor>& params) {
  Trace trace;
  for (const ts::Tensor& p : params) p.requires_grad_();
  for (int step = 0; step <= kSteps; ++step) {
    for (const ts::Tensor& p : params) p.set_grad(ts::Tensor());
    ts::Tensor loss;
    {
      const ts::debug::CommDebugMode comm;
      loss = mlp_loss(x, params[0], params[1], params[2], params[3]);
      if (step == 0) trace.comms.push_back("forward " + describe(comm));
    }
    trace.losses.push_back(loss.full_tensor().item<double>());
    if (step == kSteps) break;
    {
      const ts::debug::CommDebugMode comm;
      loss.backward();
      if (step == 0) trace.comms.push_back("backward " + describe(comm));
    }
    if (step == 0) {
      for (const ts::Tensor& p : params) {
        trace.grads.push_back(p.grad().to_vector<float>());
        trace.grad_layouts.push_back(layout_of(p.grad()));
      }
    }
    const ts::debug::CommDebugMode comm;
    {
      const ts::NoGradGuard no_grad;
      for (ts::Tensor p : params) p -= kLr * p.grad();  // in place: `p` shares the parameter
    }
    if (step == 0) trace.comms.push_back("SGD update " + describe(comm));
  }
  for (const ts::Tensor& p : params) {
    trace.params.push_back(p.to_vector<float>());
    trace.param_layouts.push_back(layout_of(p));
  }
  return trace;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float e : v) m = std::max(m, std::fabs(static_cast<double>(e)));
  return m;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

struct Layout {
  const char* name;
  ts::Placements x;
  std::vector<ts::Placements> params;  // w1, b1, w2, b2
};

// A DTensor run against the plain one: the report lines, and the checks that failed.
struct Comparison {
  std::string report;
  std::vector<std::string> failures;
};

void check(Comparison& c, bool ok, const std::string& what) {
  if (!ok) c.failures.push_back(what);
}

template <typename... Args>
std::string format(const char* fmt, Args... args) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

Comparison compare(const Layout& layout, const Trace& dist, const Trace& plain) {
  Comparison c;
  c.report += format("  loss %.8f (plain %.8f)", dist.losses.front(), plain.losses.front());
  for (size_t i = 0; i < plain.losses.size(); ++i) {
    const double rel =
        std::fabs(dist.losses[i] - plain.losses[i]) / std::max(std::fabs(plain.losses[i]), 1e-30);
    check(c, rel <= kRelTol,
          "loss at step " + std::to_string(i) +
              format(": %.9g vs plain %.9g", dist.losses[i], plain.losses[i]));
  }
  c.report += format(", after %d SGD steps %.8f", kSteps, dist.losses.back());
  c.report += format(" (plain %.8f)\n", plain.losses.back());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    const double diff = max_abs_diff(dist.grads[i], plain.grads[i]);
    const double scale = std::max(max_abs(plain.grads[i]), 1e-30);
    if (i == 0 || i == 2) {
      c.report += std::string("  grad ") + kParamNames[i] + " " + dist.grad_layouts[i] +
                  format(": max abs diff %.3g (relative %.3g)\n", diff, diff / scale);
    }
    check(c, diff <= kRelTol * scale,
          std::string("grad of ") + kParamNames[i] +
              format(": max abs diff %.3g, max abs %.3g", diff, scale));
    check(c, dist.grad_layouts[i] == ts::to_string(layout.params[i]),
          std::string("grad of ") + kParamNames[i] + " has placements " + dist.grad_layouts[i] +
              ", the parameter " + ts::to_string(layout.params[i]));
  }
  c.report += "  collectives per rank in step 1:";
  for (size_t i = 0; i < dist.comms.size(); ++i) c.report += (i ? "; " : " ") + dist.comms[i];
  c.report += "\n";
  c.report += "  parameters after the steps, max abs diff:";
  for (size_t i = 0; i < plain.params.size(); ++i) {
    const double diff = max_abs_diff(dist.params[i], plain.params[i]);
    const double scale = std::max(max_abs(plain.params[i]), 1e-30);
    c.report += std::string(" ") + kParamNames[i] + format(" %.3g", diff);
    check(c, diff <= kRelTol * scale,
          std::string("parameter ") + kParamNames[i] +
              format(" after the steps: max abs diff %.3g, max abs %.3g", diff, scale));
    check(c, dist.param_layouts[i] == ts::to_string(layout.params[i]),
          std::string("parameter ") + kParamNames[i] + " has placements " + dist.param_layouts[i] +
              " after the steps, " + ts::to_string(layout.params[i]) + " before");
  }
  c.report += "\n";
  return c;
}

// Runs the layout on kWorld rank threads; false on a mismatch or an error.
bool run_distributed(const Layout& layout, const Trace& plain) {
  std::printf("%s on %d ranks: x %s, w1 %s, b1 %s, w2 %s, b2 %s\n", layout.name, kWorld,
              ts::to_string(layout.x).c_str(), ts::to_string(layout.params[0]).c_str(),
              ts::to_string(layout.params[1]).c_str(), ts::to_string(layout.params[2]).c_str(),
              ts::to_string(layout.params[3]).c_str());
  // Each rank compares its own full values; rank 0 reports, the others only where they differ.
  std::vector<Comparison> results(kWorld);
  try {
    ts::dist::run_threads(kWorld, [&](const ts::dist::ProcessGroupPtr& world) {
      const ts::DeviceMesh mesh(ts::DeviceType::CPU, {kWorld});
      const Inputs in = make_inputs();
      const ts::Tensor x = ts::distribute_tensor(in.x, mesh, layout.x);
      std::vector<ts::Tensor> params;
      for (size_t i = 0; i < in.params.size(); ++i) {
        params.push_back(ts::distribute_tensor(in.params[i], mesh, layout.params[i]));
      }
      results[static_cast<size_t>(world->rank())] = compare(layout, train(x, params), plain);
    });
  } catch (const std::exception& e) {
    std::printf("  ERROR: %s\n", e.what());
    return false;
  }
  std::printf("%s", results[0].report.c_str());
  bool ok = true;
  for (size_t rank = 0; rank < results.size(); ++rank) {
    if (rank > 0 && results[rank].failures == results[0].failures) continue;
    for (const std::string& f : results[rank].failures) {
      std::printf("  MISMATCH%s: %s\n",
                  rank == 0 ? "" : (" on rank " + std::to_string(rank)).c_str(), f.c_str());
    }
    ok = ok && results[rank].failures.empty();
  }
  return ok;
}

}  // namespace

int main() {
  std::printf(
      "2-layer MLP %lld-%lld-%lld, batch %lld, float32, loss mean(y^2), %d SGD steps of lr %g\n",
      static_cast<long long>(kIn), static_cast<long long>(kHidden), static_cast<long long>(kOut),
      static_cast<long long>(kBatch), kSteps, kLr);

  const Inputs in = make_inputs();
  const Trace plain = train(in.x, in.params);
  std::printf("plain tensors: loss %.8f, after %d SGD steps %.8f\n", plain.losses.front(), kSteps,
              plain.losses.back());

  const ts::Placements r = {ts::Replicate()};
  const ts::Placements s0 = {ts::Shard(0)};
  const ts::Placements s1 = {ts::Shard(1)};
  const Layout layouts[] = {
      {"data parallel", s0, {r, r, r, r}},
      {"tensor parallel", r, {s0, s0, s1, r}},
  };
  bool ok = true;
  for (const Layout& layout : layouts) ok = run_distributed(layout, plain) && ok;
  if (!ok) {
    std::printf("FAILED: the DTensor runs differ from the plain run beyond %g relative\n", kRelTol);
    return 1;
  }
  std::printf("OK: both layouts match the plain run to %g relative\n", kRelTol);
  return 0;
}
