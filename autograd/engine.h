#pragma once
// The backward engine: runs a graph of Nodes from root edges on the calling thread.
//
// Note [Engine state is per call]
// Everything the engine tracks (dependency counts, gradient buffers, the ready queue) is local to
// one execute() call, so a backward inside a Function's backward (reentrant) and backward passes
// of several rank threads at once need no locks; the graph each caller owns is the only shared
// state.

#include <functional>
#include <vector>

#include "tessera/autograd/node.h"
#include "tessera/runtime/tensor.h"

namespace tessera::autograd {

// Runs backward with root_grads[i] entering roots[i]. With `outputs` empty, every node reachable
// from the roots runs (leaves accumulate into .grad()); otherwise only the nodes leading to an
// output edge run and the summed gradient arriving at each output edge is returned (undefined if
// none arrived), without running the output nodes themselves. Runs under grad mode = create_graph;
// without keep_graph, each node's saved tensors are released once it ran.
std::vector<Tensor> execute(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                            bool keep_graph, bool create_graph, const std::vector<Edge>& outputs);

// Runs `callback` on this thread when the backward pass now running on it has run every node, in
// the order queued (a callback may queue more); the pass's caller sees their exceptions. As
// torch's Variable._execution_engine.queue_callback: data parallel waits for its gradient
// buckets there, after the last gradient hook ran. Only inside a backward pass (a hook, a
// Function's backward): an Error otherwise. A pass that fails drops its callbacks.
void queue_callback(std::function<void()> callback);

// Whether the backward pass running on this thread returns its gradients to the caller
// (autograd::grad: `outputs` given) rather than accumulating them into the leaves' .grad(): a
// Function that would hand a gradient to the leaves later, from a callback, must not then.
bool pass_returns_gradients();

}  // namespace tessera::autograd
