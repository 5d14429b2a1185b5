// The CPU float32 GEMM backends (oneDNN, OpenBLAS, Eigen, the narrow and tile kernels), each forced
// in turn,
// and the measured choice among them (Note [CPU float32 GEMM choice]) against float64 loops over
// indices.

#include <dlfcn.h>

#include <array>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "tessera/kernels/cpu/gemm_choice.h"
#include "tessera/kernels/cpu/omp_threads.h"
#include "tessera/kernels/cpu/thread_team.h"
#include "tessera/kernels/cpu/tile_matmul.h"
#include "tessera/tessera.h"
#include "tests/runtime/matmul_reference.h"

using namespace tessera;
using cpu::GemmBackend;
using runtime_test::Expected;
using runtime_test::reference_matmul;

namespace {

const std::vector<GemmBackend> kBackends = {GemmBackend::kOneDnn, GemmBackend::kOpenBlas,
                                            GemmBackend::kEigen, GemmBackend::kNarrow,
                                            GemmBackend::kTiles};

// Values in [-1, 1), float32.
Tensor make(const Shape& shape, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(shape.numel()));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(s >> 40) / 8388608.0 - 1.0);
  }
  return from_vector<float>(v, shape);
}

// Mismatches of matmul(a, b) against the reference (float32 rounding allowed).
int64_t mismatches(const Tensor& a, const Tensor& b, const Expected& want) {
  const Tensor out = matmul(a, b);
  const std::vector<double> got = out.to_vector<double>();
  if (got.size() != want.value.size()) return -1;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want.value[i]) <= 2e-5 * want.magnitude[i] + 1e-30)) ++bad;
  }
  return bad;
}

struct Case {
  std::string name;
  Tensor a, b;
};

// Square, skinny (the MLP's 10-wide layer and its gradients), transposed, sliced (a leading
// dimension beyond the row), batched, broadcast-batch and empty / K = 0 products.
std::vector<Case> cases() {
  return {
      {"square 64", make({64, 64}, 1), make({64, 64}, 2)},
      {"square 200", make({200, 200}, 3), make({200, 200}, 4)},
      {"skinny n=10", make({256, 300}, 5), make({300, 10}, 6)},
      {"skinny k=10", make({256, 10}, 7), make({10, 300}, 8)},
      {"skinny m=3", make({3, 200}, 9), make({200, 150}, 10)},
      {"vector", make({1, 300}, 11), make({300, 1}, 12)},
      {"a.t()", make({130, 70}, 13).t(), make({130, 90}, 14)},
      {"b.t()", make({70, 130}, 15), make({90, 130}, 16).t()},
      {"a.t() b.t()", make({130, 70}, 17).t(), make({90, 130}, 18).t()},
      {"row slices", make({100, 300}, 19).narrow(1, 5, 200),
       make({250, 120}, 20).narrow(0, 10, 200)},
      {"column-major slices", make({300, 100}, 21).narrow(0, 7, 200).t(),
       make({150, 230}, 22).narrow(1, 3, 200).t()},
      {"batched", make({3, 40, 50}, 23), make({3, 50, 30}, 24)},
      {"batched transposed", make({3, 50, 40}, 25).transpose(1, 2),
       make({3, 30, 50}, 26).transpose(1, 2)},
      {"broadcast batch in b", make({4, 40, 50}, 27), make({50, 30}, 28).expand({4, 50, 30})},
      {"broadcast batch in a", make({1, 40, 50}, 29).expand({4, 40, 50}), make({4, 50, 30}, 30)},
      {"batched large", make({2, 160, 200}, 31), make({2, 200, 180}, 32)},
      // Attention's q @ k^T and p @ v on heads of one fused qkv tensor: strided batched views.
      {"heads q @ k^T",
       make({3, 40, 96}, 55).narrow(-1, 0, 32).reshape({3, 40, 2, 16}).transpose(1, 2),
       make({3, 40, 96}, 56).narrow(-1, 32, 32).reshape({3, 40, 2, 16}).permute({0, 2, 3, 1})},
      {"heads p @ v", make({3, 2, 40, 40}, 57),
       make({3, 40, 96}, 58).narrow(-1, 64, 32).reshape({3, 40, 2, 16}).transpose(1, 2)},
      // Narrow outputs (N <= 16) in both of a's layouts, with K and M off the narrow kernels'
      // 16- and 32-element blocks (every column count: the narrow test case below).
      {"narrow n=16 k=37", make({45, 37}, 41), make({37, 16}, 42)},
      {"narrow n=13 a.t()", make({70, 77}, 43).t(), make({70, 13}, 44)},
      {"narrow n=7 a.t() b.t()", make({50, 33}, 45).t(), make({7, 50}, 46).t()},
      {"narrow n=5 b.t() k=3", make({19, 3}, 47), make({5, 3}, 48).t()},
      {"narrow n=12 column-major slices", make({90, 100}, 49).narrow(0, 5, 80).t(),
       make({80, 40}, 50).narrow(1, 2, 12)},
      {"narrow batched n=9", make({3, 20, 50}, 51).transpose(1, 2), make({3, 20, 9}, 52)},
      {"narrow broadcast batch n=2", make({4, 33, 17}, 53), make({17, 2}, 54).expand({4, 17, 2})},
      {"empty m", make({0, 5}, 33), make({5, 3}, 34)},
      {"empty n", make({4, 5}, 35), make({5, 0}, 36)},
      {"K = 0", make({4, 0}, 37), make({0, 3}, 38)},
      {"batched K = 0", make({2, 4, 0}, 39), make({2, 0, 3}, 40)},
  };
}

