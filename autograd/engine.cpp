#include "tessera/autograd/engine.h"

#include <cstdint>
#include <iterator>
#include <utility>

#include "tessera/autograd/grad_accumulation.h"
#include "tessera/runtime/grad_mode.h"

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

// Note [Gradients of slices added in place]
// A tensor split into slices (a fused qkv projection narrowed into q, k and v) gets one gradient
// per slice, each zero but in its slice: built as such (a zero-filled tensor of the input's size
// with the slice copied in) and summed, the three cost three fills, three copies and two adds of
// the whole input. So where the input's buffer already holds another path's gradient and the
// engine could add into it in place (accumulates_in_place: nothing records, nothing else holds
// it), a node of one input and one edge is asked to add its gradient into that buffer
// (Node::add_gradient_into): a slice or select adds grad_output into its region of it. The first
// slice to arrive still builds its full-size gradient, which becomes the buffer. DTensors keep
// the general path (their slices need the sharding's own rules).
//
// Note [Engine bookkeeping]
// One backward of a small graph must cost little next to its ops (an add + sum + backward of one
// element is a few microseconds), so the per-call state is flat: the nodes reachable from the
// root get dense indices through an open-addressing table, and dependency counts, gradient
// buffers and capture flags are vectors indexed by them, allocated once per call.
class NodeIndex {
 public:
  // Index of n, or -1.
  int find(const Node* n) const {
    if (slots_.empty()) return -1;
    for (size_t i = hash(n);; i = (i + 1) & mask_) {
      if (slots_[i].node == n) return slots_[i].index;
      if (slots_[i].node == nullptr) return -1;
    }
  }
  // Index of n, inserting it as the next index if new; `added` tells which.
  int insert(const Node* n, bool& added) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    for (size_t i = hash(n);; i = (i + 1) & mask_) {
      if (slots_[i].node == n) {
        added = false;
        return slots_[i].index;
      }
      if (slots_[i].node == nullptr) {
        slots_[i] = Slot{n, static_cast<int>(count_++)};
        added = true;
        return slots_[i].index;
      }
    }
  }
  size_t size() const { return count_; }

 private:
  struct Slot {
    const Node* node = nullptr;
    int index = -1;
  };
  size_t hash(const Node* n) const {
    return (reinterpret_cast<uintptr_t>(n) >> 4) * 0x9E3779B97F4A7C15ull >> 7 & mask_;
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.node == nullptr) continue;
      size_t i = hash(s.node);
      while (slots_[i].node != nullptr) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
};

struct Graph {
  NodeIndex index;
  std::vector<Node*> nodes;  // by index
  std::vector<int> deps;     // edges into each node from reachable nodes
};

// Every node reachable from root, with dependency counts; iterative, so long chains cannot
// overflow the stack.
Graph analyze(Node* root) {
  Graph g;
  constexpr size_t kTypical = 16;
  g.nodes.reserve(kTypical);
  g.deps.reserve(kTypical);
  bool added = false;
  g.index.insert(root, added);
  g.nodes.push_back(root);
  g.deps.push_back(0);
  std::vector<Node*> stack;
  stack.reserve(kTypical);
  stack.push_back(root);
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->next_edges()) {
      if (!e.is_valid()) continue;
      const int i = g.index.insert(e.function.get(), added);
      if (added) {
        g.nodes.push_back(e.function.get());
        g.deps.push_back(0);
        stack.push_back(e.function.get());
      }
      ++g.deps[static_cast<size_t>(i)];
    }
  }
  return g;
}

// Nodes that must run for the captures: those with an edge into a captured node or into a node
// that must run. A reverse topological sweep sees every child before its parents.
std::vector<char> needed_for(const Graph& g, const std::vector<char>& captured) {
  std::vector<int> remaining = g.deps;
  std::vector<int> order;
  std::vector<int> ready{0};
  while (!ready.empty()) {
    const int n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (const Edge& e : g.nodes[static_cast<size_t>(n)]->next_edges()) {
      if (!e.is_valid()) continue;
      const int c = g.index.find(e.function.get());
      if (--remaining[static_cast<size_t>(c)] == 0) ready.push_back(c);
    }
  }
  std::vector<char> needed(g.nodes.size(), 0);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    for (const Edge& e : g.nodes[static_cast<size_t>(*it)]->next_edges()) {
      if (!e.is_valid()) continue;
      const auto c = static_cast<size_t>(g.index.find(e.function.get()));
      if (captured[c] != 0 || needed[c] != 0) {
        needed[static_cast<size_t>(*it)] = 1;
        break;
      }
    }
  }
  return needed;
}

// Checks one gradient a node returned against the slot it goes to; casts it to the slot's dtype.
Tensor validate(const Node& producer, size_t index, Tensor grad, const InputMetadata& expected) {
  TS_CHECK_SHAPE(expected.has_shape(grad.sizes()), "[backward] Function ", producer.name(),
                 " returned an invalid gradient at index ", index, " - got ", grad.shape(),
                 " but expected shape compatible with ", expected.shape());
  TS_CHECK(grad.device() == expected.device(), "[backward] Function ", producer.name(),
           " returned a gradient at index ", index, " on ", grad.device(), " but expected ",
           expected.device());
  if (grad.dtype() != expected.dtype()) grad = grad.to(expected.dtype());
  return grad;
}

// The callbacks of the backward pass running on this thread (innermost of reentrant ones), null
// outside one.
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;
// Whether that pass returns its gradients (pass_returns_gradients).
thread_local bool t_returns_gradients = false;

