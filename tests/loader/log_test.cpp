// SPDX-License-Identifier: MIT
// rdmadl_set_log_handler under concurrency: threads whose calls log (a
// function missing from the loaded library logs a debug line per call) while
// another thread swaps handlers. Each handler is always called with its own
// context, never after the call that replaced it returned, and nested calls
// are refused. Runs in the absent environment; the TSan tier runs it too.
#include <atomic>
#include <cerrno>
#include <string>
#include <thread>
#include <vector>

#include <infiniband/verbs.h>

#include "rdmadl/loader.h"
#include <doctest/doctest.h>

namespace {

struct sink {
  std::atomic<bool> retired{false};
  std::atomic<long> calls{0}, late{0}, wrong_level{0}, bad_line{0};
};

void record(int level, const char *line, void *ctx) {
  auto *s = static_cast<sink *>(ctx);
  s->calls.fetch_add(1, std::memory_order_relaxed);
  if (s->retired.load(std::memory_order_acquire))
    s->late.fetch_add(1, std::memory_order_relaxed);
  if (level != RDMADL_LOG_DEBUG)
    s->wrong_level.fetch_add(1, std::memory_order_relaxed);
  if (std::string(line).find("ibv_fork_init@IBVERBS_1.1: not in the loaded library") != 0)
    s->bad_line.fetch_add(1, std::memory_order_relaxed);
}

std::atomic<int> nested_result{-1};
void nested(int, const char *, void *) {
  nested_result.store(rdmadl_set_log_handler(RDMADL_LOG_DEBUG, nullptr, nullptr));
}

} // namespace

TEST_CASE("log: a replaced handler never runs again, each with its own context") {
  REQUIRE(rdmadl_load() == EOPNOTSUPP); // the absent environment: every call misses
  constexpr int kSinks = 64;
  std::vector<sink> sinks(kSinks);
  std::atomic<bool> stop{false};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; t++)
    callers.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed))
        ibv_fork_init();
    });
  for (int i = 0; i < kSinks; i++) {
    REQUIRE(rdmadl_set_log_handler(RDMADL_LOG_DEBUG, record, &sinks[i]) == 0);
    if (i > 0)
      sinks[i - 1].retired.store(true, std::memory_order_release);
    while (sinks[i].calls.load(std::memory_order_relaxed) < 20)
      std::this_thread::yield();
  }
  REQUIRE(rdmadl_set_log_handler(RDMADL_LOG_DEBUG, nullptr, nullptr) == 0);
  sinks[kSinks - 1].retired.store(true, std::memory_order_release);
  for (int spin = 0; spin < 1000; spin++)
    ibv_fork_init();
  stop = true;
  for (auto &t : callers)
    t.join();
  for (int i = 0; i < kSinks; i++) {
    CAPTURE(i);
    CHECK(sinks[i].calls.load() >= 20);
    CHECK(sinks[i].late.load() == 0);
    CHECK(sinks[i].wrong_level.load() == 0);
    CHECK(sinks[i].bad_line.load() == 0);
  }
}

TEST_CASE("log: a level above the handler's is not delivered") {
  sink s;
  REQUIRE(rdmadl_set_log_handler(RDMADL_LOG_INFO, record, &s) == 0);
  ibv_fork_init(); // a debug line
  CHECK(s.calls.load() == 0);
  REQUIRE(rdmadl_set_log_handler(RDMADL_LOG_DEBUG, record, &s) == 0);
  ibv_fork_init();
  CHECK(s.calls.load() == 1);
  CHECK(rdmadl_set_log_handler(-1, record, &s) == 0); // nothing at all
  ibv_fork_init();
  CHECK(s.calls.load() == 1);
  REQUIRE(rdmadl_set_log_handler(0, nullptr, nullptr) == 0);
}

TEST_CASE("log: setting a handler from inside a handler is refused") {
  REQUIRE(rdmadl_set_log_handler(RDMADL_LOG_DEBUG, nested, nullptr) == 0);
  ibv_fork_init();
  CHECK(nested_result.load() == EDEADLK);
  REQUIRE(rdmadl_set_log_handler(0, nullptr, nullptr) == 0);
}