void check_cases(const std::string& what) {
  for (int n : {1, 2}) {
    const IntraOpThreadsGuard threads(n);
    for (const Case& c : cases()) {
      INFO(what << ", " << n << " thread(s), " << c.name << ": " << c.a.sizes() << " @ "
                << c.b.sizes());
      CHECK(mismatches(c.a, c.b, reference_matmul(c.a, c.b)) == 0);
    }
  }
}

}  // namespace

TEST_CASE("every CPU float32 GEMM backend against float64 loops", "[runtime][linalg][gemm]") {
  for (GemmBackend backend : kBackends) {
    const std::string name(cpu::gemm_backend_name(backend));
    if (!cpu::gemm_backend_available(backend)) {
      WARN("skipped " << name
                      << ": not in this build or on this CPU (TESSERA_ONEDNN / TESSERA_OPENBLAS "
                         "off, the package missing at configure time, or no AVX-512F for the "
                         "narrow and tile kernels)");
      continue;
    }
    cpu::GemmBackendOverride force(backend);
    check_cases(name);
  }
}

TEST_CASE("linear's bias in the product on every backend", "[runtime][linalg][gemm]") {
  // oneDNN and the tile kernels add it in the product (Note [Bias in the product]); the others
  // after it.
  struct LinearCase {
    std::string name;
    Tensor x, w;
  };
  const std::vector<LinearCase> linear_cases = {
      {"2-D", make({64, 96}, 60), make({80, 96}, 61)},
      {"3-D, folded", make({3, 20, 96}, 62), make({200, 96}, 63)},
      {"3-D transposed, batched", make({20, 3, 96}, 64).transpose(0, 1), make({70, 96}, 65)},
      {"1-D", make({96}, 66), make({30, 96}, 67)},
      {"weight stored transposed", make({64, 96}, 68), make({96, 40}, 69).t()},
      {"narrow n=10", make({128, 96}, 70), make({10, 96}, 71)},
      {"K = 300: the tile kernels' two blocks of K", make({20, 300}, 75), make({40, 300}, 76)},
      // Two threads split the tile kernels' product by columns, the second part ragged.
      {"600 wide", make({40, 96}, 77), make({600, 96}, 78)},
      {"K = 0", make({5, 0}, 72), make({7, 0}, 73)},
  };
  for (GemmBackend backend : kBackends) {
    if (!cpu::gemm_backend_available(backend)) continue;  // the case above says why
    const cpu::GemmBackendOverride force(backend);
    for (int threads : {1, 2}) {
      const IntraOpThreadsGuard guard(threads);
      for (const LinearCase& c : linear_cases) {
        INFO(cpu::gemm_backend_name(backend) << ", " << threads << " thread(s), " << c.name
                                             << ": x " << c.x.sizes() << ", w " << c.w.sizes());
        const Tensor bias = make({c.w.size(0)}, 74);
        Expected want = reference_matmul(c.x, c.w.t());
        const std::vector<double> vb = bias.to_vector<double>();
        for (size_t i = 0; i < want.value.size(); ++i) {
          want.value[i] += vb[i % vb.size()];
          want.magnitude[i] += std::abs(vb[i % vb.size()]);
        }
        const std::vector<double> got = linear(c.x, c.w, bias).to_vector<double>();
        REQUIRE(got.size() == want.value.size());
        int64_t bad = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          if (!(std::abs(got[i] - want.value[i]) <= 2e-5 * want.magnitude[i] + 1e-30)) ++bad;
        }
        CHECK(bad == 0);
      }
    }
  }
}

