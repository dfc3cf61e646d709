// SPDX-License-Identifier: MIT
// cxx_device's checks of multi_channel: a hub of channels on one device, the
// same over rdma_cm through one listener, an accepting deadline no client
// restarts, and a full mesh of three nodes.
#include "cxx_device.hpp"

#include <arpa/inet.h>
#include <atomic>
#include <dlfcn.h>
#include <poll.h>
#include <thread>
#include <vector>

#include "rdmadl/native.hpp" // rdma_cm types for the half-open client (called via dlsym)

namespace cxx_device {

namespace {

std::vector<std::byte> pattern(std::size_t len, unsigned seed) {
  std::vector<std::byte> v(len);
  fill(v, seed);
  return v;
}

// A hub's buffer of one slot per leaf and each leaf's buffer, all registered
// for remote writes and reads.
struct hub_buffers {
  static constexpr std::size_t n = 3, len = 256;
  std::vector<std::byte> hub = std::vector<std::byte>(n * len);
  std::vector<std::vector<std::byte>> leaf{n, std::vector<std::byte>(len)};
  memory_region hub_mr;
  std::vector<memory_region> leaf_mr;

  static result<hub_buffers> create(multi_channel &h, std::vector<channel> &leaves) {
    hub_buffers b;
    auto hm = h.pd().register_memory(b.hub, access::remote_write | access::remote_read);
    if (!hm)
      return hm.error();
    b.hub_mr = std::move(*hm);
    for (std::size_t i = 0; i < n; i++) {
      auto m =
          leaves[i].pd().register_memory(b.leaf[i], access::remote_write | access::remote_read);
      if (!m)
        return m.error();
      b.leaf_mr.push_back(std::move(*m));
    }
    return b;
  }
  local_slice hub_slice(std::size_t i) const { return hub_mr.slice(i * len, len).value(); }
  std::span<std::byte> hub_part(std::size_t i) { return std::span(hub).subspan(i * len, len); }
};

// Every collective operation between a hub and its leaves (leaf i is the
// hub's peer i), byte for byte, with patterns from seed on: multicast,
// scatter_send, gather_receive, scatter_write and gather_read.
bool exchange_all(multi_channel &hub, std::vector<channel> &leaf, hub_buffers &b, unsigned seed) {
  constexpr std::size_t n = hub_buffers::n, len = hub_buffers::len;
  auto &lb = b.leaf;
  auto &lm = b.leaf_mr;
  auto expect = [&](unsigned k) { return pattern(len, seed + k); };
  auto parts = [&](bool remote) {
    std::vector<multi_channel::part> p;
    for (std::size_t i = 0; i < n; i++)
      p.push_back({i, b.hub_slice(i), remote ? lm[i].remote().value() : remote_region{}});
    return p;
  };
  // multicast: one buffer to every leaf.
  fill(b.hub_part(0), seed);
  {
    auto s0 = leaf[0].scope(), s1 = leaf[1].scope(), s2 = leaf[2].scope();
    polling_scope *sc[n] = {&s0, &s1, &s2};
    work_handle h[n];
    for (std::size_t i = 0; i < n; i++) {
      TRY(r, sc[i]->post_recv(0, *lm[i].all()));
      h[i] = *r;
    }
    std::size_t all[] = {0, 1, 2};
    EXPECT_OK(hub.multicast_send(all, b.hub_slice(0), 5s));
    for (std::size_t i = 0; i < n; i++) {
      TRY(w, sc[i]->wait(h[i], 5s));
      EXPECT(w->ok() && w->byte_len == len && w->peer == 0);
      EXPECT(same(lb[i], expect(0)));
    }
  }
  // scatter_send: a different slice to each leaf.
  for (std::size_t i = 0; i < n; i++)
    fill(b.hub_part(i), seed + 10 + static_cast<unsigned>(i));
  {
    auto s0 = leaf[0].scope(), s1 = leaf[1].scope(), s2 = leaf[2].scope();
    polling_scope *sc[n] = {&s0, &s1, &s2};
    for (std::size_t i = 0; i < n; i++)
      EXPECT_OK(sc[i]->post_recv(0, *lm[i].all()));
    EXPECT_OK(hub.scatter_send(parts(false), 5s));
    for (std::size_t i = 0; i < n; i++) {
      TRY(all, sc[i]->wait_all(5s));
      EXPECT(all->size() == 1 && all->front().ok() && all->front().byte_len == len);
      EXPECT(same(lb[i], expect(10 + static_cast<unsigned>(i))));
    }
  }
  // gather_receive: every leaf sends (from another thread), the hub collects.
  for (std::size_t i = 0; i < n; i++)
    fill(lb[i], seed + 20 + static_cast<unsigned>(i));
  {
    std::atomic<int> sent{0};
    std::thread senders([&] {
      for (std::size_t i = 0; i < n; i++)
        if (leaf[i].send(*lm[i].all(), 10s))
          sent++;
    });
    std::array<work_result, n> got_parts{};
    auto got = hub.gather_receive(parts(false), 10s, got_parts);
    senders.join();
    EXPECT(sent.load() == static_cast<int>(n));
    EXPECT_OK(got);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(got_parts[i].ok() && got_parts[i].peer == i && got_parts[i].byte_len == len);
    for (std::size_t i = 0; i < n; i++)
      EXPECT(same(b.hub_part(i), expect(20 + static_cast<unsigned>(i))));
  }
  // scatter_write and gather_read: one-sided, to and from each leaf's region.
  for (std::size_t i = 0; i < n; i++)
    fill(b.hub_part(i), seed + 30 + static_cast<unsigned>(i));
  EXPECT_OK(hub.scatter_write(parts(true), 5s));
  for (std::size_t i = 0; i < n; i++)
    EXPECT(same(lb[i], expect(30 + static_cast<unsigned>(i))));
  for (std::size_t i = 0; i < n; i++)
    fill(lb[i], seed + 40 + static_cast<unsigned>(i));
  EXPECT_OK(hub.gather_read(parts(true), 5s));
  for (std::size_t i = 0; i < n; i++)
    EXPECT(same(b.hub_part(i), expect(40 + static_cast<unsigned>(i))));
  return true;
}

} // namespace

// A hub multi_channel with three peers, each a channel on the same device:
// every operation, byte for byte, and scopes that end early.
bool check_multi_channel() {
  constexpr std::size_t n = 3, len = 256;
  TRY(ctx, context::open(dev_name));
  channel_options o;
  o.peers = n;
  o.gid.ipv4 = test_ip;
  o.scope_limit = 2000ms;
  TRY(hub, multi_channel::create(*ctx, o));
  std::vector<channel> leaf;
  for (std::size_t i = 0; i < n; i++) {
    TRY(c, channel::create(*ctx, o));
    leaf.push_back(std::move(*c));
  }
  // The exchange goes through the serialised endpoint lists, as peers would.
  TRY(hub_eps, parse_endpoints(serialize_endpoints(hub->local_endpoints())));
  std::vector<endpoint> leaf_eps;
  for (auto &c : leaf) {
    TRY(e, c.local_endpoint());
    leaf_eps.push_back(*e);
  }
  TRY(leaf_list, parse_endpoints(serialize_endpoints(leaf_eps)));
  EXPECT(hub->handshake(std::span(*leaf_list).first(2)).error() == errc::bad_size);
  EXPECT_OK(hub->handshake(*leaf_list));
  for (std::size_t i = 0; i < n; i++)
    EXPECT_OK(leaf[i].handshake((*hub_eps)[i]));
  EXPECT(hub->connected() && leaf[0].connected());

  TRY(buf, hub_buffers::create(*hub, leaf));
  EXPECT(exchange_all(*hub, leaf, *buf, 10));
  auto &lb = buf->leaf;
  auto &lm = buf->leaf_mr;
  auto hslice = [&](std::size_t i) { return buf->hub_slice(i); };
  // A scope left early still completes its write before it ends; after that
  // the NIC never reads the source again, so changing it changes nothing.
  fill(buf->hub_part(0), 60);
  [&] {
    auto s = hub->scope();
    (void)s.post_write(1, hslice(0), lm[1].remote().value());
    return; // early, without waiting
  }();
  EXPECT(same(lb[1], pattern(len, 60)));
  fill(buf->hub_part(0), 61);
  std::this_thread::sleep_for(100ms);
  EXPECT(same(lb[1], pattern(len, 60)));
  // A per-peer error: peer 1's rkey is wrong, so its write fails with a
  // remote access error; the others land. (It leaves the hub's QP 1 in error.)
  for (std::size_t i = 0; i < n; i++)
    fill(buf->hub_part(i), 70 + static_cast<unsigned>(i));
  {
    std::vector<multi_channel::part> parts;
    for (std::size_t i = 0; i < n; i++)
      parts.push_back({i, hslice(i), lm[i].remote().value()});
    parts[1].remote.rkey ^= 0x80u;
    std::array<work_result, n> res{};
    auto r = hub->scatter_write(parts, 5s, res);
    EXPECT(!r);
    EXPECT(res[1].peer == 1 && res[1].status == 10); // IBV_WC_REM_ACCESS_ERR
    EXPECT(!r && r.error() == res[1].error());
    EXPECT(res[0].ok() && res[2].ok());
    EXPECT(same(lb[0], pattern(len, 70)) && same(lb[2], pattern(len, 72)));
  }
  // A scope whose receive never gets a message ends after scope_limit with
  // the request flushed, not hanging.
  auto t0 = std::chrono::steady_clock::now();
  {
    auto s = leaf[2].scope();
    EXPECT_OK(s.post_recv(0, *lm[2].all()));
    EXPECT(s.pending() == 1);
    EXPECT(s.wait_all(50ms).error() == errc::timed_out);
  }
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT(took >= 2000ms && took < 10s);
  {
    auto s = leaf[2].scope(); // the channel works again for a new scope
    EXPECT(s.pending() == 0);
    // but its flushed peer is failed for good: RC needs a new connection
    EXPECT(s.post_recv(0, *lm[2].all()).error() == errc::peer_failed);
  }
  EXPECT(!leaf[2].connected());
  // A blocking receive that times out: its queue pair is flushed, the
  // channel says it is no longer connected, later calls fail at once.
  EXPECT(leaf[1].connected());
  EXPECT(leaf[1].receive(*lm[1].all(), 50ms).error() == errc::timed_out);
  EXPECT(!leaf[1].connected());
  EXPECT(leaf[1].receive(*lm[1].all(), 5s).error() == errc::peer_failed);
  EXPECT(leaf[1].send(*lm[1].all(), 5s).error() == errc::peer_failed);
  EXPECT(leaf[0].connected()); // the other channels are untouched
  return true;
}

namespace {

// Every operation between a hub and its leaves (leaf i is the hub's peer i),
// byte for byte: multicast, scatter_send, gather_receive, scatter_write,
// gather_read, and the single blocking forms.
bool exercise_hub(multi_channel &hub, std::vector<channel> &leaf) {
  const std::size_t n = hub_buffers::n, len = hub_buffers::len;
  EXPECT(leaf.size() == n && hub.peers() == n && hub.connected());
  TRY(buf, hub_buffers::create(hub, leaf));
  EXPECT(exchange_all(hub, leaf, *buf, 100));
  auto &lb = buf->leaf;
  auto &lm = buf->leaf_mr;
  auto hslice = [&](std::size_t i) { return buf->hub_slice(i); };
  auto hpart = [&](std::size_t i) { return buf->hub_part(i); };
  auto expect = [&](unsigned seed) { return pattern(len, seed); };
  // The single forms, peer by peer, both directions: a leaf writes into the
  // hub's region too (its QP was accepted or connected by rdma_cm).
  TRY(hub_region, buf->hub_mr.remote());
  for (std::size_t i = 0; i < n; i++) {
    fill(hpart(i), 160 + static_cast<unsigned>(i));
    result<std::uint32_t> got = errc::timed_out;
    std::thread rx([&] { got = leaf[i].receive(*lm[i].all(), 10s); });
    auto sent = hub.send(i, hslice(i), 10s);
    rx.join();
    EXPECT_OK(sent);
    EXPECT_OK(got);
    EXPECT(*got == len && same(lb[i], expect(160 + static_cast<unsigned>(i))));
    fill(hpart(i), 170 + static_cast<unsigned>(i));
    EXPECT_OK(hub.write(i, hslice(i), lm[i].remote().value(), 5s));
    EXPECT(same(lb[i], expect(170 + static_cast<unsigned>(i))));
    fill(lb[i], 180 + static_cast<unsigned>(i));
    EXPECT_OK(hub.read(i, hslice(i), lm[i].remote().value(), 5s));
    EXPECT(same(hpart(i), expect(180 + static_cast<unsigned>(i))));
    fill(lb[i], 190 + static_cast<unsigned>(i));
    TRY(dst, hub_region->slice(i * len, len));
    EXPECT_OK(leaf[i].write(*lm[i].all(), *dst, 5s));
    EXPECT(same(hpart(i), expect(190 + static_cast<unsigned>(i))));
  }
  return true;
}

} // namespace

// A hub accepting three peers through one listener, each a channel
// connecting from this process: stray ranks refused, peer index from the
// rank (not the order of arrival), every operation, and a peer that
// disconnects mid-life seen as its event.
bool check_cm_multi_channel() {
  constexpr std::size_t n = 3;
  const std::string host = cm_host();
  TRY(lst, listener::bind(host, 0));
  cm_channel_options ho;
  ho.accept = n;
  ho.first_rank = 10; // clients send 10, 11, 12: peers 0, 1, 2
  ho.step_timeout = 15s;
  ho.channel.scope_limit = 2000ms;
  ho.channel.send_depth = 32;
  ho.channel.recv_depth = 16;
  result<multi_channel> hub = errc::timed_out;
  std::thread server([&] { hub = multi_channel::create_cm(&*lst, ho); });
  auto client = [&](std::uint32_t rank) {
    cm_channel_options co;
    co.connect = {{host, lst->port()}};
    co.rank = rank;
    co.step_timeout = 15s;
    auto t = std::chrono::steady_clock::now();
    auto c = channel::create_cm(nullptr, co);
    std::fprintf(stderr, "  client rank %u: %s (%.2f s)\n", rank,
                 c ? "connected" : c.error().message().c_str(),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count());
    return c;
  };
  auto stray = client(13); // outside [10, 13)
  auto c2 = client(12);    // arrives first, is still peer 2
  auto dup = client(12);   // taken
  auto c0 = client(10);
  auto low = client(9);
  auto c1 = client(11);
  server.join();
  EXPECT_OK(hub);
  EXPECT(stray.error() == errc::rank_refused);
  EXPECT(dup.error() == errc::rank_refused);
  EXPECT(low.error() == errc::rank_refused);
  EXPECT(dup.error() == std::errc::connection_refused);
  EXPECT_OK(c0);
  EXPECT_OK(c1);
  EXPECT_OK(c2);
  std::vector<channel> leaf;
  leaf.push_back(std::move(*c0));
  leaf.push_back(std::move(*c1));
  leaf.push_back(std::move(*c2));
  for (std::size_t i = 0; i < n; i++) {
    EXPECT(hub->cm_connected(i));
    TRY(ep, hub->local_endpoint(i)); // the path rdma_cm chose is known
    EXPECT(!ep->gid_value.is_zero() && ep->qpn == hub->qp(i).qp_num());
  }
  // One PD for every peer: hub->pd() registered memory works with each.
  if (!exercise_hub(*hub, leaf))
    return false;

  // The event loop's view: nothing yet; then leaf 1 goes away (its
  // destructor disconnects) and the fd becomes readable with its event.
  EXPECT(hub->cm_fd() >= 0);
  EXPECT(hub->next_cm_event().error() == errc::timed_out);
  auto t0 = std::chrono::steady_clock::now();
  std::thread gone([&] { leaf[1] = channel(); });
  pollfd pf{hub->cm_fd(), POLLIN, 0};
  int ready = ::poll(&pf, 1, 10000);
  auto ev = hub->next_cm_event(5s);
  gone.join();
  auto took = std::chrono::steady_clock::now() - t0;
  EXPECT(ready == 1);
  EXPECT_OK(ev);
  std::fprintf(stderr, "  event: peer %zu kind %d (rdma_cm %d, status %d)\n", ev->peer,
               static_cast<int>(ev->kind), ev->event, ev->status);
  EXPECT(ev->peer == 1 && ev->kind == cm_event_kind::disconnected);
  EXPECT(took < 10s); // the leaf's destructor is bounded
  EXPECT(!hub->cm_connected(1) && hub->cm_connected(0) && hub->cm_connected(2));
  // Peer 1's queue pair is flushed; the others still work.
  std::vector<std::byte> b(64);
  TRY(bm, hub->pd().register_memory(b));
  auto dead = hub->send(1, *bm->all(), 5s);
  EXPECT(!dead);
  // The event made peer 1 failed: refused at once, the others connected.
  EXPECT(dead.error() == errc::peer_failed);
  EXPECT(!hub->connected(1) && !hub->connected() && hub->connected(0) && hub->connected(2));
  std::fprintf(stderr, "  send to the gone peer: %s\n", dead.error().message().c_str());
  for (std::size_t i : {std::size_t{0}, std::size_t{2}}) {
    std::vector<std::byte> lbuf(64);
    TRY(lmr, leaf[i].pd().register_memory(lbuf, access::remote_write));
    fill(b, 200 + static_cast<unsigned>(i));
    EXPECT_OK(hub->write(i, *bm->all(), lmr->remote().value(), 5s));
    EXPECT(same(lbuf, b));
  }
  // The hub's own end disconnects the two left, within its bound.
  t0 = std::chrono::steady_clock::now();
  *hub = multi_channel();
  EXPECT(std::chrono::steady_clock::now() - t0 < 5s);
  return true;
}

namespace {

// A client that stops midway: it sends a connection request with the hello
// of rank, then reads none of its events, so librdmacm never answers the
// acceptor's reply (no RTU: the acceptor's connection is never
// established); after hold it destroys its id, which rejects the reply.
// Raw rdma_cm from the system's librdmacm (dlopen): rdmadl has no call
// that stops there. False when a step fails.
bool half_open_client(const std::string &host, std::uint16_t port, std::uint32_t rank,
                      std::chrono::milliseconds hold) {
  void *lib = dlopen("librdmacm.so.1", RTLD_NOW);
  if (!lib)
    return false;
#define CM_FN(name) auto name##_ = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name))
  CM_FN(rdma_create_event_channel);
  CM_FN(rdma_destroy_event_channel);
  CM_FN(rdma_create_id);
  CM_FN(rdma_destroy_id);
  CM_FN(rdma_resolve_addr);
  CM_FN(rdma_resolve_route);
  CM_FN(rdma_get_cm_event);
  CM_FN(rdma_ack_cm_event);
  CM_FN(rdma_connect);
#undef CM_FN
  bool ok = false;
  rdma_event_channel *ch = rdma_create_event_channel_ ? rdma_create_event_channel_() : nullptr;
  rdma_cm_id *id = nullptr;
  auto step = [&](rdma_cm_event_type want) {
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event_(ch, &ev))
      return false;
    bool got = ev->event == want;
    rdma_ack_cm_event_(ev);
    return got;
  };
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(port);
  if (ch && inet_pton(AF_INET, host.c_str(), &dst.sin_addr) == 1 &&
      rdma_create_id_(ch, &id, nullptr, RDMA_PS_TCP) == 0 &&
      rdma_resolve_addr_(id, nullptr, reinterpret_cast<sockaddr *>(&dst), 2000) == 0 &&
      step(RDMA_CM_EVENT_ADDR_RESOLVED) && rdma_resolve_route_(id, 2000) == 0 &&
      step(RDMA_CM_EVENT_ROUTE_RESOLVED)) {
    // "RDMC", version 1, 3 zero bytes, the rank little-endian
    std::uint8_t hello[12] = {'R', 'D', 'M', 'C', 1, 0, 0, 0};
    for (int i = 0; i < 4; i++)
      hello[8 + i] = static_cast<std::uint8_t>(rank >> (8 * i));
    rdma_conn_param p{};
    p.private_data = hello;
    p.private_data_len = sizeof hello;
    p.responder_resources = p.initiator_depth = 1;
    p.retry_count = 6;
    p.rnr_retry_count = 7;
    p.qp_num = 0x1234; // no QP: the reply waits for this side, which never answers
    ok = rdma_connect_(id, &p) == 0;
    if (ok)
      std::this_thread::sleep_for(hold);
  }
  if (id)
    rdma_destroy_id_(id);
  if (ch)
    rdma_destroy_event_channel_(ch);
  dlclose(lib);
  return ok;
}

} // namespace

