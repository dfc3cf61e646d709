// SPDX-License-Identifier: MIT
// cxx_device's churn checks: connect/transfer/disconnect cycles in one
// process on Soft-RoCE, each opening the device, connecting, moving 4 KiB
// (every byte checked) and tearing everything down, for queue pairs
// connected out of band (oob::exchange), rdma_cm connections, channels made
// by channel::create_cm, channels and a multi_channel of two peers. After a
// warm-up cycle, the fds, the mappings, VmSize and the device's objects
// ("rdma resource show": ctx, pd, cq, qp, cm_id, mr) at the end equal those
// at the start. Each check prints "churn.NAME: N cycles, fds a -> b, ...".
#include "cxx_device.hpp"

#include <atomic>
#include <cstring>
#include <malloc.h>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#include "cxx/test_socket.hpp"
#include "process_counts.hpp"

namespace cxx_device {

int churn_cycles = 1000;

namespace {

constexpr std::size_t len = 4096;

// The device's object counts of the line of "rdma resource show" for
// dev_name ("0: rxe0: pd 1 cq 2 qp 1 cm_id 0 mr 0 ctx 0 srq 0"), as text
// with the numbers; empty when the tool is not there.
std::string rdma_resources() {
  std::FILE *p = ::popen("PATH=/usr/sbin:/usr/bin:/sbin:/bin rdma resource show 2>/dev/null", "r");
  if (!p)
    return {};
  std::string out;
  char line[512];
  const std::string want = ": " + dev_name + ": ";
  while (std::fgets(line, sizeof line, p)) {
    std::string s(line);
    auto at = s.find(want);
    if (at != std::string::npos) {
      out = s.substr(at + want.size());
      while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
        out.pop_back();
    }
  }
  ::pclose(p);
  return out;
}

void fill_seed(std::span<std::byte> b, int seed) {
  for (std::size_t i = 0; i < b.size(); i++)
    b[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed) * 7) & 0xff);
}

