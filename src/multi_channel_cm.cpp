// SPDX-License-Identifier: MIT
// multi_channel over rdma_cm: peers connected to addresses and accepted from
// a listener, identified by the rank each connecting side sends, all on one
// PD and one CQ; their rdma_cm events for an event loop.
#include "rdmadl_verbs.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <netdb.h>
#include <optional>
#include <poll.h>
#include <string>

#include "channel_state.hpp"
#include "cm_common.hpp"
#include "cm_hello.hpp"
#include "detail.hpp"
#include "nodes.hpp"
#include "rdmadl/cm.hpp"
#include "rdmadl/channel.hpp"
#include "rdmadl/multi_channel.hpp"
#include "serial.hpp"

namespace rdmadl {

namespace detail {

// The one event channel every id of a multi_channel reports on.
struct cm_chan {
  event_channel ch;
};

// One peer's id; destroyed before the channel it reports on.
struct cm_peer_id {
  rdma_cm_id *id = nullptr;
  std::shared_ptr<cm_chan> ch;
  ~cm_peer_id() {
    if (id)
      rdma_destroy_id(id);
  }
};

struct cm_group {
  std::shared_ptr<cm_chan> ch = std::make_shared<cm_chan>();
  std::vector<std::shared_ptr<cm_peer_id>> ids; // by peer index; null until made
  // Connected, by peer index; read by cm_connected() from any thread.
  std::unique_ptr<std::atomic<bool>[]> up;
  std::deque<cm_peer_event> queued; // taken while waiting for something else
  std::chrono::milliseconds linger{1000};

