// get_state_dict and set_state_dict (checkpoint/checkpoint.h).

#include <set>
#include <unordered_map>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/checkpoint/detail/boxes.h"
#include "tessera/checkpoint/detail/key_list.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/generator.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera::checkpoint {

namespace {

constexpr const char* kRngSeed = "rng.seed";
constexpr const char* kRngOffset = "rng.offset";

std::string optim_key(const std::string& fqn, const std::string& field) {
  return "optim." + fqn + "." + field;
}

std::string group_key(size_t group, const std::string& option) {
  return "optim.param_groups." + std::to_string(group) + "." + option;
}

// The model's fully qualified name of each optimizer parameter. Errors: one the model lacks.
std::vector<std::pair<std::string, Tensor>> optimizer_params(nn::Module& model,
                                                             optim::Optimizer& optimizer,
                                                             const char* op) {
  std::unordered_map<const TensorImpl*, std::string> names;
  for (const auto& [name, p] : model.named_parameters()) names.emplace(p.unsafe_impl(), name);
  std::vector<std::pair<std::string, Tensor>> out;
  const std::vector<Tensor> params = optimizer.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = names.find(params[i].unsafe_impl());
    TS_CHECK(it != names.end(), "[", op, "] the optimizer's parameter ", i, " (shape ",
             params[i].shape(),
             ") is not a parameter of the model: create the optimizer from "
             "model.parameters() after fully_shard / parallelize_module");
    out.emplace_back(it->second, params[i]);
  }
  return out;
}

Tensor as_saved(const Tensor& t, const StateDictOptions& options) {
  if (options.full_state_dict && t.is_distributed()) return DTensor(t).full_tensor();
  return t.detach();
}

// dst = src in place, src resharded to dst's layout (a full tensor sliced, a DTensor
// redistributed or gathered).
void assign(Tensor dst, const Tensor& src, const std::string& key, const char* op) {
  TS_CHECK(src.defined(), "[", op, "] tensor \"", key, "\" of the state dict is undefined");
  TS_CHECK_DTYPE(src.dtype() == dst.dtype(), "[", op, "] tensor \"", key,
                 "\": the state dict holds ", dtype_name(src.dtype()), ", the model ",
                 dtype_name(dst.dtype()));
  TS_CHECK_SHAPE(src.shape() == dst.shape(), "[", op, "] tensor \"", key,
                 "\": the state dict holds shape ", src.shape(), ", the model ", dst.shape());
  if (src.unsafe_impl() == dst.unsafe_impl()) return;
  if (!dst.is_distributed()) {
    dst.copy_(src.is_distributed() ? DTensor(src).full_tensor() : src);
    return;
  }
  const DTensor d(dst);
  Tensor local = d.unsafe_local();
  if (src.is_distributed()) {
    DTensor s(src);
    if (s.device_mesh() != d.device_mesh() || s.placements() != d.placements()) {
      s = s.redistribute(d.device_mesh(), d.placements());
    }
    if (s.unsafe_local().unsafe_impl() != local.unsafe_impl()) local.copy_(s.to_local());
    return;
  }
  for (const detail::LocalBlock& block : detail::local_blocks(dst)) {
    Tensor from = src, to = local;
    for (size_t dim = 0; dim < block.global.sizes.size(); ++dim) {
      const auto d64 = static_cast<int64_t>(dim);
      from = from.narrow(d64, block.global.offsets[dim], block.global.sizes[dim]);
      to = to.narrow(d64, block.local_offsets[dim], block.global.sizes[dim]);
    }
    to.copy_(from);
  }
}

int64_t as_int(const Scalar& s, const std::string& key, const char* op) {
  if (const auto* i = std::get_if<int64_t>(&s)) return *i;
  throw Error(std::string("[") + op + "] scalar \"" + key + "\" must be an int64");
}

double as_double(const Scalar& s, const std::string& key, const char* op) {
  if (const auto* d = std::get_if<double>(&s)) return *d;
  if (const auto* i = std::get_if<int64_t>(&s)) return static_cast<double>(*i);
  throw Error(std::string("[") + op + "] scalar \"" + key + "\" must be a number");
}

}  // namespace