// Makes `callbacks` this thread's queue while the pass runs, restoring the outer pass's after.
class CallbackQueueScope {
 public:
  CallbackQueueScope(std::vector<std::function<void()>>* callbacks, bool returns_gradients)
      : saved_(t_callbacks), saved_returns_(t_returns_gradients) {
    t_callbacks = callbacks;
    t_returns_gradients = returns_gradients;
  }
  ~CallbackQueueScope() {
    t_callbacks = saved_;
    t_returns_gradients = saved_returns_;
  }
  CallbackQueueScope(const CallbackQueueScope&) = delete;
  CallbackQueueScope& operator=(const CallbackQueueScope&) = delete;

 private:
  std::vector<std::function<void()>>* saved_;
  bool saved_returns_;
};

std::vector<Tensor> run_graph(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                              bool keep_graph, bool create_graph, const std::vector<Edge>& outputs);

}  // namespace

void queue_callback(std::function<void()> callback) {
  TS_CHECK(t_callbacks != nullptr,
           "[queue_callback] called outside a backward pass; call it from a gradient hook or a "
           "Function's backward");
  t_callbacks->push_back(std::move(callback));
}

bool pass_returns_gradients() { return t_returns_gradients; }

std::vector<Tensor> execute(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                            bool keep_graph, bool create_graph, const std::vector<Edge>& outputs) {
  std::vector<std::function<void()>> callbacks;
  std::vector<Tensor> captured;
  {
    const CallbackQueueScope scope(&callbacks, !outputs.empty());
    captured = run_graph(roots, std::move(root_grads), keep_graph, create_graph, outputs);
    // Index, not iterators: a callback may queue another.
    for (size_t i = 0; i < callbacks.size(); ++i) {
      const std::function<void()> callback = std::move(callbacks[i]);
      callback();
    }
  }
  return captured;
}

namespace {

std::vector<Tensor> run_graph(const std::vector<Edge>& roots, std::vector<Tensor> root_grads,
                              bool keep_graph, bool create_graph,
                              const std::vector<Edge>& outputs) {
  GradModeScope grad_mode(create_graph);
  auto graph_root = std::make_shared<GraphRoot>(roots, std::move(root_grads));
  Graph g = analyze(graph_root.get());
  const size_t count = g.nodes.size();

  // For each capture: the node it sits on, its slot and where its gradient goes.
  std::vector<char> is_captured(count, 0);
  for (const Edge& out : outputs) {
    const int i = g.index.find(out.function.get());
    if (i >= 0) is_captured[static_cast<size_t>(i)] = 1;
  }
  const bool capture_mode = !outputs.empty();
  const std::vector<char> needed = capture_mode ? needed_for(g, is_captured) : std::vector<char>{};

  std::vector<Tensor> captured(outputs.size());
  // The gradients arriving at each node's input slots, in one flat array.
  std::vector<size_t> first_slot(count + 1, 0);
  for (size_t i = 0; i < count; ++i) first_slot[i + 1] = first_slot[i] + g.nodes[i]->num_inputs();
  std::vector<Tensor> slots(first_slot[count]);
  std::vector<int> ready;
  ready.reserve(count);
  ready.push_back(0);
  while (!ready.empty()) {
    const auto n = static_cast<size_t>(ready.back());
    ready.pop_back();
    Node* node = g.nodes[n];
    std::vector<Tensor> inputs(std::make_move_iterator(slots.begin() + first_slot[n]),
                               std::make_move_iterator(slots.begin() + first_slot[n + 1]));
    node->run_pre_hooks(inputs);
    if (is_captured[n] != 0) {
      for (size_t k = 0; k < outputs.size(); ++k) {
        if (outputs[k].function.get() == node) captured[k] = inputs[outputs[k].input_nr];
      }
    }
    if (capture_mode && n != 0 && needed[n] == 0) continue;

    const std::vector<Edge>& edges = node->next_edges();
    if (inputs.size() == 1 && edges.size() == 1 && edges[0].is_valid() && inputs[0].defined()) {
      // See Note [Gradients of slices added in place].
      const auto c = static_cast<size_t>(g.index.find(edges[0].function.get()));
      Tensor& slot = slots[first_slot[c] + edges[0].input_nr];
      if (slot.defined() && !slot.is_distributed() && !inputs[0].is_distributed() &&
          accumulates_in_place(slot) && node->add_gradient_into(inputs[0], slot)) {
        if (!keep_graph) node->release_variables();
        if (--g.deps[c] == 0) ready.push_back(static_cast<int>(c));
        continue;
      }
    }
    std::vector<Tensor> grads = node->apply(std::move(inputs));
    if (!keep_graph) node->release_variables();
    TS_CHECK(grads.size() == edges.size(), "[backward] Function ", node->name(), " returned ",
             grads.size(), " gradients but expected ", edges.size());
    for (size_t i = 0; i < edges.size(); ++i) {
      const Edge& e = edges[i];
      if (!e.is_valid()) continue;
      Node* child = e.function.get();
      const auto c = static_cast<size_t>(g.index.find(child));
      if (grads[i].defined()) {
        Tensor grad = validate(*node, i, std::move(grads[i]), child->input_metadata()[e.input_nr]);
        Tensor& slot = slots[first_slot[c] + e.input_nr];
        if (slot.defined()) {
          accumulate_gradient(slot, grad);
        } else {
          slot = std::move(grad);
        }
      }
      if (--g.deps[c] == 0) ready.push_back(static_cast<int>(c));
    }
  }
  return captured;
}

}  // namespace

}  // namespace tessera::autograd