  rdma_event_channel *native() const noexcept { return ch->ch.native_handle(); }
  // The peer index of id, or ids.size().
  std::size_t index_of(const rdma_cm_id *id) const noexcept {
    for (std::size_t i = 0; i < ids.size(); i++)
      if (ids[i] && ids[i]->id == id)
        return i;
    return ids.size();
  }
  // Disconnects every connected peer, then waits (up to linger in all) for
  // their DISCONNECTED, so the peers' disconnects are answered.
  ~cm_group();
};

} // namespace detail

namespace {

using ms = std::chrono::milliseconds;
using clock = std::chrono::steady_clock;

// Why a client was rejected (the value of a reject's hello frame).
enum refusal : std::uint8_t { r_malformed = 1, r_range = 2, r_taken = 3, r_device = 4 };

using detail::cm_hello;
using detail::parse_cm_hello;

// An address to connect to; an empty host or port 0 is no address.
result<sockaddr_storage> resolve(const cm_address &a) {
  if (a.host.empty() || a.port == 0)
    return std::errc::address_not_available;
  return detail::resolve_address(a.host, a.port, false);
}

cm_event_kind kind_of(int e) noexcept {
  switch (e) {
  case RDMA_CM_EVENT_DISCONNECTED:
    return cm_event_kind::disconnected;
  case RDMA_CM_EVENT_CONNECT_ERROR:
  case RDMA_CM_EVENT_UNREACHABLE:
    return cm_event_kind::connection_error;
  case RDMA_CM_EVENT_DEVICE_REMOVAL:
    return cm_event_kind::device_removal;
  case RDMA_CM_EVENT_ADDR_CHANGE:
    return cm_event_kind::address_change;
  case RDMA_CM_EVENT_TIMEWAIT_EXIT:
    return cm_event_kind::timewait_exit;
  default:
    return cm_event_kind::other;
  }
}

// An event of a known peer, taken outside next_cm_event: a peer that is
// gone is disconnected from this side too (flushing its queue pair), and the
// event queued for next_cm_event.
void note(detail::cm_group &g, std::size_t peer, const rdma_cm_event *ev) {
  cm_peer_event e{peer, kind_of(ev->event), static_cast<int>(ev->event), ev->status};
  if ((e.kind == cm_event_kind::disconnected || e.kind == cm_event_kind::connection_error ||
       e.kind == cm_event_kind::device_removal) &&
      g.up[peer]) {
    g.up[peer] = false;
    rdma_disconnect(g.ids[peer]->id);
  }
  g.queued.push_back(e);
}

// A rejection that carries a rank refusal is errc::rank_refused; the rest
// as for any rdma_cm event.
std::error_code event_error(const rdma_cm_event *ev) {
  if (ev->event == RDMA_CM_EVENT_REJECTED) {
    auto p = static_cast<const std::byte *>(ev->param.conn.private_data);
    auto why = p ? parse_cm_hello({p, ev->param.conn.private_data_len}) : std::nullopt;
    if (why && *why != r_device)
      return make_error_code(errc::rank_refused);
  }
  return detail::cm_event_error(ev);
}

// Waits for event want on id (peer index peer); events of the other peers
// that come meanwhile are noted for next_cm_event.
result<void> expect(detail::cm_group &g, rdma_cm_id *id, rdma_cm_event_type want, ms timeout) {
  auto deadline = detail::deadline(timeout);
  for (;;) {
    auto ev = detail::take_cm_event(g.native(), deadline);
    if (!ev)
      return ev.error();
    std::error_code ec;
    bool mine = (*ev)->id == id;
    if (mine) {
      if ((*ev)->event != want)
        ec = event_error(*ev);
    } else if (std::size_t p = g.index_of((*ev)->id); p < g.ids.size()) {
      note(g, p, *ev);
    }
    rdma_ack_cm_event(*ev);
    if (mine)
      return ec ? result<void>(ec) : result<void>();
  }
}

// The shared PD and CQ, made on the first peer's device (the channel keeps
// that id alive for as long as the context is used); every later peer must
// be on the same device. Then peer's QP on them.
result<void> add_qp(detail::channel_state &s, detail::cm_group &g, std::size_t peer,
                    const cm_channel_options &o, std::size_t total) {
  rdma_cm_id *id = g.ids[peer]->id;
  if (!id->verbs)
    return errc::unexpected_event;
  if (!s.ctx) {
    s.ctx = detail::borrow_context(id->verbs, g.ids[peer]);
    auto pd = protection_domain::create(s.ctx);
    if (!pd)
      return pd.error();
    s.pd = std::move(*pd);
    auto dev = s.ctx.query_device();
    if (!dev)
      return dev.error();
    auto depths = detail::plan_depths(*dev, total, o.channel.send_depth, o.channel.recv_depth);
    if (!depths)
      return depths.error();
    cq_options co;
    co.depth = depths->cqe;
    co.extended = false;
    auto cq = completion_queue::create(s.ctx, co);
    if (!cq)
      return cq.error();
    s.cq = std::move(*cq);
  } else if (s.ctx.native_handle() != id->verbs) {
    return errc::wrong_device;
  }
  auto dev = s.ctx.query_device();
  if (!dev)
    return dev.error();
  auto depths = detail::plan_depths(*dev, total, o.channel.send_depth, o.channel.recv_depth);
  if (!depths)
    return depths.error();
  qp_options qo;
  qo.send_depth = depths->send;
  qo.recv_depth = depths->recv;
  ibv_qp_init_attr a = detail::plain(detail::qp_init_attr(
      *dev, qo, s.pd.native_handle(), s.cq.native_handle(), s.cq.native_handle()));
  if (rdma_create_qp(id, s.pd.native_handle(), &a))
    return detail::rdma_error();
  auto n = std::make_shared<detail::qp_node>();
  n->qp = id->qp;
  n->kind = detail::qp_node::owner_kind::rdma_cm;
  n->cm_id = id;
  n->owner = g.ids[peer];
  n->type = qp_type::rc;
  n->pd = detail::access::node(s.pd);
  n->send_cq = n->recv_cq = detail::access::node(s.cq);
  n->port = id->port_num;
  detail::access::set(s.qps[peer], std::move(n));
  return detail::set_ack_timeout(id, o.ack_timeout);
}

rdma_conn_param conn_param(const detail::channel_state &s, const cm_channel_options &o,
                           std::span<const std::byte> data) {
  rdma_conn_param p{};
  p.private_data = data.data();
  p.private_data_len = static_cast<std::uint8_t>(data.size());
  auto dev = s.ctx.query_device();
  p.responder_resources =
      static_cast<std::uint8_t>(std::clamp(dev ? dev->max_qp_rd_atom : 1, 1, 255));
  p.initiator_depth =
      static_cast<std::uint8_t>(std::clamp(dev ? dev->max_qp_init_rd_atom : 1, 1, 255));
  p.retry_count = std::min<std::uint8_t>(o.retry_count, 7);
  p.rnr_retry_count = 7;
  return p;
}

// Rejects a connection request, saying why, and destroys its id.
void refuse(rdma_cm_id *id, refusal why) {
  auto b = cm_hello(why);
  rdma_reject(id, b.data(), static_cast<std::uint8_t>(b.size()));
  rdma_destroy_id(id);
}

result<void> connect_peer(detail::channel_state &s, detail::cm_group &g, std::size_t peer,
                          const sockaddr_storage &addr, const cm_channel_options &o,
                          std::size_t total) {
  auto node = std::make_shared<detail::cm_peer_id>();
  node->ch = g.ch;
  if (rdma_create_id(g.native(), &node->id, nullptr, RDMA_PS_TCP)) {
    node->id = nullptr;
    return detail::rdma_error();
  }
  g.ids[peer] = node;
  rdma_cm_id *id = node->id;
  sockaddr_storage dst = addr;
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&dst),
                        detail::cm_timeout(o.timeout)))
    return detail::rdma_error();
  if (auto r = expect(g, id, RDMA_CM_EVENT_ADDR_RESOLVED, o.timeout); !r)
    return r;
  if (rdma_resolve_route(id, detail::cm_timeout(o.timeout)))
    return detail::rdma_error();
  if (auto r = expect(g, id, RDMA_CM_EVENT_ROUTE_RESOLVED, o.timeout); !r)
    return r;
  if (auto r = add_qp(s, g, peer, o, total); !r)
    return r;
  auto me = cm_hello(o.rank);
  rdma_conn_param p = conn_param(s, o, me);
  if (rdma_connect(id, &p))
    return detail::rdma_error();
  if (auto r = expect(g, id, RDMA_CM_EVENT_ESTABLISHED, o.timeout); !r)
    return r;
  g.up[peer] = true;
  return {};
}

