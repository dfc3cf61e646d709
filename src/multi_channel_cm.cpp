// SPDX-License-Identifier: MIT
// multi_channel over rdma_cm: peers connected to addresses and accepted from
// a listener, identified by the rank each connecting side sends, all on one
// PD and one CQ; their rdma_cm events for an event loop.
#include "rdmadl_verbs.h"

#include <atomic>
#include <chrono>
#include <optional>

#include "channel_state.hpp"
#include "cm_group.hpp"
#include "cm_hello.hpp"
#include "detail.hpp"
#include "rdmadl/channel.hpp"
#include "rdmadl/cm.hpp"
#include "rdmadl/multi_channel.hpp"

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

// The group of a channel built with create_cm (held by the channel state).
detail::cm_group *group_of(const std::shared_ptr<detail::channel_state> &s) noexcept {
  return s ? static_cast<detail::cm_group *>(s->link.get()) : nullptr;
}

// Accepts o.accept clients from l, each at the index its rank gives, all
// within one deadline (o.step_timeout from the start of the accepting, never
// restarted). Requests and the accepted clients' connection events are
// taken as they come, so a client that is slow to complete its connection
// does not hold up the others; one whose connection fails (CONNECT_ERROR,
// UNREACHABLE, REJECTED, DISCONNECTED before ESTABLISHED) frees its rank
// for a new attempt. Refused clients (malformed, out-of-range or taken
// rank) are rejected and the accepting goes on.
result<void> accept_peers(detail::cm_group &g, listener &l, const cm_channel_options &o) {
  const std::size_t base = o.connect.size();
  rdma_event_channel *lch = l.native_handle()->channel;
  rdma_event_channel *const chans[] = {lch, g.native()};
  const auto deadline = detail::deadline(o.step_timeout);
  std::error_code refused; // the first client refused, reported if time runs out
  std::size_t done = 0;
  while (done < o.accept) {
    auto ev = detail::take_cm_event(chans, deadline);
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
      if (type == RDMA_CM_EVENT_ESTABLISHED) {
        g.up[peer] = true;
        done++;
      } else if (type == RDMA_CM_EVENT_CONNECT_ERROR || type == RDMA_CM_EVENT_UNREACHABLE ||
                 type == RDMA_CM_EVENT_REJECTED || type == RDMA_CM_EVENT_DISCONNECTED) {
        g.drop(peer);
      }
      continue;
    }
    auto hello = parse_cm_hello(detail::event_data(*ev));
    const bool ok = hello.has_value();
    const std::uint32_t rank = hello.value_or(0);
    rdma_ack_cm_event(*ev);
    refusal why = !ok                                                      ? r_malformed
                  : rank < o.first_rank || rank - o.first_rank >= o.accept ? r_range
                  : g.ids[base + (rank - o.first_rank)]                    ? r_taken
                                                                           : refusal{};
    if (why == refusal{} && g.ctx && g.ctx.native_handle() != id->verbs)
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
  if (o.accept && !from->native_handle())
    return detail::rdma_error(errc::empty_object);
  return detail::rdma_error([&]() -> result<multi_channel> {
    auto made = detail::cm_group::create(total);
    if (!made)
      return made.error();
    std::shared_ptr<detail::cm_group> g = std::move(*made);
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
    const auto me = cm_hello(o.rank);
    for (std::size_t i = 0; i < addrs.size(); i++) {
      const char *step = nullptr;
      if (auto r = g->connect(i, addrs[i], me, nullptr, &step); !r) {
        // Which peer and which step, as rdmadl::connect says it (and the
        // failed call's own detail, if it left one).
        std::string why =
            detail::format("multi_channel::create_cm: peer %zu (%s:%u): %s: %s", i,
                           o.connect[i].host.c_str(), static_cast<unsigned>(o.connect[i].port),
                           step ? step : "start", r.error().message().c_str());
        if (!last_error_detail().empty())
          why += " (" + std::string(last_error_detail()) + ")";
        detail::set_error_detail(std::move(why));
        return r.error();
      }
    }
    if (o.accept)
      if (auto r = accept_peers(*g, *from, o); !r)
        return r.error();
    g->learn_paths();
    // The channel state gets the verbs objects; the group (its ids, their
    // events) goes with it, disconnecting the peers when the state ends.
    auto s = std::make_shared<detail::channel_state>();
    s->ctx = std::move(g->ctx);
    s->pd = std::move(g->pd);
    s->cq = std::move(g->cq);
    s->qps = std::move(g->qps);
    s->index_qps();
    s->peer_state.assign(total, 0);
    s->limit = o.channel.scope_limit;
    s->connected = true;
    s->link = std::move(g);
    multi_channel mc;
    mc.adopt(std::move(s));
    return mc;
  }());
}

int multi_channel::cm_fd() const noexcept {
  auto *g = group_of(s_);
  return g ? g->fd() : -1;
}

bool multi_channel::cm_connected(std::size_t peer) const noexcept {
  auto *g = group_of(s_);
  return g && peer < g->ids.size() && g->up[peer].load();
}

result<cm_peer_event> multi_channel::next_cm_event(std::chrono::milliseconds timeout) {
  auto *g = group_of(s_);
  if (!g)
    return detail::rdma_error(errc::empty_object);
  auto e = g->next_event(detail::deadline(timeout));
  if (!e)
    return e.error();
  // A peer reported gone was disconnected from this side too (its queue
  // pair flushed): it is failed, as after a failed request.
  if (e->kind == cm_event_kind::disconnected || e->kind == cm_event_kind::connection_error ||
      e->kind == cm_event_kind::device_removal)
    s_->fail(e->peer);
  return e;
}

result<channel> channel::create_cm(listener *from, const cm_channel_options &opts) {
  if (opts.connect.size() + opts.accept == 0)
    return errc::no_peers;
  if (opts.connect.size() + opts.accept != 1)
    return errc::one_peer_only;
  return wrap(multi_channel::create_cm(from, opts));
}

} // namespace rdmadl
