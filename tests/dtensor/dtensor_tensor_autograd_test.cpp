// Tensor's autograd methods on DTensors (a DTensor's autograd state is its local tensor's):
// backward with a gradient of another layout, set_grad, register_hook, detach, is_leaf.

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
TEST_CASE("DTensor autograd: backward, set_grad, hooks and detach through Tensor's methods",
          "[dtensor][ops][autograd]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Tensor a = ints({8, 6}, 1);
    const Tensor g = ints({8, 6}, 2);
    const auto expect = [&](bool ok, const std::string& what) {
      if (!ok) f.push_back(what);
    };

    // backward with a gradient laid out differently from the tensor (S(1) for an S(0) tensor),
    // and with a plain gradient (taken as Replicate).
    for (bool plain_gradient : {false, true}) {
      const Tensor x = distribute_tensor(a, mesh, {Shard(0)}).requires_grad_();
      const Tensor y = x * 3;
      y.backward(plain_gradient ? g : Tensor(distribute_tensor(g, mesh, {Shard(1)})));
      const Tensor gx = x.grad();
      expect(gx.is_distributed() && DTensor(gx).placements() == Placements{Shard(0)},
             "x.grad() is an S(0) DTensor");
      expect(equal(gx, g * 3), "x.grad() equals 3 * gradient");
      expect(x.is_leaf() && !y.is_leaf() && y.grad_fn() != nullptr, "leaf and grad_fn forward");
    }

    // set_grad takes any layout of the right shape and stores it in the tensor's gradient layout.
    const Tensor p = distribute_tensor(a, mesh, {Shard(0)}).requires_grad_();
    p.set_grad(distribute_tensor(g, mesh, {Replicate()}));
    expect(DTensor(p.grad()).placements() == Placements{Shard(0)} && equal(p.grad(), g),
           "set_grad redistributes to S(0)");
    p.set_grad(Tensor());
    expect(!p.grad().defined(), "set_grad(undefined) clears the gradient");
    try {
      p.set_grad(ints({3}, 4));
      f.push_back("set_grad of a wrong shape did not raise");
    } catch (const Error& e) {
      expect(std::string(e.what()).find("[set_grad] gradient of shape [3]") != std::string::npos,
             std::string("set_grad shape message: ") + e.what());
    }

    // A hook sees the gradient as a DTensor and may replace it with a DTensor of any layout.
    const Tensor h = distribute_tensor(a, mesh, {Shard(0)}).requires_grad_();
    bool saw_dtensor = false;
    h.register_hook([&](const Tensor& grad) {
      saw_dtensor = grad.is_distributed();
      return Tensor(DTensor(grad * 2).redistribute({Replicate()}));
    });
    sum(h * h).backward();
    expect(saw_dtensor, "the hook received a DTensor");
    expect(equal(h.grad(), a * 4), "the hook's doubled gradient reached h.grad()");

    // detach: the same DTensor out of the graph.
    const Tensor d = (h * 1).detach();
    expect(d.is_distributed() && !d.requires_grad() && equal(d, a), "detach keeps the DTensor");
    return f;
  });
}

}  // namespace tessera::dtensor_test