// The next event of either channel, waiting until deadline; the caller
// acks it. Errors: errc::timed_out, or the errno.
result<rdma_cm_event *> take_either(rdma_event_channel *a, rdma_event_channel *b,
                                    clock::time_point deadline) {
  for (;;) {
    for (auto *ch : {a, b}) {
      rdma_cm_event *ev = nullptr;
      if (rdma_get_cm_event(ch, &ev) == 0)
        return ev;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return detail::rdma_error();
    }
    int left = detail::poll_timeout(deadline);
    if (left == 0)
      return errc::timed_out;
    pollfd p[2] = {{a->fd, POLLIN, 0}, {b->fd, POLLIN, 0}};
    if (::poll(p, 2, left) < 0 && errno != EINTR)
      return detail::rdma_error();
  }
}

// Gives up an accepted client that did not get connected: its queue pair
// and id go, so the same rank may connect again.
void drop_accepted(detail::channel_state &s, detail::cm_group &g, std::size_t peer) {
  s.qps[peer] = queue_pair(); // rdma_destroy_qp; the node held the id until here
  g.ids[peer].reset();
}

// Accepts o.accept clients from l, each at the index its rank gives, all
// within one deadline (o.timeout from the start of the accepting, never
// restarted). Requests and the accepted clients' connection events are
// taken as they come, so a client that is slow to complete its connection
// does not hold up the others; one whose connection fails (CONNECT_ERROR,
// UNREACHABLE, REJECTED, DISCONNECTED before ESTABLISHED) frees its rank
// for a new attempt. Refused clients (malformed, out-of-range or taken
// rank) are rejected and the accepting goes on.
result<void> accept_peers(detail::channel_state &s, detail::cm_group &g, listener &l,
                          const cm_channel_options &o, std::size_t total) {
  const std::size_t base = o.connect.size();
  rdma_event_channel *lch = l.native_handle()->channel;
  const auto deadline = detail::deadline(o.timeout);
  std::error_code refused; // the first client refused, reported if time runs out
  std::size_t done = 0;
  while (done < o.accept) {
    auto ev = take_either(lch, g.native(), deadline);
    if (!ev)
      return refused && ev.error() == errc::timed_out ? result<void>(refused) : ev.error();
    rdma_cm_id *id = (*ev)->id;
    if ((*ev)->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
      const auto type = (*ev)->event;
      std::size_t peer = g.index_of(id);
      if (peer >= g.ids.size()) {
        // The listener's own event (device removal, address change) ends
        // the accepting, as before; one of an id already dropped is stale.
        const bool listener_event = id->channel == lch;
        auto ec = event_error(*ev);
        rdma_ack_cm_event(*ev);
        if (listener_event)
          return ec;
        continue;
      }
      if (peer < base || g.up[peer]) { // a connected peer's event
        note(g, peer, *ev);
        rdma_ack_cm_event(*ev);
        continue;
      }
      rdma_ack_cm_event(*ev);
      if (type == RDMA_CM_EVENT_ESTABLISHED) {
        g.up[peer] = true;
        done++;
      } else if (type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE ||
                 type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED) {
        drop_accepted(s, g, peer);
      }
      continue;
    }
    auto p = static_cast<const std::byte *>((*ev)->param.conn.private_data);
    auto hello = p ? parse_cm_hello({p, (*ev)->param.conn.private_data_len}) : std::nullopt;
    const bool ok = hello.has_value();
    const std::uint32_t rank = hello.value_or(0);
    rdma_ack_cm_event(*ev);
    refusal why = !ok                                                      ? r_malformed
                  : rank < o.first_rank || rank - o.first_rank >= o.accept ? r_range
                  : g.ids[base + (rank - o.first_rank)]                    ? r_taken
                                                                           : refusal{};
    if (why == refusal{} && s.ctx && s.ctx.native_handle() != id->verbs)
      why = r_device;
    if (why != refusal{}) {
      refuse(id, why);
      if (why == r_device)
        return errc::wrong_device;
      if (!refused)
        refused = make_error_code(errc::rank_refused);
      continue;
    }
    const std::size_t peer = base + (rank - o.first_rank);
    auto node = std::make_shared<detail::cm_peer_id>();
    node->id = id;
    node->ch = g.ch;
    g.ids[peer] = node;
    // A request this side cannot take is rejected, so its client learns it
    // now rather than at its timeout.
    if (rdma_migrate_id(id, g.native())) {
      auto ec = detail::rdma_error();
      rdma_reject(id, nullptr, 0);
      return ec;
    }
    if (auto r = add_qp(s, g, peer, o, total); !r) {
      rdma_reject(id, nullptr, 0);
      return r;
    }
    rdma_conn_param cp = conn_param(s, o, {});
    if (rdma_accept(id, &cp)) {
      auto ec = detail::rdma_error();
      rdma_reject(id, nullptr, 0);
      return ec;
    }
  }
  return {};
}

} // namespace