template <class F> bool churn(const char *name, F cycle) {
  // Threads of the rdma_cm and out-of-band cycles would each get a malloc
  // arena of their own when the main one is busy (new mappings at moments
  // that depend on timing): one arena keeps the counts exact.
  mallopt(M_ARENA_MAX, 1);
  if (!cycle(-1)) // warm-up: first-use allocations (thread stacks, caches)
    return false;
  const auto before = process_counts::now();
  const std::string res_before = rdma_resources();
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  while (done < churn_cycles && cycle(done))
    if (++done % 100 == 0)
      std::fprintf(stderr, "  churn.%s: %d cycles, %.1f s\n", name, done,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto after = process_counts::now();
  const std::string res_after = rdma_resources();
  std::printf("churn.%s: %d cycles in %.1f s, %s, rdma resources [%s] -> [%s]\n", name, done, secs,
              process_counts::describe(before, after).c_str(), res_before.c_str(),
              res_after.c_str());
  std::fflush(stdout);
  EXPECT(done == churn_cycles);
  EXPECT(after.fds == before.fds);
  EXPECT(after.maps == before.maps);
  EXPECT(after.vm_size_kb == before.vm_size_kb);
  EXPECT(!res_before.empty() && res_after == res_before);
  return true;
}

// One side of the verbs cycle.
struct side {
  context ctx;
  protection_domain pd;
  completion_queue cq;
  queue_pair qp;
  std::vector<std::byte> buf = std::vector<std::byte>(len);
  memory_region mr;
};

bool open_side(side &s) {
  TRY(ctx, context::open(dev_name));
  s.ctx = std::move(*ctx);
  TRY(pd, protection_domain::create(s.ctx));
  s.pd = std::move(*pd);
  TRY(cq, completion_queue::create(s.ctx));
  s.cq = std::move(*cq);
  qp_options o = test_qp_options();
  o.send_depth = 4;
  o.recv_depth = 4;
  TRY(qp, queue_pair::create(s.ctx, s.pd, s.cq, s.cq, o));
  s.qp = std::move(*qp);
  TRY(mr, s.pd.register_memory(s.buf));
  s.mr = std::move(*mr);
  return true;
}

bool verbs_cycle(int i) {
  side a, b;
  if (!open_side(a) || !open_side(b))
    return false;
  TRY(ea, a.qp.local_endpoint());
  TRY(eb, b.qp.local_endpoint());
  const auto blob_a = ea->serialize(), blob_b = eb->serialize();
  const std::string host = cm_host();
  const std::uint16_t port = free_ipv4_port(); // free just now, each cycle
  result<std::vector<std::byte>> got_b = std::errc::interrupted;
  std::atomic<bool> listening{false};
  std::thread listener([&] {
    listening = true;
    got_b = oob::exchange(host, port, true, blob_b, 10s);
  });
  while (!listening)
    std::this_thread::yield();
  std::this_thread::sleep_for(1ms); // the connecting side retries every 20 ms
  auto got_a = oob::exchange(host, port, false, blob_a, 10s);
  listener.join();
  EXPECT_OK(got_a);
  EXPECT_OK(got_b);
  TRY(pa, endpoint::parse(*got_a));
  TRY(pb, endpoint::parse(*got_b));
  EXPECT_OK(a.qp.connect(*pa));
  EXPECT_OK(b.qp.connect(*pb));
  fill_seed(a.buf, i);
  TRY(dst, b.mr.slice(0, len));
  TRY(src, a.mr.slice(0, len));
  EXPECT_OK(b.qp.post_recv(*dst, 1));
  EXPECT_OK(a.qp.post_send(*src, 2));
  TRY(got, one(b.cq));
  EXPECT_OK(one(a.cq));
  EXPECT(got->byte_len == len && a.buf == b.buf);
  return true;
}

// A connection and its accepted peer over rdma_cm: a send, then the client
// disconnects and the server sees it.
bool cm_cycle(int i) {
  const std::string host = cm_host();
  TRY(lst, listener::bind(host, 0));
  std::vector<std::byte> srv(len), cli(len);
  fill_seed(cli, i);
  std::atomic<bool> server_ok{false}, posted{false};
  std::thread server([&] {
    auto req = lst->get_request(10s);
    if (!req)
      return;
    auto conn = req->accept();
    if (!conn)
      return;
    auto mr = conn->pd().register_memory(srv);
    auto s = mr ? mr->all() : result<local_slice>(errc::empty_object);
    if (!s || !conn->qp()->post_recv(*s, 1))
      return;
    posted = true;
    if (!one(*conn->cq(), 10s))
      return;
    server_ok = static_cast<bool>(conn->wait_disconnect(10s));
  });
  bool ok = [&] {
    TRY(conn, connect(host, lst->port()));
    TRY(mr, conn->pd().register_memory(cli));
    TRY(s, mr->all());
    // The server posts its receive after accepting: wait for it rather than
    // pay an RNR retry per cycle.
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!posted && std::chrono::steady_clock::now() < until)
      std::this_thread::yield();
    EXPECT_OK(conn->qp()->post_send(*s, 2));
    EXPECT_OK(one(*conn->cq(), 10s));
    EXPECT_OK(conn->disconnect());
    return true;
  }();
  server.join();
  EXPECT(ok && server_ok && srv == cli);
  return true;
}