TEST_CASE("the narrow kernels on every output width and layout", "[runtime][linalg][gemm]") {
  if (!cpu::gemm_backend_available(GemmBackend::kNarrow)) {
    WARN("skipped: the narrow kernels need x86-64 with AVX-512F, which this CPU lacks");
    return;
  }
  cpu::GemmBackendOverride force(GemmBackend::kNarrow);
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard guard(threads);
    for (int64_t n = 1; n <= 16; ++n) {
      const Tensor a = make({37, 21}, static_cast<uint64_t>(100 + n));
      const Tensor b = make({21, n}, static_cast<uint64_t>(200 + n));
      const Tensor b_col = make({n, 21}, static_cast<uint64_t>(300 + n)).t();
      const Tensor a_col = make({21, 37}, static_cast<uint64_t>(400 + n)).t();
      for (const auto& [x, y] : {std::pair{a, b}, {a, b_col}, {a_col, b}, {a_col, b_col}}) {
        INFO(threads << " thread(s), n = " << n << ", a strides " << x.strides() << ", b strides "
                     << y.strides());
        CHECK(mismatches(x, y, reference_matmul(x, y)) == 0);
      }
    }
  }
}

// Tile edges (1 to 14 rows, 1 to 32 columns of a 14 x 32 tile), several blocks of K (256) and of
// columns (512), every layout of a and b, each operand read in place and packed (Note
// [Register-tile float32 products]: rows 2 KiB apart, 128 output rows or more, column-major a
// deeper than 64, row-major a's full blocks copied by steps, a row-major b packed by the first
// row block's tiles or before them), each against float64.
// linear's bias on them: the case below.
TEST_CASE("the tile kernels on every tile edge, block and layout", "[runtime][linalg][gemm]") {
  if (!cpu::gemm_backend_available(GemmBackend::kTiles)) {
    WARN("skipped: the tile kernels need x86-64 with AVX-512F, which this CPU lacks");
    return;
  }
  cpu::GemmBackendOverride force(GemmBackend::kTiles);
  struct Dims {
    int64_t m, n, k;
  };
  std::vector<Dims> dims;
  for (int64_t m = 1; m <= 15; ++m) dims.push_back({m, 33, 19});  // every tile height
  for (int64_t n : {1, 15, 16, 17, 31, 32, 47, 48, 64}) dims.push_back({29, n, 21});  // widths
  const int64_t columns = cpu::tile_matmul_column_block();  // sized to this CPU's L2
  dims.push_back({17, columns + 18, 40});  // two blocks of columns, the last 18 wide
  dims.push_back({30, 40, 600});           // three blocks of K, the last 88 deep
  dims.push_back({16, columns + 8, 270});  // both
  dims.push_back({130, 45, 70});           // b packed for 128 rows or more
  dims.push_back({250, 40, 100});  // a column-major packed in two chunks of rows, the last 26
  dims.push_back({20, 48, 512});   // a's rows 2 KiB apart: packed
  dims.push_back({17, 512, 30});   // b's rows 2 KiB apart: packed
  // A row-major a's full 14-row blocks copied by steps (256 columns or more, 128 deep or more),
  // beside the partial blocks that end m (1 to 13 rows, not copied so), at depths that are not
  // multiples of 16.
  for (int64_t m : {1, 13, 14, 15, 29}) dims.push_back({m, 256, 150});
  dims.push_back({15, 257, 140});  // the last tile 1 column wide
  dims.push_back({28, 300, 600});  // three blocks of K, the last 88 deep (not copied by steps)
  // A packed row-major b: packed by the first row block's tiles where all of b fits in one core's
  // L2, two blocks of columns (the last 8 wide) and of K; the first row block 5 rows high; b over
  // the L2 (2.4 MB) packed before the tiles (Note [b packed by the first row block]).
  dims.push_back({130, columns + 8, 300});
  dims.push_back({5, 512, 300});
  dims.push_back({20, 1024, 600});
  uint64_t seed = 500;
  for (int threads : {1, 2}) {
    const IntraOpThreadsGuard guard(threads);
    for (const Dims& d : dims) {
      const Tensor a = make({d.m, d.k}, ++seed), a_col = make({d.k, d.m}, ++seed).t();
      const Tensor b = make({d.k, d.n}, ++seed), b_col = make({d.n, d.k}, ++seed).t();
      for (const auto& [x, y] : {std::pair{a, b}, {a, b_col}, {a_col, b}, {a_col, b_col}}) {
        INFO(threads << " thread(s), " << d.m << " x " << d.k << " @ " << d.k << " x " << d.n
                     << ", a strides " << x.strides() << ", b strides " << y.strides());
        CHECK(mismatches(x, y, reference_matmul(x, y)) == 0);
      }
    }
  }
}

