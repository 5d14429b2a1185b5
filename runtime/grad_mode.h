#pragma once
// Grad mode: whether ops record the autograd graph. Thread-local, as in PyTorch, because the
// `threads` collectives backend runs one rank per thread (DESIGN.md: no hidden global state across
// ranks). It lives in runtime/ so op entry points can read it without depending on autograd/.

namespace tessera {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

// RAII: disables recording on this thread until the end of the scope, then restores the previous
// mode (like torch::NoGradGuard).
class NoGradGuard {
 public:
  NoGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(previous_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// RAII: enables recording on this thread until the end of the scope (used by backward with
// create_graph), then restores the previous mode.
class EnableGradGuard {
 public:
  EnableGradGuard() : previous_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(previous_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace tessera
