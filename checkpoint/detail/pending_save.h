#pragma once
// The calling rank's async_save in flight (checkpoint/save.cpp).

namespace tessera::checkpoint::detail {

// Returns once this rank thread's pending async_save (if any) has finished; its errors stay in
// its future.
void wait_for_pending_save();

}  // namespace tessera::checkpoint::detail
