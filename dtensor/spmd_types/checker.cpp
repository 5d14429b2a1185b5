#include "tessera/dtensor/spmd_types/checker.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <sstream>

#include "tessera/dtensor/local_layout.h"
#include "tessera/dtensor/rules/rule_table.h"
#include "tessera/dtensor/spmd_types/local_types.h"

namespace tessera::spmd::detail {

// Note [Typing an op]
// Along each mesh dim, with t the types of the op's typed inputs (spmd_types' non-collective
// rules):
//   any I:  every input I -> I; I with another type is an Error (convert it first);
//   any P:  the op must be linear in its P inputs with every other input R: a strategy of the
//           op's sharding rule (dtensor/rules, Note [Partial linearity]) that keeps exactly
//           those inputs Partial(sum) and the others Replicate; its outputs are P where the
//           strategy's are Partial(sum) and R where they are Replicate (a *_like factory). So
//           P + P -> P, P * R -> P, sum(P) -> P, and P + R, P * P, exp(P), P * V are Errors;
//   random: V (each rank's draws are its own);
//   else:   any V -> V, all R -> R.
// Strict mode: a plain (untyped) tensor beside typed ones is an Error; an op the registry does
// not know is an Error; an in-place op must leave its first argument's types as they are.
// Factories without tensor arguments (zeros, ones, full, arange, ...) never reach the dispatch
// and make plain tensors, which spmd::assert_type types (spmd_types types deterministic ones R
// by itself): a factory seam in runtime/ would also type the factories that backward formulas
// and kernels call internally, whose results must stay plain.

namespace {

using dtensor::OpRule;

constexpr const char* kRandomOps[] = {"rand_like", "randn_like", "dropout"};

bool is_random(const char* op) {
  return std::any_of(std::begin(kRandomOps), std::end(kRandomOps),
                     [op](const char* r) { return std::strcmp(op, r) == 0; });
}

struct TypedInputs {
  const DeviceMesh* mesh = nullptr;
  size_t first = 0;                      // the first typed argument
  std::vector<Tensor> locals;            // undefined for an absent input
  std::vector<const LocalTypes*> types;  // null for an absent input
};

TypedInputs gather(const char* op, const std::vector<Tensor>& tensors) {
  TypedInputs in;
  while (typed_meta(tensors[in.first]) == nullptr) ++in.first;
  in.mesh = &mesh_of(tensors[in.first]);
  in.locals.resize(tensors.size());
  in.types.resize(tensors.size(), nullptr);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined()) continue;
    if (typed_meta(t) == nullptr) {
      TS_CHECK(!t.is_distributed(), "[", op, "] argument ", i, " is a DTensor and argument ",
               in.first,
               " a local SPMD-typed tensor (inside local_map with spmd_types=true); pass DTensors "
               "to local_map as arguments instead of using them inside its function");
      TS_CHECK(false, "[", op, "] argument ", i, " is an untyped tensor (shape ", t.sizes(),
               ") and argument ", in.first, " has local SPMD types ",
               to_string(types_of(tensors[in.first])),
               ": strict mode does not mix typed and untyped operands; type it with "
               "spmd::assert_type(t, types) (a deterministic factory's result is R on every mesh "
               "dim) or pass it to local_map as a DTensor");
    }
    TS_CHECK(mesh_of(t) == *in.mesh, "[", op, "] arguments ", in.first, " and ", i,
             " are local SPMD-typed tensors of different meshes (", *in.mesh, " and ", mesh_of(t),
             ")");
    in.locals[i] = typed_local(t);
    in.types[i] = &types_of(t);
  }
  return in;
}

DTensorSpec replicated_spec(const DeviceMesh& mesh, const Shape& shape, DType dtype) {
  return DTensorSpec{mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate()), shape,
                     contiguous_strides(shape), dtype};
}

