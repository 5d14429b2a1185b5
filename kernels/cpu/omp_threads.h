#pragma once
// Sets the calling thread's OpenMP thread count for a scope: oneDNN (an OpenMP build), Eigen and
// Tessera's own GEMM kernels size their parallel regions by omp_get_max_threads(), which
// tessera::set_num_threads does not reach (kernels/cpu/linalg.cpp sets it per product; tests and
// benchmarks that call a kernel directly set it with this).

#include <omp.h>

namespace tessera::cpu {

class OmpThreadsGuard {
 public:
  explicit OmpThreadsGuard(int threads) : saved_(omp_get_max_threads()) {
    if (threads != saved_) omp_set_num_threads(threads);
  }
  ~OmpThreadsGuard() {
    if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
  }
  OmpThreadsGuard(const OmpThreadsGuard&) = delete;
  OmpThreadsGuard& operator=(const OmpThreadsGuard&) = delete;

 private:
  int saved_;
};

}  // namespace tessera::cpu