// create_cm's accepting has one deadline that no client restarts, and a
// client that stops midway holds up no other and frees its rank when its
// connection fails.
bool check_cm_accept_deadline() {
  const std::string host = cm_host();
  {
    // A refused client every 100 ms for up to 8 s: the accepting still ends
    // at its 2 s deadline (the first version waited for the stream's end).
    TRY(lst, listener::bind(host, 0));
    cm_channel_options ho;
    ho.accept = 1;
    ho.step_timeout = 2s;
    std::atomic<bool> stop{false};
    std::thread stream([&] {
      auto end = std::chrono::steady_clock::now() + 8s;
      while (!stop && std::chrono::steady_clock::now() < end) {
        cm_channel_options co;
        co.connect = {{host, lst->port()}};
        co.rank = 5; // outside [0, 1)
        co.step_timeout = 1s;
        (void)channel::create_cm(nullptr, co);
        std::this_thread::sleep_for(100ms);
      }
    });
    auto t0 = std::chrono::steady_clock::now();
    auto hub = multi_channel::create_cm(&*lst, ho);
    auto took = std::chrono::steady_clock::now() - t0;
    stop = true;
    stream.join();
    std::fprintf(stderr, "  refused stream: %s after %.2f s\n",
                 hub ? "connected" : hub.error().message().c_str(),
                 std::chrono::duration<double>(took).count());
    EXPECT(hub.error() == errc::rank_refused);
    EXPECT(took >= 1900ms && took < 4s);
  }
  {
    // Rank 0 stops midway, rank 1 connects, rank 0 tries again: the channel
    // is made (the first version failed as soon as the stuck client's
    // connection did).
    TRY(lst, listener::bind(host, 0));
    cm_channel_options ho;
    ho.accept = 2;
    ho.step_timeout = 20s;
    result<multi_channel> hub = errc::timed_out;
    std::thread server([&] { hub = multi_channel::create_cm(&*lst, ho); });
    EXPECT(half_open_client(host, lst->port(), 0, 1500ms));
    auto connect = [&](std::uint32_t rank) {
      cm_channel_options co;
      co.connect = {{host, lst->port()}};
      co.rank = rank;
      co.step_timeout = 5s;
      auto c = channel::create_cm(nullptr, co);
      // The stuck client's rank is free once the acceptor has seen its
      // connection fail; until then it is taken.
      for (int i = 0; i < 25 && !c && c.error() == errc::rank_refused; i++) {
        std::this_thread::sleep_for(200ms);
        c = channel::create_cm(nullptr, co);
      }
      return c;
    };
    auto c1 = connect(1);
    auto c0 = connect(0);
    server.join();
    EXPECT_OK(c1);
    EXPECT_OK(c0);
    EXPECT_OK(hub);
    EXPECT(hub->connected() && hub->cm_connected(0) && hub->cm_connected(1));
    // Peer i is rank i: each sees the other's bytes.
    for (std::size_t i = 0; i < 2; i++) {
      channel &leaf = i == 0 ? *c0 : *c1;
      std::vector<std::byte> b(32), r(32);
      fill(b, 60 + static_cast<unsigned>(i));
      TRY(bm, hub->pd().register_memory(b));
      TRY(rm, leaf.pd().register_memory(r));
      result<std::uint32_t> got = errc::timed_out;
      std::thread rx([&] { got = leaf.receive(*rm->all(), 5s); });
      auto sent = hub->send(i, *bm->all(), 5s);
      rx.join();
      EXPECT_OK(sent);
      EXPECT_OK(got);
      EXPECT(same(r, b));
    }
  }
  return true;
}

