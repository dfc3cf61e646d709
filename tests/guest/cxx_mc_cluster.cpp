// SPDX-License-Identifier: MIT
// cxx_mc_cluster: one node of a three-node multi_channel test on the
// cluster tier (ci/vm/cluster-tests.sh). Rank R of IP0,IP1,IP2 builds a
// multi_channel with two peers (the other ranks, in rank order), trades an
// endpoint list and a remote region with each over rdmadl::oob, then, every
// byte checked: a scatter of sends and a gather of receives, a multicast of
// one buffer, a scatter of writes and a gather of reads. Last, rank 2 is
// killed mid-scope (rank 0 asks the host for it): ranks 0 and 1 must get a
// failed result for every request to it, with its peer index, and still
// complete their requests to each other.
//
//   cxx_mc_cluster --rank R --nodes IP0,IP1,IP2 --port P --kill NODE --id ID [--caps C0,C1,C2]
//
// oob ports: P+1+a+b for ranks a < b (a listens). NODE is rank 2's cluster
// node number (for "RDMADL-HOST-KILL NODE"); NODE -1 skips the kill: the
// ranks trade a last send each way (check mc.done) and end (so two ranks may
// share a node, as in the impaired cluster of ci/vm/README.md). Each check is printed at once as
// "RDMADL-CHECK ID:mc.NAME PASS|FAIL" (rank 2 dies before it could print
// later). Exit status: 0 every check passed, 1 one failed, 2 bad usage.
//
// With --caps C0,C1,C2 (each "rdma" or "none": whether that rank's node has
// rdma-core) the channel is transport-neutral (channel_transport::automatic,
// no context opened here): the ranks trade channel_endpoint blobs and
// connect(), check mc.transport (transport_of each peer is rdma exactly
// when both nodes have rdma-core, else tcp) and run the same phases and
// kill, over RDMA, TCP or both. Check mc.open is then not printed.
//
// With --cm as well (after --caps), no endpoint travels out of band: each
// rank binds listener::bind(IP, P+5, automatic) (rdma_cm and TCP, or TCP
// alone without rdma-core), waits until the other ranks' listeners take
// TCP connections (mc.meet), and builds the channel with create_cm and
// cm_mesh() (transport automatic: a TCP rendezvous per peer, then rdma_cm
// between two nodes with rdma-core, TCP to one without). The windows travel
// over the channel itself (mc.windows); mc.channel_endpoints, mc.oob_exchange
// and mc.handshake are not printed, mc.listen, mc.meet and mc.windows are.
// Rank r's listener is on port P+5+r. --step-timeout S (default 120) is
// create_cm's step_timeout. --caps then says what each pair must end on,
// not only what its nodes have: under the impaired cluster's profile
// noroce (mcfb, ci/vm/cluster-plan.sh) both nodes have rdma-core but no
// RoCE frame crosses, so "rdma,none,rdma" asks for RDMA between ranks 0
// and 2 (one node) and TCP, fallen back after rdma_cm failed, for rank 1.
// RDMADL_VM_BREAK=mc.NAME breaks the byte check NAME (see same()).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <rdmadl/rdmadl.hpp>

using namespace rdmadl;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t slot = 256;
const char *id = "";
int failed = 0;

bool check(const char *name, bool ok, const std::string &why = {}) {
  if (!ok && !why.empty())
    std::printf("mc: %s: %s\n", name, why.c_str());
  std::printf("RDMADL-CHECK %s:mc.%s %s\n", id, name, ok ? "PASS" : "FAIL");
  std::fflush(stdout);
  failed += !ok;
  return ok;
}

// Byte i of what rank `from` sends rank `to` in phase ph (to 9: a multicast).
std::byte pattern(unsigned from, unsigned to, unsigned ph, std::size_t i) {
  return std::byte((from * 61 + to * 17 + ph * 29 + i * 7) & 0xff);
}
void fill(std::byte *p, unsigned from, unsigned to, unsigned ph) {
  for (std::size_t i = 0; i < slot; i++)
    p[i] = pattern(from, to, ph, i);
}
// Whether p holds that message. RDMADL_VM_BREAK=mc.NAME (the check's name)
// flips one expected byte, to show that the tier fails.
bool same(const char *check, const std::byte *p, unsigned from, unsigned to, unsigned ph) {
  const char *brk = std::getenv("RDMADL_VM_BREAK");
  bool flip = brk && std::string(brk) == std::string("mc.") + check;
  for (std::size_t i = 0; i < slot; i++)
    if (p[i] != (pattern(from, to, ph, i) ^ std::byte(flip && i == slot / 2))) {
      std::printf("mc: %s: byte %zu from rank %u: got 0x%02x\n", check, i, from,
                  std::to_integer<unsigned>(p[i]));
      return false;
    }
  return true;
}

