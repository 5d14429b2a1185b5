#include "tessera/autograd/formulas/formula.h"

#include "tessera/runtime/dtype.h"
#include "tessera/runtime/ops.h"

namespace tessera::autograd {

namespace {
void give_history(const std::shared_ptr<Node>& node, const Tensor& out) {
  if (out.defined() && is_floating_point(out.dtype())) set_history(out, node);
}
}  // namespace

void record(const std::shared_ptr<Node>& node,
            std::initializer_list<std::reference_wrapper<const Tensor>> inputs,
            std::initializer_list<const Tensor*> outputs) {
  std::vector<Edge> edges;
  edges.reserve(inputs.size());
  for (const Tensor& t : inputs) edges.push_back(gradient_edge(t));
  node->set_next_edges(std::move(edges));
  for (const Tensor* out : outputs) give_history(node, *out);
}

void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            std::initializer_list<const Tensor*> outputs) {
  node->set_next_edges(collect_next_edges(inputs));
  for (const Tensor* out : outputs) give_history(node, *out);
}

void record(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
            const std::vector<Tensor>& outputs) {
  node->set_next_edges(collect_next_edges(inputs));
  for (const Tensor& out : outputs) give_history(node, out);
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.sizes() == shape) return grad;
  const int64_t leading = grad.dim() - static_cast<int64_t>(shape.size());
  TS_INTERNAL_ASSERT(leading >= 0, "sum_to: gradient of shape ", grad.sizes(),
                     " cannot come from a broadcast of ", shape);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < leading; ++d) dims.push_back(d);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (shape[d] == 1 && grad.size(leading + d) != 1) dims.push_back(leading + d);
  }
  if (dims.empty()) return grad.reshape(shape);
  return sum(grad, dims, /*keepdim=*/true).reshape(shape);
}

}  // namespace tessera::autograd
