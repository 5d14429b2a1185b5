#include "tessera/dtensor/rule_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/dtensor_functions.h"
#include "tessera/dtensor/local_layout.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/shape.h"

namespace tessera::dtensor {

namespace {

Placements all_replicate(const DeviceMesh& mesh) {
  return Placements(static_cast<size_t>(mesh.ndim()), Replicate());
}

// Relative tolerance of a dtype's sums taken in another order.
double tolerance_of(DType dtype) {
  if (dtype == kFloat64) return 1e-10;
  if (dtype == kFloat32) return 1e-4;
  return 1e-2;  // float16, bfloat16
}

struct Difference {
  int64_t index = 0;
  double got = 0.0;
  double want = 0.0;
};

// The first element where `got` differs from `want`, if any. Floating values compare within
// `rtol` of the element plus `rtol` of the largest finite magnitude; NaN matches NaN, an infinity
// only itself.
std::optional<Difference> first_difference(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to(kFloat64).contiguous().to_vector<double>();
  const std::vector<double> b = want.to(kFloat64).contiguous().to_vector<double>();
  const bool floating = is_floating_point(want.dtype());
  const double rtol = floating ? tolerance_of(want.dtype()) : 0.0;
  double largest = 0.0;
  for (double v : b) {
    if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
  }
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    const bool same = std::isinf(b[i]) || std::isinf(a[i])
                          ? a[i] == b[i]
                          : std::abs(a[i] - b[i]) <= rtol * (std::abs(b[i]) + largest);
    if (!same) return Difference{static_cast<int64_t>(i), a[i], b[i]};
  }
  return std::nullopt;
}

[[noreturn]] void wrong_rule(const char* op, const std::vector<Placements>& input_placements,
                             const std::vector<Placements>& output_placements,
                             const std::string& what) {
  TS_CHECK(false, "[", op, "] the sharding rule registered for '", op,
           "' does not hold here (checked by register_sharding's validate): run with inputs ",
           describe_placements(input_placements), " and outputs ",
           describe_placements(output_placements), ", ", what,
           "; fix the rule, or unregister_sharding(\"", op, "\") for the built-in one");
}

}  // namespace

std::string describe_placements(const std::vector<Placements>& per_tensor) {
  std::string s;
  for (const Placements& ps : per_tensor) {
    s += (s.empty() ? "" : ", ") + (ps.empty() ? std::string("absent") : to_string(ps));
  }
  return s;
}

bool checking_rule(bool validate_option) {
  if (validate_option) return true;
  static const bool from_environment = [] {
    const char* v = std::getenv("TESSERA_VALIDATE_SHARDING");
    return v != nullptr && std::strcmp(v, "") != 0 && std::strcmp(v, "0") != 0;
  }();
  return from_environment;
}

WholeCall gather_whole_call(const std::vector<Tensor>& locals,
                            const std::vector<std::shared_ptr<const DTensorSpec>>& specs) {
  const NoGradGuard no_grad;
  WholeCall whole;
  whole.generator_offset = default_generator().offset();
  whole.inputs.resize(locals.size());
  for (size_t i = 0; i < locals.size(); ++i) {
    if (specs[i] == nullptr) continue;
    const Placements target = all_replicate(specs[i]->mesh);
    // A copy either way: an in-place op must not write the whole input the check runs on.
    whole.inputs[i] = specs[i]->placements == target
                          ? locals[i].clone()
                          : redistribute_local(locals[i], specs[i], target, RedistributeOptions{});
  }
  return whole;
}

void check_rule_result(const char* op, const WholeCall& whole, const std::vector<Tensor>& outputs,
                       const std::vector<Shape>& output_shapes, const DeviceMesh& mesh,
                       const std::vector<Placements>& input_placements,
                       const std::vector<Placements>& output_placements, bool in_place,
                       const LocalOp& local) {
  const NoGradGuard no_grad;
  std::vector<DTensorSpec> in_specs;
  for (const Tensor& t : whole.inputs) {
    if (!t.defined()) {
      in_specs.push_back(DTensorSpec{mesh, {}, {}, {}, kFloat32});
      continue;
    }
    in_specs.push_back(DTensorSpec{mesh, all_replicate(mesh), t.sizes(),
                                   contiguous_strides(t.sizes()), t.dtype()});
  }
  std::vector<DTensorSpec> out_specs;
  for (const Shape& shape : output_shapes) {
    out_specs.push_back(
        DTensorSpec{mesh, all_replicate(mesh), shape, contiguous_strides(shape), kFloat32});
  }
  const CallLayout layout(op, mesh, in_specs, out_specs);
  // The generator where the sharded call started, then where it left it.
  Generator& generator = default_generator();
  const uint64_t after = generator.offset();
  generator.set_offset(whole.generator_offset);
  std::vector<Tensor> expected = local(LocalCall{whole.inputs, output_shapes, layout});
  generator.set_offset(after);
  if (in_place) expected = {whole.inputs[0]};
  TS_CHECK(expected.size() >= outputs.size(), "[", op, "] the op gave ", expected.size(),
           " outputs on the whole tensors and ", outputs.size(), " sharded");
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor got = DTensor(outputs[o]).full_tensor();
    const Tensor& want = expected[o];
    if (got.sizes() != want.sizes() || got.dtype() != want.dtype()) {
      wrong_rule(op, input_placements, output_placements,
                 fmt::format("output {} gathered has shape {} and dtype {} where the op on the "
                             "whole tensors gives shape {} and dtype {}",
                             o, got.sizes(), dtype_name(got.dtype()), want.sizes(),
                             dtype_name(want.dtype())));
    }
    const std::optional<Difference> d = first_difference(got, want);
    if (!d.has_value()) continue;
    wrong_rule(op, input_placements, output_placements,
               fmt::format("output {} differs from '{}' on the whole tensors at flat index {} "
                           "(gathered {}, one device {})",
                           o, op, d->index, d->got, d->want));
  }
}

}  // namespace tessera::dtensor