// Applications set OpenBLAS's process-wide thread count too (libtorch, numpy): a Tessera product
// runs OpenBLAS at one thread and gives the application its count back (See Note [OpenBLAS's
// process-wide thread count] in kernels/cpu/openblas_matmul.cpp).
TEST_CASE("an OpenBLAS product keeps the application's OpenBLAS thread count",
          "[runtime][linalg][gemm]") {
  if (!cpu::gemm_backend_available(GemmBackend::kOpenBlas)) {
    WARN("skipped: this build has no OpenBLAS (TESSERA_OPENBLAS off, or the package missing)");
    return;
  }
  using SetThreads = void (*)(int);
  using GetThreads = int (*)();
  const auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  const auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  REQUIRE(set != nullptr);
  REQUIRE(get != nullptr);
  const int before = get();
  set(2);
  {
    cpu::GemmBackendOverride force(GemmBackend::kOpenBlas);
    check_cases("openblas under an application's 2 OpenBLAS threads");
  }
  CHECK(get() == 2);
  set(before);
}

TEST_CASE("the measured CPU GEMM choice is stable and correct", "[runtime][linalg][gemm]") {
  check_cases("auto");
  for (int threads : {1, 2}) {
    const GemmBackend first = cpu::chosen_gemm_backend(256, 1024, 512, threads);
    CHECK(cpu::gemm_backend_available(first));
    for (int i = 0; i < 3; ++i) CHECK(cpu::chosen_gemm_backend(256, 1024, 512, threads) == first);
    // The same shape class (each dim in the same range) gets the same answer.
    CHECK(cpu::chosen_gemm_backend(300, 1000, 500, threads) == first);
    // A transposed a (autograd's x^T views) is a class of its own, stable as well.
    const GemmBackend transposed = cpu::chosen_gemm_backend(1024, 10, 256, threads, false, true);
    CHECK(cpu::gemm_backend_available(transposed));
    CHECK(cpu::chosen_gemm_backend(1000, 12, 300, threads, false, true) == transposed);
    // So is a batch of products (per-call and per-matrix costs differ between backends).
    const GemmBackend batched = cpu::chosen_gemm_backend(64, 64, 32, threads, true, false, 64);
    CHECK(cpu::gemm_backend_available(batched));
    CHECK(cpu::chosen_gemm_backend(100, 50, 20, threads, true, false, 8) == batched);
    // And a product that adds linear's bias, timed with it (Note [Bias in the product]).
    const GemmBackend with_bias =
        cpu::chosen_gemm_backend(512, 256, 256, threads, true, false, 1, true);
    CHECK(cpu::gemm_backend_available(with_bias));
    CHECK(cpu::chosen_gemm_backend(400, 300, 200, threads, true, false, 1, true) == with_bias);
  }
}

