// from_blob and DLPack (runtime/interop.h): zero-copy in both directions, the producer's
// deleter run exactly once, strides and offsets kept, every dtype, and the errors of what
// cannot cross.

#include <catch2/catch.hpp>
#include <cstring>
#include <numeric>
#include <vector>

#include "tessera/tessera.h"

using namespace tessera;

namespace {

// A hand-built producer: memory, shape and strides it owns, and a count of deleter calls.
template <typename Managed>
struct Producer {
  std::vector<float> memory;
  std::vector<int64_t> shape, strides;
  Managed managed{};
  int deleted = 0;

  Producer(std::vector<float> data, std::vector<int64_t> sizes, std::vector<int64_t> steps,
           uint64_t byte_offset)
      : memory(std::move(data)), shape(std::move(sizes)), strides(std::move(steps)) {
    DLTensor& dl = managed.dl_tensor;
    dl.data = memory.data();
    dl.device = DLDevice{kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = DLDataType{kDLFloat, 32, 1};
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
    dl.byte_offset = byte_offset;
    managed.manager_ctx = this;
    managed.deleter = [](Managed* self) { ++static_cast<Producer*>(self->manager_ctx)->deleted; };
  }
};

std::vector<float> iota_floats(size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

}  // namespace

TEST_CASE("to_dlpack then from_dlpack: same memory, strides, offset and dtype",
          "[runtime][dlpack]") {
  const Tensor base = arange(24, kFloat32).reshape({4, 6});
  // A view with a storage offset and non-contiguous strides.
  const Tensor view = base.slice(1, 1, 5, 2).t();  // [2, 4], strides [2, 6], offset 1
  REQUIRE(view.storage_offset() == 1);
  DLManagedTensor* managed = to_dlpack(view);
  const DLTensor& dl = managed->dl_tensor;
  CHECK(dl.data == base.raw_data());
  CHECK(dl.byte_offset == 4);
  CHECK(dl.ndim == 2);
  CHECK(std::vector<int64_t>(dl.shape, dl.shape + 2) == std::vector<int64_t>{2, 4});
  CHECK(std::vector<int64_t>(dl.strides, dl.strides + 2) == std::vector<int64_t>{2, 6});
  CHECK(dl.dtype.code == kDLFloat);
  CHECK(dl.dtype.bits == 32);
  CHECK(dl.dtype.lanes == 1);
  CHECK(dl.device.device_type == kDLCPU);
  const Tensor back = from_dlpack(managed);
  CHECK(back.raw_data() == view.raw_data());
  CHECK(back.sizes() == view.sizes());
  CHECK(back.strides() == view.strides());
  CHECK(back.storage_offset() == 1);
  CHECK(back.to_vector<float>() == view.to_vector<float>());
  // Shared memory: a write through one is seen by the other.
  Tensor writable = back;
  writable.fill_(Scalar(7.0));
  CHECK(base.to_vector<float>()[1] == 7.0f);
}

TEST_CASE("every Tessera dtype crosses DLPack and comes back as itself", "[runtime][dlpack]") {
  struct Expected {
    DType dtype;
    uint8_t code, bits;
  };
  const Expected table[] = {{kBool, kDLBool, 8},      {kUInt8, kDLUInt, 8},
                            {kInt32, kDLInt, 32},     {kInt64, kDLInt, 64},
                            {kFloat16, kDLFloat, 16}, {kBFloat16, kDLBfloat, 16},
                            {kFloat32, kDLFloat, 32}, {kFloat64, kDLFloat, 64}};
  for (const Expected& e : table) {
    INFO(e.dtype);
    const Tensor t = arange(6, kFloat32).to(e.dtype).reshape({2, 3});
    DLManagedTensorVersioned* managed = to_dlpack_versioned(t);
    CHECK(managed->version.major == kDLPackVersion.major);
    CHECK(managed->flags == 0);
    CHECK(managed->dl_tensor.dtype.code == e.code);
    CHECK(managed->dl_tensor.dtype.bits == e.bits);
    const Tensor back = from_dlpack(managed);
    CHECK(back.dtype() == e.dtype);
    CHECK(back.raw_data() == t.raw_data());
    CHECK(back.to(kFloat64).to_vector<double>() == t.to(kFloat64).to_vector<double>());
  }
}

TEST_CASE("an export keeps the memory alive until the consumer's one deleter call",
          "[runtime][dlpack]") {
  DLManagedTensor* managed = nullptr;
  {
    const Tensor t = arange(5, kFloat64);
    managed = to_dlpack(t);
  }  // every Tensor is gone; the export still holds the storage
  const auto* data = static_cast<const double*>(managed->dl_tensor.data);
  CHECK(data[4] == 4.0);
  managed->deleter(managed);
  // An empty tensor exports a null data pointer, as DLPack asks.
  DLManagedTensor* empty = to_dlpack(zeros({0, 3}));
  CHECK(empty->dl_tensor.data == nullptr);
  CHECK(empty->dl_tensor.byte_offset == 0);
  CHECK(from_dlpack(empty).sizes() == Shape{0, 3});
}

TEST_CASE("from_dlpack of a hand-built tensor: odd strides, an offset, the deleter once",
          "[runtime][dlpack]") {
  // A 3 x 2 view at element offset 5 of 21 floats, strides (6, 3) elements.
  Producer<DLManagedTensor> p(iota_floats(21), {3, 2}, {6, 3}, 5 * sizeof(float));
  {
    const Tensor t = from_dlpack(&p.managed);
    CHECK(t.storage_offset() == 5);
    CHECK(t.strides() == Shape{6, 3});
    CHECK(t.to_vector<float>() == std::vector<float>{5, 8, 11, 14, 17, 20});
    const Tensor column = t.select(1, 1);  // a view shares the storage and its deleter
    const Tensor doubled = t.mul(Scalar(2.0));
    CHECK(doubled.to_vector<float>() == std::vector<float>{10, 16, 22, 28, 34, 40});
    CHECK(p.deleted == 0);
    CHECK(column.to_vector<float>() == std::vector<float>{8, 14, 20});
  }
  CHECK(p.deleted == 1);
  // Null strides: contiguous. A data pointer and a byte offset that are not whole elements each,
  // but whose sum is an aligned element, read from the byte the producer named.
  std::vector<float> floats(9);
  for (size_t i = 0; i < 9; ++i) floats[i] = static_cast<float>(i) + 0.5f;
  auto* bytes = reinterpret_cast<char*>(floats.data());
  Producer<DLManagedTensor> q({}, {2, 4}, {}, 2);
  q.managed.dl_tensor.data = bytes + 2;  // + 2 bytes of offset: floats[1]
  {
    const Tensor t = from_dlpack(&q.managed);
    CHECK(t.is_contiguous());
    CHECK(t.to_vector<float>() == std::vector<float>(floats.begin() + 1, floats.end()));
  }
  CHECK(q.deleted == 1);
  // Elements that are not aligned would be read in place by every kernel: refused.
  q.managed.dl_tensor.data = bytes + 1;
  CHECK_THROWS_WITH(from_dlpack(&q.managed),
                    Catch::Contains("is not aligned to its 4-byte float32 elements"));
  CHECK(q.deleted == 1);
  CHECK_THROWS_WITH(from_blob(bytes + 2, {2}, std::nullopt, nullptr),
                    Catch::Contains("[from_blob] the data") && Catch::Contains("is not aligned"));
}

TEST_CASE("a read-only import refuses every in-place write and exports read-only",
          "[runtime][dlpack]") {
  Producer<DLManagedTensorVersioned> p(iota_floats(6), {6}, {}, 0);
  p.managed.version = kDLPackVersion;
  p.managed.flags = DLPACK_FLAG_BITMASK_READ_ONLY;
  {
    Tensor t = from_dlpack(&p.managed);
    CHECK(t.add(Scalar(1.0)).to_vector<float>()[5] == 6.0f);  // reading is fine
    CHECK_THROWS_WITH(t.fill_(Scalar(0.0)), Catch::Contains("[fill_] writes a read-only tensor"));
    CHECK_THROWS_WITH(t.copy_(ones({6})), Catch::Contains("[copy_] writes a read-only tensor"));
    CHECK_THROWS_WITH(t += ones({6}), Catch::Contains("writes a read-only tensor"));
    CHECK_THROWS_WITH(t *= Scalar(2.0), Catch::Contains("writes a read-only tensor"));
    Tensor view = t.narrow(0, 1, 2);
    CHECK_THROWS_WITH(view.zero_(), Catch::Contains("read-only"));
    CHECK(p.memory == iota_floats(6));  // nothing was written
    CHECK_THROWS_WITH(to_dlpack(t), Catch::Contains("to_dlpack_versioned"));
    DLManagedTensorVersioned* again = to_dlpack_versioned(t);
    CHECK((again->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
    again->deleter(again);
    Tensor copy = t.clone();
    copy.fill_(Scalar(1.0));  // a clone is Tessera's own, writable memory
    CHECK(copy.to_vector<float>() == std::vector<float>(6, 1.0f));
  }
  CHECK(p.deleted == 1);
  // A read-only export of a writable tensor says so too.
  DLManagedTensorVersioned* ro = to_dlpack_versioned(ones({2}), /*read_only=*/true);
  CHECK((ro->flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0);
  CHECK_THROWS_WITH(from_dlpack(ro).fill_(Scalar(3.0)), Catch::Contains("read-only"));
}

TEST_CASE("from_dlpack refuses what it cannot represent and consumes nothing then",
          "[runtime][dlpack]") {
  Producer<DLManagedTensor> p(iota_floats(4), {4}, {}, 0);
  const auto refused = [&](const std::string& fragment) {
    CHECK_THROWS_WITH(from_dlpack(&p.managed), Catch::Contains(fragment));
    CHECK(p.deleted == 0);
  };
  p.managed.dl_tensor.dtype = DLDataType{kDLFloat, 32, 4};
  CHECK_THROWS_AS(from_dlpack(&p.managed), DTypeError);
  refused("has 4 lanes");
  p.managed.dl_tensor.dtype = DLDataType{kDLComplex, 64, 1};
  refused("(kDLComplex) with 64 bits has no Tessera dtype; supported: bool (kDLBool 8)");
  p.managed.dl_tensor.dtype = DLDataType{kDLInt, 16, 1};
  refused("has no Tessera dtype");
  p.managed.dl_tensor.dtype = DLDataType{kDLFloat, 32, 1};
  p.managed.dl_tensor.device = DLDevice{kDLOpenCL, 0};
  CHECK_THROWS_AS(from_dlpack(&p.managed), DeviceError);
  refused("imports kDLCPU (1) and kDLCUDA (2)");
  p.managed.dl_tensor.device = DLDevice{kDLCUDA, 64};
  CHECK_THROWS_AS(from_dlpack(&p.managed), DeviceError);
  refused("CUDA device index 64 is out of range");
  p.managed.dl_tensor.device = DLDevice{kDLCPU, 0};
  p.strides = {-1};
  p.managed.dl_tensor.strides = p.strides.data();
  refused("negative strides [-1]");
  p.managed.dl_tensor.strides = nullptr;
  p.managed.dl_tensor.ndim = -1;
  refused("DLTensor.ndim is -1");
  p.managed.dl_tensor.ndim = 1;
  p.managed.dl_tensor.data = nullptr;
  refused("null data pointer for a tensor of shape [4]");
  CHECK_THROWS_WITH(from_dlpack(static_cast<DLManagedTensor*>(nullptr)),
                    Catch::Contains("null DLManagedTensor"));
  Producer<DLManagedTensorVersioned> v(iota_floats(4), {4}, {}, 0);
  v.managed.version = DLPackVersion{2, 0};
  CHECK_THROWS_WITH(from_dlpack(&v.managed),
                    Catch::Contains("DLPack version 2.0 is not supported: Tessera reads 1.x"));
  CHECK(v.deleted == 0);
}

TEST_CASE("to_dlpack of a DTensor asks for its local shard or the whole tensor",
          "[runtime][dlpack]") {
  dist::run_threads(2, [](dist::ProcessGroupPtr) {
    const DeviceMesh mesh(DeviceType::CPU, {2});
    const DTensor d = distribute_tensor(ones({4, 2}), mesh, {Shard(0)});
    CHECK_THROWS_WITH(to_dlpack(d), Catch::Contains("global shape [4, 2]") &&
                                        Catch::Contains("to_local()") &&
                                        Catch::Contains("full_tensor()"));
    DLManagedTensor* local = to_dlpack(d.to_local());
    CHECK(local->dl_tensor.shape[0] == 2);
    local->deleter(local);
  });
}

TEST_CASE("from_blob: no copy, the deleter once, views, in-place ops and autograd",
          "[runtime][dlpack]") {
  std::vector<float> memory = iota_floats(12);
  int deleted = 0;
  void* deleted_pointer = nullptr;
  {
    Tensor t = from_blob(
        memory.data(), {3, 4}, std::nullopt,
        [&](void* p) {
          ++deleted;
          deleted_pointer = p;
        },
        TensorOptions().dtype(kFloat32));
    CHECK(t.raw_data() == memory.data());
    Tensor row = t.select(0, 1);
    row.fill_(Scalar(-1.0));  // writes the caller's memory
    CHECK(memory[4] == -1.0f);
    t += ones({3, 4});
    CHECK(memory[0] == 1.0f);
    // Strided: every other column.
    const Tensor cols = from_blob(memory.data(), {3, 2}, Shape{4, 2}, nullptr);
    CHECK(cols.to_vector<float>() == std::vector<float>{1, 3, 0, 0, 9, 11});
    CHECK(deleted == 0);
  }
  CHECK(deleted == 1);
  CHECK(deleted_pointer == memory.data());
  // A leaf that requires grad: its gradient is that of a tensor Tessera allocated.
  std::vector<double> x{1.0, 2.0, 3.0};
  Tensor leaf = from_blob(x.data(), {3}, std::nullopt, nullptr,
                          TensorOptions().dtype(kFloat64).requires_grad());
  CHECK(leaf.requires_grad());
  leaf.mul(leaf).sum().backward();
  CHECK(leaf.grad().to_vector<double>() == std::vector<double>{2.0, 4.0, 6.0});
}

TEST_CASE("from_blob errors leave the memory with the caller", "[runtime][dlpack]") {
  float memory[4] = {};
  int deleted = 0;
  const auto count = [&](void*) { ++deleted; };
  CHECK_THROWS_WITH(from_blob(nullptr, {2}, std::nullopt, count),
                    Catch::Contains("[from_blob] null data pointer for a tensor of shape [2]"));
  CHECK_THROWS_WITH(from_blob(memory, {2, -1}, std::nullopt, count), Catch::Contains("from_blob"));
  CHECK_THROWS_WITH(from_blob(memory, {2, 2}, Shape{1}, count),
                    Catch::Contains("got strides [1] for sizes [2, 2]"));
  CHECK_THROWS_WITH(from_blob(memory, {2}, Shape{-1}, count), Catch::Contains("negative strides"));
  CHECK_THROWS_AS(
      from_blob(memory, {4}, std::nullopt, count, TensorOptions().dtype(kInt64).requires_grad()),
      DTypeError);
  CHECK_THROWS_AS(from_blob(memory, {4}, std::nullopt, count, Device::cuda(7)), DeviceError);
  CHECK_THROWS_WITH(from_blob(memory, {int64_t{1} << 62, 4}, std::nullopt, count),
                    Catch::Contains("from_blob"));
  CHECK(deleted == 0);
  // An empty tensor may have a null pointer.
  CHECK(from_blob(nullptr, {0, 5}, std::nullopt, count).numel() == 0);
  CHECK(deleted == 1);
}