detail::cm_group::~cm_group() {
  std::size_t waiting = 0;
  for (std::size_t i = 0; i < ids.size(); i++)
    if (up[i] && rdma_disconnect(ids[i]->id) == 0)
      waiting++;
  auto deadline = detail::deadline(linger);
  while (waiting) {
    auto ev = detail::take_cm_event(native(), deadline);
    if (!ev)
      break;
    std::size_t p = index_of((*ev)->id);
    if (p < ids.size() && up[p] && kind_of((*ev)->event) != cm_event_kind::other &&
        kind_of((*ev)->event) != cm_event_kind::timewait_exit) {
      up[p] = false;
      waiting--;
    }
    rdma_ack_cm_event(*ev);
  }
}

result<cm_channel_options> cm_mesh(std::size_t rank, std::span<const cm_address> nodes,
                                   cm_channel_options base) {
  if (rank >= nodes.size() || nodes.size() > UINT32_MAX)
    return errc::out_of_range;
  base.connect.assign(nodes.begin(), nodes.begin() + static_cast<std::ptrdiff_t>(rank));
  base.rank = static_cast<std::uint32_t>(rank);
  base.accept = nodes.size() - 1 - rank;
  base.first_rank = static_cast<std::uint32_t>(rank + 1);
  return base;
}

