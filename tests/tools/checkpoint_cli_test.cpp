// tessera-checkpoint as a user runs it (issue 53): info lists what a checkpoint holds, verify
// passes on a saved checkpoint and names the file and tensor of a flipped byte or broken metadata,
// consolidate writes one safetensors file whose tensors equal the saved full tensors bitwise
// (one process and DTensors on 4 rank threads: Shard(1), StridedShard), and usage errors exit 2
// with one message. The consolidate command is also called in tiny slabs, which split the rows.

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "tessera/checkpoint/detail/chunk_reader.h"
#include "tessera/checkpoint/detail/files.h"
#include "tessera/checkpoint/detail/metadata.h"
#include "tessera/checkpoint/detail/safetensors.h"
#include "tests/checkpoint/checkpoint_test_util.h"
#include "tests/tools/run_command.h"
#include "tools/checkpoint/consolidate.h"
#include "tools/checkpoint/slabs.h"

namespace tessera::checkpoint_tool {
namespace {

namespace cd = checkpoint::detail;
using checkpoint::StateDict;
using checkpoint_test::TempDir;
using Run = test::CommandResult;

// stdout and stderr together; `only_stdout` drops stderr (to see where a message went).
Run run_tool(const std::string& args, bool only_stdout = false) {
  return test::run_command(std::string(TESSERA_CHECKPOINT_CLI) + " " + args +
                           (only_stdout ? " 2>/dev/null" : " 2>&1"));
}

std::string quoted(const std::string& path) { return "'" + path + "'"; }

size_t lines(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

// Whether `line[i..]` matches `pattern[j..]` whole: a small pattern language for table rows
// (no std::regex: under the sanitizers' -O2 -Werror GCC 12 warns inside <regex>): " +" is one
// or more blanks, "[0-9]+" one or more digits, "\\c" the character c, anything else itself.
bool matches(const std::string& line, size_t i, const std::string& pattern, size_t j) {
  if (j == pattern.size()) return i == line.size();
  const auto repeat = [&](size_t width, auto&& accepts) {
    size_t k = i;
    while (k < line.size() && accepts(line[k])) {
      ++k;
      if (matches(line, k, pattern, j + width)) return true;
    }
    return false;
  };
  if (pattern.compare(j, 2, " +") == 0) return repeat(2, [](char c) { return c == ' '; });
  if (pattern.compare(j, 6, "[0-9]+") == 0) {
    return repeat(6, [](char c) { return c >= '0' && c <= '9'; });
  }
  if (pattern[j] == '\\' && j + 1 < pattern.size()) ++j;
  return i < line.size() && line[i] == pattern[j] && matches(line, i + 1, pattern, j + 1);
}

// Whether some line of `text` matches `pattern` whole (a table row, its columns aligned with
// blanks).
bool has_line(const std::string& text, const std::string& pattern) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (matches(line, 0, pattern, 0)) return true;
  }
  return false;
}

// The full tensors of a test checkpoint, every byte random (comparisons are bitwise).
struct Globals {
  Tensor a = checkpoint_test::random_bits({8, 6}, kFloat32, 21);
  Tensor b = checkpoint_test::random_bits({6}, kInt64, 22);
  Tensor c = checkpoint_test::random_bits({4, 8, 5}, kBFloat16, 23);
  Tensor mask = checkpoint_test::random_bits({3, 4}, kBool, 24);
  Tensor scale = checkpoint_test::random_bits({}, kFloat64, 25);
  Tensor none = checkpoint_test::random_bits({2, 0, 3}, kFloat16, 26);
  std::map<std::string, Tensor> all() const {
    return {{"a", a}, {"b", b}, {"c", c}, {"mask", mask}, {"scale", scale}, {"none", none}};
  }
};

// Where the DTensors lie: mesh and one placement list per tensor (a, b, c; the others are plain
// tensors every rank holds).
struct Layout {
  std::string name;
  Shape mesh;  // empty: one process, no world
  Placements a, b, c;
};

std::vector<Layout> layouts() {
  return {
      {"one process", {}, {}, {}, {}},
      {"4: Shard(1)", {4}, {Shard(1)}, {Shard(0)}, {Shard(1)}},
      {"2x2: StridedShard(0, 2), Shard(0) and StridedShard(1, 2), Shard(1)",
       {2, 2},
       {StridedShard(0, 2), Shard(0)},
       {Replicate(), Shard(0)},
       {StridedShard(1, 2), Shard(1)}},
  };
}

// Saves the globals under `layout` into `dir`, with scalars equal on every rank and one that
// differs per rank.
void save(const Layout& layout, const Globals& g, const std::string& dir) {
  const auto state = [&](int rank,
                         const std::function<Tensor(const Tensor&, const Placements&)>& place) {
    StateDict sd;
    sd.tensors = {{"a", place(g.a, layout.a)}, {"b", place(g.b, layout.b)},
                  {"c", place(g.c, layout.c)}, {"mask", g.mask.clone()},
                  {"scale", g.scale.clone()},  {"none", g.none.clone()}};
    sd.scalars = {{"epoch", int64_t{3}}, {"lr", 0.1}, {"note", std::string("warm start")}};
    if (!layout.mesh.empty()) sd.scalars["seed"] = int64_t{100 + rank};
    return sd;
  };
  if (layout.mesh.empty()) {
    checkpoint::save(state(0, [](const Tensor& t, const Placements&) { return t.clone(); }), dir);
    return;
  }
  dist::run_threads(static_cast<int>(layout.mesh.numel()), [&](dist::ProcessGroupPtr world) {
    const DeviceMesh mesh(DeviceType::CPU, layout.mesh);
    checkpoint::save(state(world->rank(),
                           [&](const Tensor& t, const Placements& p) {
                             return Tensor(distribute_tensor(t, mesh, p));
                           }),
                     dir);
  });
}

// Reads a safetensors file as a standard reader would: its header, strictly parsed, and each
// tensor's bytes.
struct SafetensorsFile {
  cd::SafetensorsHeader header;
  std::map<std::string, std::string> bytes;
};

SafetensorsFile read_safetensors(const std::string& path) {
  const cd::File f = cd::File::open_read(path);
  SafetensorsFile out;
  out.header = cd::parse_safetensors_header(
      path, f.size(), [&](uint64_t at, uint64_t n) { return f.pread_string(at, n, "header"); });
  for (const cd::SafetensorsEntry& e : out.header.entries) {
    out.bytes[e.name] = f.pread_string(out.header.data_start + e.begin, e.end - e.begin, e.name);
  }
  return out;
}

// Each problem with the consolidated file against the saved full tensors: missing, another dtype
// or shape, unaligned, other bytes.
std::vector<std::string> consolidate_problems(const SafetensorsFile& file, const Globals& g) {
  std::vector<std::string> problems;
  if (file.header.entries.size() != g.all().size()) problems.push_back("another tensor count");
  for (const auto& [key, t] : g.all()) {
    const auto it = std::find_if(file.header.entries.begin(), file.header.entries.end(),
                                 [&](const cd::SafetensorsEntry& e) { return e.name == key; });
    if (it == file.header.entries.end()) {
      problems.push_back(key + " is missing");
      continue;
    }
    if (it->dtype != t.dtype() || it->shape != t.shape()) {
      problems.push_back(key + ": dtype or shape");
    }
    if ((file.header.data_start + it->begin) % element_size(t.dtype()) != 0) {
      problems.push_back(key + " is not aligned to its element size");
    }
    const std::string& bytes = file.bytes.at(key);
    const Tensor full = t.contiguous();
    if (bytes.size() != full.nbytes() ||
        (!bytes.empty() && std::memcmp(bytes.data(), full.raw_data(), bytes.size()) != 0)) {
      problems.push_back(key + ": other bytes");
    }
  }
  return problems;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Flips the bits of one byte of a file in place.
void flip_byte(const std::string& path, uint64_t at) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekg(static_cast<std::streamoff>(at));
  const char byte = static_cast<char>(f.get() ^ 0xff);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(byte);
}

TEST_CASE("tessera-checkpoint info lists tensors and shapes and totals and scalars",
          "[checkpoint_cli]") {
  const Globals g;
  for (const Layout& layout : {layouts()[0], layouts()[1]}) {
    INFO(layout.name);
    TempDir dir;
    save(layout, g, dir.path());
    const cd::Metadata m = cd::read_metadata(dir.path());
    size_t chunks = 0;
    for (const auto& [key, t] : m.tensors) chunks += t.chunks.size();
    const Run r = run_tool("info " + quoted(dir.path()), true);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(has_line(r.output, "a +float32 +\\[8, 6\\] +" +
                                 std::to_string(m.tensors.at("a").chunks.size()) + " +192"));
    CHECK(has_line(r.output, "c +bfloat16 +\\[4, 8, 5\\] +[0-9]+ +320"));
    CHECK(has_line(r.output, "scale +float64 +\\[\\] +1 +8"));
    CHECK(has_line(r.output, "none +float16 +\\[2, 0, 3\\] +0 +0"));
    const int world = layout.mesh.empty() ? 1 : 4;
    CHECK_THAT(r.output,
               Catch::Contains("6 tensors, " + std::to_string(chunks) + " chunks") &&
                   Catch::Contains("in " + std::to_string(world) + " file") &&
                   Catch::Contains(world == 1 ? "saved by 1 rank\n" : "saved by 4 ranks\n"));
    CHECK(has_line(r.output, "epoch +int64 +3"));
    CHECK(has_line(r.output, "lr +double +0.1"));
    CHECK(has_line(r.output, "note +string +\"warm start\""));
    if (world == 4) {
      CHECK_THAT(r.output, Catch::Contains("per-rank scalars"));
      CHECK(has_line(r.output, " +3 +seed +int64 +103"));
    }
  }
}

TEST_CASE("tessera-checkpoint verify passes and then names the file and tensor of a flipped byte",
          "[checkpoint_cli]") {
  const Globals g;
  TempDir dir;
  save(layouts()[2], g, dir.path());
  const cd::Metadata m = cd::read_metadata(dir.path());
  size_t chunks = 0;
  uint64_t bytes = 0;
  for (const auto& [key, t] : m.tensors) {
    for (const cd::ChunkRecord& c : t.chunks) {
      ++chunks;
      bytes += c.nbytes;
    }
  }
  const Run ok = run_tool("verify " + quoted(dir.path()));
  INFO(ok.output);
  REQUIRE(ok.status == 0);
  CHECK(ok.output == "verified 6 tensors, " + std::to_string(chunks) + " chunks, " +
                         std::to_string(bytes) + " bytes: all checksums match\n");

  // One byte in the middle of a chunk of "c".
  const cd::ChunkRecord& chunk = m.tensors.at("c").chunks.at(1);
  flip_byte(dir / chunk.file, chunk.file_offset + chunk.nbytes / 2);
  const Run bad = run_tool("verify " + quoted(dir.path()));
  INFO(bad.output);
  CHECK(bad.status == 1);
  CHECK(lines(bad.output) == 1);
  CHECK_THAT(bad.output, Catch::Contains("checksum mismatch in " + dir / chunk.file) &&
                             Catch::Contains("tensor \"c\"") &&
                             Catch::Contains(cd::describe_box(chunk.offsets, chunk.sizes)));

  // consolidate reads the same byte: it fails the same way and leaves no file, whole or partial.
  TempDir out;
  const std::string file = out / "model.safetensors";
  const Run failed = run_tool("consolidate " + quoted(dir.path()) + " " + quoted(file));
  INFO(failed.output);
  CHECK(failed.status == 1);
  CHECK_THAT(failed.output, Catch::Contains("[tessera-checkpoint consolidate] checksum mismatch") &&
                                Catch::Contains("tensor \"c\""));
  CHECK_FALSE(cd::path_exists(file));
  CHECK_FALSE(cd::path_exists(file + ".tmp"));
}

TEST_CASE("tessera-checkpoint verify finds a corrupted header and broken chunk geometry",
          "[checkpoint_cli]") {
  const Globals g;
  TempDir dir;
  save(layouts()[1], g, dir.path());
  const cd::Metadata m = cd::read_metadata(dir.path());
  const std::string metadata_path = dir / cd::kMetadataFile;

  SECTION("a chunk file's header") {
    const std::string file = dir / m.tensors.at("a").chunks.at(0).file;
    flip_byte(file, 8);  // the header's opening '{'
    const Run r = run_tool("verify " + quoted(dir.path()));
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains(file) && Catch::Contains("does not start with '{'"));
  }
  SECTION("two chunks of a tensor that overlap") {
    cd::Metadata broken = m;
    auto& chunks = broken.tensors.at("a").chunks;
    chunks.at(1).offsets = chunks.at(0).offsets;
    write_file(metadata_path, cd::to_json(broken));
    const Run r = run_tool("verify " + quoted(dir.path()));
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("tensor \"a\" has overlapping chunks") &&
                             Catch::Contains(chunks.at(0).file) &&
                             Catch::Contains(chunks.at(1).file));
  }
  SECTION("a chunk missing") {
    cd::Metadata broken = m;
    broken.tensors.at("b").chunks.pop_back();
    write_file(metadata_path, cd::to_json(broken));
    const Run r = run_tool("verify " + quoted(dir.path()));
    INFO(r.output);
    CHECK(r.status == 1);
    const int64_t held = 6 - m.tensors.at("b").chunks.back().sizes[0];
    CHECK_THAT(r.output, Catch::Contains("chunks of tensor \"b\" [6] hold " + std::to_string(held) +
                                         " of its 6 elements"));
    // consolidate would leave a gap: it refuses before it writes anything.
    TempDir out;
    const Run c =
        run_tool("consolidate " + quoted(dir.path()) + " " + quoted(out / "m.safetensors"));
    CHECK(c.status == 1);
    CHECK_FALSE(cd::path_exists(out / "m.safetensors.tmp"));
  }
}

