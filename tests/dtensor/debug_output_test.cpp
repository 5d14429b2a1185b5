// What the debugging aids print (issue 62 item 7): CommDebugMode's trace names each
// collective's group by its world ranks, so a 2-D mesh's dims can be told apart.

#include <catch2/catch.hpp>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {
namespace {

TEST_CASE("CommDebugMode: the trace names each collective's group", "[dtensor][debug]") {
  on_mesh({2, 2}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const DTensor d = distribute_tensor(ones({4, 4}), mesh, {Shard(0), Shard(1)});
    debug::CommDebugMode mode;
    (void)d.redistribute({Replicate(), Shard(1)});  // gathers dim 0 along mesh dim 0
    const std::vector<int64_t> c = *mesh.get_coordinate();
    // Mesh dim 0 joins the ranks of one column: {c1, 2 + c1}.
    const std::string group = fmt::format("[{}, {}]", c[1], 2 + c[1]);
    const std::string table = mode.tracing_table();
    if (table.find("group") == std::string::npos || table.find(group) == std::string::npos) {
      f.push_back("the trace does not show group " + group + ":\n" + table);
    }
    const std::string json = mode.json();
    if (json.find("\"group\": " + group) == std::string::npos) {
      f.push_back("the JSON trace does not show group " + group + ": " + json);
    }
    return f;
  });
}

}  // namespace
}  // namespace tessera::dtensor_test
