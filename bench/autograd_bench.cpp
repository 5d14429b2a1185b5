// Autograd overhead benchmark: what recording the tape costs per op on tiny tensors (where the op
// itself is nearly free, so the figure is the overhead), what backward costs per node, beside the
// same work without grad.
//
// Targets (issue 3; libtorch on these machines: add with grad about 1.0 us, add + sum + backward
// of one element about 8.8 us): add with grad < 600 ns; add + sum + backward < 4 us.

#include <tessera/tessera.h>

#include <functional>
#include <string>

#include "bench/bench_util.h"

namespace ts = tessera;
using ts::bench::time_per_call;

namespace {

constexpr int kCalls = 20000;

void print_row(const std::string& name, double with_grad_s, double without_grad_s,
               const char* target = "") {
  fmt::print("  {:<34} {:>9.0f} ns {:>9.0f} ns {:>9.0f} ns  {}\n", name, with_grad_s * 1e9,
             without_grad_s * 1e9, (with_grad_s - without_grad_s) * 1e9, target);
}

// Times op(x) on a leaf that requires grad and on the same values without grad. The outputs die
// at once, so the graph (one node) is freed inside each call too.
void op_row(const std::string& name, const ts::Tensor& leaf,
            const std::function<ts::Tensor(const ts::Tensor&)>& op, const char* target = "") {
  const ts::Tensor plain = leaf.detach();
  const double with_grad = time_per_call([&] { op(leaf); }, kCalls);
  const double without = time_per_call([&] { op(plain); }, kCalls);
  print_row(name, with_grad, without, target);
}

// A chain y = ((x * c) + c) * c ... of n small ops, then backward; beside the forward alone
// without grad.
double chain_forward(const ts::Tensor& x, const ts::Tensor& c, int n) {
  ts::Tensor y = x;
  for (int i = 0; i < n; ++i) y = (i % 2 == 0) ? y * c : y + c;
  return ts::sum(y).item<double>();
}

}  // namespace

int main() {
  ts::set_num_threads(1);
  fmt::print("Tessera autograd overhead (1 intra-op thread, median of 7 batches of {} calls)\n\n",
             kCalls);
  fmt::print("  {:<34} {:>12} {:>12} {:>12}\n", "op on tiny tensors", "with grad", "without",
             "tape cost");

  const ts::Tensor x1 = ts::ones({1});
  x1.requires_grad_();
  const ts::Tensor y1 = ts::ones({1});
  const ts::Tensor x16 = ts::rand({4, 4});
  x16.requires_grad_();
  const ts::Tensor w16 = ts::rand({4, 4});

  op_row(
      "add (1 element)", x1, [&](const ts::Tensor& x) { return x + y1; },
      "target < 600 ns with grad");
  op_row("mul (1 element)", x1, [&](const ts::Tensor& x) { return x * y1; });
  op_row("exp (1 element)", x1, [&](const ts::Tensor& x) { return ts::exp(x); });
  op_row("sum (4x4)", x16, [&](const ts::Tensor& x) { return ts::sum(x); });
  op_row("matmul (4x4 @ 4x4)", x16, [&](const ts::Tensor& x) { return ts::matmul(x, w16); });
  op_row("view: transpose (4x4)", x16, [&](const ts::Tensor& x) { return x.t(); });
  op_row("softmax (4x4, dim 1)", x16, [&](const ts::Tensor& x) { return ts::softmax(x, 1); });

  // add + sum + backward of one element: the whole round trip a training step pays per op.
  const double round_trip = time_per_call(
      [&] {
        ts::Tensor loss = ts::sum(x1 + y1);
        loss.backward();
      },
      kCalls);
  const double round_trip_plain = time_per_call([&] { ts::sum(y1 + y1); }, kCalls);
  print_row("add + sum + backward (1 element)", round_trip, round_trip_plain,
            "target < 4 us with grad");
  x1.set_grad({});

  fmt::print("\n  {:<34} {:>12} {:>12} {:>12}\n", "chain of 1000 small ops (4x4)", "total",
             "per op", "");
  constexpr int kChain = 1000;
  const ts::Tensor c = ts::full({4, 4}, 1.0001);
  const double forward_plain =
      ts::bench::time_median([&] { chain_forward(x16.detach(), c, kChain); }, 7);
  const double forward_grad = ts::bench::time_median([&] { chain_forward(x16, c, kChain); }, 7);
  const double forward_backward = ts::bench::time_median(
      [&] {
        ts::Tensor y = x16;
        for (int i = 0; i < kChain; ++i) y = (i % 2 == 0) ? y * c : y + c;
        ts::sum(y).backward();
      },
      7);
  auto chain_row = [&](const char* name, double s) {
    fmt::print("  {:<34} {:>9.1f} us {:>9.0f} ns\n", name, s * 1e6, s / kChain * 1e9);
  };
  chain_row("forward without grad", forward_plain);
  chain_row("forward with grad (tape)", forward_grad);
  chain_row("forward + backward", forward_backward);
  chain_row("backward alone (difference)", forward_backward - forward_grad);
  return 0;
}
