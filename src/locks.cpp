// SPDX-License-Identifier: MIT
#include "locks.hpp"

#include <thread>

namespace rdmadl::detail {

// Marks the mutex contended (2) and sleeps until it is let go; whoever
// takes it then keeps it marked, so its unlock() wakes the next waiter.
void light_mutex::lock_contended(int c) noexcept {
  if (c != 2)
    c = s_.exchange(2, std::memory_order_acquire);
  while (c != 0) {
    s_.wait(2, std::memory_order_relaxed);
    c = s_.exchange(2, std::memory_order_acquire);
  }
}

void rw_gate::pause() noexcept {
  std::this_thread::yield();
}

} // namespace rdmadl::detail
