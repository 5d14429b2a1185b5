// Views of DTensors have the single-device view's global geometry (Note [Global geometry of
// views]): strides, storage offset and contiguity, for chains of views and every placement.

#include <catch2/catch.hpp>
#include <functional>
#include <sstream>

#include "tests/dtensor/dtensor_ops_expect.h"

namespace tessera::dtensor_test {
namespace {

using ViewChain = std::function<Tensor(const Tensor&)>;

std::vector<std::pair<std::string, ViewChain>> chains() {
  return {
      {"transpose(0, 2)", [](const Tensor& t) { return t.transpose(0, 2); }},
      {"permute(2, 0, 1)",
       [](const Tensor& t) {
         return t.permute({2, 0, 1});
       }},
      {"slice(1, 1, 5, 2)", [](const Tensor& t) { return t.slice(1, 1, 5, 2); }},
      {"narrow(2, 1, 1)", [](const Tensor& t) { return t.narrow(2, 1, 1); }},
      {"select(1, 3)", [](const Tensor& t) { return t.select(1, 3); }},
      {"unsqueeze(1).expand",
       [](const Tensor& t) {
         return t.unsqueeze(1).expand({t.size(0), 3, t.size(1), t.size(2)});
       }},
      {"transpose then reshape (copies)",
       [](const Tensor& t) { return t.transpose(0, 1).reshape({-1}); }},
      {"slice then view",
       [](const Tensor& t) {
         return t.narrow(1, 2, 2).view({t.size(0), 4});
       }},
      {"t of a slice", [](const Tensor& t) { return t.select(2, 1).narrow(1, 1, 3).t(); }},
  };
}

std::string geometry(const Tensor& t) {
  std::ostringstream os;
  os << "sizes " << t.sizes() << " strides " << t.strides() << " offset " << t.storage_offset()
     << (t.is_contiguous() ? " contiguous" : " not contiguous");
  return os.str();
}

TEST_CASE("views of DTensors have the single-device global strides and storage offset",
          "[dtensor][view]") {
  const Tensor x = ints({5, 6, 2}, 1);
  const std::vector<Placements> layouts{
      {Replicate()}, {Shard(0)}, {Shard(1)}, {Shard(2)}, {Partial()}};
  on_mesh({2}, [&](const DeviceMesh& mesh) {
    Failures f;
    for (const Placements& ps : layouts) {
      const Tensor d = distribute_tensor(x, mesh, ps);
      for (const auto& [name, chain] : chains()) {
        const Tensor want = chain(x);
        const Tensor got = chain(d);
        if (geometry(got) != geometry(want)) {
          f.push_back(name + " of " + ps[0].to_string() + ": " + geometry(got) + ", one device " +
                      geometry(want));
        }
        if (!equal(got.full_tensor(), want)) {
          f.push_back(name + " of " + ps[0].to_string() + ": values differ");
        }
      }
    }
    return f;
  });
}

TEST_CASE("a slice of a Replicate DTensor reports the single-device storage offset",
          "[dtensor][view]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    Failures f;
    const Tensor x = ints({8}, 2);
    const Tensor d = distribute_tensor(x, mesh, {Replicate()});
    const Tensor s = d.slice(0, 1, 7);
    if (s.storage_offset() != 1) f.push_back("offset " + std::to_string(s.storage_offset()));
    const Tensor s2 = s.narrow(0, 2, 3);
    if (s2.storage_offset() != 3) f.push_back("offset " + std::to_string(s2.storage_offset()));
    // An op that is not a view starts a fresh tensor.
    if ((s2 + 1).storage_offset() != 0) f.push_back("s2 + 1 has a storage offset");
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