std::string types_along(const TypedInputs& in, size_t m) {
  std::string s = "[";
  bool first = true;
  for (const LocalTypes* t : in.types) {
    if (t == nullptr) continue;
    if (!first) s += ", ";
    s += to_string((*t)[m]);
    first = false;
  }
  return s + "]";
}

// The output types of an op with Partial inputs along mesh dim `call.mesh_dim` (Note [Typing an
// op]), or nullopt when the op is not linear in them.
std::optional<std::vector<LocalType>> partial_outputs(const OpRule& rule, const ShardingCall& call,
                                                      const TypedInputs& in, size_t m) {
  if (rule.strategies == nullptr) return std::nullopt;
  for (const ShardingStrategy& s : rule.strategies(call)) {
    bool fits = true;
    for (size_t i = 0; fits && i < in.types.size(); ++i) {
      if (in.types[i] == nullptr) continue;
      const LocalType t = (*in.types[i])[m];
      fits = t == LocalType::kP ? s.inputs[i].is_partial(dist::ReduceOp::Sum)
                                : t == LocalType::kR && s.inputs[i].is_replicate();
    }
    std::vector<LocalType> outs;
    for (const Placement& p : s.outputs) {
      if (!fits) break;
      if (p.is_partial(dist::ReduceOp::Sum)) {
        outs.push_back(LocalType::kP);
      } else if (p.is_replicate()) {
        outs.push_back(LocalType::kR);
      } else {
        fits = false;
      }
    }
    if (fits) return outs;
  }
  return std::nullopt;
}

// The types of the op's outputs along mesh dim m: one per output, or one for all of them.
std::vector<LocalType> type_along(const char* op, const OpRule& rule, ShardingCall& call,
                                  const TypedInputs& in, size_t m) {
  bool any_i = false;
  bool any_other = false;
  bool any_p = false;
  bool any_v = false;
  for (const LocalTypes* t : in.types) {
    if (t == nullptr) continue;
    const LocalType x = (*t)[m];
    any_i = any_i || x == LocalType::kI;
    any_other = any_other || x != LocalType::kI;
    any_p = any_p || x == LocalType::kP;
    any_v = any_v || x == LocalType::kV;
  }
  const std::string dim = mesh_dim_name(*in.mesh, static_cast<int64_t>(m));
  if (any_i) {
    TS_CHECK(!any_other, "[", op, "] Invariant type on ", dim,
             " cannot mix with other types. Found types: ", types_along(in, m),
             ". Convert the invariant operand first: spmd::convert(t, ", m,
             ", I, R) (same value, each rank's own use) or spmd::convert(t, ", m,
             ", I, V, dim) (this rank's chunk)");
    return {LocalType::kI};
  }
  if (any_p) {
    call.mesh_dim = static_cast<int64_t>(m);
    std::optional<std::vector<LocalType>> outs = partial_outputs(rule, call, in, m);
    TS_CHECK(outs.has_value(), "[", op, "] on ", dim, ": input types ", types_along(in, m),
             " have no typing rule: a partial sum (P) passes only through an op linear in it "
             "whose every other operand is R (P + P, P - P, P * R, P / R, sum(P), mm(P, R), "
             "clone(P), ...); reduce it first with spmd::all_reduce(t, ",
             m, ", P, R) or spmd::reduce_scatter(t, ", m, ", P, V, dim)");
    return *outs;
  }
  if (is_random(op)) return {LocalType::kV};
  return {any_v ? LocalType::kV : LocalType::kR};
}

}  // namespace

bool any_typed(const std::vector<Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const Tensor& t) { return typed_meta(t) != nullptr; });
}

