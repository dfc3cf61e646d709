// SPDX-License-Identifier: MIT
// The out-of-band exchange over loopback TCP: both sides, timeouts (none at
// all included), every address of a name, a listener that outlives strays
// until its deadline, the detail each failure names (call, side, host, port),
// and the kept connection: streams of blobs, limits, timeouts that lose
// nothing, peers that close or send a malformed length.
#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <netdb.h>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <utility>

#include "rdmadl/rdmadl.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

// A name that resolves to ::1, then 127.0.0.1 (or the reverse), whatever the
// host's resolver says: this program's getaddrinfo answers it and passes
// every other name on to the C library's. rdmadl's lookup calls this one.
namespace {
constexpr const char *dual_v6_first = "oob-test-v6-first.invalid";
constexpr const char *dual_v4_first = "oob-test-v4-first.invalid";
constexpr const char *nowhere = "oob-test-nowhere.invalid"; // resolves to nothing
using getaddrinfo_fn = int (*)(const char *, const char *, const addrinfo *, addrinfo **);
getaddrinfo_fn next_getaddrinfo() {
  static auto f = reinterpret_cast<getaddrinfo_fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
  return f;
}
} // namespace

extern "C" __attribute__((visibility("default"))) int
getaddrinfo(const char *node, const char *service, const addrinfo *hints, addrinfo **res) {
  if (node && !std::strcmp(node, nowhere))
    return EAI_NONAME;
  bool v6_first = node && !std::strcmp(node, dual_v6_first);
  if (!node || (!v6_first && std::strcmp(node, dual_v4_first) != 0))
    return next_getaddrinfo()(node, service, hints, res);
  addrinfo h = hints ? *hints : addrinfo{};
  h.ai_flags |= AI_NUMERICHOST;
  addrinfo *a = nullptr, *b = nullptr;
  int rc = next_getaddrinfo()(v6_first ? "::1" : "127.0.0.1", service, &h, &a);
  if (rc != 0)
    return rc;
  rc = next_getaddrinfo()(v6_first ? "127.0.0.1" : "::1", service, &h, &b);
  if (rc != 0) {
    freeaddrinfo(a);
    return rc;
  }
  addrinfo *last = a;
  while (last->ai_next)
    last = last->ai_next;
  last->ai_next = b; // freeaddrinfo frees the chain node by node
  *res = a;
  return 0;
}

namespace {
// A TCP port free on both 127.0.0.1 and ::1 just now.
std::uint16_t free_port() {
  for (int attempt = 0; attempt < 20; attempt++) {
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(s >= 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0);
    ::close(s);
    int s6 = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (s6 < 0)
      return ntohs(a.sin_port);
    sockaddr_in6 a6{};
    a6.sin6_family = AF_INET6;
    a6.sin6_port = a.sin_port;
    a6.sin6_addr = in6addr_loopback;
    int rc = ::bind(s6, reinterpret_cast<sockaddr *>(&a6), sizeof a6);
    ::close(s6);
    if (rc == 0 || errno == EADDRNOTAVAIL)
      return ntohs(a.sin_port);
  }
  FAIL("no free port");
  return 0;
}

bool has_ipv6_loopback() {
  int s = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (s < 0)
    return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  bool ok = ::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

std::vector<std::byte> bytes(std::size_t n, int seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; i++)
    v[i] = static_cast<std::byte>((i * 7 + static_cast<std::size_t>(seed)) & 0xff);
  return v;
}

// Runs a listener on LISTEN_HOST and a client on CONNECT_HOST with the given
// timeouts; both must get the other's blob.
void both_sides(const char *listen_host, const char *connect_host, std::chrono::milliseconds lt,
                std::chrono::milliseconds ct) {
  INFO("listener on \"" << std::string(listen_host) << "\", client to \""
                        << std::string(connect_host) << "\"");
  const std::uint16_t port = free_port();
  auto a = bytes(100, 1), b = bytes(3000, 2);
  result<std::vector<std::byte>> got_by_server = errc::timed_out;
  std::thread server([&] { got_by_server = oob::exchange(listen_host, port, true, a, lt); });
  auto got_by_client = oob::exchange(connect_host, port, false, b, ct);
  server.join();
  REQUIRE_MESSAGE(got_by_client, got_by_client.error().message());
  REQUIRE_MESSAGE(got_by_server, got_by_server.error().message());
  CHECK(*got_by_client == a);
  CHECK(*got_by_server == b);
}

// A plain TCP client to 127.0.0.1:port (retrying until it listens, 5 s), or
// -1. (No REQUIRE: the caller has a thread to join first.)
int raw_connect(std::uint16_t port) {
  for (int i = 0; i < 250; i++) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0)
      return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0)
      return s;
    ::close(s);
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

