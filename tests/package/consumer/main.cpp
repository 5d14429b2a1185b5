// Consumer of the installed package: prints OK only when the library computes correctly.
#include <tessera/tessera.h>

#include <iostream>

namespace ts = tessera;

int main() {
  ts::Tensor a = ts::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::vector<float> t = a.t().contiguous().to_vector<float>();
  if (t != std::vector<float>{1, 4, 2, 5, 3, 6}) {
    std::cerr << "consumer: wrong transpose " << a.t() << "\n";
    return 1;
  }
  try {
    a.view({4, 2});
    std::cerr << "consumer: view to a wrong size did not throw\n";
    return 1;
  } catch (const ts::Error& e) {
    std::cout << "consumer: caught expected error: " << e.what() << "\n";
  }
  std::cout << "consumer OK\n";
  return 0;
}
