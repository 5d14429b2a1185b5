// A short tour of the runtime: views, broadcasting, and their printing.

#include <tessera/tessera.h>

#include <iostream>

namespace ts = tessera;

int main() {
  ts::Tensor a = ts::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  std::cout << "a = " << a << "\n";
  std::cout << "a.t() = " << a.t() << "\n";
  for (const auto& c : ts::from_vector<int64_t>({0, 1, 2, 3, 4}, {5}).chunk(4)) {
    std::cout << "chunk of 5 into 4: " << c << "\n";
  }
  return 0;
}