StateDict get_state_dict(nn::Module& model, optim::Optimizer* optimizer, StateDictOptions options) {
  NoGradGuard no_grad;
  StateDict sd;
  for (const auto& [name, p] : model.named_parameters()) sd.tensors[name] = as_saved(p, options);
  for (const auto& [name, b] : model.named_buffers()) sd.tensors[name] = as_saved(b, options);
  if (optimizer != nullptr) {
    for (const auto& [fqn, param] : optimizer_params(model, *optimizer, "get_state_dict")) {
      const optim::Optimizer::StateRefs refs = optimizer->state_refs(param);
      for (const auto& [field, tensor] : refs.tensors) {
        sd.tensors[optim_key(fqn, field)] = as_saved(*tensor, options);
      }
      for (const auto& [field, value] : refs.integers) sd.scalars[optim_key(fqn, field)] = *value;
    }
    for (size_t g = 0; g < optimizer->num_param_groups(); ++g) {
      for (const optim::Optimizer::OptionRef& o : optimizer->option_refs(g)) {
        sd.scalars[group_key(g, o.name)] =
            o.flag ? Scalar(static_cast<int64_t>(*o.flag)) : Scalar(*o.number);
      }
    }
  }
  const Generator& gen = default_generator();
  // uint64 state as its int64 bit pattern (the scalar types are JSON's).
  sd.scalars[kRngSeed] = static_cast<int64_t>(gen.seed());
  sd.scalars[kRngOffset] = static_cast<int64_t>(gen.offset());
  return sd;
}

void set_state_dict(nn::Module& model, optim::Optimizer* optimizer, const StateDict& state,
                    StateDictOptions options) {
  constexpr const char* op = "set_state_dict";
  NoGradGuard no_grad;
  // Every target, by key, as get_state_dict names them.
  std::vector<std::pair<std::string, Tensor>> targets;
  for (const auto& [name, p] : model.named_parameters()) targets.emplace_back(name, p);
  for (const auto& [name, b] : model.named_buffers()) targets.emplace_back(name, b);
  std::vector<std::pair<std::string, int64_t*>> integers;
  if (optimizer != nullptr) {
    for (const auto& [fqn, param] : optimizer_params(model, *optimizer, op)) {
      const optim::Optimizer::StateRefs refs = optimizer->state_refs(param);
      for (const auto& [field, tensor] : refs.tensors)
        targets.emplace_back(optim_key(fqn, field), *tensor);
      for (const auto& [field, value] : refs.integers)
        integers.emplace_back(optim_key(fqn, field), value);
    }
  }
  std::vector<std::string> missing, unexpected;
  std::set<std::string> known;
  for (const auto& [key, t] : targets) {
    known.insert(key);
    if (!state.tensors.count(key)) missing.push_back(key);
  }
  for (const auto& [key, value] : integers) {
    if (!state.scalars.count(key)) missing.push_back(key);
  }
  for (const auto& [key, t] : state.tensors) {
    if (!known.count(key)) unexpected.push_back(key);
  }
  if (options.strict && (!missing.empty() || !unexpected.empty())) {
    std::string message = "[set_state_dict] the state dict does not match the model";
    message += optimizer ? " and optimizer:" : ":";
    if (!missing.empty()) message += " missing " + detail::list_keys(missing) + ";";
    if (!unexpected.empty()) message += " unexpected " + detail::list_keys(unexpected) + ";";
    throw Error(message + " (strict = false skips them)");
  }
  for (const auto& [key, target] : targets) {
    if (auto it = state.tensors.find(key); it != state.tensors.end())
      assign(target, it->second, key, op);
  }
  for (const auto& [key, value] : integers) {
    if (auto it = state.scalars.find(key); it != state.scalars.end())
      *value = as_int(it->second, key, op);
  }
  if (optimizer != nullptr) {
    for (size_t g = 0; g < optimizer->num_param_groups(); ++g) {
      for (const optim::Optimizer::OptionRef& o : optimizer->option_refs(g)) {
        const std::string key = group_key(g, o.name);
        auto it = state.scalars.find(key);
        if (it == state.scalars.end()) continue;
        if (o.flag) {
          *o.flag = as_int(it->second, key, op) != 0;
        } else {
          *o.number = as_double(it->second, key, op);
        }
      }
    }
  }
  auto seed = state.scalars.find(kRngSeed);
  auto offset = state.scalars.find(kRngOffset);
  if (seed != state.scalars.end() && offset != state.scalars.end()) {
    Generator& gen = default_generator();
    gen.manual_seed(static_cast<uint64_t>(as_int(seed->second, kRngSeed, op)));
    gen.set_offset(static_cast<uint64_t>(as_int(offset->second, kRngOffset, op)));
  }
}

}  // namespace tessera::checkpoint
