#include "tessera/dtensor/spmd_types/collectives.h"

#include "tessera/autograd/function.h"
#include "tessera/dtensor/dtensor_functions.h"
#include "tessera/runtime/ops.h"

namespace tessera::spmd {

namespace {

using autograd::AutogradContext;
using detail::mesh_dim_name;

// One data movement along one mesh dim, as placements of that dim (the other dims Replicate):
// the redistribute planner's transitions, except Shard -> Partial, which is local here (zeros but
// this rank's block) where the planner goes through Replicate (an all_gather).
struct Move {
  Placement from;
  Placement to;
  int64_t mesh_dim = 0;
};

Tensor run_move(const Tensor& local, const DeviceMesh& mesh, const Move& move) {
  if (move.from == move.to) return local.view(local.sizes());
  const auto m = static_cast<size_t>(move.mesh_dim);
  const int64_t n = mesh.size(move.mesh_dim);
  if (move.from.is_shard() && move.to.is_partial()) {
    std::vector<Tensor> blocks(static_cast<size_t>(n), zeros_like(local));
    blocks[static_cast<size_t>(mesh.get_local_rank(move.mesh_dim))] = local;
    return cat(blocks, move.from.dim());
  }
  Shape shape = local.sizes();
  if (move.from.is_shard()) shape[static_cast<size_t>(move.from.dim())] *= n;
  Placements src(static_cast<size_t>(mesh.ndim()), Replicate());
  Placements dst = src;
  src[m] = move.from;
  dst[m] = move.to;
  auto spec = std::make_shared<const DTensorSpec>(
      DTensorSpec{mesh, src, shape, contiguous_strides(shape), local.dtype()});
  return dtensor::redistribute_local(local, spec, dst, RedistributeOptions{});
}

// A typed collective's local part: `fwd` forward, `bwd` on the gradient, whose own backward is
// `fwd` again (every row of the table in collectives.h pairs so), so it differentiates twice.
// The redistributes run under forward's no-grad mode: this Function is what records.
struct TypedCollectiveFn : autograd::Function<TypedCollectiveFn> {
  static const char* name() { return "SpmdCollectiveBackward"; }
  static Tensor forward(AutogradContext* ctx, const Tensor& local, DeviceMesh mesh, Move fwd,
                        Move bwd) {
    ctx->saved_data["mesh"] = mesh;
    ctx->saved_data["fwd"] = fwd;
    ctx->saved_data["bwd"] = bwd;
    return run_move(local, mesh, fwd);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    return {TypedCollectiveFn::apply(grads[0], std::any_cast<DeviceMesh>(ctx->saved_data["mesh"]),
                                     std::any_cast<Move>(ctx->saved_data["bwd"]),
                                     std::any_cast<Move>(ctx->saved_data["fwd"]))};
  }
};

// The checks every call shares; returns the output's types.
LocalTypes checked_types(const char* op, const Tensor& x, int64_t mesh_dim, LocalType src,
                         LocalType dst) {
  TS_CHECK(detail::typed_meta(x) != nullptr, "[spmd::", op,
           "] expects a local SPMD-typed tensor (inside local_map with spmd_types=true), got ",
           !x.defined() ? "an undefined tensor"
                        : (x.is_distributed() ? "a DTensor" : "an untyped tensor"));
  const DeviceMesh& mesh = detail::mesh_of(x);
  TS_CHECK(mesh_dim >= 0 && mesh_dim < mesh.ndim(), "[spmd::", op, "] mesh_dim ", mesh_dim,
           " is out of range for a mesh of ", mesh.ndim(), " dims");
  LocalTypes types = detail::types_of(x);
  const auto m = static_cast<size_t>(mesh_dim);
  TS_CHECK(types[m] == src, "[spmd::", op, "] on ", mesh_dim_name(mesh, mesh_dim),
           ": the tensor's type is ", to_string(types[m]), ", not src=", to_string(src),
           " (its types: ", to_string(types), ")");
  types[m] = dst;
  return types;
}

[[noreturn]] void unsupported(const char* op, const Tensor& x, int64_t mesh_dim, LocalType src,
                              LocalType dst, const char* valid) {
  throw Error(::tessera::detail::concat_message(
      "[spmd::", op, "] on ", mesh_dim_name(detail::mesh_of(x), mesh_dim), ": src=", to_string(src),
      ", dst=", to_string(dst), " is not supported; valid: ", valid));
}

Tensor run(const Tensor& x, LocalTypes types, const Move& fwd, const Move& bwd) {
  const DeviceMesh& mesh = detail::mesh_of(x);
  Tensor out = TypedCollectiveFn::apply(detail::typed_local(x), mesh, fwd, bwd);
  return detail::make_typed(std::move(out), std::move(types), mesh);
}

int64_t tensor_dim(const char* op, const Tensor& x, int64_t dim) {
  const int64_t n = x.dim();
  TS_CHECK_INDEX(dim >= -n && dim < n, "[spmd::", op, "] dim ", dim,
                 " is out of range for a tensor of ", n, " dims");
  return dim < 0 ? dim + n : dim;
}

}  // namespace

Tensor all_reduce(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst) {
  LocalTypes types = checked_types("all_reduce", x, mesh_dim, src, dst);
  TS_CHECK(src != LocalType::kR && src != LocalType::kI, "[spmd::all_reduce] on ",
           mesh_dim_name(detail::mesh_of(x), mesh_dim), ": all_reduce on replicated/invariant ",
           "data (src=", to_string(src),
           ") is usually a bug: every rank already holds the value, and the sum would multiply "
           "it by the group size; valid src: P, or V (read as P)");
  if (dst != LocalType::kR && dst != LocalType::kI) {
    unsupported("all_reduce", x, mesh_dim, src, dst, "src P|V with dst R|I");
  }
  const Move fwd{Partial(), Replicate(), mesh_dim};
  const Move bwd = dst == LocalType::kR ? fwd : Move{Replicate(), Replicate(), mesh_dim};
  return run(x, std::move(types), fwd, bwd);
}

Tensor all_gather(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst, int64_t dim) {
  LocalTypes types = checked_types("all_gather", x, mesh_dim, src, dst);
  if (src != LocalType::kV || (dst != LocalType::kR && dst != LocalType::kI)) {
    unsupported("all_gather", x, mesh_dim, src, dst, "src V with dst R|I");
  }
  const Shard shard(tensor_dim("all_gather", x, dim));
  const Move fwd{shard, Replicate(), mesh_dim};
  const Move bwd{dst == LocalType::kR ? Placement(Partial()) : Placement(Replicate()), shard,
                 mesh_dim};
  return run(x, std::move(types), fwd, bwd);
}

Tensor reduce_scatter(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst,
                      int64_t dim) {
  LocalTypes types = checked_types("reduce_scatter", x, mesh_dim, src, dst);
  if ((src != LocalType::kP && src != LocalType::kV) || dst != LocalType::kV) {
    unsupported("reduce_scatter", x, mesh_dim, src, dst, "src P|V with dst V");
  }
  const Shard shard(tensor_dim("reduce_scatter", x, dim));
  return run(x, std::move(types), Move{Partial(), shard, mesh_dim},
             Move{shard, Replicate(), mesh_dim});
}

Tensor convert(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst, int64_t dim) {
  LocalTypes types = checked_types("convert", x, mesh_dim, src, dst);
  using enum LocalType;
  const auto move = [mesh_dim](const Placement& from, const Placement& to) {
    return Move{from, to, mesh_dim};
  };
  const auto shard = [&] { return Shard(tensor_dim("convert", x, dim)); };
  if (src == kR && dst == kV) {
    return run(x, std::move(types), move(Replicate(), shard()), move(shard(), Partial()));
  }
  if (src == kR && dst == kP) {
    return run(x, std::move(types), move(Replicate(), Partial()), move(Replicate(), Partial()));
  }
  if (src == kI && dst == kR) {
    return run(x, std::move(types), move(Replicate(), Replicate()), move(Partial(), Replicate()));
  }
  if (src == kI && dst == kV) {
    return run(x, std::move(types), move(Replicate(), shard()), move(shard(), Replicate()));
  }
  if (src == kV && dst == kP) {
    return run(x, std::move(types), move(shard(), Partial()), move(Replicate(), shard()));
  }
  unsupported("convert", x, mesh_dim, src, dst, "(R, V), (R, P), (I, R), (I, V), (V, P)");
}

Tensor reinterpret(const Tensor& x, int64_t mesh_dim, LocalType src, LocalType dst) {
  LocalTypes types = checked_types("reinterpret", x, mesh_dim, src, dst);
  const Move identity{Replicate(), Replicate(), mesh_dim};
  return run(x, std::move(types), identity, identity);
}

}  // namespace tessera::spmd
