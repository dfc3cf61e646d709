// SPDX-License-Identifier: MIT
// Ping-pong over rdma_cm: a server thread accepts, the client connects, and
// they bounce one message back and forth. Usage: rdmadl-example-pingpong IP [N]
// (IP: an address of the RDMA device's netdev).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

// Receives one message into buf, then sends it back; n times.
static bool bounce(connection &c, std::span<std::byte> buf, int n, bool first_send) {
  auto mr = c.pd().register_memory(buf).value();
  auto s = *mr.all();
  completion wc[1];
  if (!first_send && !c.qp().post_recv(s, 1))
    return false;
  for (int i = 0; i < n; i++) {
    if (first_send) {
      if (!c.qp().post_recv(s, 1) || !c.qp().post_send(s, 2) || !c.cq().poll_wait(wc, 5s) ||
          !wc[0].ok() || !c.cq().poll_wait(wc, 5s) || !wc[0].ok())
        return false;
    } else {
      // The next receive is posted before answering, so the peer's next
      // message never meets an empty receive queue (an RNR retry).
      if (!c.cq().poll_wait(wc, 5s) || !wc[0].ok() || (i + 1 < n && !c.qp().post_recv(s, 1)) ||
          !c.qp().post_send(s, 2) || !c.cq().poll_wait(wc, 5s) || !wc[0].ok())
        return false;
    }
  }
  return true;
}

int main(int argc, char **argv) {
  const char *ip = argc > 1 ? argv[1] : "127.0.0.1";
  int n = argc > 2 ? std::atoi(argv[2]) : 1000;
  auto lst = listener::bind(ip, 0);
  if (!lst) {
    std::fprintf(stderr, "listen on %s: %s\n", ip, lst.error().message().c_str());
    return 1;
  }
  std::byte sbuf[64] = {}, cbuf[64] = {};
  bool server_ok = false;
  std::thread server([&] {
    auto req = lst->get_request(10s);
    auto conn = req ? req->accept() : result<connection>(req.error());
    server_ok = conn && bounce(*conn, sbuf, n, false) && conn->wait_disconnect(10s);
  });
  auto conn = connect(ip, lst->port());
  if (!conn) {
    std::fprintf(stderr, "connect: %s\n", conn.error().message().c_str());
    server.join();
    return 1;
  }
  std::memcpy(cbuf, "ping", 4);
  auto t0 = std::chrono::steady_clock::now();
  bool ok = bounce(*conn, cbuf, n, true);
  auto us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0);
  ok = conn->disconnect(10s) && ok;
  server.join();
  ok = ok && server_ok && std::memcmp(sbuf, "ping", 4) == 0;
  std::printf("%d round trips: %.2f us each: %s\n", n, us.count() / n, ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
