// SPDX-License-Identifier: MIT
// The TCP engine's region table (src/region_table.hpp) on its own: what a
// region's end waits for, and what it must not wait for. A blocking use
// (use_blocking(): a recv(2) that waits for a peer's payload) holds its one
// region: that region's end waits for it, every other region's start and
// end, and every other use, goes on meanwhile.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "region_table.hpp"

using namespace std::chrono_literals;
using rdmadl::access;
using rdmadl::detail::region_table;
using kind = region_table::key_kind;

namespace {
// A gate a blocking use waits at until the test opens it (or 10 s pass:
// the case then fails rather than hangs).
struct latch {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  bool wait() {
    std::unique_lock l(m);
    return cv.wait_for(l, 10s, [&] { return open; });
  }
  void release() {
    {
      std::lock_guard l(m);
      open = true;
    }
    cv.notify_all();
  }
};
constexpr std::uint64_t a_addr = 0x10000, b_addr = 0x20000, c_addr = 0x30000;
} // namespace

TEST_CASE("region table: a use checks key, range and right") {
  region_table t;
  t.add(11, 12, a_addr, 4096, access::remote_write);
  int calls = 0;
  auto fn = [&] { calls++; };
  CHECK(t.use(kind::remote, 12, a_addr, 4096, access::remote_write, fn));
  CHECK(t.use(kind::local, 11, a_addr + 100, 10, access::local, fn));
  CHECK_FALSE(t.use(kind::remote, 12, a_addr + 1, 4096, access::remote_write, fn)); // past its end
  CHECK_FALSE(t.use(kind::remote, 12, a_addr, 8, access::remote_read, fn));         // no such right
  CHECK_FALSE(t.use(kind::remote, 11, a_addr, 8, access::remote_write, fn)); // an lkey as rkey
  CHECK(t.use_blocking(kind::remote, 12, a_addr, 64, access::remote_write, fn));
  CHECK_FALSE(t.use_blocking(kind::remote, 12, a_addr + 4090, 64, access::remote_write, fn));
  CHECK(calls == 3);
  t.remove(11);
  CHECK_FALSE(t.use(kind::remote, 12, a_addr, 8, access::remote_write, fn));
  CHECK_FALSE(t.use_blocking(kind::local, 11, a_addr, 8, access::local, fn));
  CHECK(calls == 3);
}

TEST_CASE("region table: a blocking use holds its region only") {
  region_table t;
  t.add(1, 101, a_addr, 4096, access::remote_write);
  t.add(2, 102, b_addr, 4096, access::remote_write);
  latch gate;
  std::atomic<bool> inside{false}, returned{false};
  bool released_in_time = false, allowed = false;
  std::thread user([&] { // (no assertion in this thread: the case checks after join())
    allowed = t.use_blocking(kind::remote, 101, a_addr, 4096, access::remote_write, [&] {
      inside = true;
      released_in_time = gate.wait();
      returned = true;
    });
  });
  while (!inside)
    std::this_thread::yield();
  // Another region starts, is used and ends while the use blocks: none of
  // it waits for that use (it would wait for good: the gate opens after).
  t.add(3, 103, c_addr, 4096, access::remote_read);
  bool used = false;
  CHECK(t.use(kind::remote, 103, c_addr, 8, access::remote_read, [&] { used = true; }));
  CHECK(used);
  t.remove(2);
  t.remove(3);
  CHECK_FALSE(returned);
  // The held region's end waits for the use to return, and from the moment
  // it began no new use of that region starts.
  auto ending = std::async(std::launch::async, [&] {
    t.remove(1);
    return returned.load();
  });
  CHECK(ending.wait_for(50ms) == std::future_status::timeout);
  gate.release();
  CHECK(ending.get()); // it ended only after the use had returned
  user.join();
  CHECK(allowed);
  CHECK(released_in_time);
  CHECK_FALSE(t.use(kind::remote, 101, a_addr, 8, access::remote_write, [] {}));
}

TEST_CASE("region table: two blocking uses of one region both hold it") {
  region_table t;
  t.add(1, 101, a_addr, 4096, access::remote_write);
  latch first, second;
  std::atomic<int> inside{0}, returned{0};
  auto blocking = [&](latch &l) {
    return std::thread([&] {
      (void)t.use_blocking(kind::remote, 101, a_addr, 8, access::remote_write, [&] {
        inside++;
        (void)l.wait();
        returned++;
      });
    });
  };
  std::thread u1 = blocking(first), u2 = blocking(second);
  while (inside < 2)
    std::this_thread::yield();
  auto ending = std::async(std::launch::async, [&] {
    t.remove(1);
    return returned.load();
  });
  first.release();
  CHECK(ending.wait_for(50ms) == std::future_status::timeout); // the second still holds it
  second.release();
  CHECK(ending.get() == 2);
  u1.join();
  u2.join();
}
