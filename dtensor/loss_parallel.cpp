// LossParallelGuard, and cross_entropy on logits sharded on the class dim while one is active
// (torch.distributed.tensor.parallel.loss_parallel). See Note [Loss parallel cross_entropy].

#include "tessera/dtensor/loss_parallel.h"

#include <any>
#include <limits>
#include <memory>
#include <sstream>
#include <string>

#include "tessera/autograd/function.h"
#include "tessera/dtensor/dtensor.h"
#include "tessera/dtensor/dtensor_meta.h"
#include "tessera/runtime/error.h"
#include "tessera/runtime/grad_mode.h"
#include "tessera/runtime/ops.h"

namespace tessera {

namespace {
thread_local int loss_parallel_depth = 0;
}  // namespace

LossParallelGuard::LossParallelGuard() { ++loss_parallel_depth; }
LossParallelGuard::~LossParallelGuard() { --loss_parallel_depth; }
bool LossParallelGuard::active() { return loss_parallel_depth > 0; }

namespace dtensor {
namespace {

// Note [Loss parallel cross_entropy]
// The logits x hold, on each rank, all rows of its batch block and one block of the classes (the
// class dim is sharded over the mesh dims K; other mesh dims shard another dim or replicate).
// Per row, over the ranks of K (the row's whole class range):
//   m = max of the local maxima                                  all_reduce MAX
//   s = sum of the local sums of exp(x - m)                      all_reduce SUM
//   t = the target's logit (only the rank holding it adds it)    all_reduce SUM
//   loss = log(s) + m - t; ignored rows are 0
// Label smoothing (ls) also needs the sum of the row's logits: loss = log(s) + m - (1 - ls) t -
// ls / C * sum(x). It travels in the buffer of t (a class dim of 2), so it costs no all_reduce.
// A run of contiguous mesh dims in K reduces in one all_reduce over the mesh's flattened group;
// K split into r runs (or a sub-mesh without flattened groups) costs 3 r all_reduces, max and sum
// being associative.
//
// The result is Replicate on K. reduction none keeps the target's layout (the row shards). sum
// and mean are Partial(sum) over the mesh dims that shard the rows: each rank sums its own rows
// (mean: divided by the global count of counted rows), so the parts add up to the single-device
// loss without a collective now; an all_reduce here would be paid on every step, while the
// Partial is reduced only where the value is read (full_tensor, item), and its gradient needs
// none. The count comes from the target: free when the target arrives replicated over the mesh
// dims that shard it; else one all_reduce of one int64.
//
// backward needs no collective: d loss / d x = (exp(x - m) / s - q) * coef, with m and s saved
// from forward, q the smoothed one-hot of the target over this rank's classes ((1 - ls) at the
// target, plus ls / C), and coef the row's incoming gradient times the reduction's scale (1 / count
// for mean), 0 for ignored rows. It is first order only: m and s enter as constants.

using autograd::AutogradContext;
using SpecPtr = std::shared_ptr<const DTensorSpec>;

// What the logits' layout implies for the call.
struct LogitsLayout {
  SpecPtr spec;
  int64_t class_dim = 1;
  std::vector<int64_t> class_mesh_dims;  // the mesh dims that shard the class dim
  // The target's layout and global shape: the logits' without the class dim.
  Placements row_placements;
  Shape row_shape;
};

// Everything forward and backward need besides the logits.
struct LossSetup {
  int64_t class_dim = 1;
  int64_t classes = 0;
  CrossEntropyOptions options;
  double count = 0.0;  // the global number of counted rows (used by mean)
  std::vector<dist::ProcessGroupPtr> class_groups;
  // Per row (class dim kept, of size 1): the target's position among this rank's classes, -1
  // when another rank holds it or the row is ignored; and whether the row counts.
  Tensor target_index;
  Tensor counted;
};

DType compute_dtype(DType dtype) { return dtype == kFloat64 ? kFloat64 : kFloat32; }

std::string describe_placements(const SpecPtr& spec) {
  std::ostringstream os;
  os << spec->placements << " on " << spec->mesh;
  return os.str();
}

void check_logits_placements(const LogitsLayout& layout) {
  const SpecPtr& spec = layout.spec;
  const char* valid =
      "; inside a LossParallelGuard the logits must be sharded on the class dim (dim 1 of "
      "[N, C, d...], dim 0 of [C]) on at least one mesh dim, with Shard of another dim or "
      "Replicate on the other mesh dims";
  for (const Placement& p : spec->placements) {
    TS_CHECK(!p.is_partial(), "[cross_entropy] argument 0 (logits) has placements ",
             describe_placements(spec), ": Partial logits are not supported", valid,
             "; redistribute them first");
  }
  TS_CHECK(!layout.class_mesh_dims.empty(), "[cross_entropy] argument 0 (logits) of shape ",
           spec->shape, " has placements ", describe_placements(spec),
           ", not sharded on the class dim ", layout.class_dim, valid,
           " (as torch's loss_parallel); redistribute them, or compute the loss outside the guard");
}

LogitsLayout logits_layout(const Tensor& logits) {
  TS_CHECK(logits.is_distributed(), "[cross_entropy] argument 0 (logits) is a plain Tensor of ",
           "shape ", logits.sizes(), "; inside a LossParallelGuard the logits must be a DTensor ",
           "sharded on the class dim");
  LogitsLayout layout;
  layout.spec = meta_of(logits).spec;
  const DTensorSpec& spec = *layout.spec;
  TS_CHECK_DTYPE(is_floating_point(spec.dtype),
                 "[cross_entropy] expected a floating point input (logits), got ", spec.dtype);
  TS_CHECK_SHAPE(!spec.shape.empty(), "[cross_entropy] expected logits of shape [C], [N, C] or ",
                 "[N, C, d1, ...], got a 0-dim tensor");
  const int64_t cd = spec.shape.size() == 1 ? 0 : 1;
  layout.class_dim = cd;
  for (size_t m = 0; m < spec.placements.size(); ++m) {
    const Placement& p = spec.placements[m];
    if (p.is_shard(cd)) {
      layout.class_mesh_dims.push_back(static_cast<int64_t>(m));
      layout.row_placements.push_back(Replicate());
    } else if (p.is_shard()) {
      layout.row_placements.push_back(with_shard_dim(p, p.dim() > cd ? p.dim() - 1 : p.dim()));
    } else {
      layout.row_placements.push_back(Replicate());
    }
  }
  check_logits_placements(layout);
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (static_cast<int64_t>(d) != cd) layout.row_shape.push_back(spec.shape[d]);
  }
  return layout;
}

// Groups that together span `mesh_dims` (ascending): one per run of contiguous dims (its
// flattened group), or one per dim where the mesh has no flattened group (a sub-mesh).
std::vector<dist::ProcessGroupPtr> groups_spanning(const DeviceMesh& mesh,
                                                   const std::vector<int64_t>& mesh_dims) {
  std::vector<dist::ProcessGroupPtr> groups;
  size_t i = 0;
  while (i < mesh_dims.size()) {
    std::vector<int64_t> run{mesh_dims[i]};
    while (i + run.size() < mesh_dims.size() && mesh_dims[i + run.size()] == run.back() + 1) {
      run.push_back(mesh_dims[i + run.size()]);
    }
    i += run.size();
    if (dist::ProcessGroupPtr g = mesh.flattened_group(run)) {
      groups.push_back(std::move(g));
      continue;
    }
    for (int64_t m : run) groups.push_back(mesh.get_group(m));
  }
  return groups;
}

// `op` of `t` over the groups, into a new tensor (`t` may be a view of the logits).
Tensor all_reduce_over(const Tensor& t, dist::ReduceOp op,
                       const std::vector<dist::ProcessGroupPtr>& groups) {
  Tensor in = t.contiguous();
  for (const dist::ProcessGroupPtr& g : groups) {
    Tensor out = Tensor::make_empty(in.sizes(), in.dtype(), in.device());
    g->all_reduce_into(out, in, op)->wait();
    in = std::move(out);
  }
  return in;
}

// ---- the target ----

void check_target(const Tensor& target, const LogitsLayout& layout, const std::string& what) {
  TS_CHECK_DTYPE(target.dtype() == kInt64,
                 "[cross_entropy] expected a target of class indices of dtype int64, got ",
                 target.dtype(), " (argument 1, ", what, ")");
  TS_CHECK_SHAPE(target.sizes() == layout.row_shape, "[cross_entropy] expected a target of shape ",
                 layout.row_shape, " for logits of shape ", layout.spec->shape, ", got ",
                 target.sizes(), " (argument 1, ", what, ")");
}

// Checks the class indices of `target` (any block of it) and returns how many are not ignored.
int64_t check_and_count(const Tensor& target, int64_t classes, int64_t ignore_index) {
  const Tensor host = target.contiguous().cpu();
  const int64_t* t = host.data_ptr<int64_t>();
  int64_t counted = 0;
  for (int64_t i = 0; i < host.numel(); ++i) {
    if (t[i] == ignore_index) continue;
    TS_CHECK_INDEX(t[i] >= 0 && t[i] < classes, "[cross_entropy] target ", t[i],
                   " is out of range for ", classes, " classes (expected a class index in [0, ",
                   classes, ") or ignore_index ", ignore_index, ")");
    ++counted;
  }
  return counted;
}

struct LocalTarget {
  Tensor local;       // this rank's block under LogitsLayout::row_placements
  int64_t count = 0;  // the global number of counted rows (mean only)
};

// A plain target is the whole target, taken as Replicate (torch's loss_parallel assumes a
// replicated target): each rank keeps its block, without a collective.
LocalTarget plain_target(const Tensor& target, const LogitsLayout& layout,
                         const CrossEntropyOptions& options, Device device) {
  check_target(target, layout, "a plain Tensor");
  TS_CHECK_T(DeviceError, target.device() == device, "[cross_entropy] expected target on ", device,
             " like the input, got ", target.device());
  const int64_t count =
      check_and_count(target, layout.spec->shape[layout.class_dim], options.ignore_index);
  const DTensor placed =
      distribute_tensor(target, layout.spec->mesh, layout.row_placements, std::nullopt);
  return {placed.to_local(), count};
}

// A DTensor target is redistributed to the rows' layout (a collective only where it is laid out
// otherwise). For mean, its count is summed over the mesh dims that shard it.
LocalTarget dtensor_target(const DTensor& target, const LogitsLayout& layout,
                           const CrossEntropyOptions& options) {
  const DeviceMesh& mesh = layout.spec->mesh;
  TS_CHECK(target.device_mesh() == mesh, "[cross_entropy] argument 1 (target) is a DTensor on ",
           target.device_mesh(), " and argument 0 (logits) one on ", mesh,
           "; both must be on one mesh");
  const std::string what = "a DTensor with placements " + describe_placements(target.spec_ptr());
  check_target(target, layout, what);
  std::vector<int64_t> sharded;
  for (size_t m = 0; m < target.placements().size(); ++m) {
    const Placement& p = target.placements()[m];
    TS_CHECK(!p.is_partial(), "[cross_entropy] argument 1 (target) is ", what,
             ": class indices cannot be Partial; valid are Shard and Replicate (the loss uses ",
             layout.row_placements, ")");
    if (p.is_shard()) sharded.push_back(static_cast<int64_t>(m));
  }
  const Tensor local = target.to_local();
  int64_t count =
      check_and_count(local, layout.spec->shape[layout.class_dim], options.ignore_index);
  if (options.reduction == Reduction::Mean && !sharded.empty()) {
    const Tensor mine = full({1}, count, TensorOptions(kInt64).device(local.device()));
    count =
        all_reduce_over(mine, dist::ReduceOp::Sum, groups_spanning(mesh, sharded)).item<int64_t>();
  }
  return {target.redistribute(layout.row_placements).to_local(), count};
}

// Per row, the target's position among this rank's classes (`runs`: the global class indices it
// holds, in local order); -1 when another rank holds it or the row is ignored.
Tensor local_class_index(const Tensor& target, const std::vector<Run>& runs, int64_t ignore_index) {
  const Tensor host = target.contiguous().cpu();
  const int64_t* t = host.data_ptr<int64_t>();
  std::vector<int64_t> index(static_cast<size_t>(host.numel()), -1);
  for (size_t i = 0; i < index.size(); ++i) {
    if (t[i] == ignore_index) continue;
    int64_t before = 0;
    for (const Run& r : runs) {
      if (t[i] >= r.offset && t[i] < r.offset + r.size) {
        index[i] = before + t[i] - r.offset;
        break;
      }
      before += r.size;
    }
  }
  return from_vector(index, host.sizes(), target.device());
}

std::shared_ptr<const LossSetup> make_setup(const LogitsLayout& layout, const LocalTarget& target,
                                            const CrossEntropyOptions& options) {
  const int64_t cd = layout.class_dim;
  auto s = std::make_shared<LossSetup>();
  s->class_dim = cd;
  s->classes = layout.spec->shape[cd];
  s->options = options;
  s->count = static_cast<double>(target.count);
  s->class_groups = groups_spanning(layout.spec->mesh, layout.class_mesh_dims);
  const std::vector<Run> runs =
      layout.spec->global_runs(layout.spec->coordinate())[static_cast<size_t>(cd)];
  s->target_index = local_class_index(target.local, runs, options.ignore_index).unsqueeze(cd);
  const Tensor ignored =
      full({}, options.ignore_index, TensorOptions(kInt64).device(target.local.device()));
  s->counted = ne(target.local, ignored).unsqueeze(cd);
  return s;
}

// ---- forward and backward on the local logits ----

// Whether each of this rank's classes is the row's target (bool, [rows with the class dim]).
Tensor is_target(const LossSetup& s, int64_t local_classes, Device device) {
  Shape shape(static_cast<size_t>(s.target_index.dim()), 1);
  shape[static_cast<size_t>(s.class_dim)] = local_classes;
  return eq(arange(0, local_classes, 1, kInt64, device).reshape(shape), s.target_index);
}

// The row maximum over all classes (class dim kept); a rank without classes contributes -inf.
Tensor global_row_max(const Tensor& x, const LossSetup& s) {
  const int64_t cd = s.class_dim;
  Tensor local;
  if (x.size(cd) == 0) {
    Shape shape = x.sizes();
    shape[static_cast<size_t>(cd)] = 1;
    local = full(shape, -std::numeric_limits<double>::infinity(),
                 TensorOptions(x.dtype()).device(x.device()));
  } else {
    local = amax(x, {cd}, true);
  }
  return all_reduce_over(local, dist::ReduceOp::Max, s.class_groups);
}

// The row's target logit and, with label smoothing, the sum of its logits: one buffer (class dim
// of 1 or 2), so that both take one all_reduce.
Tensor target_terms(const Tensor& x, const LossSetup& s) {
  const int64_t cd = s.class_dim;
  const Tensor zero = zeros({}, TensorOptions(x.dtype()).device(x.device()));
  Tensor terms = sum(where(is_target(s, x.size(cd), x.device()), x, zero), {cd}, true);
  if (s.options.label_smoothing > 0) terms = cat({terms, sum(x, {cd}, true)}, cd);
  return all_reduce_over(terms, dist::ReduceOp::Sum, s.class_groups);
}

Tensor reduce_rows(const Tensor& rows, const LossSetup& s) {
  if (s.options.reduction == Reduction::None) return rows;
  // Summed in float64, as the single-device op; as PyTorch, a mean over no counted row is nan.
  const Tensor total = sum(rows.to(kFloat64));
  return s.options.reduction == Reduction::Mean ? total / s.count : total;
}

struct LossParallelFn : autograd::Function<LossParallelFn> {
  static const char* name() { return "LossParallelCrossEntropyBackward"; }

