// SPDX-License-Identifier: MIT
// cxx_device's checks of connection and listener over rdma_cm: connect and
// accept with private data, a reject, and the ACK timeout reaching the QP.
#include "cxx_device.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

namespace cxx_device {

namespace {
// A cm_options::prepare that registers buf (into mr) and posts one receive
// of all of it, work request id.
std::function<result<void>(connection &)>
receive_first(std::span<std::byte> buf, std::optional<memory_region> &mr, std::uint64_t id) {
  return [buf, &mr, id](connection &c) -> result<void> {
    auto m = c.pd().register_memory(buf);
    if (!m)
      return m.error();
    mr = std::move(*m);
    auto all = mr->all();
    return all ? c.qp()->post_recv(*all, id) : result<void>(all.error());
  };
}
} // namespace

bool check_cm() {
  TRY(lst, listener::bind(test_ip ? inet_ntoa(in_addr{test_ip}) : "0.0.0.0", 0));
  std::uint16_t port = lst->port();
  EXPECT(port != 0);
  const char hello[] = "hello from client";
  const char welcome[] = "welcome, client";
  std::atomic<bool> server_ok{false};
  std::vector<std::byte> srv_buf(4096);
  std::thread server([&] {
    auto req = lst->get_request(10s);
    if (!req) {
      std::fprintf(stderr, "  server: %s\n", req.error().message().c_str());
      return;
    }
    if (req->peer_data().size() < sizeof hello ||
        std::memcmp(req->peer_data().data(), hello, sizeof hello) != 0) {
      std::fprintf(stderr, "  server: wrong private data\n");
      return;
    }
    cm_options o;
    o.private_data = std::as_bytes(std::span(welcome));
    // An option rdma_cm decides itself is refused and leaves the request
    // unanswered, so the accept after it still works.
    cm_options pinned = o;
    pinned.transport.mtu = 1024;
    if (auto r = req->accept(pinned); r || r.error() != errc::not_honoured) {
      std::fprintf(stderr, "  server: accept with an MTU was not refused\n");
      return;
    }
    // The receive goes in before the accept (cm_options::prepare), on the
    // queue pair of the connection accept() then returns.
    std::optional<memory_region> mr;
    queue_pair *prepared = nullptr;
    o.prepare = [&, first = receive_first(srv_buf, mr, 1)](connection &c) {
      prepared = c.qp();
      return first(c);
    };
    auto conn = req->accept(o);
    if (!conn) {
      std::fprintf(stderr, "  server accept: %s\n", conn.error().message().c_str());
      return;
    }
    if (!prepared || prepared->qp_num() != conn->qp()->qp_num() || !mr) {
      std::fprintf(stderr, "  server: prepare did not run on the accepted queue pair\n");
      return;
    }
    auto s = mr->all();
    if (!s)
      return;
    auto c = one(*conn->cq(), 10s);
    if (!c)
      return;
    // Echo it back, then wait for the client to disconnect.
    if (!conn->qp()->post_send(*s, 2))
      return;
    if (!one(*conn->cq(), 10s))
      return;
    auto d = conn->wait_disconnect(10s);
    if (!d) {
      std::fprintf(stderr, "  server wait_disconnect: %s\n", d.error().message().c_str());
      return;
    }
    server_ok = true;
  });
  bool ok = [&] {
    cm_options o;
    o.private_data = std::as_bytes(std::span(hello));
    auto host = cm_host();
    // rdma_cm picks the port and GID itself: asking for one is refused, not ignored.
    cm_options pinned = o;
    pinned.qp.port = 1;
    EXPECT(connect(host, port, pinned).error() == errc::not_honoured);
    // A prepare hook's error is the connect's, before any request goes out.
    cm_options refused = o;
    refused.prepare = [](connection &) -> result<void> { return errc::no_such_peer; };
    EXPECT(connect(host, port, refused).error() == errc::no_such_peer);
    EXPECT(std::string_view(last_error_detail()).find(": prepare: ") != std::string_view::npos);
    // The client's receive goes in before the connect too.
    std::vector<std::byte> out(4096), in(4096);
    fill(out, 9);
    std::optional<memory_region> mi;
    o.prepare = receive_first(in, mi, 10);
    TRY(conn, connect(host, port, o));
    EXPECT(mi.has_value());
    // The QP rdma_cm made knows its path: port, GID, QPN as the device has them.
    TRY(ep, conn->qp()->local_endpoint());
    EXPECT(!ep->gid_value.is_zero());
    EXPECT(ep->qpn == conn->qp()->qp_num());
    EXPECT(conn->qp()->port() == 1);
    EXPECT(conn->qp()->uses_wr_api() == conn->ctx().supports(feature::wr_api));
    EXPECT(conn->peer_data().size() >= sizeof welcome);
    EXPECT(std::memcmp(conn->peer_data().data(), welcome, sizeof welcome) == 0);
    TRY(mo, conn->pd().register_memory(out));
    TRY(so, mo->all());
    {
      auto b = conn->qp()->batch(); // the WR API on an rdma_cm QP where offered
      b.send(*so, 11);
      EXPECT_OK(b.commit());
    }
    std::array<completion, 2> c;
    std::size_t got = 0;
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (got < 2 && std::chrono::steady_clock::now() < deadline) {
      TRY(n, conn->cq()->poll(std::span(c).subspan(got)));
      got += *n;
    }
    EXPECT(got == 2 && c[0].ok() && c[1].ok());
    EXPECT(same(out, in));
    EXPECT_OK(conn->disconnect(10s));
    return true;
  }();
  server.join();
  EXPECT(ok);
  EXPECT(server_ok.load());
  EXPECT(same(srv_buf, [] {
    std::vector<std::byte> v(4096);
    fill(v, 9);
    return v;
  }()));
  return true;
}

// cm_options::transport.ack_timeout reaches the queue pair: once the server's QP is in
// the error state it answers nothing, and a send of the client fails with
// RETRY_EXC_ERR after 7 tries of about 1 ms each. With rdma_cm's own choice
// (ack_timeout 0) the same 7 tries took 16 s on Soft-RoCE (bookworm), and
// with retry_count 7 rxe retries for ever, so 2 s tell them apart.
bool check_cm_ack_timeout() {
  const std::string host = cm_host();
  TRY(lst, listener::bind(host, 0));
  std::atomic<int> stage{0}; // 1: server QP in error; 2: client done
  std::thread server([&] {
    auto req = lst->get_request(10s);
    auto conn = req ? req->accept() : result<connection>(errc::empty_object);
    if (!conn || !conn->qp()->to_error()) {
      stage = -1;
      return;
    }
    stage = 1;
    for (int i = 0; i < 3000 && stage.load() != 2; i++)
      std::this_thread::sleep_for(10ms);
  });
  bool ok = [&] {
    cm_options o;
    o.transport.ack_timeout = 8; // 4.096 us * 2^8: about 1 ms; retry_count stays 6
    TRY(conn, connect(host, lst->port(), o));
    for (int i = 0; i < 1000 && stage.load() == 0; i++)
      std::this_thread::sleep_for(10ms);
    EXPECT(stage.load() == 1);
    std::vector<std::byte> buf(256);
    TRY(mr, conn->pd().register_memory(buf));
    TRY(s, mr->all());
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_OK(conn->qp()->post_send(*s, 1));
    std::array<completion, 1> c;
    std::size_t got = 0;
    while (got == 0 && std::chrono::steady_clock::now() - t0 < 20s) {
      TRY(n, conn->cq()->poll(c));
      got = *n;
    }
    auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT(got == 1);
    std::fprintf(stderr, "  send to a silent peer: %s after %.3f s\n",
                 c[0].error().message().c_str(), secs);
    EXPECT(c[0].status == 12); // IBV_WC_RETRY_EXC_ERR
    EXPECT(secs < 2.0);
    return true;
  }();
  stage = 2;
  server.join();
  return ok;
}

bool check_cm_reject() {
  TRY(lst, listener::bind(test_ip ? inet_ntoa(in_addr{test_ip}) : "0.0.0.0", 0));
  std::uint16_t port = lst->port();
  std::thread server([&] {
    auto req = lst->get_request(10s);
    if (req) {
      const char no[] = "go away";
      (void)req->reject(std::as_bytes(std::span(no)));
    }
  });
  cm_options o;
  o.step_timeout = 10s;
  auto conn = connect(cm_host(), port, o);
  server.join();
  EXPECT(!conn);
  EXPECT(conn.error() == errc::rejected);
  EXPECT(conn.error() == std::errc::connection_refused);
  // Nobody listening: an error, within the timeout.
  o.step_timeout = 3s;
  auto t0 = std::chrono::steady_clock::now();
  auto none = connect(cm_host(), port, o);
  EXPECT(!none);
  EXPECT(std::chrono::steady_clock::now() - t0 < 20s);
  std::fprintf(stderr, "  connect with no listener: %s\n", none.error().message().c_str());
  return true;
}

} // namespace cxx_device
