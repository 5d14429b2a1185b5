// Bad checkpoints and failed saves, each in a forked child (tests/robustness/forked_case.h): a
// typed Error on every rank, never a hang, a crash or silently wrong data, and the previous
// checkpoint still loads after a failed or killed save.

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/metadata.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/robustness/forked_case.h"

namespace tessera::checkpoint_test {
namespace {

using checkpoint::StateDict;
using robustness_test::every_rank_raises;
using Fragments = std::vector<std::string>;
using robustness_test::expect_error;
using robustness_test::expect_success;

// The state every case saves: a row-sharded and a replicated DTensor and a plain tensor.
StateDict sample_state(const DeviceMesh& mesh, uint32_t seed,
                       const Placements& w_placements = {Shard(0)}) {
  StateDict sd;
  sd.tensors["w"] = distribute_tensor(random_bits({8, 6}, kFloat32, seed), mesh, w_placements);
  sd.tensors["b"] = distribute_tensor(random_bits({6}, kFloat64, seed + 1), mesh, {Replicate()});
  sd.tensors["plain"] = random_bits({3}, kInt64, seed + 2);
  sd.scalars["step"] = int64_t{seed};
  return sd;
}

StateDict zeros_like_sample(const DeviceMesh& mesh, const Placements& w_placements = {Shard(1)}) {
  StateDict sd;
  sd.tensors["w"] = distribute_tensor(zeros({8, 6}, kFloat32), mesh, w_placements);
  sd.tensors["b"] = distribute_tensor(zeros({6}, kFloat64), mesh, {Replicate()});
  sd.tensors["plain"] = zeros({3}, kInt64);
  return sd;
}

void save_sample(const std::string& dir, uint32_t seed) {
  dist::run_threads(4, [&](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {4});
    checkpoint::save(sample_state(mesh, seed), dir);
  });
}

// Throws unless `into` holds what save_sample(seed) saved.
void expect_sample(const StateDict& sd, uint32_t seed) {
  if (!same_bits(sd.tensors.at("w"), random_bits({8, 6}, kFloat32, seed)) ||
      !same_bits(sd.tensors.at("b"), random_bits({6}, kFloat64, seed + 1)) ||
      !same_bits(sd.tensors.at("plain"), random_bits({3}, kInt64, seed + 2))) {
    throw std::logic_error("the loaded tensors differ from the saved ones");
  }
}

// The chunk file holding `key`'s chunk at row `row`, relative to the directory.
std::string chunk_file(const std::string& dir, const std::string& key, int64_t row) {
  const auto m = checkpoint::detail::read_metadata(dir);
  for (const auto& c : m.tensors.at(key).chunks) {
    if (c.offsets[0] <= row && row < c.offsets[0] + c.sizes[0]) return c.file;
  }
  throw std::logic_error("no chunk holds the row");
}

void flip_byte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(at));
  const char c = static_cast<char>(f.get() ^ 0x10);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(c);
}

TEST_CASE("a corrupted byte is a checksum Error on every rank naming the file and tensor",
          "[checkpoint][faults]") {
  TempDir dir;
  expect_success("save", [&] { save_sample(dir.path(), 1); });
  expect_error(
      "load after a flipped byte",
      [&] {
        const std::string name = chunk_file(dir.path(), "w", 3);
        const auto size = std::filesystem::file_size(dir / name);
        flip_byte(dir / name, size - 5);  // in the data, past the header
        every_rank_raises(
            [&](const DeviceMesh& mesh) {
              StateDict sd = zeros_like_sample(mesh);
              checkpoint::load(sd, dir.path());
            },
            Fragments{"checksum mismatch", name, "tensor \"w\""});
        throw Error("every rank raised");
      },
      Fragments{"every rank raised"});
}

TEST_CASE("a truncated chunk file is an Error on every rank", "[checkpoint][faults]") {
  TempDir dir;
  expect_error(
      "load of a truncated file",
      [&] {
        save_sample(dir.path(), 2);
        const std::string name = chunk_file(dir.path(), "w", 7);
        std::filesystem::resize_file(dir / name, std::filesystem::file_size(dir / name) - 8);
        every_rank_raises(
            [&](const DeviceMesh& mesh) {
              StateDict sd = zeros_like_sample(mesh);
              checkpoint::load(sd, dir.path());
            },
            Fragments{"is truncated", name});
        throw Error("every rank raised");
      },
      Fragments{"every rank raised"});
}