void write_to(int s, const void *p, std::size_t n) {
  if (s >= 0)
    (void)!::write(s, p, n);
}

void close_fd(int s) {
  if (s >= 0)
    ::close(s);
}
} // namespace

TEST_CASE("oob: two sides exchange their blobs over loopback TCP") {
  const std::uint16_t port = free_port();
  std::vector<std::byte> a(100), b(3000);
  for (std::size_t i = 0; i < a.size(); i++)
    a[i] = static_cast<std::byte>(i);
  for (std::size_t i = 0; i < b.size(); i++)
    b[i] = static_cast<std::byte>(255 - i % 256);
  result<std::vector<std::byte>> got_by_server = errc::timed_out;
  std::thread server([&] { got_by_server = oob::exchange("127.0.0.1", port, true, a, 5s); });
  auto got_by_client = oob::exchange("127.0.0.1", port, false, b, 5s);
  server.join();
  REQUIRE(got_by_client);
  REQUIRE(got_by_server);
  CHECK(*got_by_client == a);
  CHECK(*got_by_server == b);
}

TEST_CASE("oob: no peer in time, on either side, and an oversized blob") {
  const std::uint16_t port = free_port();
  std::vector<std::byte> blob(16);
  auto start = std::chrono::steady_clock::now();
  auto r = oob::exchange("127.0.0.1", port, false, blob, 200ms);
  CHECK(r.error() == errc::timed_out);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  const std::string p = std::to_string(port);
  CHECK(last_error_detail() == "oob::exchange: connect to 127.0.0.1:" + p +
                                   " timed out after 200 ms (last attempt: Connection refused)");
  CHECK(oob::exchange("127.0.0.1", port, true, blob, 100ms).error() == errc::timed_out);
  CHECK(last_error_detail() ==
        "oob::exchange: listen on 127.0.0.1:" + p + " timed out after 100 ms: no peer connected");
  std::vector<std::byte> big(oob::max_blob + 1);
  CHECK(oob::exchange("::1", port, false, big, 100ms).error() == errc::over_limit);
  CHECK(last_error_detail() == "oob::exchange: connect to [::1]:" + p +
                                   ": our blob is 65537 bytes, over max_blob (65536)");
  CHECK(oob::exchange(nowhere, port, false, blob, 100ms).error() ==
        std::errc::address_not_available);
  CHECK(last_error_detail() == "oob::exchange: connect to " + std::string(nowhere) + ":" + p +
                                   ": the host name does not resolve");
  CHECK(oob::exchange("", port, true, blob, 0ms).error() == errc::timed_out);
  CHECK(last_error_detail().find("oob::exchange: listen on *:" + p) == 0);
}

TEST_CASE("oob: a peer that hangs up before sending its blob") {
  const std::uint16_t port = free_port();
  int l = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(l >= 0);
  int one = 1;
  ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(l, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
  REQUIRE(::listen(l, 1) == 0);
  std::thread rude([&] {
    int c = ::accept(l, nullptr, nullptr);
    if (c >= 0)
      ::close(c); // says nothing
  });
  std::vector<std::byte> blob(16);
  auto r = oob::exchange("127.0.0.1", port, false, blob, 5s);
  rude.join();
  ::close(l);
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::errc::connection_reset);
  CHECK(r.error() == errc::peer_closed);
  // (a reset if our blob arrived after the close)
  CHECK(last_error_detail().find("oob::exchange: connect to 127.0.0.1:" + std::to_string(port) +
                                 ": the peer closed the connection") == 0);
}

TEST_CASE("oob: milliseconds::max() is no limit, on either side") {
  // now() + max overflowed: the wait had ended before it began.
  both_sides("127.0.0.1", "127.0.0.1", std::chrono::milliseconds::max(), 10s);
  both_sides("127.0.0.1", "127.0.0.1", 10s, std::chrono::milliseconds::max());
}

TEST_CASE("oob: a listener on \"\" takes IPv4 and IPv6 clients") {
  both_sides("", "127.0.0.1", 10s, 10s);
  if (!has_ipv6_loopback()) {
    MESSAGE("no IPv6 loopback on this host: the IPv6 client is not tried");
    return;
  }
  both_sides("", "::1", 10s, 10s);
}

