// SPDX-License-Identifier: MIT
// Two locks for the TCP engine's data path, where the library's are a
// call each with more work than the path needs: it takes each a few times
// per message. Both are built on std::atomic (so ThreadSanitizer sees their
// ordering) and sleep, when they must, through std::atomic::wait() or a
// yield.
#ifndef RDMADL_SRC_LOCKS_HPP
#define RDMADL_SRC_LOCKS_HPP

#include <atomic>
#include <cstdint>

namespace rdmadl::detail {

// A mutex (Lockable, for std::lock_guard, std::unique_lock and
// std::condition_variable_any) whose uncontended lock and unlock are one
// atomic operation each, inline: 0 free, 1 held, 2 held with a thread
// waiting (unlock() then wakes one).
class light_mutex {
public:
  void lock() noexcept {
    int c = 0;
    if (!s_.compare_exchange_strong(c, 1, std::memory_order_acquire, std::memory_order_relaxed))
      lock_contended(c);
  }
  bool try_lock() noexcept {
    int c = 0;
    return s_.compare_exchange_strong(c, 1, std::memory_order_acquire, std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (s_.exchange(0, std::memory_order_release) == 2)
      s_.notify_one();
  }

private:
  void lock_contended(int c) noexcept; // locks.cpp
  std::atomic<int> s_{0};
};

// A reader-writer lock whose shared side is one atomic add and one atomic
// subtract (std::shared_mutex's are a library call each, with more work):
// readers are counted in s_; a writer (one at a time: region_table holds
// its own mutex around lock()) sets the top bit, so no reader enters, and
// waits, yielding, until the readers in it have left. Readers hold it for
// one non-blocking socket call or a copy, writers for a hash update.
class rw_gate {
public:
  void lock_shared() noexcept {
    std::uint32_t v = s_.load(std::memory_order_relaxed);
    for (;;) {
      if (v & writer) {
        pause();
        v = s_.load(std::memory_order_relaxed);
      } else if (s_.compare_exchange_weak(v, v + 1, std::memory_order_acquire,
                                          std::memory_order_relaxed)) {
        return;
      }
    }
  }
  void unlock_shared() noexcept { s_.fetch_sub(1, std::memory_order_release); }
  void lock() noexcept {
    std::uint32_t v = s_.fetch_or(writer, std::memory_order_acquire);
    while ((v & ~writer) != 0) {
      pause();
      v = s_.load(std::memory_order_acquire);
    }
  }
  void unlock() noexcept { s_.fetch_and(~writer, std::memory_order_release); }

private:
  static constexpr std::uint32_t writer = 1u << 31;
  static void pause() noexcept; // std::this_thread::yield() (locks.cpp)
  std::atomic<std::uint32_t> s_{0};
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_LOCKS_HPP
