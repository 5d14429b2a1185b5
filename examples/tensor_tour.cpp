// A short tour of Tessera: views, broadcasting, kernels, random numbers, and four ranks of the
// embedded threads backend reducing a tensor together.

#include <tessera/tessera.h>

#include <iostream>
#include <mutex>

namespace ts = tessera;

int main() {
  ts::Tensor a = ts::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::cout << "a = " << a << "\n";
  std::cout << "a.t() (a view, no copy) = " << a.t() << "\n";
  for (const auto& c : ts::arange(5).chunk(4)) {
    std::cout << "torch.chunk of 5 rows into 4: " << c << "\n";
  }
  std::cout << "a + [10, 20, 30] (broadcast) = " << a + ts::from_vector<float>({10, 20, 30}, {3})
            << "\n";
  std::cout << "a @ a.t() = " << ts::matmul(a, a.t()) << "\n";
  std::cout << "softmax(a, -1) = " << ts::softmax(a, -1) << "\n";
  std::cout << "sum over dim 0 = " << ts::sum(a, {0}) << ", mean = " << ts::mean(a) << "\n";

  ts::manual_seed(42);
  std::cout << "randn({2, 2}) with seed 42 = " << ts::randn({2, 2}) << "\n";

  try {
    ts::add(a, ts::ones({4}));
  } catch (const ts::Error& e) {
    std::cout << "errors name the op and shapes: " << e.what() << "\n";
  }

  std::mutex print_mutex;
  ts::dist::run_threads(4, [&](ts::dist::ProcessGroupPtr world) {
    ts::Tensor t = ts::full({3}, static_cast<double>(world->rank() + 1));
    world->all_reduce(t, ts::dist::ReduceOp::Sum);
    std::lock_guard<std::mutex> lock(print_mutex);
    std::cout << "rank " << world->rank() << " of " << world->size() << ": all_reduce sum = " << t
              << "\n";
  });
  return 0;
}