// Two channels made by channel::create_cm, one accepting and one
// connecting; a send; both destroyed at once (each waits for the other's
// disconnect).
bool cm_channel_cycle(int i) {
  const std::string host = cm_host();
  TRY(lst, listener::bind(host, 0));
  cm_channel_options so;
  so.accept = 1;
  so.step_timeout = 10s;
  result<channel> srv = errc::timed_out;
  std::thread server([&] { srv = channel::create_cm(&*lst, so); });
  cm_channel_options co;
  co.connect = {{host, lst->port()}};
  co.step_timeout = 10s;
  auto cli = channel::create_cm(nullptr, co);
  server.join();
  EXPECT_OK(cli);
  EXPECT_OK(srv);
  std::vector<std::byte> a(len), b(len);
  fill_seed(a, i);
  TRY(amr, cli->pd().register_memory(a));
  TRY(bmr, srv->pd().register_memory(b));
  {
    auto sc = srv->scope();
    TRY(h, sc.post_recv(0, *bmr->all()));
    EXPECT_OK(cli->send(*amr->all(), 10s));
    TRY(r, sc.wait(*h, 10s));
    EXPECT(r->ok() && r->byte_len == len && a == b);
  }
  *amr = memory_region();
  *bmr = memory_region();
  std::thread gone([&] { *srv = channel(); });
  *cli = channel();
  gone.join();
  return true;
}

// Two channels on one context, connected to each other; a send.
bool channel_cycle(int i) {
  TRY(ctx, context::open(dev_name));
  channel_options o;
  o.gid.ipv4 = test_ip;
  TRY(a, channel::create(*ctx, o));
  TRY(b, channel::create(*ctx, o));
  TRY(ea, a->local_endpoint());
  TRY(eb, b->local_endpoint());
  EXPECT_OK(a->handshake(*eb));
  EXPECT_OK(b->handshake(*ea));
  std::vector<std::byte> abuf(len), bbuf(len);
  fill_seed(abuf, i);
  TRY(amr, a->pd().register_memory(abuf));
  TRY(bmr, b->pd().register_memory(bbuf));
  auto sc = b->scope();
  TRY(h, sc.post_recv(0, *bmr->all()));
  EXPECT_OK(a->send(*amr->all(), 10s));
  TRY(r, sc.wait(*h, 10s));
  EXPECT(r->ok() && r->byte_len == len && abuf == bbuf);
  return true;
}

// A multi_channel of two peers and the channels at their ends; a write to
// each peer.
bool multi_channel_cycle(int i) {
  TRY(ctx, context::open(dev_name));
  channel_options o;
  o.peers = 2;
  o.gid.ipv4 = test_ip;
  TRY(hub, multi_channel::create(*ctx, o));
  channel_options one_peer = o;
  one_peer.peers = 1;
  std::vector<channel> peer;
  std::vector<endpoint> theirs;
  for (std::size_t p = 0; p < 2; p++) {
    TRY(c, channel::create(*ctx, one_peer));
    TRY(mine, hub->local_endpoint(p));
    EXPECT_OK(c->handshake(*mine));
    TRY(e, c->local_endpoint());
    theirs.push_back(*e);
    peer.push_back(std::move(*c));
  }
  EXPECT_OK(hub->handshake(theirs));
  std::vector<std::byte> hbuf(len);
  std::vector<std::vector<std::byte>> pbuf(2, std::vector<std::byte>(len));
  fill_seed(hbuf, i);
  TRY(hmr, hub->pd().register_memory(hbuf));
  std::vector<memory_region> pmr;
  for (std::size_t p = 0; p < 2; p++) {
    TRY(m, peer[p].pd().register_memory(pbuf[p], access::remote_write));
    TRY(dst, m->remote(0, len));
    EXPECT_OK(hub->write(p, *hmr->all(), *dst, 10s));
    pmr.push_back(std::move(*m));
  }
  EXPECT(pbuf[0] == hbuf && pbuf[1] == hbuf);
  return true;
}

} // namespace

bool check_churn_verbs() {
  return churn("verbs", verbs_cycle);
}
bool check_churn_cm() {
  return churn("cm", cm_cycle);
}
bool check_churn_cm_channel() {
  return churn("cm_channel", cm_channel_cycle);
}
bool check_churn_channel() {
  return churn("channel", channel_cycle);
}
bool check_churn_multi_channel() {
  return churn("multi_channel", multi_channel_cycle);
}

} // namespace cxx_device