TEST_CASE("tessera-checkpoint consolidate writes the saved full tensors bitwise",
          "[checkpoint_cli]") {
  const Globals g;
  for (const Layout& layout : layouts()) {
    INFO(layout.name);
    TempDir dir, out;
    save(layout, g, dir.path());
    const std::string file = out / "model.safetensors";
    const Run r = run_tool("consolidate " + quoted(dir.path()) + " " + quoted(file));
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK(r.output == "wrote " + file + ": 6 tensors, " +
                          std::to_string(std::filesystem::file_size(file)) + " bytes\n");
    CHECK_FALSE(cd::path_exists(file + ".tmp"));
    const SafetensorsFile st = read_safetensors(file);
    for (const std::string& p : consolidate_problems(st, g)) FAIL_CHECK(p);
    CHECK(st.header.metadata.at("epoch") == "3");
    CHECK(st.header.metadata.at("lr") == "0.1");
    CHECK(st.header.metadata.at("note") == "warm start");
    if (!layout.mesh.empty()) {
      CHECK(st.header.metadata.at("rank2/seed") == "102");
      CHECK(st.header.metadata.count("seed") == 0);
    }
    // Tessera's own reader of full-tensor files takes it as it takes pretrained weights.
    StateDict loaded;
    for (const auto& [key, t] : g.all()) loaded.tensors[key] = zeros(t.shape(), t.dtype());
    checkpoint::load_safetensors(loaded, file);
    for (const auto& [key, t] : g.all()) {
      INFO(key);
      CHECK(checkpoint_test::same_bits(loaded.tensors.at(key), t));
    }
  }
}