std::vector<Tensor> typed_dispatch(const char* op, const std::vector<Tensor>& tensors,
                                   const OpAttrs& attrs, const LocalOp& local) {
  TypedInputs in = gather(op, tensors);
  const DeviceMesh& mesh = *in.mesh;
  const dtensor::RuleTable& table = dtensor::builtin_rules();
  const auto it = table.find(std::string_view(op));
  TS_CHECK(it != table.end(), "[", op,
           "] has no local SPMD typing rule (it is not an op of the registry of dtensor/rules); "
           "strict mode rejects it on typed tensors");
  const OpRule& rule = it->second;

  ShardingCall call{op, {}, mesh, 0, attrs};
  std::vector<DTensorSpec> run_inputs;
  for (const Tensor& l : in.locals) {
    DTensorSpec s = l.defined() ? replicated_spec(mesh, l.sizes(), l.dtype())
                                : DTensorSpec{mesh, {}, {}, {}, kFloat32};
    call.inputs.push_back(s);
    run_inputs.push_back(std::move(s));
  }
  // Types first: a typing Error says more than a shape Error of the same call.
  const auto mesh_ndim = static_cast<size_t>(mesh.ndim());
  std::vector<std::vector<LocalType>> along(mesh_ndim);
  for (size_t m = 0; m < mesh_ndim; ++m) along[m] = type_along(op, rule, call, in, m);
  const auto out_types = [&](size_t o) {
    LocalTypes types(mesh_ndim);
    for (size_t m = 0; m < mesh_ndim; ++m) types[m] = along[m][std::min(o, along[m].size() - 1)];
    return types;
  };
  if (rule.in_place) {
    TS_CHECK(out_types(0) == *in.types[0], "[", op,
             "] writes its first argument in place, whose local SPMD types are ",
             to_string(*in.types[0]), ", but the result's are ", to_string(out_types(0)),
             "; compute out of place");
  }

  std::vector<Shape> out_shapes;
  std::vector<DTensorSpec> run_outputs;
  if (rule.output_shapes != nullptr) {
    out_shapes = rule.output_shapes(call);
    for (const Shape& s : out_shapes) run_outputs.push_back(replicated_spec(mesh, s, kFloat32));
  }
  const dtensor::CallLayout layout(op, mesh, run_inputs, run_outputs);
  std::vector<Tensor> out = local(LocalCall{in.locals, out_shapes, layout});
  if (rule.in_place) return {tensors[0]};
  std::vector<Tensor> typed;
  typed.reserve(out.size());
  for (size_t o = 0; o < out.size(); ++o) {
    typed.push_back(make_typed(out[o], out_types(o), mesh));
  }
  return typed;
}

Tensor typed_full_tensor(const Tensor& t) {
  throw Error(::tessera::detail::concat_message(
      "[full_tensor] a local SPMD-typed tensor ", to_string(types_of(t)),
      " is one rank's local tensor inside local_map(spmd_types=true); it has no global value: "
      "gather it with spmd::all_gather or spmd::all_reduce, or return it from the function to "
      "get a DTensor"));
}

Tensor typed_wrap_like(const Tensor& local, const Tensor& like, bool as_grad) {
  LocalTypes types = types_of(like);
  if (as_grad) {
    for (LocalType& x : types) x = backward_type(x);
  }
  return make_typed(local, std::move(types), mesh_of(like));
}

Tensor typed_grad_local(const Tensor& grad, const Tensor& like, const char* op) {
  LocalTypes expected = types_of(like);
  for (LocalType& x : expected) x = backward_type(x);
  TS_CHECK(
      typed_meta(grad) != nullptr && types_of(grad) == expected, "[", op,
      "] the gradient of a local SPMD-typed tensor ", to_string(types_of(like)), " must be typed ",
      to_string(expected), " (the backward types), got ",
      typed_meta(grad) != nullptr ? to_string(types_of(grad)) : std::string("an untyped tensor"));
  TS_CHECK_SHAPE(grad.sizes() == like.sizes(), "[", op, "] gradient of shape ", grad.sizes(),
                 " for a tensor of shape ", like.sizes());
  return typed_local(grad);
}

std::string typed_describe(const Tensor& t) {
  std::ostringstream os;
  os << "SpmdTyped(types=" << to_string(types_of(t)) << ", mesh=" << mesh_of(t)
     << ", local=" << typed_local(t) << ")";
  return os.str();
}

}  // namespace tessera::spmd::detail