TEST_CASE("a directory without committed metadata is an incomplete checkpoint",
          "[checkpoint][faults]") {
  TempDir dir;
  expect_error(
      "no metadata",
      [&] {
        save_sample(dir.path(), 3);
        std::filesystem::remove(dir / checkpoint::detail::kMetadataFile);
        every_rank_raises(
            [&](const DeviceMesh& mesh) {
              StateDict sd = zeros_like_sample(mesh);
              checkpoint::load(sd, dir.path());
            },
            Fragments{"holds no committed checkpoint", dir.path()});
        throw Error("every rank raised");
      },
      Fragments{"every rank raised"});
  expect_error(
      "no directory",
      [&] {
        StateDict sd;
        checkpoint::load(sd, dir / "absent");
      },
      Fragments{"no checkpoint directory", "absent"});
  expect_error(
      "garbage metadata",
      [&] {
        std::ofstream(dir / checkpoint::detail::kMetadataFile) << "{\"format\": 3";
        StateDict sd;
        checkpoint::load(sd, dir.path());
      },
      Fragments{"is not valid checkpoint metadata", "not JSON"});
}

TEST_CASE("missing and unexpected keys are listed; strict = false loads the rest",
          "[checkpoint][faults]") {
  TempDir dir;
  expect_success("save", [&] { save_sample(dir.path(), 4); });
  expect_error(
      "strict",
      [&] {
        every_rank_raises(
            [&](const DeviceMesh& mesh) {
              StateDict sd = zeros_like_sample(mesh);
              sd.tensors.erase("plain");
              sd.tensors["extra"] = zeros({2});
              checkpoint::load(sd, dir.path());
            },
            Fragments{"missing in the checkpoint: \"extra\"",
                      "unexpected (not in the state dict): \"plain\""});
        throw Error("every rank raised");
      },
      Fragments{"every rank raised"});
  expect_success("not strict", [&] {
    StateDict sd;
    sd.tensors["plain"] = zeros({3}, kInt64);
    sd.tensors["extra"] = full({2}, 5.0);
    checkpoint::load(sd, dir.path(), /*strict=*/false);
    if (!same_bits(sd.tensors.at("plain"), random_bits({3}, kInt64, 6)))
      throw std::logic_error("plain differs");
    if (!same_bits(sd.tensors.at("extra"), full({2}, 5.0)))
      throw std::logic_error("extra was touched");
  });
  expect_error(
      "a missing scalar",
      [&] {
        StateDict sd;
        sd.tensors = {{"w", zeros({8, 6}, kFloat32)},
                      {"b", zeros({6}, kFloat64)},
                      {"plain", zeros({3}, kInt64)}};
        sd.scalars["epoch"] = int64_t{0};
        checkpoint::load(sd, dir.path());
      },
      Fragments{"scalars missing in the checkpoint", "\"epoch\""});
}

TEST_CASE("a shape or dtype mismatch names the tensor and both sides", "[checkpoint][faults]") {
  TempDir dir;
  expect_success("save", [&] { save_sample(dir.path(), 5); });
  expect_error(
      "shape",
      [&] {
        StateDict sd;
        sd.tensors["w"] = zeros({8, 5}, kFloat32);
        checkpoint::load(sd, dir.path(), false);
      },
      Fragments{"tensor \"w\"", "[8, 6]", "[8, 5]"});
  const robustness_test::Outcome o = robustness_test::run_forked([&] {
    StateDict sd;
    sd.tensors["w"] = zeros({8, 6}, kFloat64);
    checkpoint::load(sd, dir.path(), false);
  });
  CHECK(o.error_type == "DTypeError");
  CHECK(o.message.find("float32") != std::string::npos);
}