// A full mesh of three multi_channels of two peers each over rdma_cm
// loopback (cm_mesh): node k's peer p is node p (p < k) or p + 1, checked
// by what each node receives from each peer, then one-sided writes.
bool check_cm_mesh() {
  constexpr std::size_t k = 3, len = 128;
  const std::string host = cm_host();
  std::vector<listener> lst;
  std::vector<cm_address> nodes;
  for (std::size_t i = 0; i < k; i++) {
    TRY(l, listener::bind(host, 0));
    nodes.push_back({host, l->port()});
    lst.push_back(std::move(*l));
  }
  std::atomic<int> built{0}, finished{0}, good{0};
  std::vector<std::string> why(k);
  // Each node's region, so the others can write into it: slot j <- node j.
  std::vector<std::vector<std::byte>> region(k, std::vector<std::byte>(k * len));
  std::vector<remote_region> regions(k);
  auto node = [&](std::size_t r) -> bool {
    auto fail = [&](const char *what, std::error_code ec) {
      why[r] = std::string(what) + ": " + ec.message();
      return false;
    };
    auto o = cm_mesh(r, nodes);
    if (!o)
      return fail("cm_mesh", o.error());
    o->step_timeout = 15s;
    auto mc = multi_channel::create_cm(&lst[r], *o);
    built++;
    if (!mc)
      return fail("create_cm", mc.error());
    std::vector<std::byte> out(len), in((k - 1) * len);
    fill(out, 300 + static_cast<unsigned>(r));
    auto mo = mc->pd().register_memory(out);
    auto mi = mc->pd().register_memory(in);
    auto mr = mc->pd().register_memory(region[r], access::remote_write);
    if (!mo || !mi || !mr)
      return fail("register", std::make_error_code(std::errc::not_enough_memory));
    regions[r] = mr->remote().value();
    {
      auto s = mc->scope();
      for (std::size_t p = 0; p < k - 1; p++)
        if (auto h = s.post_recv(p, mi->slice(p * len, len).value()); !h)
          return fail("post_recv", h.error());
      for (std::size_t p = 0; p < k - 1; p++)
        if (auto h = s.post_send(p, *mo->all()); !h)
          return fail("post_send", h.error());
      auto all = s.wait_all(15s);
      if (!all)
        return fail("wait_all", all.error());
      for (const auto &w : *all)
        if (!w.ok())
          return fail("completion", w.error());
    }
    for (std::size_t p = 0; p < k - 1; p++) {
      std::size_t sender = p < r ? p : p + 1;
      std::vector<std::byte> want(len);
      fill(want, 300 + static_cast<unsigned>(sender));
      if (!same(std::span(in).subspan(p * len, len), want))
        return fail("peer index", std::make_error_code(std::errc::bad_message));
    }
    // Every node has published its region once all are built and have
    // exchanged; then each writes its slot into every peer's region.
    finished++;
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (finished.load() < static_cast<int>(k) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    for (std::size_t p = 0; p < k - 1; p++) {
      std::size_t target = p < r ? p : p + 1;
      auto dst = regions[target].slice(r * len, len);
      if (!dst)
        return fail("slice", dst.error());
      if (auto w = mc->write(p, *mo->all(), *dst, 10s); !w)
        return fail("write", w.error());
    }
    finished++; // second barrier: nobody disconnects while others still write
    while (finished.load() < static_cast<int>(2 * k) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    good++;
    return true;
  };
  std::vector<std::thread> t;
  for (std::size_t r = 0; r < k; r++)
    t.emplace_back([&, r] { (void)node(r); });
  for (auto &x : t)
    x.join();
  for (std::size_t r = 0; r < k; r++)
    if (!why[r].empty())
      std::fprintf(stderr, "  node %zu: %s\n", r, why[r].c_str());
  EXPECT(built.load() == static_cast<int>(k));
  EXPECT(good.load() == static_cast<int>(k));
  for (std::size_t r = 0; r < k; r++)
    for (std::size_t j = 0; j < k; j++) {
      if (j == r)
        continue;
      std::vector<std::byte> want(len);
      fill(want, 300 + static_cast<unsigned>(j));
      EXPECT(same(std::span(region[r]).subspan(j * len, len), want));
    }
  return true;
}

} // namespace cxx_device
