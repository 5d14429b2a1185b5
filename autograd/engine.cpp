#include "autograd/engine.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "autograd/grad_accumulation.h"
#include "runtime/grad_mode.h"

namespace tessera::autograd {

namespace {

// The node every pass starts from: hands the root gradients to the roots.
class GraphRoot final : public Node {
 public:
  GraphRoot(const std::vector<Edge>& roots, std::vector<Tensor> grads) : grads_(std::move(grads)) {
    set_next_edges(roots);
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& /*grad_outputs*/) override {
    return std::move(grads_);
  }
  std::string name() const override { return "GraphRoot"; }

 private:
  std::vector<Tensor> grads_;
};

class GradModeScope {
 public:
  explicit GradModeScope(bool enabled) : previous_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeScope() { set_grad_enabled(previous_); }
  GradModeScope(const GradModeScope&) = delete;
  GradModeScope& operator=(const GradModeScope&) = delete;

 private:
  bool previous_;
};

struct Capture {
  uint32_t input_nr;
  size_t output_index;
};

// Dependency counts (edges into each node from nodes reachable from root) and a topological order
// (each node before the nodes its edges point to), by Kahn's algorithm; iterative, so long chains
// cannot overflow the stack.
void analyze(Node* root, std::unordered_map<Node*, int>& deps, std::vector<Node*>& order) {
  std::vector<Node*> stack{root};
  std::unordered_set<Node*> seen{root};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      ++deps[e.function.get()];
      if (seen.insert(e.function.get()).second) stack.push_back(e.function.get());
    }
  }
  std::unordered_map<Node*, int> remaining = deps;
  std::vector<Node*> ready{root};
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (const Edge& e : n->next_edges()) {
      if (e.is_valid() && --remaining[e.function.get()] == 0) ready.push_back(e.function.get());
    }
  }
}

// Nodes that must run for the captures: those with an edge into a captured node or into a node
// that must run. Visiting the topological order backwards sees every child before its parents.
std::unordered_set<Node*> needed_for(
    const std::vector<Node*>& order,
    const std::unordered_map<Node*, std::vector<Capture>>& captures) {
  std::unordered_set<Node*> needed;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (const Edge& e : (*it)->next_edges()) {
      Node* child = e.function.get();
      if (child != nullptr && (captures.count(child) != 0 || needed.count(child) != 0)) {
        needed.insert(*it);
        break;
      }
    }
  }
  return needed;
}

// Checks one gradient a node returned against the slot it goes to; casts it to the slot's dtype.
Tensor validate(const Node& producer, size_t index, Tensor grad, const InputMetadata& expected) {
  TS_CHECK_SHAPE(grad.shape() == expected.shape, "[backward] Function ", producer.name(),
                 " returned an invalid gradient at index ", index, " - got ", grad.shape(),
                 " but expected shape compatible with ", expected.shape);
  TS_CHECK(grad.device() == expected.device, "[backward] Function ", producer.name(),
           " returned a gradient at index ", index, " on ", grad.device(), " but expected ",
           expected.device);
  if (grad.dtype() != expected.dtype) grad = grad.to(expected.dtype);
  return grad;
}

}  // namespace

std::vector<Tensor> execute(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                            bool keep_graph, bool create_graph, const std::vector<Edge>& outputs) {
  GradModeScope grad_mode(create_graph);
  auto graph_root = std::make_shared<GraphRoot>(roots, std::move(root_grads));

  std::unordered_map<Node*, int> deps;
  std::vector<Node*> order;
  analyze(graph_root.get(), deps, order);

  std::unordered_map<Node*, std::vector<Capture>> captures;
  for (size_t i = 0; i < outputs.size(); ++i) {
    captures[outputs[i].function.get()].push_back(Capture{outputs[i].input_nr, i});
  }
  const bool capture_mode = !outputs.empty();
  const std::unordered_set<Node*> needed =
      capture_mode ? needed_for(order, captures) : std::unordered_set<Node*>{};

  std::vector<Tensor> captured(outputs.size());
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  std::vector<Node*> ready{graph_root.get()};
  while (!ready.empty()) {
    Node* node = ready.back();
    ready.pop_back();
    std::vector<Tensor> inputs;
    if (auto it = buffers.find(node); it != buffers.end()) {
      inputs = std::move(it->second);
      buffers.erase(it);
    }
    inputs.resize(node->num_inputs());
    node->run_pre_hooks(inputs);
    if (auto it = captures.find(node); it != captures.end()) {
      for (const Capture& c : it->second) captured[c.output_index] = inputs[c.input_nr];
    }
    if (capture_mode && node != graph_root.get() && needed.count(node) == 0) continue;

    std::vector<Tensor> grads = node->apply(std::move(inputs));
    if (!keep_graph) node->release_variables();
    const std::vector<Edge>& edges = node->next_edges();
    TS_CHECK(grads.size() == edges.size(), "[backward] Function ", node->name(), " returned ",
             grads.size(), " gradients but expected ", edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* child = e.function.get();
      if (grads[i].defined()) {
        Tensor g = validate(*node, i, std::move(grads[i]), child->input_metadata()[e.input_nr]);
        std::vector<Tensor>& buffer = buffers[child];
        buffer.resize(child->num_inputs());
        Tensor& slot = buffer[e.input_nr];
        slot = slot.defined() ? sum_gradients(slot, g) : std::move(g);
      }
      if (--deps[child] == 0) ready.push_back(child);
    }
  }
  return captured;
}

}  // namespace tessera::autograd
