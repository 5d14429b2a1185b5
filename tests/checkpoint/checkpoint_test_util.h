#pragma once
// Helpers for the checkpoint tests: scratch directories, tensors of arbitrary bit patterns, and
// bitwise comparison.

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "tessera/tessera.h"

namespace tessera::checkpoint_test {

// A fresh directory under the system's temp folder, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessera-ckpt-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) ? pattern : std::string();
    if (path_.empty()) throw std::runtime_error("mkdtemp failed");
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Every byte drawn at random (NaN and infinity patterns included: comparisons are bitwise);
// booleans 0 or 1.
inline Tensor random_bits(const Shape& shape, DType dtype, uint32_t seed) {
  Tensor t = empty(shape, dtype);
  std::mt19937 gen(seed);
  auto* p = static_cast<unsigned char*>(t.raw_data());
  for (size_t i = 0; i < t.nbytes(); ++i) {
    p[i] = static_cast<unsigned char>(dtype == kBool ? gen() & 1u : gen() & 0xffu);
  }
  return t;
}

// Bitwise equality of two tensors' values (DTensors compared as their full tensors).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  const Tensor x = (a.is_distributed() ? a.full_tensor() : a).cpu().contiguous();
  const Tensor y = (b.is_distributed() ? b.full_tensor() : b).cpu().contiguous();
  return x.dtype() == y.dtype() && x.shape() == y.shape() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace tessera::checkpoint_test
