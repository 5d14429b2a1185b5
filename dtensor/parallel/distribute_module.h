#pragma once
// distribute_module (torch.distributed.tensor.distribute_module): turns a module's parameters and
// buffers into DTensors on a mesh and wraps its calls with input / output conversions.

#include <functional>
#include <string>

#include "tessera/autograd/nn/module.h"
#include "tessera/dtensor/device_mesh.h"
#include "tessera/dtensor/placement.h"
#include "tessera/runtime/tensor.h"

namespace tessera {

// Called for the module and each descendant (path as named_modules gives it, "" for the module
// itself); swaps DTensors in with register_parameter / register_buffer.
using PartitionFn = std::function<void(const std::string& path, nn::Module&, const DeviceMesh&)>;
// Replace the module's input before forward / its output after it (a forward pre-hook / hook).
using InputFn = std::function<Tensor(nn::Module&, const Tensor& input, const DeviceMesh&)>;
using OutputFn = std::function<Tensor(nn::Module&, const Tensor& output, const DeviceMesh&)>;

// For the module and every descendant: partition_fn (when given), then every parameter and buffer
// that is not yet a DTensor becomes a Replicate one on `mesh` (PyTorch's default); parameters keep
// their identity and requires_grad (Module::register_parameter). input_fn / output_fn, when given,
// become a forward pre-hook / forward hook of `module`.
// Errors: a module distributed before (PyTorch allows one call), a DTensor parameter on another
// mesh.
void distribute_module(nn::Module& module, const DeviceMesh& mesh, PartitionFn partition_fn = {},
                       InputFn input_fn = {}, OutputFn output_fn = {});

namespace detail {
// `tensor` (plain) as a DTensor on `mesh` with `placements`, scattered from its value on every
// rank (distribute_tensor), as a leaf with `tensor`'s requires_grad.
Tensor distribute_leaf(const Tensor& tensor, const DeviceMesh& mesh, const Placements& placements);
}  // namespace detail

}  // namespace tessera
