// Single-op cases: the eager overhead of a one-element op, memory-bound ops on 64 MiB, the
// transposed copy, and GEMMs.

#include <memory>

#include "bench/memory_rate.h"
#include "bench/vs_libtorch/cases.h"
#include "tessera/kernels/cpu/gemm_choice.h"

namespace tessera::bench::vs_libtorch {

namespace {

// Inputs and outputs shared by the two sides of a case (kept alive by the case's closures).
struct Operands {
  Tensor a, b, out;
  torch::Tensor ta, tb, tout;
};

std::shared_ptr<Operands> operands(const Shape& shape, DType dtype, bool requires_grad) {
  auto o = std::make_shared<Operands>();
  o->a = randn(shape).to(dtype).requires_grad_(requires_grad);
  o->b = randn(shape).to(dtype).requires_grad_(requires_grad);
  o->ta = to_torch(o->a).requires_grad_(requires_grad);
  o->tb = to_torch(o->b).requires_grad_(requires_grad);
  return o;
}

Case one_element_add(const std::string& name, bool requires_grad, bool backward) {
  auto o = operands({1}, kFloat32, requires_grad);
  Case c{name, 1.0, nullptr, nullptr, nullptr, 2000};
  if (backward) {
    // autograd::grad, not backward(): nothing accumulates across calls.
    c.tessera = [o] { o->out = autograd::grad({(o->a + o->b).sum()}, {o->a})[0]; };
    c.libtorch = [o] { o->tout = torch::autograd::grad({(o->ta + o->tb).sum()}, {o->ta})[0]; };
  } else {
    c.tessera = [o] { o->out = o->a + o->b; };
    c.libtorch = [o] { o->tout = o->ta + o->tb; };
  }
  c.max_rel_diff = [o] { return relative_difference(o->out, o->tout); };
  return c;
}

constexpr int64_t k64MiBFloats = int64_t{16} << 20;

Case big_add_fresh() {
  auto o = operands({k64MiBFloats}, kFloat32, false);
  return {"c = a + b, 64 MiB, fresh output", 1.0, [o] { o->out = o->a + o->b; },
          [o] { o->tout = o->ta + o->tb; }, [o] { return relative_difference(o->out, o->tout); }};
}

Case big_add_inplace() {
  auto o = operands({k64MiBFloats}, kFloat32, false);
  // The sides run different numbers of calls (each sample settles in a loop of its own), so a
  // and ta differ after timing: the check adds in place once more, on fresh copies of b.
  Case c{"a += b, 64 MiB", 1.0, [o] { o->a += o->b; }, [o] { o->ta += o->tb; },
         [o] {
           Tensor x = o->b.clone();
           x += o->b;
           torch::Tensor tx = o->tb.clone();
           tx += o->tb;
           return relative_difference(x, tx);
         }};
  c.plain_loop = [o] { update_loop(o->a.data_ptr<float>(), o->b.data_ptr<float>(), k64MiBFloats); };
  c.memory_bytes = 3.0 * k64MiBFloats * sizeof(float);  // a and b read, a written
  return c;
}

Case big_exp() {
  auto o = operands({k64MiBFloats}, kFloat32, false);
  return {"exp, 64 MiB", 1.0, [o] { o->out = o->a.exp(); }, [o] { o->tout = o->ta.exp(); },
          [o] { return relative_difference(o->out, o->tout); }};
}

Case big_sum() {
  auto o = operands({k64MiBFloats}, kFloat32, false);
  Case c{"sum, 64 MiB", 1.0, [o] { o->out = o->a.sum(); }, [o] { o->tout = o->ta.sum(); },
         [o] { return relative_difference(o->out, o->tout); }};
  c.plain_loop = [o] { read_loop(o->a.data_ptr<float>(), k64MiBFloats); };
  c.memory_bytes = 1.0 * k64MiBFloats * sizeof(float);
  return c;
}

Case transposed_copy() {
  auto o = operands({4096, 4096}, kFloat32, false);
  return {"t().contiguous(), 4096^2", 1.0, [o] { o->out = o->a.t().contiguous(); },
          [o] { o->tout = o->ta.t().contiguous(); },
          [o] { return relative_difference(o->out, o->tout); }};
}

Case square_matmul(int64_t n, DType dtype) {
  auto o = operands({n, n}, dtype, false);
  const std::string name = fmt::format("matmul {} {}", dtype == kFloat32 ? "f32" : "bf16", n);
  Case c{name, 1.0, [o] { o->out = matmul(o->a, o->b); },
         [o] { o->tout = torch::matmul(o->ta, o->tb); },
         [o] { return relative_difference(o->out, o->tout); }};
  if (dtype == kFloat32) {
    c.product_flops = 2.0 * double(n) * double(n) * double(n);
    c.tessera_gemm = [o] {
      return std::string(cpu::gemm_backend_name(cpu::chosen_gemm_backend(o->a, o->b)));
    };
  }
  return c;
}

}  // namespace

std::vector<Case> op_cases() {
  std::vector<Case> cases;
  cases.push_back(one_element_add("add, 1 element", false, false));
  cases.push_back(one_element_add("add, 1 element, with grad", true, false));
  cases.push_back(one_element_add("add + sum + backward, 1 element", true, true));
  cases.push_back(big_add_fresh());
  cases.push_back(big_add_inplace());
  cases.push_back(big_exp());
  cases.push_back(big_sum());
  cases.push_back(transposed_copy());
  for (DType dtype : {kFloat32, kBFloat16}) {
    for (int64_t n : {1024, 2048}) cases.push_back(square_matmul(n, dtype));
  }
  return cases;
}

}  // namespace tessera::bench::vs_libtorch
