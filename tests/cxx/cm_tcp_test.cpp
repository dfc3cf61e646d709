// SPDX-License-Identifier: MIT
// multi_channel::create_cm over TCP on the host, with no RDMA at all: groups
// made by rank over loopback move real bytes (every one checked), ranks are
// refused as over rdma_cm, a peer that is gone or answers garbage is a clear
// error of that peer, and a TCP peer's end is an rdma_cm-style event.
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "rdmadl/rdmadl.hpp"
#include "test_buffer.hpp"
#include "test_ok.hpp"
#include "test_socket.hpp"

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {
bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

cm_channel_options base_options(channel_transport t) {
  cm_channel_options o;
  o.channel.transport = t;
  o.channel.scope_limit = 2000ms;
  o.step_timeout = 5000ms;
  return o;
}

// Runs make(i) for i in [0, n) at once (create_cm blocks until its peers
// come); the results by index.
std::vector<result<multi_channel>>
at_once(std::size_t n, const std::function<result<multi_channel>(std::size_t)> &make) {
  std::vector<result<multi_channel>> out;
  for (std::size_t i = 0; i < n; i++)
    out.emplace_back(errc::timed_out);
  std::vector<std::string> details(n);
  std::vector<std::jthread> threads;
  for (std::size_t i = 0; i < n; i++)
    threads.emplace_back([&, i] {
      out[i] = make(i);
      details[i] = std::string(last_error_detail());
    });
  for (auto &t : threads)
    t.join();
  for (std::size_t i = 0; i < n; i++)
    if (!out[i])
      MESSAGE("node ", i, ": ", out[i].error().message(), ": ", details[i]);
  return out;
}

// A full mesh of n nodes on loopback, built with create_cm and cm_mesh().
struct cm_group_of {
  std::vector<listener> listeners;
  std::vector<multi_channel> mc;
  cm_group_of(std::size_t n, channel_transport t) {
    std::vector<cm_address> nodes;
    for (std::size_t i = 0; i < n; i++) {
      listeners.push_back(ok(listener::bind("127.0.0.1", 0, t)));
      nodes.push_back({"127.0.0.1", listeners.back().port()});
    }
    auto made = at_once(n, [&](std::size_t i) -> result<multi_channel> {
      auto o = cm_mesh(i, nodes, base_options(t));
      if (!o)
        return o.error();
      return multi_channel::create_cm(&listeners[i], *o);
    });
    for (auto &m : made)
      mc.push_back(ok(std::move(m)));
  }
  // Node i's peer index for node j (cm_mesh: j, or j - 1 after i).
  static std::size_t peer(std::size_t i, std::size_t j) { return j < i ? j : j - 1; }
};

// The raw bytes of a rendezvous frame (cm_hello.hpp): "RDMR", version 2, 3
// zero bytes, value (LE), caps, 3 zero bytes.
std::vector<std::uint8_t> rendezvous(std::uint32_t value, std::uint8_t caps = 2) {
  std::vector<std::uint8_t> b = {'R', 'D', 'M', 'R', 2, 0, 0, 0};
  for (int i = 0; i < 4; i++)
    b.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
  b.insert(b.end(), {caps, 0, 0, 0});
  return b;
}

// A loopback TCP socket of the test: a listener on a free port, or a
// connection to one.
struct raw_socket {
  int fd = -1;
  std::uint16_t port = 0;
  raw_socket() = default;
  raw_socket(const raw_socket &) = delete;
  raw_socket &operator=(const raw_socket &) = delete;
  ~raw_socket() {
    if (fd >= 0)
      ::close(fd);
  }
  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  void listen() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    auto a = loopback(0);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 4) == 0);
    socklen_t len = sizeof a;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0);
    port = ntohs(a.sin_port);
  }
  void connect(std::uint16_t to) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    auto a = loopback(to);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
    timeval limit{5, 0}; // a read that would hang fails the case instead
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  }
  // Accepts one connection (up to 5 s).
  int accept_one() const {
    pollfd p{fd, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    int c = ::accept(fd, nullptr, nullptr);
    REQUIRE(c >= 0);
    return c;
  }
  static void write_all(int to, const std::vector<std::uint8_t> &b) {
    REQUIRE(::send(to, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size()));
  }
};

// One client of an acceptor: connects to port with rank (transport tcp).
result<multi_channel> client(std::uint16_t port, std::uint32_t rank,
                             std::chrono::milliseconds step = 5000ms) {
  auto o = base_options(channel_transport::tcp);
  o.connect = {{"127.0.0.1", port}};
  o.rank = rank;
  o.step_timeout = step;
  return multi_channel::create_cm(nullptr, o);
}
} // namespace