TEST_CASE("consolidate in slabs smaller than a row splits the inner dims and stays bitwise",
          "[checkpoint_cli]") {
  const Globals g;
  for (const Layout& layout : layouts()) {
    INFO(layout.name);
    TempDir dir, out;
    save(layout, g, dir.path());
    for (int64_t slab_bytes : {1, 6, 20, 64}) {
      INFO("slab bytes " << slab_bytes);
      const std::string file = out / ("slab" + std::to_string(slab_bytes) + ".safetensors");
      consolidate(dir.path(), file, ConsolidateOptions{slab_bytes});
      for (const std::string& p : consolidate_problems(read_safetensors(file), g)) FAIL_CHECK(p);
    }
  }
}

TEST_CASE("slabs tile a tensor in row-major order within their byte budget", "[checkpoint_cli]") {
  for (const Shape& shape : {Shape{}, Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{2, 0, 3}}) {
    for (int64_t budget : {1, 4, 8, 24, 48, 1000}) {
      INFO("shape " << shape << " budget " << budget);
      constexpr size_t kElement = 4;
      int64_t next = 0;  // the row-major index the next slab must start at
      bool ok = true;
      for_each_slab(shape, kElement, budget, [&](const cd::Box& box) {
        int64_t first = 0;
        for (size_t d = 0; d < shape.size(); ++d) first = first * shape[d] + box.offsets[d];
        ok = ok && first == next &&
             box.numel() * static_cast<int64_t>(kElement) <= std::max<int64_t>(budget, kElement);
        // Contiguous: every dim after the first one sized above 1 is whole.
        bool whole_after = false;
        for (size_t d = 0; d < shape.size(); ++d) {
          if (whole_after) ok = ok && box.sizes[d] == shape[d] && box.offsets[d] == 0;
          whole_after = whole_after || box.sizes[d] > 1;
        }
        next = first + box.numel();
      });
      CHECK(ok);
      CHECK(next == shape.numel());
    }
  }
}

