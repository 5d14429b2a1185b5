#include "tessera/autograd/autograd.h"

#include "tessera/autograd/autograd_meta.h"
#include "tessera/autograd/engine.h"
#include "tessera/runtime/ops.h"

namespace tessera::autograd {

namespace {

// Root edges and gradients: implicit ones for one-element outputs, checked shapes otherwise.
std::pair<std::vector<Edge>, std::vector<Tensor>> make_roots(const std::vector<Tensor>& outputs,
                                                             const std::vector<Tensor>& grads,
                                                             const char* op) {
  TS_CHECK(grads.empty() || grads.size() == outputs.size(), "[", op, "] got ", grads.size(),
           " gradients for ", outputs.size(), " tensors");
  std::vector<Edge> edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    TS_CHECK(out.defined(), "[", op, "] tensor ", i, " is undefined");
    Edge edge = gradient_edge(out);
    TS_CHECK(edge.is_valid(), "[", op, "] element ", i,
             " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grads.empty() ? Tensor() : grads[i];
    if (!g.defined()) {
      TS_CHECK(out.numel() == 1, "[", op,
               "] grad can be implicitly created only for scalar outputs, got shape ", out.shape());
      g = ones_like(out);
    } else {
      TS_CHECK_SHAPE(g.shape() == out.shape(), "[", op, "] Mismatch in shape: grad_output[", i,
                     "] has a shape of ", g.shape(), " and output[", i, "] has a shape of ",
                     out.shape());
      if (g.dtype() != out.dtype()) g = g.to(out.dtype());
    }
    edges.push_back(std::move(edge));
    root_grads.push_back(std::move(g));
  }
  return {std::move(edges), std::move(root_grads)};
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions options) {
  auto [roots, root_grads] = make_roots(outputs, grad_outputs, "grad");
  std::vector<Edge> targets;
  targets.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    TS_CHECK(input.defined() && input.requires_grad(),
             "[grad] One of the differentiated Tensors does not require grad");
    targets.push_back(gradient_edge(input));
  }
  const bool keep_graph = options.retain_graph.value_or(options.create_graph);
  std::vector<Tensor> result =
      execute(roots, std::move(root_grads), keep_graph, options.create_graph, targets);
  for (const Tensor& g : result) {
    TS_CHECK(g.defined() || options.allow_unused,
             "[grad] One of the differentiated Tensors appears to not have been used in the graph. "
             "Set allow_unused=true if this is the desired behavior.");
  }
  return result;
}

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors,
              BackwardOptions options) {
  auto [roots, root_grads] = make_roots(tensors, grad_tensors, "backward");
  const bool keep_graph = options.retain_graph.value_or(options.create_graph);
  execute(roots, std::move(root_grads), keep_graph, options.create_graph, {});
}

}  // namespace tessera::autograd
