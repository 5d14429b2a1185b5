#pragma once
// Backend-independent checks of the collectives against a single-process reference, run by every
// rank of a group: collectives_threads_test.cpp runs them under dist::run_threads, mpi_test.cpp
// under mpirun. Ranks never call Catch2 (its assertions are not thread-safe); each returns the
// list of what it found wrong, and the test asserts that the list is empty.
//
// Every rank fills its tensors with stored(dtype, source, i), small integers in [-3, 3] (shifted
// for uint8, 0/1 for bool), so every rank can compute every other rank's data, and sums and
// products over four ranks are exact in every dtype (bfloat16 included).

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "tessera/runtime/dispatch.h"
#include "tessera/tessera.h"

namespace coll_test {

using tessera::DType;
using tessera::Tensor;
using tessera::dist::ProcessGroup;
using tessera::dist::ProcessGroupPtr;
using tessera::dist::ReduceOp;

inline const std::vector<ReduceOp> kAllOps = {ReduceOp::Sum, ReduceOp::Avg,     ReduceOp::Min,
                                              ReduceOp::Max, ReduceOp::Product, ReduceOp::BAnd,
                                              ReduceOp::BOr, ReduceOp::BXor};
// The acceptance matrix, and every dtype for a lighter pass.
inline const std::vector<DType> kMatrixDTypes = {tessera::kFloat32, tessera::kFloat64,
                                                 tessera::kBFloat16, tessera::kInt64};
inline const std::vector<DType> kAllDTypes = {
    tessera::kBool,    tessera::kUInt8,    tessera::kInt32,   tessera::kInt64,
    tessera::kFloat16, tessera::kBFloat16, tessera::kFloat32, tessera::kFloat64};

inline double stored(DType dt, int source, int64_t i) {
  const double v = static_cast<double>((source * 5 + i * 3 + 1) % 7) - 3;
  if (dt == tessera::kBool) return v > 0 ? 1 : 0;
  if (dt == tessera::kUInt8) return v + 3;
  return v;
}

inline Tensor empty(DType dt, const tessera::Shape& shape) {
  return Tensor::make_empty(shape, dt, tessera::Device::cpu());
}

// A contiguous tensor of `shape` holding stored(dt, source, offset + i).
inline Tensor filled(DType dt, const tessera::Shape& shape, int source, int64_t offset = 0) {
  Tensor t = empty(dt, shape);
  tessera::visit_dtype(dt, [&](auto tag) {
    using T = decltype(tag);
    T* p = t.data_ptr<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      p[i] = static_cast<T>(static_cast<float>(stored(dt, source, offset + i)));
    }
  });
  return t;
}

inline std::vector<double> read(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  tessera::visit_dtype(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = t.data_ptr<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, tessera::Half> || std::is_same_v<T, tessera::BFloat16>) {
        out[i] = static_cast<float>(p[i]);
      } else {
        out[i] = static_cast<double>(p[i]);
      }
    }
  });
  return out;
}

inline bool op_valid(ReduceOp op, DType dt) {
  const bool bitwise = op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor;
  if (bitwise) return tessera::is_integral(dt, /*include_bool=*/true);
  if (op == ReduceOp::Avg) return tessera::is_floating_point(dt);
  return true;
}

// The reduction of `v` (one value per rank) as the collective must compute it, in float64 /
// int64 (bool: Sum and Max are or, Product and Min are and; uint8 wraps).
inline double reduce_ref(ReduceOp op, DType dt, const std::vector<double>& v) {
  if (tessera::is_floating_point(dt)) {
    double acc = v[0];
    for (size_t q = 1; q < v.size(); ++q) {
      switch (op) {
        case ReduceOp::Sum:
        case ReduceOp::Avg:
          acc += v[q];
          break;
        case ReduceOp::Product:
          acc *= v[q];
          break;
        case ReduceOp::Min:
          acc = std::min(acc, v[q]);
          break;
        case ReduceOp::Max:
          acc = std::max(acc, v[q]);
          break;
        default:
          break;
      }
    }
    return op == ReduceOp::Avg ? acc / static_cast<double>(v.size()) : acc;
  }
  auto acc = static_cast<int64_t>(v[0]);
  for (size_t q = 1; q < v.size(); ++q) {
    const auto x = static_cast<int64_t>(v[q]);
    const bool logical = dt == tessera::kBool;
    switch (op) {
      case ReduceOp::Sum:
        acc = logical ? (acc | x) : acc + x;
        break;
      case ReduceOp::Product:
        acc = logical ? (acc & x) : acc * x;
        break;
      case ReduceOp::Min:
        acc = std::min(acc, x);
        break;
      case ReduceOp::Max:
        acc = std::max(acc, x);
        break;
      case ReduceOp::BAnd:
        acc &= x;
        break;
      case ReduceOp::BOr:
        acc |= x;
        break;
      case ReduceOp::BXor:
        acc ^= x;
        break;
      default:
        break;
    }
  }
  if (dt == tessera::kUInt8) acc &= 0xff;
  return static_cast<double>(acc);
}

inline bool close(DType dt, double got, double want) {
  const double scale = std::max(1.0, std::abs(want));
  switch (dt) {
    case tessera::kBFloat16:
      return std::abs(got - want) <= 1e-2 * scale;
    case tessera::kFloat16:
      return std::abs(got - want) <= 2e-3 * scale;
    case tessera::kFloat32:
      return std::abs(got - want) <= 1e-6 * scale;
    case tessera::kFloat64:
      return std::abs(got - want) <= 1e-12 * scale;
    default:
      return got == want;
  }
}

// Collects one rank's failures.
class Checker {
 public:
  explicit Checker(ProcessGroupPtr pg) : pg_(std::move(pg)) {}
  ProcessGroup& pg() { return *pg_; }
  const ProcessGroupPtr& pg_ptr() { return pg_; }
  int rank() const { return pg_->rank(); }
  int size() const { return pg_->size(); }
  const std::vector<std::string>& failures() const { return failures_; }

  void expect(bool ok, const std::string& what) {
    if (!ok) failures_.push_back(fmt::format("rank {}: {}", rank(), what));
  }

  void expect_values(const Tensor& t, const std::vector<double>& want, const std::string& what) {
    const std::vector<double> got = read(t);
    if (got.size() != want.size()) {
      return expect(false,
                    fmt::format("{}: {} elements, expected {}", what, got.size(), want.size()));
    }
    for (size_t i = 0; i < got.size(); ++i) {
      if (!close(t.dtype(), got[i], want[i])) {
        return expect(false,
                      fmt::format("{}: element {} is {}, expected {}", what, i, got[i], want[i]));
      }
    }
  }

  // `fn` must throw E whose message contains every string of `parts`.
  template <typename E>
  void expect_throws(const std::function<void()>& fn, const std::vector<std::string>& parts,
                     const std::string& what) {
    try {
      fn();
    } catch (const E& e) {
      const std::string message = e.what();
      for (const std::string& p : parts) {
        expect(message.find(p) != std::string::npos,
               fmt::format("{}: message \"{}\" lacks \"{}\"", what, message, p));
      }
      return;
    } catch (const std::exception& e) {
      return expect(false, fmt::format("{}: threw the wrong type: {}", what, e.what()));
    }
    expect(false, what + ": did not throw");
  }

 private:
  ProcessGroupPtr pg_;
  std::vector<std::string> failures_;
};

// Sizes that differ per rank, zero included from three ranks on.
inline int64_t uneven(int q) { return (2 * q + 1) % 5; }

}  // namespace coll_test