TEST_CASE("tessera-checkpoint usage errors exit 2 with one message naming what is valid",
          "[checkpoint_cli]") {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "[tessera-checkpoint] no command given; valid commands: info, verify, consolidate"},
      {"bogus", "[tessera-checkpoint] unknown command 'bogus'; valid commands: info, verify"},
      {"--bogus",
       "[tessera-checkpoint] unknown flag --bogus; the only flag before a command is --help"},
      {"info", "[tessera-checkpoint info] missing DIR; usage: tessera-checkpoint info DIR"},
      {"info --X d", "[tessera-checkpoint info] unknown flag --X; its only flag is --help"},
      {"verify a b", "[tessera-checkpoint verify] unexpected argument 'b'; usage:"},
      {"consolidate d",
       "[tessera-checkpoint consolidate] missing OUT.safetensors; usage: tessera-checkpoint "
       "consolidate DIR OUT.safetensors"},
      {"consolidate d o x", "[tessera-checkpoint consolidate] unexpected argument 'x'"},
      {"verify --", "[tessera-checkpoint verify] missing DIR"},
      // What follows a "--" after the last operand is still the command's.
      {"verify a -- b", "[tessera-checkpoint verify] unexpected argument 'b'"},
      {"verify a -- -x", "[tessera-checkpoint verify] unexpected argument '-x'"},
      {"info d verify", "[tessera-checkpoint info] unexpected argument 'verify'"},
      {"--bogus info d", "[tessera-checkpoint] unknown flag --bogus"},
      {"bogus info d", "[tessera-checkpoint] unknown command 'bogus'"},
  };
  for (const auto& [args, message] : cases) {
    INFO("tessera-checkpoint " << args);
    const Run r = run_tool(args);
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(lines(r.output) == 1);
    CHECK_THAT(r.output, Catch::StartsWith(message));
    CHECK(run_tool(args, true).output.empty());  // on stderr
  }
}

