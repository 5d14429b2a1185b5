// The safetensors format: a file written by the reference implementation (the `safetensors`
// package; tests/checkpoint/data/make_reference.py) loads, whole and sharded (each rank reading its
// slices); the strict reader accepts it and refuses every malformed header.

#include "tessera/checkpoint/detail/safetensors.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <mutex>

#include "tessera/checkpoint/detail/files.h"
#include "tests/checkpoint/checkpoint_test_util.h"

namespace tessera::checkpoint_test {
namespace {

const std::string kReference = std::string(TESSERA_CHECKPOINT_DATA) + "/reference.safetensors";

checkpoint::detail::SafetensorsHeader parse(const std::string& path) {
  const auto file = checkpoint::detail::File::open_read(path);
  return checkpoint::detail::parse_safetensors_header(
      path, file.size(),
      [&](uint64_t at, uint64_t n) { return file.pread_string(at, n, "header"); });
}

// The reference file's tensors, recomputed here from make_reference.py's formulas.
std::map<std::string, Tensor> expected_reference() {
  std::map<std::string, Tensor> t;
  t["f32_2x3"] = (arange(6, kFloat32).reshape({2, 3}) * 0.5 - 1.0).to(kFloat32);
  t["f64_3x4x2"] = arange(24, kFloat64).reshape({3, 4, 2}) / 7.0;
  t["f16_3"] = from_vector(std::vector<double>{0.5, -2.0, 65504.0}, {3}).to(kFloat16);
  t["i64_4"] = from_vector(std::vector<int64_t>{-3, 0, 7, int64_t{1} << 40}, {4});
  t["i32_2x2"] = from_vector(std::vector<int32_t>{1, -2, 2147483647, -2147483647 - 1}, {2, 2});
  t["u8_5"] = (arange(5, kInt64) * 50).to(kUInt8);
  t["bool_3"] = from_vector(std::vector<int64_t>{1, 0, 1}, {3}).to(kBool);
  t["empty_0x3"] = zeros({0, 3}, kFloat32);
  t["scalar"] = full({}, 2.5, kFloat32);
  return t;
}

TEST_CASE("a file of the reference safetensors implementation loads bitwise", "[checkpoint]") {
  const auto header = parse(kReference);
  CHECK(header.metadata.at("written_by") == "safetensors 0.8.0");
  CHECK(header.entries.size() == 9);
  checkpoint::StateDict sd;
  const auto expected = expected_reference();
  for (const auto& [key, t] : expected) sd.tensors[key] = zeros(t.shape(), t.dtype());
  checkpoint::load_safetensors(sd, kReference);
  for (const auto& [key, t] : expected) {
    INFO(key);
    CHECK(same_bits(sd.tensors.at(key), t));
  }
}

TEST_CASE("a plain safetensors file loads straight into sharded DTensors", "[checkpoint]") {
  const auto expected = expected_reference();
  std::mutex mutex;
  std::vector<std::string> failures;
  dist::run_threads(4, [&](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {2, 2});
    checkpoint::StateDict sd;
    sd.tensors["f64_3x4x2"] =
        distribute_tensor(zeros({3, 4, 2}, kFloat64), mesh, {Shard(1), Shard(0)});
    sd.tensors["f32_2x3"] =
        distribute_tensor(zeros({2, 3}, kFloat32), mesh, {Replicate(), Shard(1)});
    sd.tensors["i64_4"] =
        distribute_tensor(zeros({4}, kInt64), mesh, {StridedShard(0, 2), Shard(0)});
    checkpoint::load_safetensors(sd, kReference, /*strict=*/false);
    for (const auto& [key, t] : sd.tensors) {
      if (!same_bits(t, expected.at(key))) {
        std::lock_guard<std::mutex> lock(mutex);
        failures.push_back(key + " differs");
      }
    }
  });
  for (const auto& f : failures) FAIL_CHECK(f);
}

// A file of an 8-byte length, `json` and `data`.
std::string write_raw(const TempDir& dir, const std::string& json, const std::string& data,
                      uint64_t length_override = UINT64_MAX) {
  const uint64_t length = length_override == UINT64_MAX ? json.size() : length_override;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  const std::string path = dir / "bad.safetensors";
  std::ofstream(path, std::ios::binary) << bytes << json << data;
  return path;
}

TEST_CASE("the strict safetensors reader refuses malformed files with the reason", "[checkpoint]") {
  TempDir dir;
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK_NOTHROW(parse(write_raw(dir, ok, std::string(8, 'x'))));
  const std::vector<std::tuple<std::string, std::string, std::string, uint64_t>> cases = {
      {"exceeds the file's", ok, std::string(8, 'x'), 4096},
      {"does not start with '{'", std::string(" ").append(ok.substr(1)), std::string(8, 'x'),
       UINT64_MAX},
      {"is not JSON", "{\"a\":", "", UINT64_MAX},
      {"has no Tessera dtype", R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})",
       std::string(8, 'x'), UINT64_MAX},
      {"do not hold shape", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
       std::string(8, 'x'), UINT64_MAX},
      {"leaving a gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       std::string(8, 'x'), UINT64_MAX},
      {"overlapping",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       std::string(8, 'x'), UINT64_MAX},
      {"(truncated)", ok, std::string(4, 'x'), UINT64_MAX},
      {"but the file has", ok, std::string(12, 'x'), UINT64_MAX},
      {"lacks dtype", R"({"a":{"shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x'),
       UINT64_MAX},
      {"has a size that is not", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
       std::string(8, 'x'), UINT64_MAX},
  };
  for (const auto& [reason, json, data, length] : cases) {
    INFO(reason);
    const std::string path = write_raw(dir, json, data, length);
    try {
      parse(path);
      FAIL_CHECK("accepted");
    } catch (const checkpoint::CheckpointError& e) {
      CHECK_THAT(e.what(), Catch::Contains(reason) && Catch::Contains("bad.safetensors"));
    }
  }
}

}  // namespace
}  // namespace tessera::checkpoint_test
