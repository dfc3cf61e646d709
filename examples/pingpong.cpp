// SPDX-License-Identifier: MIT
// Ping-pong over rdma_cm: a server accepts, the client connects, and they
// bounce one message back and forth, N times (default 1000).
//   rdmadl-example-pingpong IP [N]                 both in one process (threads)
//   rdmadl-example-pingpong --listen IP PORT [N]   the server, on another node
//   rdmadl-example-pingpong --connect IP PORT [N]  its client
// (IP: an address of the RDMA device's netdev; the listener's for --connect).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

// Waits for one completion; on failure says which step of which round trip
// and why (a timeout, or the completion's status), so a failed run is not
// just "FAILED".
static bool await(completion_queue &cq, const char *what, int i) {
  completion wc[1];
  auto n = cq.poll_wait(wc, 5s);
  if (n && wc[0].ok())
    return true;
  std::error_code ec = !n ? n.error() : wc[0].error();
  std::fprintf(stderr, "round trip %d: %s: %s\n", i, what, ec.message().c_str());
  return false;
}

// Posts one work request; on failure says which and why.
static bool posted(result<void> r, const char *what, int i) {
  if (!r)
    std::fprintf(stderr, "round trip %d: post %s: %s\n", i, what, r.error().message().c_str());
  return bool(r);
}

// Bounces one message in mr n times: the client sends first; the server's
// first receive is posted already (see serve()).
static bool bounce(connection &c, const memory_region &mr, int n, bool first_send) {
  auto s = *mr.all();
  auto &cq = *c.cq();
  for (int i = 0; i < n; i++) {
    if (first_send) {
      // The two completions come in either order; both must be good.
      if (!posted(c.qp()->post_recv(s, 1), "receive", i) ||
          !posted(c.qp()->post_send(s, 2), "send", i) || !await(cq, "first completion", i) ||
          !await(cq, "second completion", i))
        return false;
    } else {
      // The next receive is posted before answering, so the peer's next
      // message never meets an empty receive queue (an RNR retry).
      if (!await(cq, "receive", i) ||
          (i + 1 < n && !posted(c.qp()->post_recv(s, 1), "receive", i + 1)) ||
          !posted(c.qp()->post_send(s, 2), "send", i) || !await(cq, "send", i))
        return false;
    }
  }
  return true;
}

// The server's side: one connection, n bounces, then the client's disconnect.
static bool serve(listener &lst, int n, std::chrono::seconds wait) {
  std::byte sbuf[64] = {};
  memory_region mr;
  // The first receive goes in before the accept: the client sends as soon as
  // it is connected, and should its confirmation of the accept be lost, that
  // message is what completes the accept (cm_options::prepare).
  cm_options o;
  o.prepare = [&](connection &c) -> result<void> {
    auto m = c.pd().register_memory(sbuf);
    if (!m)
      return m.error();
    mr = std::move(*m);
    auto all = mr.all();
    return all ? c.qp()->post_recv(*all, 1) : result<void>(all.error());
  };
  auto req = lst.get_request(wait);
  auto conn = req ? req->accept(o) : result<connection>(req.error());
  if (!conn)
    std::fprintf(stderr, "accept: %s\n", conn.error().message().c_str());
  if (!conn || !bounce(*conn, mr, n, false))
    return false;
  // 30 s: the CM resends a lost DREQ or DREP only after seconds (one loss
  // cost ~6 s at 5% frame loss in the impaired cluster).
  if (auto d = conn->wait_disconnect(30s); !d) {
    std::fprintf(stderr, "the client's disconnect: %s\n", d.error().message().c_str());
    return false;
  }
  return std::memcmp(sbuf, "ping", 4) == 0;
}

// The client's side; retries the connection for up to TRIES seconds (a server
// on another node may not listen yet).
static bool ping(const char *ip, std::uint16_t port, int n, int tries) {
  auto conn = connect(ip, port);
  // Worth another try: nobody listens yet (rejected, unreachable, no answer).
  auto again = [&] {
    return conn.error() == std::errc::connection_refused ||
           conn.error() == std::errc::protocol_error || conn.error() == std::errc::timed_out;
  };
  for (int i = 1; !conn && again() && i < tries; i++) {
    std::this_thread::sleep_for(1s);
    conn = connect(ip, port);
  }
  if (!conn) {
    std::fprintf(stderr, "connect: %s\n", conn.error().message().c_str());
    return false;
  }
  std::byte cbuf[64] = {};
  std::memcpy(cbuf, "ping", 4);
  auto mr = conn->pd().register_memory(cbuf);
  if (!mr) {
    std::fprintf(stderr, "register: %s\n", mr.error().message().c_str());
    return false;
  }
  auto t0 = std::chrono::steady_clock::now();
  bool ok = bounce(*conn, *mr, n, true);
  auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0);
  auto disc = conn->disconnect(30s); // (see serve())
  if (!disc)
    std::fprintf(stderr, "disconnect: %s\n", disc.error().message().c_str());
  ok = disc && ok && std::memcmp(cbuf, "ping", 4) == 0;
  std::printf("%d round trips: %.2f us each\n", n, us.count() / n);
  return ok;
}

int main(int argc, char **argv) {
  bool split = argc >= 4 &&
               (std::strcmp(argv[1], "--listen") == 0 || std::strcmp(argv[1], "--connect") == 0);
  const char *ip = split ? argv[2] : argc > 1 ? argv[1] : "127.0.0.1";
  int port = split ? std::atoi(argv[3]) : 0;
  int n = split ? (argc > 4 ? std::atoi(argv[4]) : 1000) : argc > 2 ? std::atoi(argv[2]) : 1000;
  if (n < 1 || port < (split ? 1 : 0) || port > 65535) {
    std::fprintf(stderr, "usage: rdmadl-example-pingpong [--listen|--connect IP PORT | IP] [N]\n");
    return 2;
  }
  bool ok;
  if (split && argv[1][2] == 'c') {
    ok = ping(ip, static_cast<std::uint16_t>(port), n, 60);
  } else {
    auto lst = listener::bind(ip, static_cast<std::uint16_t>(port));
    if (!lst) {
      std::fprintf(stderr, "listen on %s: %s\n", ip, lst.error().message().c_str());
      return 1;
    }
    if (split) {
      ok = serve(*lst, n, 120s);
    } else {
      bool server_ok = false;
      std::thread server([&] { server_ok = serve(*lst, n, 120s); });
      ok = ping(ip, lst->port(), n, 1);
      server.join();
      ok = ok && server_ok;
    }
  }
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