TEST_CASE("tessera-checkpoint help for the tool and each command goes to stdout",
          "[checkpoint_cli]") {
  for (const char* args : {"--help", "-h"}) {
    const Run r = run_tool(args, true);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Catch::Contains("tessera-checkpoint info DIR") &&
                             Catch::Contains("tessera-checkpoint verify DIR") &&
                             Catch::Contains("tessera-checkpoint consolidate DIR OUT.safetensors"));
  }
  for (const std::string command : {"info", "verify", "consolidate"}) {
    for (const char* flag : {"--help", "-h"}) {
      const Run r = run_tool(command + " " + flag, true);
      INFO(r.output);
      CHECK(r.status == 0);
      CHECK_THAT(r.output, Catch::StartsWith("usage: tessera-checkpoint " + command));
    }
  }
}

TEST_CASE("tessera-checkpoint runtime errors exit 1 with the error message", "[checkpoint_cli]") {
  TempDir empty;
  const Run none = run_tool("info " + quoted(empty.path()));
  INFO(none.output);
  CHECK(none.status == 1);
  CHECK_THAT(none.output, Catch::Contains(empty.path() + " holds no committed checkpoint"));
  const Run missing = run_tool("verify " + quoted(empty / "nothing"));
  INFO(missing.output);
  CHECK(missing.status == 1);
  CHECK_THAT(missing.output, Catch::Contains("no checkpoint directory " + empty / "nothing"));
  // A command's name after a command is an operand: a directory named "info".
  const Run named = test::run_command("cd " + quoted(empty.path()) + " && " +
                                      TESSERA_CHECKPOINT_CLI + " verify info 2>&1");
  INFO(named.output);
  CHECK(named.status == 1);
  CHECK_THAT(named.output, Catch::Contains("no checkpoint directory info"));

  const Globals g;
  TempDir dir;
  save(layouts()[0], g, dir.path());
  const std::string unwritable = empty / "no-such-dir/model.safetensors";
  const Run denied = run_tool("consolidate " + quoted(dir.path()) + " " + quoted(unwritable));
  INFO(denied.output);
  CHECK(denied.status == 1);
  CHECK_THAT(denied.output, Catch::Contains(unwritable));
  // Over the checkpoint's own metadata: refused, and the checkpoint is intact.
  const std::string own = dir / cd::kMetadataFile;
  const Run over = run_tool("consolidate " + quoted(dir.path()) + " " + quoted(own));
  INFO(over.output);
  CHECK(over.status == 1);
  CHECK_THAT(over.output, Catch::Contains("of the checkpoint being read"));
  CHECK(run_tool("verify " + quoted(dir.path())).status == 0);
}

}  // namespace
}  // namespace tessera::checkpoint_tool
