// SPDX-License-Identifier: MIT
// multi_channel over rdma_cm: peers connected to addresses and accepted from
// a listener, identified by the rank each connecting side sends, all on one
// PD and one CQ; their rdma_cm events for an event loop.
//
// With a transport other than rdma, every peer first meets over TCP (the
// rendezvous, cm_rendezvous.hpp): the ranks and what each side can do
// travel there, so a node without rdma-core takes part. A pair that can
// use RDMA then connects through rdma_cm as with transport rdma, and the
// connecting side reports the outcome over the rendezvous connection: if
// rdma_cm could not connect, the pair falls back to TCP on it. Any other
// pair keeps the rendezvous connection as its TCP connection (the channel's
// TCP engine). A TCP peer's end is reported by next_cm_event() as an rdma_cm
// disconnect is, and wakes cm_fd() (an epoll set of the group's event
// channel and the engine's failure eventfd).
#include "rdmadl_verbs.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <sys/epoll.h>

#include "channel_state.hpp"
#include "cm_group.hpp"
#include "cm_hello.hpp"
#include "cm_rendezvous.hpp"
#include "detail.hpp"
#include "fd.hpp"
#include "nodes.hpp"
#include "rdmadl/channel.hpp"
#include "rdmadl/cm.hpp"
#include "rdmadl/multi_channel.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl {

