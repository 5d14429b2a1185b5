// A job that must fail under mpirun -n 4 (tests/collectives/mpi_tests.cmake): mode "throw" lets an
// exception escape main on rank 2 while the others wait in a collective; mode "timeout" keeps
// rank 1 away from a collective that the others run with a 1 s timeout.

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include "tessera/tessera.h"

namespace dist = tessera::dist;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const dist::ProcessGroupPtr pg = dist::init_process_group({.backend = "mpi"});
  tessera::Tensor t = tessera::Tensor::make_empty({16}, tessera::kFloat32, tessera::Device::cpu());
  float* p = t.data_ptr<float>();
  for (int i = 0; i < 16; ++i) p[i] = 1.0f;
  pg->all_reduce(t);
  if (mode == "throw") {
    if (pg->rank() == 2) throw tessera::Error("rank 2 fails on purpose");
    pg->all_reduce(t);
  } else if (mode == "timeout") {
    if (pg->rank() == 1) std::this_thread::sleep_for(std::chrono::seconds(60));
    pg->all_reduce(t, {.timeout = std::chrono::seconds(1)});
  }
  std::printf("rank %d finished, which it must not\n", pg->rank());
  return 0;
}