TEST_CASE("cm tcp: a listener bound for TCP has a socket and a port, and no rdma_cm id") {
  for (auto t : {channel_transport::tcp, channel_transport::automatic}) {
    CAPTURE(name(t));
    auto l = ok(listener::bind("127.0.0.1", 0, t));
    CHECK(l.tcp_fd() >= 0);
    CHECK(l.port() != 0);
    if (t == channel_transport::tcp || stack() != stack_state::ready)
      CHECK(l.native_handle() == nullptr);
    // The port is taken for TCP now: a second listener on it is refused.
    auto again = listener::bind("127.0.0.1", l.port(), channel_transport::tcp);
    REQUIRE_FALSE(again);
    CHECK(again.error() == std::errc::address_in_use);
    CHECK(has(last_error_detail(), "rdmadl::listener::bind on 127.0.0.1:"));
    CHECK(has(last_error_detail(), ": listen on TCP: "));
    listener moved = std::move(l);
    CHECK(moved.tcp_fd() >= 0);
    CHECK(l.tcp_fd() == -1);
  }
  auto bad = listener::bind("no-such-host.invalid", 0, channel_transport::tcp);
  REQUIRE_FALSE(bad);
  CHECK(bad.error() == std::errc::address_not_available);
}

TEST_CASE("cm tcp: a mesh of three made by rank moves every byte over TCP, and says why") {
  channel_transport t = channel_transport::tcp;
  std::string reason = "this host has no RDMA: the channel's transport is tcp";
  SUBCASE("transport tcp") {}
  SUBCASE("transport automatic, on a host without RDMA") {
    if (stack() == stack_state::ready)
      return; // a host with a device: the Soft-RoCE tier covers RDMA pairs
    t = channel_transport::automatic;
    reason = "this host has no RDMA: ";
  }
  static std::mutex m;
  static std::vector<std::string> lines; // the log hook's
  lines.clear();
  REQUIRE_FALSE(set_log_handler(log_level::warn, [](log_level, std::string_view line, void *) {
    std::lock_guard lock(m);
    lines.emplace_back(line);
  }));
  cm_group_of g(3, t);
  (void)set_log_handler(log_level::error, nullptr);
  auto &mc = g.mc;
  CHECK(lines.size() == 6); // one fallback per pair and side
  for (const auto &line : lines)
    CHECK(line.find("multi_channel: peer ") == 0);
  for (std::size_t i = 0; i < 3; i++)
    for (std::size_t p = 0; p < 2; p++) {
      CAPTURE(i);
      CAPTURE(p);
      CHECK(mc[i].peers() == 2);
      CHECK(mc[i].connected(p));
      CHECK(mc[i].cm_connected(p));
      CHECK(mc[i].transport_of(p) == channel_transport::tcp);
      INFO(mc[i].describe(p));
      CHECK(mc[i].describe(p).find("peer " + std::to_string(p) + " over TCP: " + reason) == 0);
      CHECK(mc[i].qp(p) == nullptr);
    }
  // No event yet, and cm_fd() says so.
  for (auto &c : mc) {
    REQUIRE(c.cm_fd() >= 0);
    pollfd p{c.cm_fd(), POLLIN, 0};
    CHECK(::poll(&p, 1, 0) == 0);
    CHECK(c.next_cm_event(0ms).error() == errc::timed_out);
  }
  // Send and receive between every ordered pair.
  for (std::size_t i = 0; i < 3; i++)
    for (std::size_t j = 0; j < 3; j++) {
      if (i == j)
        continue;
      CAPTURE(i);
      CAPTURE(j);
      const unsigned seed = static_cast<unsigned>(10 * i + j);
      buffer src(mc[i].pd(), 100000, seed), dst(mc[j].pd(), 100000, 0);
      auto s = mc[j].scope();
      auto h = ok(s.post_recv(cm_group_of::peer(j, i), dst.all()));
      ok(mc[i].send(cm_group_of::peer(i, j), src.all(), 5s));
      auto r = ok(s.wait(h, 5s));
      CHECK(r.ok());
      CHECK(r.byte_len == 100000);
      CHECK(dst.holds(seed));
    }
  // One-sided: node 2 writes into node 0 and reads node 1 back.
  buffer target(mc[0].pd(), 8192, 0, rdmadl::access::remote_write);
  buffer source(mc[1].pd(), 8192, 44, rdmadl::access::remote_read);
  buffer mine(mc[2].pd(), 8192, 45), got(mc[2].pd(), 8192, 0);
  ok(mc[2].write(cm_group_of::peer(2, 0), mine.all(), ok(target.mr.remote()), 5s));
  CHECK(target.holds(45));
  ok(mc[2].read(cm_group_of::peer(2, 1), got.all(), ok(source.mr.remote()), 5s));
  CHECK(got.holds(44));
  // Scatter and gather: node 0 writes a part to each peer, then reads them back.
  std::vector<buffer> remote;
  remote.reserve(2);
  for (std::size_t k = 1; k < 3; k++)
    remote.emplace_back(mc[k].pd(), 4096, 0,
                        rdmadl::access::remote_write | rdmadl::access::remote_read);
  buffer parts_src(mc[0].pd(), 2 * 4096, 11), back(mc[0].pd(), 2 * 4096, 0);
  std::vector<multi_channel::part> parts;
  for (std::size_t k = 0; k < 2; k++)
    parts.push_back({k, ok(parts_src.mr.slice(k * 4096, 4096)), ok(remote[k].mr.remote())});
  std::vector<work_result> results(2);
  ok(mc[0].scatter_write(parts, 5s, results));
  for (std::size_t k = 0; k < 2; k++) {
    CHECK(results[k].ok());
    CHECK(std::memcmp(remote[k].bytes.data(), parts_src.bytes.data() + k * 4096, 4096) == 0);
    parts[k].buf = ok(back.mr.slice(k * 4096, 4096));
  }
  ok(mc[0].gather_read(parts, 5s, results));
  CHECK(back.bytes == parts_src.bytes);
  // Scatter send to both peers, gathered by each: node 0 is peer 0 of both.
  buffer msgs(mc[0].pd(), 2 * 512, 12);
  std::vector<buffer> rx;
  rx.reserve(2);
  for (std::size_t k = 1; k < 3; k++)
    rx.emplace_back(mc[k].pd(), 512, 0);
  {
    auto s1 = mc[1].scope();
    auto s2 = mc[2].scope();
    auto h1 = ok(s1.post_recv(0, rx[0].all()));
    auto h2 = ok(s2.post_recv(0, rx[1].all()));
    for (std::size_t k = 0; k < 2; k++)
      parts[k] = {k, ok(msgs.mr.slice(k * 512, 512)), {}};
    ok(mc[0].scatter_send(parts, 5s, results));
    CHECK(ok(s1.wait(h1, 5s)).byte_len == 512);
    CHECK(ok(s2.wait(h2, 5s)).byte_len == 512);
  }
  for (std::size_t k = 0; k < 2; k++)
    CHECK(std::memcmp(rx[k].bytes.data(), msgs.bytes.data() + k * 512, 512) == 0);
}

