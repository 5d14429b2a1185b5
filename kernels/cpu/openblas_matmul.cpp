// OpenBLAS sgemm, one OpenBLAS thread per call, split over the caller's OpenMP threads (See Note
// [CPU float32 GEMM choice] in kernels/cpu/linalg.cpp for why).

#include "tessera/kernels/cpu/openblas_matmul.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <vector>

#include "tessera/kernels/cpu/gemm_tasks.h"
#include "tessera/kernels/cpu/onednn_matmul.h"

namespace tessera::cpu {

namespace {

// Rows or columns of the output per thread are rounded to this: OpenBLAS's microkernels cover
// 16 floats along a row, so no thread ends on a ragged edge it need not have.
constexpr int64_t kSplitAlign = 16;

bool fits_blas_int(int64_t v) { return v <= INT_MAX; }

// Note [OpenBLAS's process-wide thread count]
// The pthread build of OpenBLAS (Debian's default) has one thread count for the whole process,
// and the application may set it too (libtorch, numpy, vs_libtorch's libtorch side). Tessera
// splits a product over its own OpenMP threads and needs each OpenBLAS call to run on its
// caller: a count above one puts OpenBLAS's pool under every OpenMP thread (oversubscribed, and
// its workers spin on the cores after the call), while setting one for good takes the
// application's threads away. So the count is one while any Tessera product runs, from any
// rank thread, and the application's again once the last one ends. An application call that
// runs concurrently with a Tessera product runs on one thread.
class OneOpenBlasThread {
 public:
  OneOpenBlasThread() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (state().running++ == 0) {
      state().application_threads = openblas_get_num_threads();
      if (state().application_threads != 1) openblas_set_num_threads(1);
    }
  }
  ~OneOpenBlasThread() {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (--state().running == 0 && state().application_threads != 1) {
      openblas_set_num_threads(state().application_threads);
    }
  }
  OneOpenBlasThread(const OneOpenBlasThread&) = delete;
  OneOpenBlasThread& operator=(const OneOpenBlasThread&) = delete;

 private:
  struct State {
    std::mutex mutex;
    int running = 0;              // Tessera products inside OpenBLAS now
    int application_threads = 1;  // the count to restore when the last one ends
  };
  static State& state() {
    static State s;
    return s;
  }
};

// c (m x n, row-major, ldc) = a (m x k) @ b (k x n), one OpenBLAS thread.
void sgemm(int64_t m, int64_t n, int64_t k, const float* a, MatrixLayout la, const float* b,
           MatrixLayout lb, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, la.row_major ? CblasNoTrans : CblasTrans,
              lb.row_major ? CblasNoTrans : CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(la.ld), b, static_cast<int>(lb.ld),
              0.0f, c, static_cast<int>(ldc));
}

}  // namespace

bool openblas_available() { return true; }

bool openblas_matmul(const Tensor& out, const Tensor& a, const Tensor& b) {
  TS_INTERNAL_ASSERT(out.dtype() == kFloat32, "[matmul] OpenBLAS path called with dtype ",
                     out.dtype());
  const Float32Products p(out, a, b);
  if (!fits_blas_int(p.m) || !fits_blas_int(p.n) || !fits_blas_int(p.k) ||
      !fits_blas_int(p.la.ld) || !fits_blas_int(p.lb.ld)) {
    return false;
  }
  const OneOpenBlasThread one_thread;

  // Each product's longer output dim is the one cut when there are fewer products than threads
  // (each thread packs the whole other operand).
  const bool split_rows = p.m >= p.n;
  for_each_gemm_piece(p.batch, split_rows ? p.m : p.n, kSplitAlign,
                      [&](int64_t i, int64_t begin, int64_t len) {
                        const float* ai = p.a_matrix(i);
                        const float* bi = p.b_matrix(i);
                        float* ci = p.out_matrix(i);
                        if (split_rows) {
                          sgemm(len, p.n, p.k, ai + begin * (p.la.row_major ? p.la.ld : 1), p.la,
                                bi, p.lb, ci + begin * p.n, p.n);
                        } else {
                          sgemm(p.m, len, p.k, ai, p.la,
                                bi + begin * (p.lb.row_major ? 1 : p.lb.ld), p.lb, ci + begin, p.n);
                        }
                      });
  return true;
}

}  // namespace tessera::cpu
