// SPDX-License-Identifier: MIT
// result<T> semantics and rdmadl's error categories. Needs no stack.
#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

using namespace rdmadl;

namespace {
result<int> half(int v) {
  if (v % 2)
    return std::errc::invalid_argument;
  return v / 2;
}
struct counted {
  static inline int live = 0;
  int v;
  explicit counted(int x) : v(x) { live++; }
  counted(const counted &o) : v(o.v) { live++; }
  counted(counted &&o) noexcept : v(o.v) { live++; }
  ~counted() { live--; }
};
} // namespace

TEST_CASE("error: result holds a value or an error, never both") {
  auto a = half(4);
  REQUIRE(a.has_value());
  CHECK(static_cast<bool>(a));
  CHECK(*a == 2);
  CHECK(a.value() == 2);
  CHECK_FALSE(a.error());
  auto b = half(3);
  REQUIRE_FALSE(b);
  CHECK(b.error() == std::errc::invalid_argument);
  CHECK(b.error().category() == std::generic_category());
  CHECK(b.value_or(-1) == -1);
  CHECK(a.value_or(-1) == 2);
}

TEST_CASE("error: result manages the lifetime of its value") {
  {
    result<counted> r(counted(5));
    CHECK(counted::live == 1);
    result<counted> c = r;
    CHECK(counted::live == 2);
    result<counted> m = std::move(c);
    CHECK(m->v == 5);
    m = result<counted>(std::errc::io_error);
    CHECK(counted::live == 2); // r and the moved-from c
    CHECK(m.error() == std::errc::io_error);
  }
  CHECK(counted::live == 0);
  result<std::unique_ptr<int>> u(std::make_unique<int>(7));
  auto moved = std::move(u).value();
  CHECK(*moved == 7);
}

TEST_CASE("error: result<void> is success or an error") {
  result<void> ok;
  CHECK(ok.has_value());
  CHECK_FALSE(ok.error());
  result<void> bad(errc::timed_out);
  CHECK_FALSE(bad);
  CHECK(bad.error() == errc::timed_out);
  CHECK(bad.error() == std::errc::timed_out);
}

TEST_CASE("error: rdmadl errc values compare equal to the closest std::errc") {
  std::error_code no_dev = errc::no_devices;
  CHECK(no_dev == std::errc::no_such_device);
  // No device also means RDMA cannot work here (the one error contract).
  CHECK(no_dev == std::errc::operation_not_supported);
  CHECK(std::string(no_dev.category().name()) == "rdmadl");
  CHECK(no_dev.message() == "no RDMA device found");
  CHECK(std::error_code(errc::no_kernel_support) == std::errc::operation_not_supported);
  for (errc e : {errc::empty_span, errc::out_of_range, errc::bad_size, errc::bad_magic,
                 errc::newer_format, errc::batch_full, errc::empty_object, errc::no_peers,
                 errc::endpoint_count, errc::unknown_handle, errc::slice_too_long, errc::over_limit,
                 errc::bad_rank, errc::one_peer_only}) {
    std::error_code ec = e;
    INFO(ec.message());
    CHECK(ec == std::errc::invalid_argument);
    CHECK(ec.message().find("unknown") == std::string::npos);
  }
  for (errc e : {errc::gid_mismatch, errc::no_lid, errc::bad_peer_qpn, errc::bad_peer_mtu}) {
    std::error_code ec = e;
    INFO(ec.message());
    CHECK(ec.message().find("unknown") == std::string::npos);
  }
  CHECK(std::error_code(errc::gid_mismatch) == std::errc::network_unreachable);
  CHECK(std::error_code(errc::no_lid) == std::errc::network_unreachable);
  CHECK(std::error_code(errc::bad_peer_qpn) == std::errc::invalid_argument);
  CHECK(std::error_code(errc::memlock_limit) == std::errc::not_enough_memory);
  CHECK(std::error_code(errc::memlock_limit).message().find("ulimit -l") != std::string::npos);
  CHECK(std::error_code(errc::memlock_denied).message().find("ulimit -l") != std::string::npos);
  CHECK(std::error_code(errc::rejected) == std::errc::connection_refused);
}

TEST_CASE("error: work-completion statuses have their own category") {
  std::error_code flush(5, wc_category()); // IBV_WC_WR_FLUSH_ERR
  CHECK(std::string(flush.category().name()) == "rdmadl.wc");
  CHECK(flush.message() == "Work Request Flushed Error");
  CHECK(flush == std::errc::operation_canceled);
  std::error_code retry(12, wc_category()); // IBV_WC_RETRY_EXC_ERR
  CHECK(retry.message() == "transport retry counter exceeded");
  CHECK(retry == std::errc::timed_out);
  std::error_code generic(5, std::generic_category());
  CHECK(flush != generic);
}

namespace {
// What body() writes to stderr in a child process, and whether it died of
// SIGABRT.
struct death {
  bool aborted = false;
  std::string err;
};
death run_dying(const std::function<void()> &body) {
  int p[2];
  REQUIRE(::pipe(p) == 0);
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    // The abort must end the child: doctest's own SIGABRT handler would run
    // (and, under TSan, be reported as signal-unsafe) instead.
    std::signal(SIGABRT, SIG_DFL);
    ::dup2(p[1], 2);
    ::close(p[0]);
    body();
    ::_exit(0); // not reached when body aborts
  }
  ::close(p[1]);
  death d;
  char buf[512];
  for (ssize_t k; (k = ::read(p[0], buf, sizeof buf)) > 0;)
    d.err.append(buf, static_cast<std::size_t>(k));
  ::close(p[0]);
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  d.aborted = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
  return d;
}
} // namespace

TEST_CASE("error: value() of an error aborts naming the caller's file, line and function") {
  auto where = [](int line) { return "error_test.cpp:" + std::to_string(line) + ": in "; };
  constexpr int at = __LINE__ + 3;
  auto d = run_dying([] {
    result<int> r = half(3);
    std::printf("%d\n", r.value());
  });
  INFO(d.err);
  CHECK(d.aborted);
  CHECK(d.err.find(where(at)) != std::string::npos);
  CHECK(d.err.find("Invalid argument") != std::string::npos);
  CHECK(d.err.find("generic") != std::string::npos);

  constexpr int at_void = __LINE__ + 3;
  auto v = run_dying([] {
    result<void> r(errc::timed_out);
    r.value();
  });
  INFO(v.err);
  CHECK(v.aborted);
  CHECK(v.err.find(where(at_void)) != std::string::npos);
  CHECK(v.err.find("rdmadl: timed out") != std::string::npos);

  // The rvalue and const overloads too.
  constexpr int at_rvalue = __LINE__ + 1;
  auto m = run_dying([] { (void)half(5).value(); });
  CHECK(m.aborted);
  CHECK(m.err.find(where(at_rvalue)) != std::string::npos);
  constexpr int at_const = __LINE__ + 3;
  auto c = run_dying([] {
    const result<int> r = half(7);
    (void)r.value();
  });
  CHECK(c.aborted);
  CHECK(c.err.find(where(at_const)) != std::string::npos);
}

TEST_CASE("error: last_error_detail() is empty until a documented call fails") {
  CHECK(last_error_detail().empty());
}