// Note [CPU float32 GEMM choice]: a large product's trial keeps its output's shape longest (the
// threads split a product by its output), halving K first where dims tie; it never grows a dim
// and stops at the first shape within 2^29 multiply-adds.
TEST_CASE("a large product's trial shape halves K first", "[runtime][linalg][gemm]") {
  using Dims = std::array<int64_t, 3>;  // m, n, k
  CHECK(cpu::scratch_trial_dims(1024, 1024, 1024) == Dims{1024, 1024, 512});
  CHECK(cpu::scratch_trial_dims(2048, 2048, 2048) == Dims{1024, 1024, 512});
  CHECK(cpu::scratch_trial_dims(4096, 1024, 1024) == Dims{1024, 1024, 512});
  CHECK(cpu::scratch_trial_dims(1024, 4096, 256) == Dims{1024, 2048, 256});
  CHECK(cpu::scratch_trial_dims(8192, 8192, 16) == Dims{4096, 8192, 16});
  CHECK(cpu::scratch_trial_dims(512, 1024, 1024) == Dims{512, 1024, 1024});  // already within
  CHECK(cpu::scratch_trial_dims(3000, 3000, 3000) == Dims{750, 750, 750});
  // Any shape: within the work, no dim below 1 or above its own.
  for (const Dims& dims : {Dims{1025, 999, 3001}, Dims{100000, 7, 9}, Dims{1, 1 << 20, 1 << 20}}) {
    const Dims cut = cpu::scratch_trial_dims(dims[0], dims[1], dims[2]);
    CHECK(cut[0] * cut[1] * cut[2] <= (int64_t{1} << 29));
    for (size_t i = 0; i < 3; ++i) {
      CHECK(cut[i] >= 1);
      CHECK(cut[i] <= dims[i]);
    }
  }
}

// Note [Trials on a waking thread team]: the wait ends within its budget even for a team that
// can never be prompt (4 threads here on 2 cores, or under a sanitizer), leaves the team's size
// as it was, and is not repeated for a size already waited for.
TEST_CASE("the GEMM trial's wait for the thread team ends and is once per team size",
          "[runtime][linalg][gemm]") {
  using Clock = std::chrono::steady_clock;
  for (int threads : {1, 2, 4}) {
    const cpu::OmpThreadsGuard guard(threads);
    const auto start = Clock::now();
    cpu::wait_until_thread_team_awake();
    CHECK(Clock::now() - start < std::chrono::seconds(2));  // the budget is 300 ms
    CHECK(omp_get_max_threads() == threads);
    const auto again = Clock::now();
    cpu::wait_until_thread_team_awake();
    CHECK(Clock::now() - again < std::chrono::milliseconds(50));
  }
}

