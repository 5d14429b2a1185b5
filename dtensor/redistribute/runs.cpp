#include "tessera/dtensor/redistribute/runs.h"

#include <algorithm>

#include "tessera/runtime/error.h"
#include "tessera/runtime/ops.h"

namespace tessera::dtensor {

namespace {

struct Segment {
  int64_t global = 0;
  int64_t size = 0;
  size_t source = 0;
  int64_t position = 0;
};

std::vector<Segment> segments_of(const std::vector<RunSource>& sources) {
  std::vector<Segment> segs;
  for (size_t s = 0; s < sources.size(); ++s) {
    int64_t pos = 0;
    for (const Run& r : sources[s].runs) {
      if (r.size > 0) segs.push_back(Segment{r.offset, r.size, s, pos});
      pos += r.size;
    }
  }
  std::sort(segs.begin(), segs.end(),
            [](const Segment& a, const Segment& b) { return a.global < b.global; });
  return segs;
}

}  // namespace

Tensor assemble_runs(int64_t dim, const std::vector<Run>& want,
                     const std::vector<RunSource>& sources) {
  TS_INTERNAL_ASSERT(!sources.empty(), "assemble_runs without sources");
  const std::vector<Segment> segs = segments_of(sources);
  std::vector<Tensor> pieces;
  int64_t covered = 0;
  for (const Run& w : want) {
    for (const Segment& s : segs) {
      const int64_t lo = std::max(w.offset, s.global);
      const int64_t hi = std::min(w.offset + w.size, s.global + s.size);
      if (lo >= hi) continue;
      pieces.push_back(sources[s.source].tensor.narrow(dim, s.position + (lo - s.global), hi - lo));
      covered += hi - lo;
    }
  }
  TS_INTERNAL_ASSERT(covered == total_size(want), "assemble_runs: the sources hold ", covered,
                     " of the ", total_size(want), " wanted indices");
  if (pieces.empty()) {
    Shape shape = sources[0].tensor.sizes();
    shape[static_cast<size_t>(dim)] = 0;
    return Tensor::make_empty(shape, sources[0].tensor.dtype(), sources[0].tensor.device());
  }
  if (pieces.size() == 1) return pieces[0];
  return cat(pieces, dim);
}

}  // namespace tessera::dtensor