std::string describe(const std::vector<work_result> &rs) {
  std::string s;
  for (auto &r : rs)
    s += " [peer " + std::to_string(r.peer) + " id " + std::to_string(r.id) + ": " +
         (r.ok() ? std::string("ok") : r.error().message()) + "]";
  return s;
}

int usage() {
  std::fprintf(stderr,
               "usage: cxx_mc_cluster --rank 0|1|2 --nodes IP0,IP1,IP2 --port P "
               "--kill NODE --id ID [--step-timeout S] [--caps rdma|none,rdma|none,rdma|none "
               "[--cm]]\n");
  return 2;
}

// Whether a TCP connection to ip:port is taken (closed at once, having said
// nothing: a create_cm acceptor drops it).
bool listening(const std::string &ip, std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1)
    return false;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return false;
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

} // namespace

int main(int argc, char **argv) {
  long rank = -1, port = 0, kill_node = -1, step_secs = 120;
  bool has_step = false;
  const bool by_cm = argc > 1 && std::string(argv[argc - 1]) == "--cm";
  if (by_cm)
    argc--;
  std::vector<std::string> ip, caps;
  auto split = [](const std::string &v, std::vector<std::string> &out) {
    for (std::size_t a = 0, b; a <= v.size(); a = b + 1)
      out.push_back(v.substr(a, (b = std::min(v.find(',', a), v.size())) - a));
  };
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    char *end = nullptr;
    if (k == "--rank")
      rank = std::strtol(v.c_str(), &end, 10);
    else if (k == "--port")
      port = std::strtol(v.c_str(), &end, 10);
    else if (k == "--kill")
      kill_node = std::strtol(v.c_str(), &end, 10);
    else if (k == "--id")
      id = argv[i + 1];
    else if (k == "--nodes")
      split(v, ip);
    else if (k == "--caps")
      split(v, caps);
    else if (k == "--step-timeout")
      step_secs = std::strtol(v.c_str(), &end, 10), has_step = true;
    else
      return usage();
    if (end && *end)
      return usage();
  }
  const bool neutral = !caps.empty();
  const std::chrono::seconds step_timeout(step_secs);
  const int given = 11 + (neutral ? 2 : 0) + (has_step ? 2 : 0);
  if (argc != given || step_secs < 1 || rank < 0 || rank > 2 || port < 1 || port > 65530 ||
      kill_node < -1 || ip.size() != 3 || !*id || (by_cm && !neutral) ||
      (neutral && (caps.size() != 3 || std::count(caps.begin(), caps.end(), "rdma") +
                                               std::count(caps.begin(), caps.end(), "none") !=
                                           3)))
    return usage();
  const unsigned me = static_cast<unsigned>(rank);
  unsigned other[2]; // peer index k is rank other[k]
  for (unsigned r = 0, k = 0; r < 3; r++)
    if (r != me)
      other[k++] = r;

  channel_options opts;
  opts.peers = 2;
  // A peer that stops answering fails a request in flight after 5
  // transmissions of 1.07 s each (the default would take minutes).
  opts.connect.transport.ack_timeout = 18;
  opts.connect.transport.retry_count = 4;
  result<multi_channel> mc = errc::empty_object;
  result<listener> lst = errc::empty_object;
  if (by_cm) {
    // One port per rank: two ranks may share a node (mcfb).
    auto cm_port = [&](unsigned r) { return static_cast<std::uint16_t>(port + 5 + r); };
    lst = listener::bind(ip[me], cm_port(me), channel_transport::automatic);
    if (!check("listen", bool(lst),
               lst ? "" : lst.error().message() + " (" + std::string(last_error_detail()) + ")"))
      return 1;
    std::printf("mc: rank %u: listener on %s:%u, rdma_cm %s\n", me, ip[me].c_str(), cm_port(me),
                lst->native_handle() ? "too" : "not here (TCP alone)");
    // create_cm connects once: every listener must be up first.
    std::string missing;
    for (auto until = std::chrono::steady_clock::now() + 300s;;) {
      missing.clear();
      for (unsigned r = 0; r < 3; r++)
        if (r != me && !listening(ip[r], cm_port(r)))
          missing += " " + std::to_string(r);
      if (missing.empty() || std::chrono::steady_clock::now() > until)
        break;
      std::this_thread::sleep_for(200ms);
    }
    if (!check("meet", missing.empty(), "no listener of rank(s)" + missing))
      return 1;
    std::vector<cm_address> nodes;
    for (unsigned r = 0; r < 3; r++)
      nodes.push_back({ip[r], cm_port(r)});
    cm_channel_options base;
    base.channel.transport = channel_transport::automatic;
    base.channel.connect.transport = opts.connect.transport;
    base.step_timeout = step_timeout; // also the accepting's one deadline: the ranks start apart
    auto o = cm_mesh(me, nodes, base);
    mc = o ? multi_channel::create_cm(&*lst, *o) : result<multi_channel>(o.error());
    if (!mc)
      std::printf("mc: create_cm: %s\n", std::string(last_error_detail()).c_str());
  } else if (neutral) {
    mc = multi_channel::create(opts); // automatic: RDMA when this node can
  } else {
    auto ctx = context::open();
    if (!check("open", bool(ctx), ctx ? "" : ctx.error().message()))
      return 1;
    mc = multi_channel::create(*ctx, opts);
  }
  if (!check("create", bool(mc), mc ? "" : mc.error().message()))
    return 1;
  std::vector<std::byte> mem(16 * slot);
  auto mr = mc->pd().register_memory(mem, access::remote_write | access::remote_read);
  if (!check("register", bool(mr), mr ? "" : mr.error().message()))
    return 1;
  // Layout, in slots: 0-1 received (phase 1), 2-3 multicast received, 4-6
  // the window peers write into (slot 4 + writer's rank), 7-8 sent, 9
  // multicast sent, 10-11 written, 12-13 read back, 14-15 small notes.
  auto at = [&](std::size_t s) { return mem.data() + s * slot; };
  auto sl = [&](std::size_t s, std::size_t len = slot) { return *mr->slice(s * slot, len); };

  // Out of band: with each peer, our endpoint for it and our window.
  std::vector<endpoint> theirs(2);
  std::vector<channel_endpoint> theirs_any(2);
  auto mine_any = neutral && !by_cm
                      ? mc->channel_endpoints()
                      : result<std::vector<channel_endpoint>>(std::vector<channel_endpoint>{});
  if (neutral && !by_cm &&
      !check("channel_endpoints", bool(mine_any), mine_any ? "" : mine_any.error().message()))
    return 1;
  remote_region window[2];
  std::string why;
  if (by_cm) {
    // Our window to each peer, over the channel itself (slots 14-15 in, 7-8 out).
    auto w = mr->remote(4 * slot, 3 * slot).value().serialize();
    for (unsigned k = 0; k < 2; k++)
      std::memcpy(at(7 + k), w.data(), w.size());
    auto s = mc->scope();
    work_handle in[2];
    bool posted = true;
    for (unsigned k = 0; k < 2; k++) {
      auto h = s.post_recv(k, sl(14 + k));
      posted = posted && h && s.post_send(k, sl(7 + k, w.size()));
      if (h)
        in[k] = *h;
    }
    auto all = posted ? s.wait_all(60s) : result<std::vector<work_result>>(errc::timed_out);
    if (!posted || !all)
      why = posted ? "wait_all: " + all.error().message() : "a post failed";
    for (unsigned k = 0; k < 2 && why.empty(); k++) {
      auto r = s.wait(in[k], 0ms);
      auto reg = r && r->ok() && r->byte_len == w.size()
                     ? remote_region::parse(std::span(at(14 + k), w.size()))
                     : result<remote_region>(errc::bad_size);
      if (!reg)
        why += "from rank " + std::to_string(other[k]) + ": " + reg.error().message() + "; ";
      else
        window[k] = *reg;
    }
    if (!check("windows", why.empty(), why))
      return 1;
  }
  for (unsigned a = 0; a < 3 && !by_cm; a++)
    for (unsigned b = a + 1; b < 3; b++) {
      if (me != a && me != b)
        continue;
      unsigned k = me == a ? (b == other[0] ? 0 : 1) : (a == other[0] ? 0 : 1);
      std::vector<std::byte> blob;
      if (neutral) {
        blob = serialize_channel_endpoints({&(*mine_any)[k], 1});
      } else {
        endpoint ep = mc->local_endpoint(k).value();
        blob = serialize_endpoints({&ep, 1});
      }
      auto w = mr->remote(4 * slot, 3 * slot).value().serialize();
      blob.insert(blob.end(), w.begin(), w.end());
      auto got =
          oob::exchange(ip[a], static_cast<std::uint16_t>(port + 1 + a + b), me == a, blob, 300s);
      std::size_t count = 0;
      std::error_code err = got ? std::error_code() : got.error();
      if (got && got->size() <= w.size())
        err = make_error_code(errc::bad_size);
      if (!err) {
        auto list = std::span(*got).first(got->size() - w.size());
        if (neutral) {
          auto eps = parse_channel_endpoints(list);
          err = eps ? std::error_code() : eps.error();
          count = eps ? eps->size() : 0;
          if (count == 1)
            theirs_any[k] = (*eps)[0];
        } else {
          auto eps = parse_endpoints(list);
          err = eps ? std::error_code() : eps.error();
          count = eps ? eps->size() : 0;
          if (count == 1)
            theirs[k] = (*eps)[0];
        }
      }
      auto reg =
          !err ? remote_region::parse(std::span(*got).last(w.size())) : result<remote_region>(err);
      if (!reg || count != 1) {
        why += "with rank " + std::to_string(me == a ? b : a) + ": " +
               (reg ? std::string("not one endpoint") : reg.error().message()) + "; ";
        continue;
      }
      window[k] = *reg;
    }
  if (!by_cm) {
    if (!check("oob_exchange", why.empty(), why))
      return 1;
    auto hs = neutral ? mc->connect(theirs_any) : mc->handshake(theirs);
    if (!check("handshake", bool(hs), hs ? "" : hs.error().message()))
      return 1;
  }
  if (neutral) {
    // RDMA exactly between two nodes with rdma-core; TCP wherever one lacks it.
    std::string got;
    bool ok = true;
    for (unsigned k = 0; k < 2; k++) {
      auto want = caps[me] == "rdma" && caps[other[k]] == "rdma" ? channel_transport::rdma
                                                                 : channel_transport::tcp;
      ok = ok && mc->transport_of(k) == want;
      got += " [rank " + std::to_string(other[k]) + ": " + std::string(name(mc->transport_of(k))) +
             ", want " + std::string(name(want)) + "]";
      std::printf("mc: rank %u: %s\n", me, mc->describe(k).c_str());
    }
    check("transport", ok, "transports" + got);
  }

  // Runs one phase in a scope: post(scope) posts, then everything is waited for.
  auto phase = [&](const char *name, auto post) -> std::vector<work_result> {
    auto s = mc->scope();
    std::string err = post(s);
    auto rs = err.empty() ? s.wait_all(60s) : result<std::vector<work_result>>(errc::timed_out);
    if (!err.empty() || !rs) {
      check(name, false, err.empty() ? "wait_all: " + rs.error().message() : err);
      return {};
    }
    return *rs;
  };
  auto all_ok = [](const std::vector<work_result> &rs, std::size_t n) {
    bool ok = rs.size() == n;
    for (auto &r : rs)
      ok = ok && r.ok() && r.peer < 2;
    return ok;
  };

  // 1. Scatter of sends, gather of receives: peer k gets its own bytes.
  for (unsigned k = 0; k < 2; k++)
    fill(at(7 + k), me, other[k], 1);
  auto rs = phase("gather_recv", [&](polling_scope &s) -> std::string {
    for (unsigned k = 0; k < 2; k++)
      if (!s.post_recv(k, sl(k)) || !s.post_send(k, sl(7 + k)))
        return "post to peer " + std::to_string(k) + " failed";
    return {};
  });
  if (!rs.empty()) {
    bool ok = all_ok(rs, 4);
    for (auto &r : rs)
      ok = ok && (r.byte_len == 0 || r.byte_len == slot);
    for (unsigned k = 0; k < 2; k++)
      ok = ok && same("gather_recv", at(k), other[k], me, 1);
    check("gather_recv", ok, "results" + describe(rs));
  }

  // 2. Multicast: one buffer sent to both peers.
  fill(at(9), me, 9, 2);
  rs = phase("multicast", [&](polling_scope &s) -> std::string {
    for (unsigned k = 0; k < 2; k++)
      if (!s.post_recv(k, sl(2 + k)) || !s.post_send(k, sl(9)))
        return "post to peer " + std::to_string(k) + " failed";
    return {};
  });
  if (!rs.empty()) {
    bool ok = all_ok(rs, 4);
    for (unsigned k = 0; k < 2; k++)
      ok = ok && same("multicast", at(2 + k), other[k], 9, 2);
    check("multicast", ok, "results" + describe(rs));
  }

  // 3. Scatter of writes into each peer's window (our slot of it), each
  // followed by a note: when a peer's note is here, its write is too.
  for (unsigned k = 0; k < 2; k++)
    fill(at(10 + k), me, other[k], 3);
  rs = phase("scatter_write", [&](polling_scope &s) -> std::string {
    for (unsigned k = 0; k < 2; k++)
      if (!s.post_recv(k, sl(14 + k, 8)) ||
          !s.post_write(k, sl(10 + k), *window[k].slice(me * slot, slot)) ||
          !s.post_send(k, sl(14 + k, 8)))
        return "post to peer " + std::to_string(k) + " failed";
    return {};
  });
  if (!rs.empty()) {
    check("scatter_write", all_ok(rs, 6), "results" + describe(rs));
    bool ok = true;
    for (unsigned k = 0; k < 2; k++)
      ok = ok && same("write.target", at(4 + other[k]), other[k], me, 3);
    check("write.target", ok, "a peer's bytes are not in our window");
  }
  // ... and a gather of reads of what we wrote there.
  rs = phase("gather_read", [&](polling_scope &s) -> std::string {
    for (unsigned k = 0; k < 2; k++)
      if (!s.post_read(k, sl(12 + k), *window[k].slice(me * slot, slot)))
        return "post to peer " + std::to_string(k) + " failed";
    return {};
  });
  if (!rs.empty()) {
    bool ok = all_ok(rs, 2);
    for (unsigned k = 0; k < 2; k++)
      ok = ok && same("gather_read", at(12 + k), me, other[k], 3);
    check("gather_read", ok, "results" + describe(rs));
  }
  std::printf("mc: rank %u: phases done\n", me);
  std::fflush(stdout);
  if (kill_node < 0) {
    // No kill: a last exchange of sends with both peers, so no rank leaves
    // while a peer may still read its memory (gather_read).
    auto done = phase("done", [&](polling_scope &s) -> std::string {
      for (unsigned k = 0; k < 2; k++)
        if (!s.post_recv(k, sl(14 + k, slot / 2)) ||
            !s.post_send(k, *mr->slice((14 + k) * slot + slot / 2, slot / 2)))
          return "post to peer " + std::to_string(k) + " failed";
      return {};
    });
    if (!done.empty())
      check("done", all_ok(done, 4), "results" + describe(done));
    // A peer whose last send lost its ACK retransmits it (1.07 s later):
    // stay to answer that for a few retransmissions before the QPs go.
    sleep(5);
    return failed ? 1 : 0;
  }

  // 4. Rank 2 dies mid-scope. It posts nothing more, so a send to it waits
  // (receiver not ready) until it is gone, then fails.
  if (me == 2) {
    sleep(120);
    check("killed", false, "still alive 120 s after the phases");
    return 1;
  }
  const unsigned live = other[0] == 2 ? 1 : 0, dead = 1 - live;
  fill(at(7), me, other[live], 4);
  auto s = mc->scope();
  auto hr = s.post_recv(live, sl(0));
  bool posted =
      hr && s.post_recv(dead, sl(1)) && s.post_send(dead, sl(8)) && s.post_send(live, sl(7));
  if (!check("kill.post", posted, "post failed"))
    return 1;
  if (me == 0) {
    // The live peer's message: it too has its requests to rank 2 posted.
    auto r = s.wait(*hr, 120s);
    if (!check("kill.live_first", r && r->ok(), r ? r->error().message() : r.error().message()))
      return 1;
    std::printf("RDMADL-HOST-KILL %ld\n", kill_node);
    std::fflush(stdout);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto all = s.wait_all(60s);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!check("kill.no_hang", bool(all), all ? "" : "wait_all: " + all.error().message()))
    return 1;
  std::printf("mc: rank %u: wait_all returned %zu results in %.1f s:%s\n", me, all->size(), secs,
              describe(*all).c_str());
  if (neutral) // how the dead peer was noticed (over TCP: keepalive, or no ACK of bytes written)
    std::printf("mc: rank %u: %s\n", me, mc->describe(dead).c_str());
  std::size_t live_ok = 0, dead_failed = 0, dead_retry = 0, n_dead = 0;
  for (auto &r : *all) {
    if (r.peer == live)
      live_ok += r.ok();
    if (r.peer == dead) {
      n_dead++;
      dead_failed += !r.ok();
      dead_retry += r.status == 12; // IBV_WC_RETRY_EXC_ERR: the transport gave up
    }
  }
  check("kill.peer_errors", n_dead == 2 && dead_failed == 2 && dead_retry >= 1,
        "want both requests to the dead peer failed, one of them by retry exhaustion");
  check("kill.live_peer", live_ok == 2 && same("kill.live_peer", at(0), other[live], me, 4),
        "the live peer's send and receive must complete, with its bytes");
  return failed ? 1 : 0;
}
