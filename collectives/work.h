#pragma once
// Work: the handle of an issued collective (torch.distributed.Work).

#include <memory>

namespace tessera::dist {

// A collective in flight. Synchronous calls return an already completed Work; with
// `async_op = true` the call returns at once and the collective progresses in the background
// (CPU backends: on the group's progress thread, in issue order; a stream-ordered backend: on
// its stream). Until wait() returns, the tensors passed to the call must stay alive and must not
// be read or written by the caller.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished; rethrows its error (CommError on a failure or timeout
  // of the group, Error on arguments the ranks disagree on). Later calls return (or rethrow) again.
  virtual void wait() = 0;
  // Whether the collective has finished, successfully or not. Never blocks.
  virtual bool is_completed() const = 0;
};

using WorkPtr = std::shared_ptr<Work>;

// A Work that has already finished successfully.
WorkPtr completed_work();

}  // namespace tessera::dist
