// Printing of tensors in PyTorch's layout: tensor([[1., 2.], [3., 4.]], dtype=float64).

#include <cmath>
#include <sstream>

#include "tessera/runtime/distributed.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

namespace {

constexpr int64_t kSummarizeAbove = 1000;  // torch's print threshold
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  bool floating;
  bool all_integral_values = true;  // floats that all have integer values print as "1."
  bool scientific = false;

  std::string format(double v) const {
    if (!floating) return fmt::format("{}", static_cast<int64_t>(v));
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (scientific) return fmt::format("{:.4e}", v);
    if (all_integral_values) return fmt::format("{:.0f}.", v);
    return fmt::format("{:.4f}", v);
  }
};

void print_rec(std::ostringstream& os, const Tensor& t, const Formatter& f, int64_t depth,
               bool summarize, int indent) {
  if (t.dim() == 0) {
    os << (t.dtype() == kBool ? (t.item().to_bool() ? "True" : "False")
                              : f.format(t.item().to_double()));
    return;
  }
  int64_t n = t.size(0);
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
      os << "...";
      i = n - kEdgeItems - 1;
      os << (t.dim() == 1 ? ", " : ",\n" + std::string(indent + depth + 1, ' '));
      continue;
    }
    print_rec(os, t.select(0, i), f, depth + 1, summarize, indent);
    if (i + 1 < n) {
      if (t.dim() == 1) {
        os << ", ";
      } else {
        os << ',' << std::string(t.dim() - 1, '\n') << std::string(indent + depth + 1, ' ');
      }
    }
  }
  os << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  // Printing on one rank must not start a collective: a DTensor prints its layout.
  if (t.is_distributed()) return os << distributed_hooks().describe(t);
  Tensor c = t.cpu();
  Formatter f{is_floating_point(t.dtype())};
  bool summarize = t.numel() > kSummarizeAbove;
  if (f.floating && t.numel() > 0) {
    Tensor d = c.to(kFloat64).contiguous();
    const double* p = d.data_ptr<double>();
    double max_abs = 0, min_abs = INFINITY;
    for (int64_t i = 0; i < d.numel(); ++i) {
      if (!std::isfinite(p[i])) continue;
      if (p[i] != std::floor(p[i])) f.all_integral_values = false;
      max_abs = std::max(max_abs, std::abs(p[i]));
      if (p[i] != 0) min_abs = std::min(min_abs, std::abs(p[i]));
    }
    f.scientific = max_abs >= 1e8 || (min_abs < 1e-4 && !f.all_integral_values) ||
                   (min_abs != INFINITY && max_abs / min_abs > 1000 && !f.all_integral_values);
  }
  std::ostringstream out;
  out << "tensor(";
  if (t.numel() == 0 && t.dim() > 0) {
    out << "[]";
  } else {
    print_rec(out, c, f, 0, summarize, 7);
  }
  if (t.numel() == 0 && t.dim() > 0 && t.dim() != 1) out << ", size=" << t.sizes();
  if (t.dtype() != kFloat32 && t.dtype() != kInt64 && t.dtype() != kBool) {
    out << ", dtype=" << t.dtype();
  }
  if (!t.device().is_cpu()) out << ", device='" << t.device() << "'";
  out << ')';
  return os << out.str();
}

}  // namespace tessera