TEST_CASE("cm tcp: a node with transport rdma refuses a TCP-only listener before any RDMA call") {
  auto l = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
  cm_channel_options o; // transport rdma: today's rdma_cm path
  o.channel.transport = channel_transport::rdma;
  o.accept = 1;
  auto r = multi_channel::create_cm(&l, o);
  REQUIRE_FALSE(r);
  CHECK((r.error() == errc::empty_object || r.error() == std::errc::operation_not_supported));
  // And transport tcp with a listener that has no TCP socket (an empty one).
  listener empty;
  auto t = base_options(channel_transport::tcp);
  t.accept = 1;
  CHECK(multi_channel::create_cm(&empty, t).error() == errc::empty_object);
}

TEST_CASE("cm tcp: a rank outside the range or taken is refused, and the accepting goes on") {
  auto l = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
  const std::uint16_t port = l.port();
  auto o = base_options(channel_transport::tcp);
  o.accept = 2;
  o.first_rank = 1; // ranks 1 and 2
  result<multi_channel> acceptor(errc::timed_out);
  std::jthread t([&] { acceptor = multi_channel::create_cm(&l, o); });
  auto a = client(port, 1); // peer 0 of the acceptor
  REQUIRE_MESSAGE(a, last_error_detail());
  auto out_of_range = client(port, 5);
  REQUIRE_FALSE(out_of_range);
  CHECK(out_of_range.error() == errc::rank_refused);
  INFO(last_error_detail());
  CHECK(has(last_error_detail(), "multi_channel::create_cm: peer 0 (127.0.0.1:" +
                                     std::to_string(port) + "): rendezvous: the answer: "));
  CHECK(has(last_error_detail(), "(rank 5: its rank is outside the accepted range)"));
  auto taken = client(port, 1);
  REQUIRE_FALSE(taken);
  CHECK(taken.error() == errc::rank_refused);
  CHECK(has(last_error_detail(), "(rank 1: its rank is taken already)"));
  auto b = client(port, 2); // peer 1 of the acceptor
  REQUIRE_MESSAGE(b, last_error_detail());
  t.join();
  auto mc = ok(std::move(acceptor));
  REQUIRE(mc.peers() == 2);
  // Each rank is at its index: a's bytes come to peer 0, b's to peer 1.
  buffer from_a(a->pd(), 64, 1), from_b(b->pd(), 64, 2);
  buffer in0(mc.pd(), 64, 0), in1(mc.pd(), 64, 0);
  auto s = mc.scope();
  auto h0 = ok(s.post_recv(0, in0.all()));
  auto h1 = ok(s.post_recv(1, in1.all()));
  ok(a->send(0, from_a.all(), 5s));
  ok(b->send(0, from_b.all(), 5s));
  CHECK(ok(s.wait(h0, 5s)).ok());
  CHECK(ok(s.wait(h1, 5s)).ok());
  CHECK(in0.holds(1));
  CHECK(in1.holds(2));
}

