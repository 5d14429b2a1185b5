#include "tools/checkpoint/info.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

#include "tessera/checkpoint/detail/metadata.h"
#include "tools/checkpoint/scalars.h"

namespace tessera::checkpoint_tool {

namespace {

namespace cd = checkpoint::detail;

// Rows of cells printed with every column as wide as its widest cell; the columns flagged in
// `right` (numbers) right-aligned.
class Table {
 public:
  Table(std::vector<std::string> header, std::vector<bool> right)
      : rows_{std::move(header)}, right_(std::move(right)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string text() const {
    std::vector<size_t> width(right_.size(), 0);
    for (const auto& row : rows_) {
      for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    std::string out;
    for (const auto& row : rows_) {
      std::string line;
      for (size_t c = 0; c < row.size(); ++c) {
        if (c > 0) line += "  ";
        line += right_[c] ? fmt::format("{:>{}}", row[c], width[c])
                          : fmt::format("{:<{}}", row[c], width[c]);
      }
      line.erase(line.find_last_not_of(' ') + 1);  // no trailing blanks after the last column
      out += line + "\n";
    }
    return out;
  }

 private:
  std::vector<std::vector<std::string>> rows_;
  std::vector<bool> right_;
};

// "1.5 MiB": the exact count is in the table, this is for reading at a glance.
std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < std::size(units)) {
    value /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", value, units[unit]);
}

std::string quoted_if_string(const checkpoint::Scalar& value) {
  const std::string text = scalar_text(value);
  return std::holds_alternative<std::string>(value) ? "\"" + text + "\"" : text;
}

}  // namespace

std::string info(const std::string& dir) {
  const cd::Metadata m = cd::read_metadata(dir);
  std::string out = fmt::format("checkpoint {} (save {}, saved by {} rank{})\n\n", dir, m.save_id,
                                m.world_size, m.world_size == 1 ? "" : "s");
  Table tensors({"tensor", "dtype", "shape", "chunks", "bytes"}, {false, false, false, true, true});
  size_t chunks = 0;
  uint64_t bytes = 0;
  std::set<std::string> files;
  for (const auto& [key, t] : m.tensors) {
    uint64_t tensor_bytes = 0;
    for (const cd::ChunkRecord& c : t.chunks) {
      tensor_bytes += c.nbytes;
      files.insert(c.file);
    }
    tensors.add({key, std::string(dtype_name(t.dtype)), fmt::format("{}", t.shape),
                 std::to_string(t.chunks.size()), std::to_string(tensor_bytes)});
    chunks += t.chunks.size();
    bytes += tensor_bytes;
  }
  out += m.tensors.empty() ? "no tensors\n" : tensors.text();
  out += fmt::format("\n{} tensor{}, {} chunk{}, {} bytes ({}) in {} file{}; saved by {} rank{}\n",
                     m.tensors.size(), m.tensors.size() == 1 ? "" : "s", chunks,
                     chunks == 1 ? "" : "s", bytes, human_bytes(bytes), files.size(),
                     files.size() == 1 ? "" : "s", m.world_size, m.world_size == 1 ? "" : "s");
  if (!m.scalars.empty()) {
    Table scalars({"scalar", "type", "value"}, {false, false, false});
    for (const auto& [key, value] : m.scalars) {
      scalars.add({key, scalar_type(value), quoted_if_string(value)});
    }
    out += '\n';
    out += scalars.text();
  }
  if (!m.rank_scalars.empty()) {
    // Scalars whose value differed between the saving ranks (a data-parallel generator).
    Table per_rank({"rank", "scalar", "type", "value"}, {true, false, false, false});
    for (const auto& [rank, values] : m.rank_scalars) {
      for (const auto& [key, value] : values) {
        per_rank.add({std::to_string(rank), key, scalar_type(value), quoted_if_string(value)});
      }
    }
    out += "\nper-rank scalars (their values differed between the saving ranks)\n";
    out += per_rank.text();
  }
  return out;
}

}  // namespace tessera::checkpoint_tool
