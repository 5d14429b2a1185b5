// Consumer of the installed package: prints OK only when the library computes correctly. Its own
// runtime/error.h comes first on its include path, before Tessera's include directory.
#include <tessera/tessera.h>

#include <cstring>
#include <iostream>

#include "runtime/error.h"

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
  if (std::strcmp(engine::error_header(), "engine's runtime/error.h") != 0) return 1;
  std::cout << "consumer OK\n";
  return 0;
}