  static Tensor forward(AutogradContext* ctx, const Tensor& logits,
                        std::shared_ptr<const LossSetup> setup) {
    const LossSetup& s = *setup;
    const int64_t cd = s.class_dim;
    const double ls = s.options.label_smoothing;
    const Tensor x = logits.to(compute_dtype(logits.dtype()));
    const Tensor row_max = global_row_max(x, s);
    const Tensor sumexp =
        all_reduce_over(sum(exp(x - row_max), {cd}, true), dist::ReduceOp::Sum, s.class_groups);
    const Tensor terms = target_terms(x, s);
    Tensor rows = log(sumexp) + row_max - terms.narrow(cd, 0, 1) * (1.0 - ls);
    if (ls > 0) rows = rows - terms.narrow(cd, 1, 1) * (ls / static_cast<double>(s.classes));
    rows = where(s.counted, rows, zeros({}, TensorOptions(x.dtype()).device(x.device())));
    const Tensor loss = reduce_rows(rows.squeeze(cd), s).to(logits.dtype());
    ctx->save_for_backward({logits, row_max, sumexp});
    ctx->saved_data["setup"] = std::move(setup);
    return loss;
  }

  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> grads) {
    TS_CHECK(!is_grad_enabled(), "[cross_entropy] the gradient of the loss parallel ",
             "cross_entropy is first order only (backward with create_graph is not supported)");
    const auto setup = std::any_cast<std::shared_ptr<const LossSetup>>(ctx->saved_data["setup"]);
    const LossSetup& s = *setup;
    const int64_t cd = s.class_dim;
    const double ls = s.options.label_smoothing;
    const std::vector<Tensor> saved = ctx->saved();
    const Tensor x = saved[0].to(compute_dtype(saved[0].dtype()));
    Tensor q = is_target(s, x.size(cd), x.device()).to(x.dtype());
    if (ls > 0) q = q * (1.0 - ls) + ls / static_cast<double>(s.classes);
    Tensor g = grads[0].to(x.dtype());
    if (s.options.reduction == Reduction::None) g = g.unsqueeze(cd);
    if (s.options.reduction == Reduction::Mean) g = g * (s.count > 0 ? 1.0 / s.count : 0.0);
    const Tensor coef = s.counted.to(x.dtype()) * g;
    const Tensor probs = exp(x - saved[1]) / saved[2];
    return {((probs - q) * coef).to(saved[0].dtype())};
  }
};

// See Note [Loss parallel cross_entropy] for the placements.
SpecPtr output_spec(const LogitsLayout& layout, Reduction reduction, DType dtype) {
  Placements placements = layout.row_placements;
  Shape shape = layout.row_shape;
  if (reduction != Reduction::None) {
    shape = Shape{};
    for (Placement& p : placements) {
      if (p.is_shard()) p = Partial();
    }
  }
  return std::make_shared<DTensorSpec>(
      DTensorSpec{layout.spec->mesh, placements, shape, contiguous_strides(shape), dtype});
}

}  // namespace

