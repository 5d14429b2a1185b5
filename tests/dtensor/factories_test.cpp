// DTensor factories: only the local shard is allocated, and the logical tensor is the
// single-device one (rand / randn bitwise, with the generator advanced in step on every rank).

#include <catch2/catch.hpp>

#include "tests/dtensor/dtensor_test_util.h"

namespace tessera::dtensor_test {
namespace {

using dist::ReduceOp;

TEST_CASE("rand / randn equal the single-device draws for every layout", "[dtensor][factories]") {
  const std::vector<Placements> layouts{{Shard(0), Shard(1)},    {Shard(1), Shard(0)},
                                        {Replicate(), Shard(1)}, {Shard(1), Shard(1)},
                                        {Partial(), Shard(0)},   {Replicate(), Replicate()}};
  on_mesh({2, 2}, [&](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    for (const Shape& shape : std::vector<Shape>{{7, 5}, {4, 6}, {3, 0}}) {
      for (const Placements& ps : layouts) {
        for (DType dtype : {kFloat32, kFloat64, kBFloat16}) {
          const std::string what = fmt::format("{} {} {}", shape, to_string(ps), dtype);
          Generator mine(99);
          Generator single(99);
          mine.set_offset(5);
          single.set_offset(5);
          const DTensor u =
              dtensor::rand(shape, {.mesh = mesh, .placements = ps, .dtype = dtype}, &mine);
          const DTensor n =
              dtensor::randn(shape, {.mesh = mesh, .placements = ps, .dtype = dtype}, &mine);
          const Tensor u_ref = rand(shape, dtype, &single);
          const Tensor n_ref = randn(shape, dtype, &single);
          if (u.to_local().sizes() != u.spec().local_shape()) f.push_back(what + ": local shape");
          if (!equal(u.full_tensor(), u_ref)) f.push_back(what + ": rand differs");
          if (!equal(n.full_tensor(), n_ref)) f.push_back(what + ": randn differs");
          if (mine.offset() != single.offset()) f.push_back(what + ": generator out of step");
        }
      }
    }
    return f;
  });
}

TEST_CASE("zeros / ones / full / empty / linspace / logspace", "[dtensor][factories]") {
  on_mesh({4}, [](const DeviceMesh& mesh) {
    std::vector<std::string> f;
    const Shape shape{5, 3};
    auto expect = [&](const char* what, const DTensor& d, const Tensor& ref) {
      if (d.to_local().sizes() != d.spec().local_shape())
        f.push_back(std::string(what) + ": local");
      if (!equal(d.full_tensor(), ref)) f.push_back(std::string(what) + ": values");
    };
    expect("zeros", dtensor::zeros(shape, {.mesh = mesh, .placements = {Shard(0)}}), zeros(shape));
    expect("ones", dtensor::ones(shape, {.mesh = mesh, .placements = {Shard(1)}}), ones(shape));
    expect("full P(sum)",
           dtensor::full(shape, 2.5, {.mesh = mesh, .placements = {Partial()}, .dtype = kFloat64}),
           full(shape, 2.5, kFloat64));
    expect("full P(max)",
           dtensor::full(shape, -1, {.mesh = mesh, .placements = {Partial(ReduceOp::Max)}}),
           full(shape, -1));
    expect("linspace", dtensor::linspace(-1, 2, 7, {.mesh = mesh, .placements = {Shard(0)}}),
           linspace(-1, 2, 7));
    expect("logspace", dtensor::logspace(0, 3, 5, 2.0, {.mesh = mesh, .placements = {Shard(0)}}),
           logspace(0, 3, 5, 2.0));
    const DTensor e =
        dtensor::empty(shape, {.mesh = mesh, .placements = {Shard(0)}, .requires_grad = true});
    if (e.to_local().sizes() != e.spec().local_shape()) f.push_back("empty: local shape");
    if (!e.requires_grad() || !e.unsafe_local().is_leaf())
      f.push_back("empty: not a leaf with grad");
    try {
      dtensor::zeros(shape, {});
      f.push_back("no mesh: no Error");
    } catch (const Error& err) {
      if (std::string(err.what()).find("needs a mesh") == std::string::npos)
        f.push_back(err.what());
    }
    try {
      dtensor::rand(shape, {.mesh = mesh, .dtype = kInt64});
      f.push_back("integer rand: no Error");
    } catch (const Error& err) {
      if (std::string(err.what()).find("[dtensor::rand]") == std::string::npos)
        f.push_back(err.what());
    }
    return f;
  });
}

TEST_CASE("chunk_list, mesh queries and visualize_sharding", "[dtensor][mesh]") {
  on_mesh({2, 2},
          [](const DeviceMesh& mesh) {
            std::vector<std::string> f;
            const std::vector<int64_t> coord = *mesh.get_coordinate();
            const int rank = dist::world()->rank();
            if (coord != std::vector<int64_t>{rank / 2, rank % 2}) f.push_back("coordinate");
            if (mesh.get_local_rank("dp") != rank / 2 || mesh.get_local_rank("tp") != rank % 2) {
              f.push_back("local rank");
            }
            if (mesh.get_group("tp")->size() != 2 || mesh.get_group(0)->rank() != rank / 2) {
              f.push_back("groups");
            }
            const DeviceMesh tp = mesh["tp"];
            if (tp.ndim() != 1 || tp.size() != 2 ||
                tp.ranks() != std::vector<int>{2 * (rank / 2), 2 * (rank / 2) + 1}) {
              f.push_back("sub-mesh");
            }
            // A dim of 5 over [S(0), S(0)]: 3 -> (2, 1) and 2 -> (1, 1); empty shards sit at the
            // end.
            const DTensor x =
                distribute_tensor(arange(10, kFloat32).reshape({5, 2}), mesh, {Shard(0), Shard(0)});
            const std::vector<ChunkMeta> chunks = x.chunk_list();
            const std::vector<Shape> offsets{{0, 0}, {2, 0}, {3, 0}, {4, 0}};
            const std::vector<Shape> sizes{{2, 2}, {1, 2}, {1, 2}, {1, 2}};
            if (chunks.size() != 1 || chunks[0].offsets != offsets[static_cast<size_t>(rank)] ||
                chunks[0].sizes != sizes[static_cast<size_t>(rank)]) {
              f.push_back("chunk_list");
            }
            const DTensor y = distribute_tensor(ones({4, 4}), mesh, {Shard(0), Shard(1)});
            const std::string drawing = debug::visualize_sharding(y);
            if (drawing.find("row 2:4") == std::string::npos ||
                drawing.find("col 2:4") == std::string::npos ||
                drawing.find("rank 3") == std::string::npos) {
              f.push_back("visualize_sharding:\n" + drawing);
            }
            return f;
          },
          {"dp", "tp"});
}

}  // namespace
}  // namespace tessera::dtensor_test
