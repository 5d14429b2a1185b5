#pragma once
// A tensor saved for backward, with the storage version at save time so that an in-place write
// between forward and backward is detected instead of silently giving a wrong gradient.

#include <cstdint>
#include <memory>

#include "tessera/autograd/node.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

class SavedTensor {
 public:
  SavedTensor() = default;
  // is_output: t is an output of the node that saves it. Such a tensor is kept without its
  // grad_fn (a weak reference instead), since node -> saved output -> node would be a cycle.
  SavedTensor(const Tensor& t, bool is_output);

  // The saved tensor (undefined if an undefined one was saved). Errors, naming `saved_for`:
  // after release (a second backward without retain_graph), or when its storage was modified in
  // place since it was saved.
  Tensor unpack(const Node& saved_for) const;
  // Frees the tensor; unpack raises afterwards.
  void release();

 private:
  Tensor data_;
  std::weak_ptr<Node> weak_grad_fn_;
  uint64_t saved_version_ = 0;
  uint32_t output_nr_ = 0;
  bool was_defined_ = false;
  bool is_output_ = false;
  bool released_ = false;
};

}  // namespace tessera::autograd
