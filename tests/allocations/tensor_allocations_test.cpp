// Heap allocations per new tensor (See Note [One allocation per new tensor] in
// runtime/tensor.cpp), counted by replacing the global operator new in this test executable.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <new>
#include <thread>

#include "tessera/tessera.h"

namespace {
thread_local int64_t t_operator_new_calls = 0;
}  // namespace

namespace {
void* counted_malloc(size_t bytes) {
  ++t_operator_new_calls;
  return std::malloc(bytes == 0 ? 1 : bytes);
}
}  // namespace

// Every non-aligned form is replaced, so that each pairs with its own delete here: a sanitizer
// runtime brings its own operator new[] and nothrow forms (which, unlike libstdc++'s, do not
// call the plain operator new), and freeing their blocks with std::free is a mismatch it reports.
// The aligned forms stay the runtime's, new and delete alike. Not inlined: GCC would otherwise
// see free() of a pointer from operator new and warn (-Wmismatched-new-delete), though the pairs
// are this program's own malloc / free.
[[gnu::noinline]] void* operator new(size_t bytes) {
  if (void* p = counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](size_t bytes) {
  if (void* p = counted_malloc(bytes)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new(size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes);
}
[[gnu::noinline]] void* operator new[](size_t bytes, const std::nothrow_t&) noexcept {
  return counted_malloc(bytes);
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

using namespace tessera;

namespace {

// The calling thread's operator new calls made by f.
template <typename F>
int64_t heap_allocations(const F& f) {
  const int64_t before = t_operator_new_calls;
  f();
  return t_operator_new_calls - before;
}

}  // namespace

TEST_CASE("a new tensor is one heap allocation", "[allocations]") {
  // Warm the caching allocator's free list for these sizes: data blocks are reused, not counted.
  for (int i = 0; i < 3; ++i) {
    (void)empty({2, 3});
    (void)empty({2, 3, 4, 5, 6, 7});
  }
  Tensor t;
  CHECK(heap_allocations([&] { t = empty({2, 3}); }) == 1);
  CHECK(heap_allocations([&] { t = empty({2, 3, 4, 5, 6, 7}); }) == 1);  // six dims stay inline
  // Beyond kInlineDims the sizes and strides each take a heap array.
  const Shape seven_dims{1, 1, 1, 1, 1, 1, 2};
  (void)empty(seven_dims);
  CHECK(heap_allocations([&] { t = empty(seven_dims); }) == 3);
  const Tensor base = zeros({4, 6});
  Tensor v;
  CHECK(heap_allocations([&] { v = base.view({6, 4}); }) == 1);
  CHECK(heap_allocations([&] { v = base.t(); }) == 1);
  const Tensor a = ones({64, 64}), b = ones({64, 64});
  Tensor c;
  for (int i = 0; i < 3; ++i) {
    c = a + b;
    c = a.exp();
  }
  // Pointwise ops make their output and nothing else. (Reductions and matmul still allocate
  // bookkeeping of their own: dims and batch-offset vectors, a view for the squeezed output.)
  CHECK(heap_allocations([&] { c = a + b; }) == 1);
  CHECK(heap_allocations([&] { c = a.exp(); }) == 1);
}

TEST_CASE("a view outlives its base tensor and another thread frees it", "[allocations]") {
  Tensor view;
  {
    const Tensor base = arange(0, 12).reshape({3, 4});
    view = base.narrow(1, 1, 2);
  }
  CHECK(view.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 5, 6, 9, 10});
  // The base's block is shared by its impl and its Storage: the last one is freed on another
  // thread here (ASan checks the block is freed exactly once).
  std::thread([v = std::move(view)]() mutable { v = Tensor(); }).join();
  Tensor kept;
  std::thread([&] { kept = ones({5}); }).join();
  CHECK(kept.sum().item().to<double>() == 5.0);
}