std::vector<Tensor> loss_parallel_cross_entropy(const std::vector<Tensor>& inputs,
                                                const OpAttrs& attrs) {
  TS_INTERNAL_ASSERT(inputs.size() == 2 && attrs.ints.size() == 2 && attrs.reals.size() == 1,
                     "[cross_entropy] loss parallel expects {logits, target} and the attrs of ",
                     "runtime/ops/nn.cpp");
  const CrossEntropyOptions options{attrs.ints[0], attrs.reals[0],
                                    static_cast<Reduction>(attrs.ints[1])};
  TS_CHECK(options.label_smoothing >= 0.0 && options.label_smoothing <= 1.0,
           "[cross_entropy] label_smoothing must be in [0, 1], got ", options.label_smoothing);
  const LogitsLayout layout = logits_layout(inputs[0]);
  const Tensor& logits = ready_local(inputs[0]);
  const LocalTarget target = inputs[1].is_distributed()
                                 ? dtensor_target(DTensor(inputs[1]), layout, options)
                                 : plain_target(inputs[1], layout, options, logits.device());
  const Tensor loss = LossParallelFn::apply(logits, make_setup(layout, target, options));
  return {make_distributed(loss, output_spec(layout, options.reduction, loss.dtype()))};
}

}  // namespace dtensor
}  // namespace tessera