TEST_CASE("oob: a client tries every address of the name") {
  if (!has_ipv6_loopback()) {
    MESSAGE("no IPv6 loopback on this host: nothing to choose from");
    return;
  }
  // The listener is on one family; the name gives the other one first.
  both_sides("127.0.0.1", dual_v6_first, 10s, 10s);
  both_sides("::1", dual_v4_first, 10s, 10s);
  // A listener on a name listens on each of its addresses.
  both_sides(dual_v6_first, "127.0.0.1", 10s, 10s);
  both_sides(dual_v6_first, "::1", 10s, 10s);
}

TEST_CASE("oob: a listener survives strays and bad blobs until its deadline") {
  const std::uint16_t port = free_port();
  auto mine = bytes(64, 3), theirs = bytes(5000, 4);
  result<std::vector<std::byte>> got = errc::timed_out;
  std::thread server([&] { got = oob::exchange("127.0.0.1", port, true, mine, 20s); });
  // A port scanner: connects and closes at once.
  int scan = raw_connect(port);
  CHECK(scan >= 0);
  close_fd(scan);
  // A health check that says something else and hangs up.
  int s = raw_connect(port);
  write_to(s, "GET / HTTP/1.0\r\n\r\n", 18);
  close_fd(s);
  // A client announcing a blob over max_blob.
  s = raw_connect(port);
  const unsigned char huge[4] = {0xff, 0xff, 0xff, 0x7f};
  write_to(s, huge, 4);
  // One that connects and says nothing, and stays.
  int silent = raw_connect(port);
  // One that sends half a blob and goes.
  int half = raw_connect(port);
  const unsigned char len[4] = {100, 0, 0, 0};
  write_to(half, len, 4);
  write_to(half, "0123456789", 10);
  close_fd(half);
  std::this_thread::sleep_for(100ms);
  auto r = oob::exchange("127.0.0.1", port, false, theirs, 10s);
  server.join();
  close_fd(s);
  close_fd(silent);
  REQUIRE_MESSAGE(r, r.error().message());
  REQUIRE_MESSAGE(got, got.error().message());
  CHECK(*r == mine);
  CHECK(*got == theirs);
  // And with nobody real before the deadline: timed_out, not a stray's error.
  const std::uint16_t port2 = free_port();
  std::thread lonely([&] { got = oob::exchange("127.0.0.1", port2, true, mine, 1s); });
  close_fd(raw_connect(port2));
  lonely.join();
  REQUIRE_FALSE(got);
  CHECK(got.error() == errc::timed_out);
  // (the detail is the listener thread's own)
}

// ---- oob::connection ----

namespace {
template <class T> T ok(result<T> r) {
  REQUIRE_MESSAGE(r, r.error().message() << ": " << std::string(last_error_detail()));
  return std::move(*r);
}
void ok(result<void> r) {
  REQUIRE_MESSAGE(r, r.error().message() << ": " << std::string(last_error_detail()));
}

// A connected pair over loopback: [0] listened, [1] connected (it sent
// `hello` first, as the connecting side does).
std::array<oob::connection, 2> pair_up(std::size_t limit0 = oob::max_blob,
                                       std::size_t limit1 = oob::max_blob) {
  const std::uint16_t port = free_port();
  result<oob::connection> server = errc::timed_out;
  std::string server_detail;
  std::thread t([&] {
    server = oob::connection::listen("127.0.0.1", port, 10s, limit0);
    server_detail = last_error_detail();
  });
  auto client = oob::connection::connect("127.0.0.1", port, 10s, limit1);
  if (client)
    (void)client->send(bytes(3, 9), 10s);
  t.join();
  REQUIRE_MESSAGE(client, std::string(last_error_detail()));
  REQUIRE_MESSAGE(server, server_detail);
  CHECK(ok(server->receive(1s)) == bytes(3, 9));
  return {std::move(*server), std::move(*client)};
}

// A raw socket connected to a connection::listen on 127.0.0.1:port, after
// its first blob `hello`; both ends returned.
struct raw_pair {
  oob::connection conn;
  int raw = -1;
  ~raw_pair() { close_fd(raw); }
};
void raw_frame(int s, std::size_t n, int seed, std::size_t upto) {
  const unsigned char len[4] = {
      static_cast<unsigned char>(n & 0xff), static_cast<unsigned char>((n >> 8) & 0xff),
      static_cast<unsigned char>((n >> 16) & 0xff), static_cast<unsigned char>((n >> 24) & 0xff)};
  write_to(s, len, 4);
  auto b = bytes(n, seed);
  write_to(s, b.data(), std::min(upto, n));
}
void raw_listened(raw_pair &p, std::size_t limit = oob::max_blob) {
  const std::uint16_t port = free_port();
  result<oob::connection> server = errc::timed_out;
  std::thread t([&] { server = oob::connection::listen("127.0.0.1", port, 10s, limit); });
  p.raw = raw_connect(port);
  raw_frame(p.raw, 5, 1, 5);
  t.join();
  REQUIRE(p.raw >= 0);
  REQUIRE(server);
  p.conn = std::move(*server);
  CHECK(ok(p.conn.receive(1s)) == bytes(5, 1));
}
} // namespace