TEST_CASE("cm tcp: an accepting that refused clients and ran out of time says rank_refused") {
  auto l = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
  auto o = base_options(channel_transport::tcp);
  o.accept = 1;
  o.first_rank = 1;
  o.step_timeout = 500ms;
  result<multi_channel> acceptor(errc::timed_out);
  const auto start = std::chrono::steady_clock::now();
  std::jthread t([&] { acceptor = multi_channel::create_cm(&l, o); });
  CHECK(client(l.port(), 0).error() == errc::rank_refused);
  t.join();
  REQUIRE_FALSE(acceptor);
  CHECK(acceptor.error() == errc::rank_refused);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  // Nobody at all: timed out, within the step_timeout.
  const auto again = std::chrono::steady_clock::now();
  auto nobody = multi_channel::create_cm(&l, o);
  REQUIRE_FALSE(nobody);
  CHECK(nobody.error() == errc::timed_out);
  CHECK(std::chrono::steady_clock::now() - again < 3s);
}

TEST_CASE("cm tcp: a peer gone before its rendezvous is that peer's error, at once") {
  std::uint16_t port = 0;
  {
    auto gone = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
    port = gone.port();
  } // its socket is closed: nothing listens on port now
  const auto start = std::chrono::steady_clock::now();
  auto o = base_options(channel_transport::tcp);
  auto l = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
  o.connect = {{"127.0.0.1", l.port()}, {"127.0.0.1", port}};
  o.rank = 0;
  // Peer 0 takes the rendezvous (a thread of the test accepts it); peer 1 is gone.
  auto ao = base_options(channel_transport::tcp);
  ao.accept = 1;
  result<multi_channel> acceptor(errc::timed_out);
  std::jthread t([&] { acceptor = multi_channel::create_cm(&l, ao); });
  auto r = multi_channel::create_cm(nullptr, o);
  t.join();
  REQUIRE_FALSE(r);
  CHECK(r.error() == std::errc::connection_refused);
  INFO(last_error_detail());
  CHECK(last_error_detail().find("multi_channel::create_cm: peer 1 (127.0.0.1:" +
                                 std::to_string(port) + "): rendezvous: connect: ") == 0);
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("cm tcp: a listener that never answers the rendezvous is a timeout, not a hang") {
  raw_socket silent;
  silent.listen(); // the kernel completes the connection; nobody reads or answers
  const auto start = std::chrono::steady_clock::now();
  auto r = client(silent.port, 0, 300ms);
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::timed_out);
  CHECK(has(last_error_detail(), "rendezvous: the answer: "));
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("cm tcp: a malformed rendezvous answer is a clear error of that peer") {
  struct bad_answer {
    std::vector<std::uint8_t> bytes;
    std::error_code want;
  };
  auto magic = rendezvous(0);
  magic[3] = 'X';
  auto newer = rendezvous(0);
  newer[4] = 3;
  auto caps = rendezvous(0, 0x82); // an unknown caps bit
  auto reserved = rendezvous(0);
  reserved[14] = 1;
  auto no_tcp = rendezvous(0, 1); // RDMA without TCP: not what a rendezvous says
  const bad_answer cases[] = {
      {magic, make_error_code(errc::bad_magic)},
      {newer, make_error_code(errc::newer_format)},
      {caps, make_error_code(errc::bad_blob)},
      {reserved, make_error_code(errc::bad_blob)},
      {no_tcp, make_error_code(errc::bad_blob)},
      {{'R', 'D', 'M', 'R'}, std::make_error_code(std::errc::connection_reset)}, // closes early
  };
  for (const auto &c : cases) {
    raw_socket server;
    server.listen();
    std::vector<std::uint8_t> hello;
    std::jthread t([&] {
      int fd = server.accept_one();
      hello = read_n(fd, 16);
      raw_socket::write_all(fd, c.bytes);
      ::close(fd);
    });
    auto r = client(server.port, 7);
    t.join();
    // What the client sent: its rank and caps, TCP only.
    CHECK(hello == rendezvous(7, 2));
    REQUIRE_FALSE(r);
    CHECK(r.error() == c.want);
    INFO(last_error_detail());
    CHECK(has(last_error_detail(), "): rendezvous: the answer: "));
  }
}

TEST_CASE("cm tcp: a malformed rendezvous frame is refused, and the accepting goes on") {
  auto l = ok(listener::bind("127.0.0.1", 0, channel_transport::tcp));
  auto o = base_options(channel_transport::tcp);
  o.accept = 1;
  result<multi_channel> acceptor(errc::timed_out);
  std::jthread t([&] { acceptor = multi_channel::create_cm(&l, o); });
  // Garbage of a frame's size: answered with the refusal "malformed" (1).
  {
    raw_socket raw;
    raw.connect(l.port());
    std::vector<std::uint8_t> junk(16, 0xee);
    raw_socket::write_all(raw.fd, junk);
    auto answer = read_n(raw.fd, 17); // 16, then the end of the connection
    REQUIRE(answer.size() == 16);
    CHECK(std::vector<std::uint8_t>(answer.begin(), answer.begin() + 8) ==
          std::vector<std::uint8_t>({'R', 'D', 'M', 'R', 2, 0, 0, 0}));
    CHECK(answer[8] == 1); // r_malformed
  }
  // A frame cut short, and a connection that says nothing: dropped.
  {
    raw_socket cut, mute;
    cut.connect(l.port());
    mute.connect(l.port());
    raw_socket::write_all(cut.fd, {'R', 'D', 'M'});
  }
  // A good client still gets its place.
  auto c = client(l.port(), 0);
  REQUIRE_MESSAGE(c, last_error_detail());
  t.join();
  auto mc = ok(std::move(acceptor));
  buffer src(c->pd(), 256, 3), dst(mc.pd(), 256, 0);
  auto s = mc.scope();
  auto h = ok(s.post_recv(0, dst.all()));
  ok(c->send(0, src.all(), 5s));
  CHECK(ok(s.wait(h, 5s)).byte_len == 256);
  CHECK(dst.holds(3));
}

TEST_CASE("cm tcp: a TCP peer's end is a disconnected event that wakes cm_fd()") {
  cm_group_of g(3, channel_transport::tcp);
  auto &mc = g.mc;
  const int fd = mc[0].cm_fd();
  REQUIRE(fd >= 0);
  mc[1] = multi_channel(); // node 1 ends: node 0's peer 0, node 2's peer 1
  pollfd p{fd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 5000) == 1);
  auto e = ok(mc[0].next_cm_event(0ms));
  CHECK(e.peer == 0);
  CHECK(e.kind == cm_event_kind::disconnected);
  CHECK_FALSE(e.error());
  CHECK_FALSE(mc[0].connected(0));
  CHECK_FALSE(mc[0].cm_connected(0));
  CHECK(mc[0].connected(1));
  CHECK(mc[0].cm_connected(1));
  INFO(mc[0].describe(0));
  CHECK(has(mc[0].describe(0), "; failed: "));
  // Reported once; the fd is quiet again.
  CHECK(mc[0].next_cm_event(0ms).error() == errc::timed_out);
  CHECK(::poll(&p, 1, 0) == 0);
  // Node 2 hears it too, waiting for it.
  auto e2 = ok(mc[2].next_cm_event(5000ms));
  CHECK(e2.peer == 1);
  CHECK(e2.kind == cm_event_kind::disconnected);
  // The peer left between them still works.
  buffer src(mc[2].pd(), 64, 8), dst(mc[0].pd(), 64, 0);
  {
    auto s = mc[0].scope();
    auto h = ok(s.post_recv(1, dst.all()));
    ok(mc[2].send(0, src.all(), 5s));
    CHECK(ok(s.wait(h, 5s)).ok());
  }
  CHECK(dst.holds(8));
  // A request to the gone peer is refused at once.
  buffer out(mc[0].pd(), 64, 9);
  CHECK(mc[0].send(0, out.all(), 1s).error() == errc::peer_failed);
}
