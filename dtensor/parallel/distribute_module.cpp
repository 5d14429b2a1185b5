#include "tessera/dtensor/parallel/distribute_module.h"

#include "tessera/dtensor/dtensor.h"
#include "tessera/runtime/grad_mode.h"

namespace tessera {

namespace {

// The extension key that marks a module distribute_module ran on (PyTorch refuses a second call).
constexpr const char* kDistributedMark = "tessera.distribute_module";

void check_mesh(const Tensor& t, const std::string& what, const DeviceMesh& mesh) {
  if (!t.is_distributed()) return;
  const DeviceMesh& own = DTensor(t).device_mesh();
  TS_CHECK(own == mesh, "[distribute_module] ", what, " is a DTensor on mesh ", own,
           ", not on the mesh ", mesh, " the module is distributed on");
}

// Every own parameter and buffer of `m` that is not a DTensor yet becomes a Replicate one.
void replicate_rest(const std::string& path, nn::Module& m, const DeviceMesh& mesh) {
  const Placements all_r(static_cast<size_t>(mesh.ndim()), Replicate());
  const std::string prefix = path.empty() ? "" : path + ".";
  for (const auto& [name, p] : m.named_parameters(/*recurse=*/false)) {
    check_mesh(p, "parameter " + prefix + name, mesh);
    if (!p.is_distributed()) {
      m.register_parameter(name, detail::distribute_leaf(p, mesh, all_r), p.requires_grad());
    }
  }
  for (const auto& [name, b] : m.named_buffers(/*recurse=*/false)) {
    check_mesh(b, "buffer " + prefix + name, mesh);
    if (!b.is_distributed()) m.register_buffer(name, detail::distribute_leaf(b, mesh, all_r));
  }
}

}  // namespace

Tensor detail::distribute_leaf(const Tensor& tensor, const DeviceMesh& mesh,
                               const Placements& placements) {
  const bool requires_grad = tensor.requires_grad();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = distribute_tensor(tensor.detach(), mesh, placements);
  }
  if (requires_grad) out.requires_grad_();
  return out;
}

void distribute_module(nn::Module& module, const DeviceMesh& mesh, PartitionFn partition_fn,
                       InputFn input_fn, OutputFn output_fn) {
  TS_CHECK(module.extension(kDistributedMark) == nullptr, "[distribute_module] this ",
           module.name(), " was distributed before; distribute_module runs once per module");
  module.set_extension(kDistributedMark, std::make_shared<bool>(true));
  for (const auto& [path, m] : module.named_modules()) {
    if (partition_fn) partition_fn(path, *m, mesh);
    replicate_rest(path, *m, mesh);
  }
  if (input_fn) {
    module.register_forward_pre_hook(
        [mesh, input_fn](nn::Module& m, const Tensor& input) { return input_fn(m, input, mesh); });
  }
  if (output_fn) {
    module.register_forward_hook(
        [mesh, output_fn](nn::Module& m, const Tensor& /*input*/, const Tensor& output) {
          return output_fn(m, output, mesh);
        });
  }
}

}  // namespace tessera