TEST_CASE("oob: a connection carries a stream of blobs both ways, nothing lost or reordered") {
  auto c = pair_up();
  constexpr int n = 300;
  auto size_of = [](int i) {
    return static_cast<std::size_t>(i % 7 == 0    ? 0
                                    : i % 11 == 0 ? oob::max_blob
                                                  : (i * 131) % 5000);
  };
  // Each side sends on one thread and receives on another, at once.
  std::string errors[4];
  auto sender = [&](int side, std::string &err) {
    for (int i = 0; i < n && err.empty(); i++)
      if (auto r = c[side].send(bytes(size_of(i), i + 1000 * side), 10s); !r)
        err = "send " + std::to_string(i) + ": " + std::string(last_error_detail());
  };
  auto receiver = [&](int side, std::string &err) {
    for (int i = 0; i < n && err.empty(); i++) {
      auto r = c[side].receive(10s);
      if (!r || *r != bytes(size_of(i), i + 1000 * (1 - side)))
        err = "receive " + std::to_string(i) + ": " + std::string(last_error_detail());
    }
  };
  std::thread t[4] = {
      std::thread(sender, 0, std::ref(errors[0])), std::thread(receiver, 0, std::ref(errors[1])),
      std::thread(sender, 1, std::ref(errors[2])), std::thread(receiver, 1, std::ref(errors[3]))};
  for (auto &x : t)
    x.join();
  for (auto &e : errors)
    CHECK_MESSAGE(e.empty(), e);
  CHECK(c[0].native_handle() >= 0);
  CHECK(c[0].max_size() == oob::max_blob);
}

TEST_CASE("oob: a connection's size limit, on sending and on receiving") {
  auto c = pair_up(100, 1000);
  CHECK(c[0].max_size() == 100);
  // Over our own limit: refused, nothing sent, the connection goes on.
  CHECK(c[0].send(bytes(101, 0), 1s).error() == errc::over_limit);
  CHECK(last_error_detail().find("our blob is 101 bytes, over the limit of 100") !=
        std::string_view::npos);
  ok(c[0].send(bytes(100, 1), 1s));
  CHECK(ok(c[1].receive(1s)) == bytes(100, 1));
  // The peer announces more than our limit: the stream cannot go on.
  ok(c[1].send(bytes(500, 2), 1s));
  CHECK(c[0].receive(1s).error() == errc::over_limit);
  const std::string said(last_error_detail());
  CHECK(said.find("oob::connection::receive: listen on 127.0.0.1:") == 0);
  CHECK(said.find("the peer announced a blob of 500 bytes, over the limit of 100") !=
        std::string::npos);
  CHECK(c[0].receive(1s).error() == errc::over_limit);
  CHECK(last_error_detail() == said);
  // Sending is another direction: it goes on.
  ok(c[0].send(bytes(1, 1), 1s));
  CHECK(ok(c[1].receive(1s)) == bytes(1, 1));
}

TEST_CASE("oob: a receive that times out keeps what arrived; the next one continues") {
  raw_pair p;
  raw_listened(p);
  auto start = std::chrono::steady_clock::now();
  CHECK(p.conn.receive(100ms).error() == errc::timed_out);
  CHECK(std::chrono::steady_clock::now() - start >= 100ms);
  CHECK(last_error_detail().find("oob::connection::receive: listen on 127.0.0.1:") == 0);
  CHECK(last_error_detail().find("receive timed out after 100 ms") != std::string_view::npos);
  // Half a blob (the length and 40 of its 100 bytes), then a timeout.
  const std::size_t n = 100;
  const unsigned char len[4] = {n, 0, 0, 0};
  auto b = bytes(n, 7);
  write_to(p.raw, len, 2);
  CHECK(p.conn.receive(50ms).error() == errc::timed_out);
  write_to(p.raw, len + 2, 2);
  write_to(p.raw, b.data(), 40);
  CHECK(p.conn.receive(50ms).error() == errc::timed_out);
  CHECK(last_error_detail().find("within a blob (what arrived is kept)") != std::string_view::npos);
  write_to(p.raw, b.data() + 40, n - 40);
  CHECK(ok(p.conn.receive(1s)) == b);
  // Nothing waiting and no time: timed_out at once.
  CHECK(p.conn.receive(0ms).error() == errc::timed_out);
}