namespace {

using detail::cm_hello;
using detail::parse_cm_hello;

// Why a client was rejected (the value of a reject's hello frame).
enum refusal : std::uint8_t { r_malformed = 1, r_range = 2, r_taken = 3, r_device = 4 };

// An address to connect to; an empty host or port 0 is no address.
result<sockaddr_storage> resolve(const cm_address &a) {
  if (a.host.empty() || a.port == 0)
    return std::errc::address_not_available;
  return detail::resolve_address(a.host, a.port, false);
}

// A rejection that carries a rank refusal is errc::rank_refused; the rest
// as for any rdma_cm event.
std::error_code rank_rejection(std::span<const std::byte> data) {
  auto why = parse_cm_hello(data);
  if (why && *why != r_device)
    return make_error_code(errc::rank_refused);
  return {};
}

// Rejects a connection request, saying why, and destroys its id.
void refuse(rdma_cm_id *id, refusal why) {
  auto b = cm_hello(why);
  rdma_reject(id, b.data(), static_cast<std::uint8_t>(b.size()));
  rdma_destroy_id(id);
}

// What a refusal's reason means, for last_error_detail().
const char *refusal_text(std::uint32_t why) noexcept {
  switch (why) {
  case r_malformed:
    return "its rank was malformed";
  case r_range:
    return "its rank is outside the accepted range";
  case r_taken:
    return "its rank is taken already";
  default:
    return "refused";
  }
}

// What a channel built with create_cm holds beside its queue pairs (the
// channel state's link): the rdma_cm group (null on a node where rdma_cm
// cannot work, or with transport tcp) and, with TCP peers, the epoll set
// behind cm_fd().
struct cm_link {
  std::shared_ptr<detail::cm_group> g;
  detail::fd_guard events;
};

cm_link *link_of(const std::shared_ptr<detail::channel_state> &s) noexcept {
  return s ? static_cast<cm_link *>(s->link.get()) : nullptr;
}

// The TCP side of the accepting (transport other than rdma): where the
// rendezvous connections of TCP peers go, by peer index.
struct tcp_accept {
  std::vector<detail::fd_guard> &fds;
  bool rdma_here = false; // this side offers RDMA to the clients of its listener
  // Why a pair that chose RDMA is over TCP after all, by peer index.
  std::vector<std::string> &rdma_failed;
  // By peer index: 1 its rendezvous chose RDMA and its outcome has not
  // come; 2 the outcome said connected, its ESTABLISHED has not come.
  std::vector<std::uint8_t> stage = std::vector<std::uint8_t>(fds.size(), 0);
};

// Answers one whole rendezvous frame (at, a connection of l's TCP socket):
// refuses a malformed, out-of-range or taken rank, as for an rdma_cm
// request; else takes the client, as a TCP peer (the connection is kept:
// done grows) or, when both offer RDMA, as one whose rdma_cm request is to
// come (the connection waits on desk for the outcome). Whether it refused.
bool answer_rendezvous(detail::rendezvous_desk::arrival &at, detail::cm_group *g,
                       const cm_channel_options &o, tcp_accept &t, detail::rendezvous_desk &desk,
                       std::size_t &done) {
  const std::size_t base = o.connect.size();
  std::uint32_t why = 0;
  std::size_t peer = 0;
  if (!at.frame) {
    why = r_malformed;
  } else {
    const std::uint32_t rank = at.frame->value;
    if (rank < o.first_rank || rank - o.first_rank >= o.accept) {
      why = r_range;
    } else {
      peer = base + (rank - o.first_rank);
      if (t.fds[peer].get() >= 0 || (g && g->ids[peer]) || t.stage[peer])
        why = r_taken;
    }
  }
  detail::cm_rendezvous answer{why, detail::cm_can_tcp};
  if (t.rdma_here)
    answer.caps |= detail::cm_can_rdma;
  // An answer that cannot go out leaves the rank free: the client fails
  // (its connection closes) and may try again.
  if (!detail::rendezvous_answer(at.fd.get(), answer) || why != 0)
    return why != 0;
  if (t.rdma_here && (at.frame->caps & detail::cm_can_rdma)) {
    t.stage[peer] = 1; // its rdma_cm request follows, then the outcome
    desk.expect(std::move(at.fd), peer);
    return false;
  }
  t.fds[peer] = std::move(at.fd);
  done++;
  return false;
}

// Takes the outcome of the rdma_cm connect of a pair that chose RDMA (at,
// on its rendezvous connection): connected, the peer is done once its
// ESTABLISHED came (and rdma_cm is told it is connected, in case the RTU
// was lost: the client's word is the proof); TCP, the peer's rdma_cm id, if
// any, goes and the connection becomes its TCP connection; anything else
// (the connection closed, a malformed frame, connected without a request
// here) means the client gave up: its id goes and its rank is free again.
void take_outcome(detail::rendezvous_desk::arrival &at, detail::cm_group *g, tcp_accept &t,
                  std::size_t &done) {
  const std::size_t peer = at.peer;
  t.stage[peer] = 0;
  const bool has_id = g && g->ids[peer];
  if (at.frame && at.frame->value == detail::cm_outcome_rdma && has_id) {
    if (g->up[peer]) {
      done++;
    } else {
      t.stage[peer] = 2;
      rdma_notify(g->ids[peer]->id, IBV_EVENT_COMM_EST); // EISCONN: ESTABLISHED is on its way
    }
    return;
  }
  if (has_id)
    g->drop(peer);
  if (at.frame && at.frame->value == detail::cm_outcome_tcp) {
    t.rdma_failed[peer] = "its rdma_cm connect to this side failed (it fell back)";
    t.fds[peer] = std::move(at.fd);
    done++;
  }
}

// Accepts o.accept clients from l, each at the index its rank gives, all
// within one deadline (o.step_timeout from the start of the accepting, never
// restarted). Requests and the accepted clients' connection events are
// taken as they come, so a client that is slow to complete its connection
// does not hold up the others; one whose connection fails (CONNECT_ERROR,
// UNREACHABLE, REJECTED, DISCONNECTED before ESTABLISHED) frees its rank
// for a new attempt. Refused clients (malformed, out-of-range or taken
// rank) are rejected and the accepting goes on.
//
// With tcp (a transport other than rdma), the clients' rendezvous come to
// l's TCP socket in the same loop, under the same deadline; rdma_cm
// requests come only where this side offers RDMA (its listener has an
// rdma_cm id, and g exists).
result<void> accept_peers(detail::cm_group *gp, listener &l, const cm_channel_options &o,
                          tcp_accept *tcp) {
  const std::size_t base = o.connect.size();
  rdma_event_channel *lch = gp && l.native_handle() ? l.native_handle()->channel : nullptr;
  rdma_event_channel *chans[2] = {};
  std::size_t nchans = 0;
  if (lch && (!tcp || tcp->rdma_here))
    chans[nchans++] = lch;
  if (gp)
    chans[nchans++] = gp->native();
  const auto deadline = detail::deadline(o.step_timeout);
  std::error_code refused; // the first client refused, reported if time runs out
  std::size_t done = 0;
  std::optional<detail::rendezvous_desk> desk;
  std::vector<detail::rendezvous_desk::arrival> arrivals;
  std::vector<pollfd> fds;
  if (tcp)
    desk.emplace(l.tcp_fd(), o.accept + 16);
  while (done < o.accept) {
    if (desk) { // the rendezvous that came whole (without blocking)
      desk->take(arrivals);
      for (auto &a : arrivals)
        if (a.peer != SIZE_MAX)
          take_outcome(a, gp, *tcp, done);
        else if (answer_rendezvous(a, gp, o, *tcp, *desk, done) && !refused)
          refused = make_error_code(errc::rank_refused);
      arrivals.clear(); // the connections not taken close now, not at the next turn
      if (done >= o.accept)
        break;
    }
    auto ev = detail::take_cm_event(std::span(chans, nchans),
                                    desk ? std::chrono::steady_clock::now() : deadline);
    if (!ev && desk && ev.error() == errc::timed_out && !detail::expired(deadline)) {
      fds.clear(); // wait for either kind of client
      for (std::size_t i = 0; i < nchans; i++)
        fds.push_back({chans[i]->fd, POLLIN, 0});
      desk->watch(fds);
      if (auto ec = detail::wait_ready(fds.data(), fds.size(), deadline);
          ec && ec != errc::timed_out)
        return ec;
      continue;
    }
    if (!ev)
      return refused && ev.error() == errc::timed_out ? result<void>(refused) : ev.error();
    detail::cm_group &g = *gp; // an event came: there is a group
    rdma_cm_id *id = (*ev)->id;
    if ((*ev)->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      const auto type = (*ev)->event;
      std::size_t peer = g.index_of(id);
      if (peer >= g.ids.size()) {
        // The listener's own event (device removal, address change) ends
        // the accepting, as before; one of an id already dropped is stale.
        const bool listener_event = id->channel == lch;
        auto ec = g.event_error(*ev);
        rdma_ack_cm_event(*ev);
        if (listener_event)
          return ec;
        continue;
      }
      if (peer < base || g.up[peer]) { // a connected peer's event
        g.note(peer, *ev);
        rdma_ack_cm_event(*ev);
        continue;
      }
      rdma_ack_cm_event(*ev);
      // After a rendezvous, a peer is done once both its ESTABLISHED and
      // its outcome came (take_outcome()); a failed connection leaves its
      // outcome to come (TCP, most likely).
      const std::uint8_t stage = tcp ? tcp->stage[peer] : 0;
      if (type == RDMA_CM_EVENT_ESTABLISHED) {
        g.up[peer] = true;
        if (stage != 1)
          done++;
        if (stage == 2)
          tcp->stage[peer] = 0;
      } else if (type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE ||
                 type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED) {
        g.drop(peer);
        if (stage == 2) // it said connected; it is not: its rank is free again
          tcp->stage[peer] = 0;
      }
      continue;
    }
    auto hello = parse_cm_hello(detail::event_data(*ev));
    const bool ok = hello.has_value();
    const std::uint32_t rank = hello.value_or(0);
    rdma_ack_cm_event(*ev);
    refusal why = !ok                                                        ? r_malformed
                  : rank < o.first_rank || rank - o.first_rank >= o.accept   ? r_range
                  : g.ids[base + (rank - o.first_rank)]                      ? r_taken
                  : tcp && tcp->fds[base + (rank - o.first_rank)].get() >= 0 ? r_taken
                                                                             : refusal{};
    if (why == refusal{} && g.ctx && g.ctx.native_handle() != id->verbs)
      why = r_device;
    if (why != refusal{}) {
      refuse(id, why);
      // After a rendezvous, the client falls back to TCP; without one, the
      // accepting cannot take it at all.
      if (why == r_device && !(tcp && tcp->stage[base + (rank - o.first_rank)] == 1))
        return errc::wrong_device;
      if (!refused)
        refused = make_error_code(errc::rank_refused);
      continue;
    }
    const std::size_t peer = base + (rank - o.first_rank);
    if (auto r = g.adopt(peer, id); !r)
      return r;
    if (auto r = g.accept(peer, {}); !r)
      return r;
  }
  return {};
}

} // namespace

