// save and async_save (checkpoint/checkpoint.h): stage, then write and commit.

#include <thread>

#include "tessera/checkpoint/checkpoint.h"
#include "tessera/checkpoint/detail/pending_save.h"
#include "tessera/checkpoint/detail/rank_agreement.h"
#include "tessera/checkpoint/detail/save_job.h"

namespace tessera::checkpoint {

namespace detail {
namespace {

// This rank thread's async save in flight, joined before the next save or load and when the
// thread ends.
struct PendingSave {
  std::thread writer;
  ~PendingSave() {
    if (writer.joinable()) writer.join();
  }
};

PendingSave& pending_save() {
  thread_local PendingSave pending;
  return pending;
}

// The process group of this rank's background writers: a copy of the world (made once per world,
// collectively), so that their collectives never share a group with the training loop's.
dist::ProcessGroupPtr writer_group(const dist::ProcessGroupPtr& world) {
  thread_local std::weak_ptr<dist::ProcessGroup> for_world;
  thread_local dist::ProcessGroupPtr group;
  if (!group || for_world.lock() != world) {
    std::vector<int> everyone(static_cast<size_t>(world->size()));
    for (int r = 0; r < world->size(); ++r) everyone[static_cast<size_t>(r)] = r;
    group = world->split(everyone);
    for_world = world;
  }
  return group;
}

}  // namespace

void wait_for_pending_save() {
  PendingSave& pending = pending_save();
  if (pending.writer.joinable()) pending.writer.join();
}

}  // namespace detail

void save(const StateDict& state, const std::string& dir) {
  detail::wait_for_pending_save();
  detail::SaveJob job = detail::stage_save(state, dir, detail::world_or_null(), /*copy=*/false);
  detail::write_and_commit(job);
}

std::future<void> async_save(const StateDict& state, const std::string& dir) {
  detail::wait_for_pending_save();
  const dist::ProcessGroupPtr world = detail::world_or_null();
  detail::SaveJob job =
      detail::stage_save(state, dir, world ? detail::writer_group(world) : nullptr, /*copy=*/true);
  auto promise = std::make_shared<std::promise<void>>();
  std::future<void> done = promise->get_future();
  detail::pending_save().writer = std::thread([job = std::move(job), promise]() mutable {
    try {
      detail::write_and_commit(job);
      promise->set_value();
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  return done;
}

}  // namespace tessera::checkpoint