TEST_CASE("oob: a peer that closes, between blobs or in the middle of one") {
  SUBCASE("between blobs") {
    raw_pair p;
    raw_listened(p);
    raw_frame(p.raw, 10, 3, 10);
    close_fd(std::exchange(p.raw, -1));
    CHECK(ok(p.conn.receive(1s)) == bytes(10, 3)); // what was sent before the close
    CHECK(p.conn.receive(1s).error() == errc::peer_closed);
    CHECK(last_error_detail().find(": the peer closed the connection") != std::string_view::npos);
    CHECK(p.conn.receive(1s).error() == errc::peer_closed);
  }
  SUBCASE("in the middle of a blob") {
    raw_pair p;
    raw_listened(p);
    raw_frame(p.raw, 100, 3, 10);
    close_fd(std::exchange(p.raw, -1));
    CHECK(p.conn.receive(1s).error() == errc::peer_closed);
    CHECK(last_error_detail().find("closed the connection after 10 of the 100 bytes of a blob") !=
          std::string_view::npos);
  }
  SUBCASE("in the middle of a length prefix") {
    raw_pair p;
    raw_listened(p);
    write_to(p.raw, "\x01\x00", 2);
    close_fd(std::exchange(p.raw, -1));
    CHECK(p.conn.receive(1s).error() == errc::peer_closed);
    CHECK(last_error_detail().find("within a blob's length prefix") != std::string_view::npos);
  }
  SUBCASE("the sender sees the close too") {
    auto c = pair_up();
    c[1] = oob::connection();
    result<void> r;
    // The first sends may still land in the socket buffer; the close shows
    // within a few.
    for (int i = 0; i < 100 && r; i++)
      r = c[0].send(bytes(1000, i), 1s);
    CHECK(r.error() == errc::peer_closed);
    CHECK(r.error() == std::errc::connection_reset);
  }
}

TEST_CASE("oob: a malformed length prefix is a clear error, not an allocation") {
  raw_pair p;
  raw_listened(p);
  write_to(p.raw, "GET / HTTP/1.0\r\n\r\n", 18);
  CHECK(p.conn.receive(1s).error() == errc::over_limit);
  // "GET " read as a little-endian length.
  CHECK(last_error_detail().find("the peer announced a blob of 542393671 bytes, over the limit "
                                 "of 65536 (not an rdmadl oob peer") != std::string_view::npos);
}

TEST_CASE("oob: a send that times out queues its blob whole; flush() or the next send delivers") {
  constexpr std::size_t big = 32u << 20; // more than loopback's socket buffers hold
  auto c = pair_up(big, big);
  auto blob = bytes(big, 5);
  auto r = c[0].send(blob, 50ms);
  REQUIRE(r.error() == errc::timed_out);
  CHECK(last_error_detail().find("send timed out after 50 ms") != std::string_view::npos);
  CHECK(last_error_detail().find("queued") != std::string_view::npos);
  // A send behind a queued blob queues too, in order.
  CHECK(c[0].send(bytes(7, 6), 0ms).error() == errc::timed_out);
  std::thread reader([&] {
    for (auto want : {blob, bytes(7, 6), bytes(9, 8)}) {
      auto got = c[1].receive(20s);
      CHECK(got);
      if (got)
        CHECK(*got == want);
    }
  });
  ok(c[0].flush(20s));
  ok(c[0].send(bytes(9, 8), 20s));
  reader.join();
}

TEST_CASE("oob: an empty connection refuses everything") {
  oob::connection c;
  CHECK_FALSE(c);
  CHECK(c.native_handle() == -1);
  CHECK(c.send(bytes(1, 1), 1s).error() == errc::empty_object);
  CHECK(c.receive(1s).error() == errc::empty_object);
  CHECK(c.flush(1s).error() == errc::empty_object);
  CHECK(oob::connection::connect("127.0.0.1", free_port(), 100ms).error() == errc::timed_out);
  CHECK(last_error_detail().find("oob::connection::connect: connect to 127.0.0.1:") == 0);
}