TEST_CASE(
    "a failed write (file size limit) raises on every rank and the previous checkpoint still loads",
    "[checkpoint][faults]") {
  TempDir dir;
  expect_success("save, fail, load", [&] {
    save_sample(dir.path(), 7);
    ::signal(SIGXFSZ, SIG_IGN);  // the write fails with EFBIG instead of killing the process
    const rlimit limit{1 << 16, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    // Only rank 2 holds a plain tensor above the limit: the others' writes succeed.
    every_rank_raises(
        [&](const DeviceMesh& mesh) {
          StateDict sd = sample_state(mesh, 8);
          if (mesh.get_local_rank(0) == 2) sd.tensors["big"] = zeros({1 << 16}, kFloat64);
          checkpoint::save(sd, dir.path());
        },
        Fragments{"cannot write", "rank00002", "File too large"});
    const rlimit unlimited{RLIM_INFINITY, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &unlimited);
    // Nothing of the failed save is left, and the previous checkpoint loads.
    const auto m = checkpoint::detail::read_metadata(dir.path());
    for (const auto& entry : std::filesystem::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("save-", 0) == 0 && name.find(m.save_id) == std::string::npos) {
        throw std::logic_error("a file of the failed save is left: " + name);
      }
    }
    dist::run_threads(4, [&](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      StateDict sd = zeros_like_sample(mesh);
      checkpoint::load(sd, dir.path());
      expect_sample(sd, 7);
    });
  });
}

TEST_CASE("async_save's errors are raised by its future on every rank", "[checkpoint][faults]") {
  TempDir dir;
  expect_success("async save, fail", [&] {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 12, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    every_rank_raises(
        [&](const DeviceMesh& mesh) {
          StateDict sd = sample_state(mesh, 9);
          sd.tensors["big"] = zeros({1 << 12}, kFloat64);  // rank 0 writes it
          std::future<void> done = checkpoint::async_save(sd, dir.path());
          done.get();
        },
        Fragments{"cannot write"});
  });
}

TEST_CASE("a save into a directory another save holds is refused on every rank",
          "[checkpoint][faults]") {
  TempDir dir;
  expect_success("locked", [&] {
    const checkpoint::detail::DirectoryLock other(dir.path());
    every_rank_raises(
        [&](const DeviceMesh& mesh) { checkpoint::save(sample_state(mesh, 10), dir.path()); },
        Fragments{"another save into", "in progress"});
  });
}

// A child saving into `dir` is killed with SIGKILL once a chunk file of a new save appears.
// Returns whether it was killed before committing.
bool kill_during_save(const std::string& dir, const std::string& committed_id) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dist::run_threads(4, [&](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      StateDict sd = sample_state(mesh, 20);
      sd.tensors["big"] =
          distribute_tensor(zeros({1 << 24}, kFloat32), mesh, {Shard(0)});  // 64 MiB
      checkpoint::save(sd, dir);
    });
    ::_exit(0);
  }
  for (int i = 0; i < 20000; ++i) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("save-", 0) == 0 &&
          (committed_id.empty() || name.find(committed_id) == std::string::npos)) {
        ::kill(pid, SIGKILL);
        int status = 0;
        ::waitpid(pid, &status, 0);
        return WIFSIGNALED(status);
      }
    }
    ::usleep(100);
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return false;
}

TEST_CASE("a save killed with SIGKILL leaves the previous checkpoint or an incomplete one",
          "[checkpoint][faults]") {
  {
    TempDir dir;
    INFO("the save finished before the kill: the test could not interrupt it");
    REQUIRE(kill_during_save(dir.path(), ""));
    if (!checkpoint::detail::path_exists(dir / checkpoint::detail::kMetadataFile)) {
      expect_error(
          "load",
          [&] {
            StateDict sd;
            checkpoint::load(sd, dir.path());
          },
          Fragments{"holds no committed checkpoint"});
    }
  }
  TempDir dir;
  expect_success("first save", [&] { save_sample(dir.path(), 11); });
  const std::string id = [&] {
    std::ifstream in(dir / checkpoint::detail::kMetadataFile);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return checkpoint::detail::metadata_from_json(text, "metadata").save_id;
  }();
  REQUIRE(kill_during_save(dir.path(), id));
  expect_success("the previous checkpoint loads", [&] {
    dist::run_threads(4, [&](dist::ProcessGroupPtr) {
      const DeviceMesh mesh(DeviceType::CPU, {4});
      StateDict sd = zeros_like_sample(mesh);
      checkpoint::load(sd, dir.path());
      expect_sample(sd, 11);
    });
  });
}

}  // namespace
}  // namespace tessera::checkpoint_test