result<multi_channel> multi_channel::create_cm(listener *from, const cm_channel_options &o) {
  const std::size_t total = o.connect.size() + o.accept;
  if (total == 0 || o.accept > UINT32_MAX || o.first_rank + std::uint64_t{o.accept} > 1ull << 32)
    return errc::out_of_range;
  if (o.accept && !from)
    return errc::empty_object;
  const gid_selector default_gid;
  if (o.channel.port != 0 || o.channel.gid.type != default_gid.type ||
      o.channel.gid.ipv4 != default_gid.ipv4)
    return errc::not_honoured;
  std::vector<sockaddr_storage> addrs;
  for (const auto &a : o.connect) {
    auto r = resolve(a);
    if (!r)
      return r.error();
    addrs.push_back(*r);
  }
  if (o.accept && !from->native_handle())
    return detail::rdma_error(errc::empty_object);
  return detail::rdma_error([&]() -> result<multi_channel> {
    auto ch = event_channel::create();
    if (!ch)
      return ch.error();
    auto s = std::make_shared<detail::channel_state>();
    s->cm = std::make_shared<detail::cm_group>();
    auto &g = *s->cm;
    g.ch->ch = std::move(*ch);
    g.linger = o.disconnect_timeout;
    g.ids.resize(total);
    g.up = std::make_unique<std::atomic<bool>[]>(total);
    s->qps.resize(total);
    s->failed.assign(total, 0);
    s->limit = o.channel.scope_limit;
    for (std::size_t i = 0; i < addrs.size(); i++)
      if (auto r = connect_peer(*s, g, i, addrs[i], o, total); !r)
        return r.error();
    if (o.accept)
      if (auto r = accept_peers(*s, g, *from, o, total); !r)
        return r.error();
    // The port and source GID rdma_cm chose, for local_endpoint().
    for (std::size_t i = 0; i < total; i++) {
      auto &n = detail::access::node(s->qps[i]);
      std::uint8_t port = g.ids[i]->id->port_num;
      if (!detail::init_from_qp(*n, s->ctx, port, -1, {}).ok())
        n->port = port;
    }
    s->connected = true;
    multi_channel mc;
    mc.s_ = std::move(s);
    return mc;
  }());
}

int multi_channel::cm_fd() const noexcept {
  return s_ && s_->cm ? s_->cm->ch->ch.fd() : -1;
}

bool multi_channel::cm_connected(std::size_t peer) const noexcept {
  return s_ && s_->cm && peer < s_->cm->ids.size() && s_->cm->up[peer].load();
}

result<cm_peer_event> multi_channel::next_cm_event(std::chrono::milliseconds timeout) {
  if (!s_ || !s_->cm)
    return detail::rdma_error(errc::empty_object);
  auto &g = *s_->cm;
  auto deadline = detail::deadline(timeout);
  while (g.queued.empty()) {
    auto ev = detail::take_cm_event(g.native(), deadline);
    if (!ev)
      return ev.error();
    if (std::size_t p = g.index_of((*ev)->id); p < g.ids.size())
      note(g, p, *ev);
    rdma_ack_cm_event(*ev);
  }
  auto e = g.queued.front();
  g.queued.pop_front();
  // A peer reported gone was disconnected from this side too (its queue
  // pair flushed): it is failed, as after a failed request.
  if (e.kind == cm_event_kind::disconnected || e.kind == cm_event_kind::connection_error ||
      e.kind == cm_event_kind::device_removal)
    s_->fail(e.peer);
  return e;
}

result<channel> channel::create_cm(listener *from, const cm_channel_options &opts) {
  if (opts.connect.size() + opts.accept != 1)
    return errc::out_of_range;
  auto mc = multi_channel::create_cm(from, opts);
  if (!mc)
    return mc.error();
  channel c;
  c.mc_ = std::move(*mc);
  return c;
}

} // namespace rdmadl
