// Philox known answers, the counter layout of every random fill (against values recomputed here
// from philox4x32_10), reproducibility, thread-split independence, statistics, and dropout.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <set>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

using Lanes = std::array<uint32_t, 4>;

// Counter `c` (no carry needed for the small offsets used here) under key `seed`.
Lanes block(uint64_t seed, uint64_t c) { return philox4x32_10(c, 0, seed); }

double u24(uint32_t x) { return static_cast<double>(x >> 8) / 16777216.0; }
double u53(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((static_cast<uint64_t>(hi) << 32) | lo) >> 11) / 9007199254740992.0;
}

// Runs f with the calling thread's intra-op thread count set to n, then restores it.
template <typename F>
auto with_threads(int n, const F& f) {
  const IntraOpThreadsGuard scope(n);
  return f();
}

}  // namespace

TEST_CASE("philox4x32_10 matches the Random123 known-answer vectors", "[random]") {
  // Random123 tests/kat_vectors (also in Random123-Boost test_philox.cpp): counter words
  // c0..c3, key words k0, k1, as (c1:c0, c3:c2, k1:k0).
  CHECK(philox4x32_10(0, 0, 0) == Lanes{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32_10(~uint64_t{0}, ~uint64_t{0}, ~uint64_t{0}) ==
        Lanes{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32_10(0x85a308d3243f6a88ull, 0x0370734413198a2eull, 0x299f31d0a4093822ull) ==
        Lanes{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("rand follows the Philox counter layout", "[random]") {
  const uint64_t seed = 1234;
  SECTION("float32: element i from counter offset + i / 4, lane i % 4") {
    Generator g(seed);
    g.set_offset(7);
    Tensor r = rand({3, 5}, kFloat32, &g);
    CHECK(r.sizes() == Shape{3, 5});
    CHECK(r.dtype() == kFloat32);
    CHECK(g.offset() == 7 + 4);  // ceil(15 / 4) counters
    auto v = r.to_vector<float>();
    for (int64_t i = 0; i < 15; ++i) {
      CHECK(v[i] == static_cast<float>(u24(block(seed, 7 + i / 4)[i % 4])));
    }
  }
  SECTION("float64: element i from counter offset + i / 2, lanes 2 (i % 2) and 2 (i % 2) + 1") {
    Generator g(seed);
    Tensor r = rand({5}, kFloat64, &g);
    CHECK(g.offset() == 3);
    auto v = r.to_vector<double>();
    for (int64_t i = 0; i < 5; ++i) {
      const Lanes x = block(seed, i / 2);
      CHECK(v[i] == u53(x[2 * (i % 2)], x[2 * (i % 2) + 1]));
    }
  }
  SECTION("float16 and bfloat16 round the float32 draw") {
    Generator g(seed);
    auto h = rand({6}, kFloat16, &g).to_vector<float>();
    auto b = rand({6}, kBFloat16, &g).to_vector<float>();
    for (int64_t i = 0; i < 6; ++i) {
      const float u = static_cast<float>(u24(block(seed, i / 4)[i % 4]));
      const float ub = static_cast<float>(u24(block(seed, 2 + i / 4)[i % 4]));
      CHECK(h[i] == static_cast<float>(Half(u)));
      CHECK(b[i] == static_cast<float>(BFloat16(ub)));
      CHECK(h[i] < 1.0f);
      CHECK(b[i] < 1.0f);
    }
  }
  SECTION("the 128-bit counter carries into its high word") {
    Generator g(seed);
    g.set_offset(std::numeric_limits<uint64_t>::max() - 1);
    auto v = rand({12}, kFloat32, &g).to_vector<float>();
    CHECK(g.offset() == 1);  // wrapped
    const Lanes first = philox4x32_10(std::numeric_limits<uint64_t>::max() - 1, 0, seed);
    const Lanes second = philox4x32_10(std::numeric_limits<uint64_t>::max(), 0, seed);
    const Lanes third = philox4x32_10(0, 1, seed);
    for (int k = 0; k < 4; ++k) {
      CHECK(v[k] == static_cast<float>(u24(first[k])));
      CHECK(v[4 + k] == static_cast<float>(u24(second[k])));
      CHECK(v[8 + k] == static_cast<float>(u24(third[k])));
    }
  }
  SECTION("zero-size and 0-dim") {
    Generator g(seed);
    CHECK(rand({0, 3}, kFloat32, &g).numel() == 0);
    CHECK(g.offset() == 0);
    Tensor s = rand({}, kFloat32, &g);
    CHECK(s.dim() == 0);
    CHECK(s.item<float>() == static_cast<float>(u24(block(seed, 0)[0])));
    CHECK(g.offset() == 1);
  }
}

TEST_CASE("randn is Box-Muller on the Philox layout", "[random]") {
  const uint64_t seed = 99;
  const double two_pi = 2 * std::numbers::pi;
  SECTION("float32: lane pairs (0, 1) and (2, 3)") {
    Generator g(seed);
    auto v = randn({7}, kFloat32, &g).to_vector<float>();
    CHECK(g.offset() == 2);
    for (int64_t i = 0; i < 7; ++i) {
      const Lanes x = block(seed, i / 4);
      const int pair = static_cast<int>(i % 4) / 2;
      const double u1 = u24(x[2 * pair]) + 1.0 / 16777216.0;
      const double u2 = u24(x[2 * pair + 1]);
      const double r = std::sqrt(-2 * std::log(u1));
      const double expect = i % 2 == 0 ? r * std::cos(two_pi * u2) : r * std::sin(two_pi * u2);
      CHECK(v[i] == Approx(expect).margin(2e-5).epsilon(1e-5));
    }
  }
  SECTION("float64: one pair of 64-bit words per counter") {
    Generator g(seed);
    auto v = randn({5}, kFloat64, &g).to_vector<double>();
    CHECK(g.offset() == 3);
    for (int64_t i = 0; i < 5; ++i) {
      const Lanes x = block(seed, i / 2);
      const double u1 = u53(x[0], x[1]) + 1.0 / 9007199254740992.0;
      const double u2 = u53(x[2], x[3]);
      const double r = std::sqrt(-2 * std::log(u1));
      const double expect = i % 2 == 0 ? r * std::cos(two_pi * u2) : r * std::sin(two_pi * u2);
      CHECK(v[i] == Approx(expect).margin(1e-12).epsilon(1e-12));
    }
  }
}

TEST_CASE("randint takes 64-bit words modulo the range", "[random]") {
  const uint64_t seed = 5;
  Generator g(seed);
  g.set_offset(3);
  auto v = randint(-10, 1000, {5}, kInt64, &g).to_vector<int64_t>();
  CHECK(g.offset() == 3 + 3);
  for (int64_t i = 0; i < 5; ++i) {
    const Lanes x = block(seed, 3 + i / 2);
    const uint64_t w = (static_cast<uint64_t>(x[2 * (i % 2)]) << 32) | x[2 * (i % 2) + 1];
    CHECK(v[i] == -10 + static_cast<int64_t>(w % 1010));
  }
  SECTION("the full int64 range") {
    Generator h(seed);
    auto big = randint(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                       {4}, kInt64, &h)
                   .to_vector<int64_t>();
    const Lanes x = block(seed, 0);
    const uint64_t w = (static_cast<uint64_t>(x[0]) << 32) | x[1];
    const uint64_t range = ~uint64_t{0};
    CHECK(static_cast<uint64_t>(big[0]) == static_cast<uint64_t>(INT64_MIN) + w % range);
  }
}

TEST_CASE("random fills are reproducible and advance the generator", "[random]") {
  Generator a(42), b(42), c(43);
  CHECK(rand({100}, kFloat32, &a).to_vector<float>() ==
        rand({100}, kFloat32, &b).to_vector<float>());
  CHECK(a.offset() == 25);
  // Consecutive calls draw fresh counters.
  CHECK(rand({100}, kFloat32, &a).to_vector<float>() !=
        rand({100}, kFloat32, &c).to_vector<float>());
  Generator d(42);
  auto first = rand({100}, kFloat32, &d).to_vector<float>();
  auto second = rand({100}, kFloat32, &d).to_vector<float>();
  CHECK(first != second);
  CHECK(d.offset() == 50);
  // A different offset gives different numbers; the same (seed, offset) the same numbers.
  Generator e(42);
  e.set_offset(25);
  CHECK(rand({100}, kFloat32, &e).to_vector<float>() == second);
  Generator f(43);
  CHECK(rand({100}, kFloat32, &f).to_vector<float>() != first);

  SECTION("offsets advance by the counters each fill used") {
    Generator h(1);
    randn({10}, kFloat32, &h);
    CHECK(h.offset() == 3);
    randn({10}, kFloat64, &h);
    CHECK(h.offset() == 8);
    randint(0, 3, {10}, kInt32, &h);
    CHECK(h.offset() == 13);
    rand({10}, kBFloat16, &h);
    CHECK(h.offset() == 16);
    CHECK(h.reserve(4) == 16);
    CHECK(h.offset() == 20);
    h.manual_seed(9);
    CHECK(h.seed() == 9);
    CHECK(h.offset() == 0);
  }
}

TEST_CASE("manual_seed seeds the calling thread's default generator", "[random]") {
  manual_seed(2024);
  CHECK(default_generator().seed() == 2024);
  CHECK(default_generator().offset() == 0);
  auto x = rand({8}).to_vector<float>();
  CHECK(default_generator().offset() == 2);
  manual_seed(2024);
  CHECK(rand({8}).to_vector<float>() == x);
  Generator g(2024);
  CHECK(rand({8}, kFloat32, &g).to_vector<float>() == x);

  uint64_t other_seed = 0;
  std::vector<float> other;
  std::thread t([&] {
    other_seed = default_generator().seed();
    manual_seed(2024);
    other = rand({8}).to_vector<float>();
    manual_seed(7);
  });
  t.join();
  CHECK(other_seed == Generator().seed());  // a fresh thread starts from the default seed
  CHECK(other == x);
  CHECK(default_generator().seed() == 2024);  // the other thread's manual_seed stays there
  CHECK(default_generator().offset() == 2);
}

TEST_CASE("random fills do not depend on the thread count", "[random]") {
  const Shape shape{1 << 19};  // many parallel chunks
  auto run = [&](int threads) {
    return with_threads(threads, [&] {
      Generator g(77);
      std::vector<std::vector<double>> out;
      out.push_back(rand(shape, kFloat32, &g).to_vector<double>());
      out.push_back(rand(shape, kFloat64, &g).to_vector<double>());
      out.push_back(randn(shape, kFloat32, &g).to_vector<double>());
      out.push_back(randn(shape, kFloat64, &g).to_vector<double>());
      out.push_back(randint(-5, 5, shape, kInt64, &g).to_vector<double>());
      Tensor a = ones({512, 1024}).t();  // strided input
      out.push_back(dropout(a, 0.3, true, &g).to_vector<double>());
      out.push_back({static_cast<double>(g.offset())});
      return out;
    });
  };
  auto one = run(1);
  auto two = run(2);
  REQUIRE(one.size() == two.size());
  for (size_t k = 0; k < one.size(); ++k) CHECK(one[k] == two[k]);
}

TEST_CASE("uniform and normal samples have the right moments", "[random]") {
  const int64_t n = 1 << 20;
  auto moments = [](const std::vector<double>& v) {
    double mean = 0;
    for (double x : v) mean += x;
    mean /= static_cast<double>(v.size());
    double var = 0;
    for (double x : v) var += (x - mean) * (x - mean);
    return std::pair{mean, var / static_cast<double>(v.size() - 1)};
  };
  Generator g(31337);
  for (DType dt : {kFloat32, kFloat64}) {
    auto u = rand({n}, dt, &g).to_vector<double>();
    auto [um, uv] = moments(u);
    // Five standard errors: sd(mean) = sqrt(1/12/n), sd(var) = sqrt((1/80 - 1/144)/n).
    CHECK(std::abs(um - 0.5) < 5 * std::sqrt(1.0 / 12 / n));
    CHECK(std::abs(uv - 1.0 / 12) < 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
    const auto [lo, hi] = std::minmax_element(u.begin(), u.end());
    REQUIRE(*lo >= 0.0);
    REQUIRE(*hi < 1.0);
    std::vector<int64_t> bins(10, 0);
    for (double x : u) ++bins[static_cast<size_t>(x * 10)];
    for (int64_t b : bins) CHECK(std::abs(b - n / 10) < 5 * std::sqrt(n * 0.09));

    auto z = randn({n}, dt, &g).to_vector<double>();
    auto [zm, zv] = moments(z);
    CHECK(std::abs(zm) < 5 * std::sqrt(1.0 / n));
    CHECK(std::abs(zv - 1.0) < 5 * std::sqrt(2.0 / n));
    int64_t within_one = 0;
    for (double x : z) within_one += std::abs(x) < 1.0;
    CHECK(std::abs(static_cast<double>(within_one) / n - 0.682689492) < 0.003);
  }
}

TEST_CASE("randint stays in range and hits every value", "[random]") {
  Generator g(8);
  auto check_all_hit = [](const std::vector<int64_t>& v, int64_t low, int64_t high) {
    std::set<int64_t> seen(v.begin(), v.end());
    CHECK(*seen.begin() == low);
    CHECK(*seen.rbegin() == high - 1);
    CHECK(static_cast<int64_t>(seen.size()) == high - low);
  };
  check_all_hit(randint(-3, 4, {10000}, kInt64, &g).to_vector<int64_t>(), -3, 4);
  check_all_hit(randint(0, 256, {100000}, kUInt8, &g).to_vector<int64_t>(), 0, 256);
  check_all_hit(randint(-100, 100, {100000}, kInt32, &g).to_vector<int64_t>(), -100, 100);
  check_all_hit(randint(0, 2, {100}, kBool, &g).to_vector<int64_t>(), 0, 2);
  Tensor f = randint(-50, 50, {10000}, kFloat32, &g);
  CHECK(f.dtype() == kFloat32);
  const auto fv = f.to_vector<float>();
  CHECK(std::all_of(fv.begin(), fv.end(), [](float x) { return x == std::floor(x); }));
  check_all_hit(f.to_vector<int64_t>(), -50, 50);
  CHECK(randint(0, 10, {2, 3}).dtype() == kInt64);
  CHECK(randint(5, 6, {4}, kInt64, &g).to_vector<int64_t>() == std::vector<int64_t>(4, 5));
}

TEST_CASE("random factories reject bad arguments", "[random]") {
  CHECK_THROWS_AS(rand({2}, kInt64), DTypeError);
  CHECK_THROWS_WITH(rand({2}, kInt64), Catch::Contains("[rand]") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(randn({2}, kBool), Catch::Contains("[randn]") && Catch::Contains("bool"));
  CHECK_THROWS_AS(rand({2, -1}), ShapeError);
  CHECK_THROWS_WITH(randn({-3}), Catch::Contains("[randn]") && Catch::Contains("[-3]"));
  CHECK_THROWS_WITH(randint(3, 3, {2}), Catch::Contains("[randint]") && Catch::Contains("low"));
  CHECK_THROWS_WITH(randint(5, 2, {2}), Catch::Contains("[randint]"));
  CHECK_THROWS_AS(randint(0, 257, {2}, kUInt8), DTypeError);
  CHECK_THROWS_WITH(randint(-1, 10, {2}, kUInt8),
                    Catch::Contains("[randint]") && Catch::Contains("uint8"));
  CHECK_THROWS_WITH(randint(0, 3, {2}, kBool), Catch::Contains("bool"));
  CHECK_THROWS_AS(randint(0, int64_t{1} << 40, {2}, kInt32), DTypeError);
  CHECK_THROWS_AS(randint(0, (int64_t{1} << 24) + 2, {2}, kFloat32), DTypeError);
  CHECK_NOTHROW(randint(0, (int64_t{1} << 24) + 1, {2}, kFloat32));
  CHECK_NOTHROW(randint(0, 256, {2}, kUInt8));
}

TEST_CASE("dropout keeps elements whose uniform draw is below 1 - p", "[random]") {
  Tensor a = arange(0, 60, 1, kFloat32).reshape({6, 10});
  SECTION("eval mode and p = 0 return the input itself") {
    Generator g(3);
    CHECK(dropout(a, 0.5, false, &g).unsafe_impl() == a.unsafe_impl());
    CHECK(dropout(a, 0.0, true, &g).unsafe_impl() == a.unsafe_impl());
    CHECK(dropout(a, 0.5, false, &g).unsafe_impl() == a.unsafe_impl());
    CHECK(g.offset() == 0);
  }
  SECTION("p = 1 gives zeros and draws nothing") {
    Generator g(3);
    Tensor out = dropout(a, 1.0, true, &g);
    CHECK(out.sizes() == a.sizes());
    CHECK(out.to_vector<float>() == std::vector<float>(60, 0.0f));
    CHECK(g.offset() == 0);
  }
  SECTION("contiguous float32, p = 0.25") {
    Generator g(11);
    g.set_offset(5);
    Tensor out = dropout(a, 0.25, true, &g);
    CHECK(g.offset() == 5 + 15);
    CHECK(!out.is_alias_of(a));
    auto v = out.to_vector<float>();
    const float scale = static_cast<float>(1.0 / 0.75);
    for (int64_t i = 0; i < 60; ++i) {
      const bool keep = u24(block(11, 5 + i / 4)[i % 4]) < 0.75;
      CHECK(v[i] == (keep ? static_cast<float>(i) * scale : 0.0f));
    }
  }
  SECTION("transposed float64 input: the mask follows the output's row-major order") {
    Tensor b = arange(0, 60, 1, kFloat64).reshape({6, 10}).t();  // [10, 6], strided
    Generator g(12);
    auto v = dropout(b, 0.5, true, &g).to_vector<double>();
    for (int64_t r = 0; r < 10; ++r) {
      for (int64_t c = 0; c < 6; ++c) {
        const int64_t i = r * 6 + c;
        const bool keep = u24(block(12, i / 4)[i % 4]) < 0.5;
        CHECK(v[i] == (keep ? static_cast<double>(c * 10 + r) * 2.0 : 0.0));
      }
    }
  }
  SECTION("expanded half input, and a 0.7 keep rate over many elements") {
    Tensor h = full({1}, 3.0, kFloat16).expand({200000});
    Generator g(13);
    auto v = dropout(h, 0.3, true, &g).to_vector<float>();
    int64_t kept = 0;
    const float scaled = static_cast<float>(Half(3.0f * static_cast<float>(1.0 / (1.0 - 0.3))));
    int64_t other = 0;
    for (float x : v) {
      kept += x == scaled;
      other += x != scaled && x != 0.0f;
    }
    CHECK(other == 0);
    CHECK(std::abs(static_cast<double>(kept) / 200000 - 0.7) < 0.006);  // about 6 sd
  }
  SECTION("dropped NaNs stay NaN, as input * 0") {
    Tensor nan = full({64}, std::numeric_limits<double>::quiet_NaN());
    for (float x : dropout(nan, 0.5).to_vector<float>()) CHECK(std::isnan(x));
    for (float x : dropout(nan, 1.0).to_vector<float>()) CHECK(std::isnan(x));
  }
  SECTION("zero-size input") { CHECK(dropout(zeros({0, 4}), 0.5).sizes() == Shape{0, 4}); }
  SECTION("errors") {
    CHECK_THROWS_WITH(dropout(a, -0.1), Catch::Contains("[dropout]") && Catch::Contains("-0.1"));
    CHECK_THROWS_WITH(dropout(a, 1.5, false), Catch::Contains("[dropout]"));
    CHECK_THROWS_AS(dropout(a, std::nan("")), Error);
    CHECK_THROWS_AS(dropout(arange(4), 0.5), DTypeError);
    CHECK_THROWS_WITH(dropout(arange(4), 0.5), Catch::Contains("int64"));
  }
}

TEST_CASE("rand_like and randn_like draw as rand and randn of the tensor's shape and dtype",
          "[random]") {
  const Tensor like = zeros({3, 5}, kFloat64);
  for (bool normal : {false, true}) {
    INFO((normal ? "randn_like" : "rand_like"));
    manual_seed(12);
    const Tensor want = normal ? randn({3, 5}, kFloat64) : rand({3, 5}, kFloat64);
    const uint64_t offset = default_generator().offset();
    manual_seed(12);
    const Tensor got = normal ? randn_like(like) : rand_like(like);
    CHECK(got.dtype() == kFloat64);
    CHECK(equal(got, want));
    CHECK(default_generator().offset() == offset);
    CHECK_FALSE(got.requires_grad());
  }
  Generator gen(5);
  const Tensor a = rand_like(zeros({4}, kBFloat16), &gen);
  CHECK(a.dtype() == kBFloat16);
  CHECK(gen.offset() == 1);
  CHECK_THROWS_AS(rand_like(arange(4)), DTypeError);
  CHECK_THROWS_WITH(randn_like(arange(4)),
                    Catch::Contains("[randn_like]") && Catch::Contains("int64"));
}