result<cm_channel_options> cm_mesh(std::size_t rank, std::span<const cm_address> nodes,
                                   cm_channel_options base) {
  if (nodes.empty())
    return errc::no_peers;
  if (rank >= nodes.size() || nodes.size() > UINT32_MAX)
    return errc::bad_rank;
  base.connect.assign(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(rank));
  base.rank = static_cast<std::uint32_t>(rank);
  base.accept = nodes.size() - 1 - rank;
  base.first_rank = static_cast<std::uint32_t>(rank + 1);
  return base;
}

namespace {

// The channel create_cm() makes of what it connected and accepted: the
// group's verbs objects (a software PD where no peer is over RDMA), and
// with a transport other than rdma each peer's transport (over RDMA: it has
// a queue pair; this side offered RDMA to it when rdma_here[peer];
// rdma_failed[peer] says why a pair that chose RDMA fell back) and the TCP
// engine on the rendezvous connections (tcp_fds).
result<std::shared_ptr<detail::channel_state>>
assemble(std::shared_ptr<detail::cm_group> g, const cm_channel_options &o, std::size_t total,
         std::vector<detail::fd_guard> &tcp_fds, const std::vector<std::uint8_t> &rdma_here,
         const std::vector<std::string> &rdma_failed, std::string no_rdma) {
  auto s = std::make_shared<detail::channel_state>();
  std::vector<std::uint8_t> rdma(total, 0);
  if (g) {
    g->learn_paths();
    for (std::size_t p = 0; p < total; p++)
      rdma[p] = g->qps[p] ? 1 : 0;
    // The channel state gets the verbs objects; the group (its ids, their
    // events) goes with it, disconnecting the peers when the state ends.
    s->ctx = std::move(g->ctx);
    s->pd = std::move(g->pd);
    s->cq = std::move(g->cq);
    s->qps = std::move(g->qps);
  }
  if (!s->pd)
    s->pd = detail::software_pd();
  s->index_qps();
  s->peer_state.assign(total, 0);
  s->set_ready();
  s->limit = o.channel.scope_limit;
  auto link = std::make_shared<cm_link>();
  link->g = std::move(g);
  if (!tcp_fds.empty()) {
    s->allowed = o.channel.transport;
    s->no_rdma = std::move(no_rdma);
    s->why.assign(total, {});
    s->over_tcp.assign(total, 0);
    bool any_tcp = false;
    for (std::size_t p = 0; p < total; p++)
      any_tcp |= s->choose(p, rdma_here[p] || rdma[p], rdma[p], rdma_failed[p]);
    if (any_tcp) {
      for (auto &st : s->peer_state) // posts go out of line, where TCP is known
        st |= detail::channel_core::k_neutral;
      s->set_ready();
      auto e = detail::tcp_engine::make(total, detail::access::node(s->pd), o.channel.send_depth,
                                        o.channel.recv_depth);
      if (!e)
        return e.error();
      (*e)->keep_alive(o.channel.connect.transport.ack_timeout,
                       o.channel.connect.transport.retry_count);
      auto failures = (*e)->watch_failures();
      if (!failures)
        return failures.error();
      link->events.reset(::epoll_create1(EPOLL_CLOEXEC));
      if (link->events.get() < 0)
        return errno_code(errno);
      epoll_event ev{};
      ev.events = EPOLLIN;
      for (int fd : {*failures, link->g ? link->g->fd() : -1})
        if (fd >= 0 && ::epoll_ctl(link->events.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
          return errno_code(errno);
      std::vector<detail::tcp_engine::peer_setup> setups(total);
      for (std::size_t p = 0; p < total; p++)
        if (s->over_tcp[p]) {
          setups[p].tcp = true;
          setups[p].fd = tcp_fds[p].release();
        }
      s->tcp = std::move(*e);
      if (auto st = s->tcp->start(std::move(setups)); !st.ok())
        return st;
      s->tcp_started = true;
    } else {
      s->over_tcp.clear(); // every peer over RDMA: the inline data path, as with rdma
    }
  }
  s->connected = true;
  s->link = std::move(link);
  return s;
}

// After a rendezvous in which both sides offered RDMA: rdma_cm connects peer
// i, each step within half of step_timeout (so that a fallback still fits
// the accepting side's one deadline), and the outcome goes back over the
// rendezvous connection: connected (the connection then closes), or, when
// rdma_cm could not connect, TCP on that connection (tcp_fd; failed says
// why). Errors: those of sending the outcome (*step says so).
result<void> rdma_or_tcp(detail::cm_group &g, std::size_t i, const sockaddr_storage &addr,
                         std::span<const std::byte> hello, std::chrono::milliseconds step_timeout,
                         detail::rendezvous_reply &rv, detail::fd_guard &tcp_fd,
                         std::string &failed, const char **step) {
  auto r = g.connect(i, addr, hello, nullptr, step_timeout / 2, step);
  if (!r) {
    failed =
        detail::format("rdma_cm could not connect: %s: %s", *step, r.error().message().c_str());
    g.drop(i);
  }
  *step = "rendezvous: send the outcome";
  const detail::cm_rendezvous outcome{r ? detail::cm_outcome_rdma : detail::cm_outcome_tcp,
                                      detail::cm_can_tcp};
  if (auto sent = detail::rendezvous_send(rv.fd.get(), outcome, detail::deadline(step_timeout));
      !sent)
    return sent.error();
  if (!r)
    tcp_fd = std::move(rv.fd);
  return {};
}

} // namespace

result<multi_channel> multi_channel::create_cm(listener *from, const cm_channel_options &o) {
  detail::clear_error_detail();
  const std::size_t total = o.connect.size() + o.accept;
  if (total == 0)
    return errc::no_peers;
  if (o.accept > UINT32_MAX || o.first_rank + std::uint64_t{o.accept} > 1ull << 32)
    return errc::bad_rank;
  if (o.accept && !from)
    return errc::no_listener;
  const gid_selector default_gid;
  if (o.channel.port != 0 || o.channel.gid.type != default_gid.type ||
      o.channel.gid.ipv4 != default_gid.ipv4)
    return errc::not_honoured;
  if (auto r = detail::check_cm_transport(o.channel.connect.transport); !r)
    return r.error();
  std::vector<sockaddr_storage> addrs;
  for (const auto &a : o.connect) {
    auto r = resolve(a);
    if (!r)
      return r.error();
    addrs.push_back(*r);
  }
  const bool rdma_only = o.channel.transport == channel_transport::rdma;
  if (rdma_only && o.accept && !from->native_handle())
    return detail::rdma_error(errc::empty_object);
  if (!rdma_only && o.accept && !from->native_handle() && from->tcp_fd() < 0)
    return errc::empty_object;
  if (!rdma_only && o.accept && from->tcp_fd() < 0)
    return detail::fail(errc::not_honoured,
                        detail::format("multi_channel::create_cm: the listener has no TCP socket "
                                       "for the rendezvous of transport %s (bind it with "
                                       "listener::bind(host, port, channel_transport::%s))",
                                       name(o.channel.transport).data(),
                                       name(o.channel.transport).data()));
  auto build = [&]() -> result<multi_channel> {
    std::shared_ptr<detail::cm_group> g;
    std::string no_rdma;
    if (o.channel.transport != channel_transport::tcp) {
      auto made = detail::cm_group::create(total);
      if (made)
        g = std::move(*made);
      else if (rdma_only)
        return made.error();
      else // the reason as multi_channel::create(opts) gives it
        no_rdma = stack() == stack_state::ready ? made.error().message()
                                                : std::string(diagnose().sentence);
    } else {
      no_rdma = "the channel's transport is tcp";
    }
    if (g) {
      g->transport = o.channel.connect.transport;
      g->step_timeout = o.step_timeout;
      g->linger = o.disconnect_timeout;
      g->rejection = rank_rejection;
      // One CQ for every peer's send and receive entries, cut to the device.
      g->sizes = [total, send = o.channel.send_depth,
                  recv = o.channel.recv_depth](const device_attr &dev) -> result<detail::cm_sizes> {
        auto depths = detail::plan_depths(dev, total, send, recv);
        if (!depths)
          return depths.error();
        detail::cm_sizes z;
        z.qp.send_depth = depths->send;
        z.qp.recv_depth = depths->recv;
        z.qp.wr_api = false;
        z.cq_depth = depths->cqe;
        return z;
      };
    }
    // What this side offers each peer: a connecting side RDMA wherever
    // rdma_cm works here; an accepting one where its listener has an
    // rdma_cm id too.
    std::vector<std::uint8_t> rdma_here(total, g ? 1 : 0);
    const bool listener_rdma = g && o.accept && from->native_handle();
    for (std::size_t p = o.connect.size(); p < total; p++)
      rdma_here[p] = listener_rdma ? 1 : 0;
    if (g && !listener_rdma && no_rdma.empty())
      no_rdma = "its listener has no rdma_cm id (rdma_cm could not bind its address)";
    std::vector<detail::fd_guard> tcp_fds(rdma_only ? 0 : total);
    std::vector<std::string> rdma_failed(total);
    const auto me = cm_hello(o.rank);
    for (std::size_t i = 0; i < addrs.size(); i++) {
      const char *step = nullptr;
      std::uint32_t refusal = 0;
      result<void> r;
      if (rdma_only) {
        r = g->connect(i, addrs[i], me, nullptr, g->step_timeout, &step);
      } else {
        const detail::cm_rendezvous mine{
            o.rank, static_cast<std::uint8_t>(detail::cm_can_tcp | (g ? detail::cm_can_rdma : 0))};
        auto rv = detail::rendezvous_connect(addrs[i], mine, detail::deadline(o.step_timeout),
                                             &step, &refusal);
        if (!rv)
          r = rv.error();
        else if (g && (rv->answer.caps & detail::cm_can_rdma))
          r = rdma_or_tcp(*g, i, addrs[i], me, o.step_timeout, *rv, tcp_fds[i], rdma_failed[i],
                          &step);
        else
          tcp_fds[i] = std::move(rv->fd);
      }
      if (!r) {
        // Which peer and which step, as rdmadl::connect says it (and the
        // failed call's own detail, if it left one).
        std::string why =
            detail::format("multi_channel::create_cm: peer %zu (%s:%u): %s: %s", i,
                           o.connect[i].host.c_str(), static_cast<unsigned>(o.connect[i].port),
                           step ? step : "start", r.error().message().c_str());
        if (refusal)
          why += detail::format(" (rank %u: %s)", o.rank, refusal_text(refusal));
        else if (!last_error_detail().empty())
          why += " (" + std::string(last_error_detail()) + ")";
        detail::set_error_detail(std::move(why));
        return r.error();
      }
    }
    if (o.accept) {
      tcp_accept t{tcp_fds, from->native_handle() != nullptr && g != nullptr, rdma_failed};
      if (auto r = accept_peers(g.get(), *from, o, rdma_only ? nullptr : &t); !r)
        return r.error();
    }
    auto s = assemble(std::move(g), o, total, tcp_fds, rdma_here, rdma_failed, std::move(no_rdma));
    if (!s)
      return s.error();
    multi_channel mc;
    mc.adopt(std::move(*s));
    return mc;
  };
  if (rdma_only)
    return detail::rdma_error(build());
  return build();
}

int multi_channel::cm_fd() const noexcept {
  auto *l = link_of(s_);
  if (!l)
    return -1;
  if (l->events.get() >= 0)
    return l->events.get();
  return l->g ? l->g->fd() : -1;
}

bool multi_channel::cm_connected(std::size_t peer) const noexcept {
  auto *l = link_of(s_);
  if (!l || peer >= s_->peers())
    return false;
  if (s_->tcp && s_->over_tcp[peer])
    return s_->tcp->failure(peer).empty();
  return l->g && l->g->up[peer].load();
}

result<cm_peer_event> multi_channel::next_cm_event(std::chrono::milliseconds timeout) {
  auto *l = link_of(s_);
  if (!l)
    return detail::rdma_error(errc::empty_object);
  const auto until = detail::deadline(timeout);
  for (;;) {
    // A TCP peer's connection ended (the engine failed it): reported as an
    // rdma_cm disconnect.
    if (s_->tcp)
      if (std::size_t p = s_->tcp->take_failure(); p != SIZE_MAX) {
        s_->fail(p);
        return cm_peer_event{p, cm_event_kind::disconnected, RDMA_CM_EVENT_DISCONNECTED, 0};
      }
    if (l->g) {
      auto e = l->g->next_event(s_->tcp ? std::chrono::steady_clock::now() : until);
      if (e) {
        // A peer reported gone was disconnected from this side too (its
        // queue pair flushed): it is failed, as after a failed request.
        if (e->kind == cm_event_kind::disconnected || e->kind == cm_event_kind::connection_error ||
            e->kind == cm_event_kind::device_removal)
          s_->fail(e->peer);
        return e;
      }
      if (!s_->tcp || e.error() != errc::timed_out)
        return e.error();
    }
    if (!s_->tcp || detail::expired(until))
      return errc::timed_out;
    if (auto ec = detail::wait_readable(l->events.get(), until); ec && ec != errc::timed_out)
      return ec;
  }
}

result<channel> channel::create_cm(listener *from, const cm_channel_options &opts) {
  if (opts.connect.size() + opts.accept == 0)
    return errc::no_peers;
  if (opts.connect.size() + opts.accept != 1)
    return errc::one_peer_only;
  return wrap(multi_channel::create_cm(from, opts));
}

} // namespace rdmadl