TEST_CASE("TESSERA_CPU_GEMM values", "[runtime][linalg][gemm]") {
  CHECK(!cpu::parse_gemm_backend("auto").has_value());
  CHECK(cpu::parse_gemm_backend("eigen") == GemmBackend::kEigen);
  for (GemmBackend backend : kBackends) {
    const std::string name(cpu::gemm_backend_name(backend));
    if (cpu::gemm_backend_available(backend)) {
      CHECK(cpu::parse_gemm_backend(name) == backend);
    } else {
      CHECK_THROWS_WITH(cpu::parse_gemm_backend(name),
                        Catch::Contains("TESSERA_CPU_GEMM=" + name) && Catch::Contains("lacks") &&
                            Catch::Contains("auto"));
    }
  }
  CHECK_THROWS_AS(cpu::parse_gemm_backend("mkl"), Error);
  CHECK_THROWS_WITH(cpu::parse_gemm_backend("mkl"),
                    Catch::Contains("TESSERA_CPU_GEMM=mkl") && Catch::Contains("valid values") &&
                        Catch::Contains("auto") && Catch::Contains("eigen"));
}

TEST_CASE("four threads multiply concurrently on every backend", "[runtime][linalg][gemm]") {
  std::vector<GemmBackend> available;
  for (GemmBackend backend : kBackends) {
    if (cpu::gemm_backend_available(backend)) available.push_back(backend);
  }
  const std::vector<Case> all = cases();
  std::vector<Expected> want;
  for (const Case& c : all) want.push_back(reference_matmul(c.a, c.b));
  std::vector<int64_t> failures(4, 0);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      // As rank threads: one intra-op thread each; half on the measured choice, half forced.
      set_num_threads(1);
      std::optional<GemmBackend> forced;
      if (t % 2 == 1) forced = available[(t / 2) % available.size()];
      cpu::GemmBackendOverride force(forced);
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < all.size(); ++i) {
          failures[t] += mismatches(all[i].a, all[i].b, want[i]);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  CHECK(failures == std::vector<int64_t>(4, 0));
}

TEST_CASE("the GEMM observer sees each float32 product as the kernels ran it",
          "[runtime][linalg][gemm]") {
  struct Seen {
    std::mutex mutex;
    std::vector<cpu::GemmRecord> records;
  } seen;
  cpu::set_gemm_observer([&seen](const cpu::GemmRecord& r) {
    std::lock_guard<std::mutex> lock(seen.mutex);
    seen.records.push_back(r);
  });
  const Tensor a = randn({6, 40}), b = randn({40, 9}), w = randn({9, 40}), bias = randn({9});
  const Tensor heads = randn({3, 5, 40}), values = randn({3, 5, 7});
  matmul(a, b);
  matmul(a, w.t());                       // b column-major
  matmul(heads.transpose(1, 2), values);  // a batch, a column-major
  linear(a, w, bias);  // the kernel adds the bias, in the product or after it, on any backend
  std::thread([&] { matmul(b.t(), a.t()); }).join();         // reported from its own thread
  matmul(randn({4, 4}, kFloat64), randn({4, 4}, kFloat64));  // not float32: not reported
  cpu::set_gemm_observer(nullptr);
  matmul(a, b);  // after removal: not reported
  REQUIRE(seen.records.size() == 5);
  const auto& r = seen.records;
  CHECK((r[0].batch == 1 && r[0].m == 6 && r[0].k == 40 && r[0].n == 9));
  CHECK((r[0].a_row_major && r[0].b_row_major && !r[0].bias));
  CHECK(r[0].backend == cpu::chosen_gemm_backend(a, b));
  CHECK((r[1].m == 6 && r[1].k == 40 && r[1].n == 9 && r[1].a_row_major && !r[1].b_row_major));
  CHECK(r[1].backend == cpu::chosen_gemm_backend(a, w.t()));
  CHECK((r[2].batch == 3 && r[2].m == 40 && r[2].k == 5 && r[2].n == 7));
  CHECK((!r[2].a_row_major && r[2].b_row_major));
  CHECK((r[3].m == 6 && r[3].k == 40 && r[3].n == 9 && r[3].bias));
  // Its own class of the measured choice (one thread for a product this small).
  CHECK(r[3].backend == cpu::chosen_gemm_backend(6, 9, 40, 1, true, false, 1, true));
  CHECK((r[4].m == 9 && r[4].k == 40 && r[4].n == 6 && !r[4].a_row_major && !r[4].b_row_major));
  for (const auto& record : r) CHECK(record.seconds > 0.0);
}
