// SPDX-License-Identifier: MIT
#include "cm_group.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <netdb.h>
#include <utility>

#include "fd.hpp"
#include "log.h"
#include "lookup.hpp"
#include "nodes.hpp"
#include "rdmadl/loader.h"

namespace rdmadl::detail {

int cm_timeout(std::chrono::milliseconds t) noexcept {
  return t.count() <= 0 ? 0 : t.count() > (1 << 30) ? (1 << 30) : static_cast<int>(t.count());
}

result<sockaddr_storage> resolve_address(std::string_view host, std::uint16_t port, bool passive) {
  auto res = lookup_address(host, port, passive);
  if (!res)
    return res.error();
  sockaddr_storage ss{};
  std::memcpy(&ss, (*res)->ai_addr, std::min<std::size_t>((*res)->ai_addrlen, sizeof ss));
  freeaddrinfo(*res);
  return ss;
}

result<rdma_cm_event *> take_cm_event(std::span<rdma_event_channel *const> chans,
                                      std::chrono::steady_clock::time_point deadline) {
  std::array<pollfd, 2> p{};
  const std::size_t n = std::min(chans.size(), p.size());
  for (;;) {
    for (std::size_t i = 0; i < n; i++) {
      rdma_cm_event *ev = nullptr;
      if (rdma_get_cm_event(chans[i], &ev) == 0)
        return ev;
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return rdma_error();
      p[i] = {chans[i]->fd, POLLIN, 0};
    }
    if (expired(deadline))
      return errc::timed_out;
    if (auto ec = wait_ready(p.data(), n, deadline); ec && ec != errc::timed_out)
      return ec;
  }
}

std::error_code cm_event_error(const rdma_cm_event *ev) {
  switch (ev->event) {
  case RDMA_CM_EVENT_REJECTED:
    return make_error_code(errc::rejected);
  case RDMA_CM_EVENT_ADDR_ERROR:
  case RDMA_CM_EVENT_ROUTE_ERROR:
  case RDMA_CM_EVENT_UNREACHABLE:
  case RDMA_CM_EVENT_CONNECT_ERROR:
    return ev->status < 0 ? errno_code(-ev->status)
                          : std::make_error_code(std::errc::host_unreachable);
  default:
    return make_error_code(errc::unexpected_event);
  }
}

std::span<const std::byte> event_data(const rdma_cm_event *ev) noexcept {
  auto p = static_cast<const std::byte *>(ev->param.conn.private_data);
  return p ? std::span<const std::byte>(p, ev->param.conn.private_data_len)
           : std::span<const std::byte>();
}

cm_event_kind kind_of(int event) noexcept {
  switch (event) {
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

result<void> check_cm_transport(const transport_options &t) {
  const transport_options defaults;
  if (t.mtu != defaults.mtu || t.min_rnr_timer != defaults.min_rnr_timer)
    return errc::not_honoured;
  return {};
}

cm_peer_id::~cm_peer_id() {
  if (id)
    rdma_destroy_id(id);
}

// ---- the group ----

cm_group::cm_group(std::size_t peers)
    : qps(peers), ids(peers), up(std::make_unique<std::atomic<bool>[]>(peers)) {}

result<std::unique_ptr<cm_group>> cm_group::create(std::size_t peers) {
  auto ch = event_channel::create();
  if (!ch)
    return ch.error();
  std::unique_ptr<cm_group> g(new cm_group(peers));
  g->ch_->ch = std::move(*ch);
  return g;
}

std::size_t cm_group::index_of(const rdma_cm_id *id) const noexcept {
  for (std::size_t i = 0; i < ids.size(); i++)
    if (ids[i] && ids[i]->id == id)
      return i;
  return ids.size();
}

std::error_code cm_group::event_error(const rdma_cm_event *ev) const {
  if (rejection && ev->event == RDMA_CM_EVENT_REJECTED)
    if (auto ec = rejection(event_data(ev)))
      return ec;
  return cm_event_error(ev);
}

// The shared PD and CQ are made on the first peer's device (the context
// keeps that id alive for as long as it is used); every later peer must be
// on the same device. Then peer's queue pair on them, honouring the SRQ and
// the WR API of sizes().qp.
result<void> cm_group::add_qp(std::size_t peer) {
  rdma_cm_id *id = ids[peer]->id;
  if (!id->verbs)
    return errc::unexpected_event;
  if (!ctx) {
    ctx = borrow_context(id->verbs, ids[peer]);
    auto p = protection_domain::create(ctx);
    if (!p)
      return p.error();
    pd = std::move(*p);
    auto dev = ctx.query_device();
    if (!dev)
      return dev.error();
    auto sz = sizes ? sizes(*dev) : result<cm_sizes>(cm_sizes{});
    if (!sz)
      return sz.error();
    made_ = *sz;
    cq_options co;
    co.depth = made_.cq_depth;
    co.extended = false;
    if (watch_first_completion) {
      auto ch = completion_channel::create(ctx);
      if (!ch)
        return ch.error();
      cq_channel = std::move(*ch);
      co.channel = &cq_channel;
    }
    auto c = completion_queue::create(ctx, co);
    if (!c)
      return c.error();
    cq = std::move(*c);
  } else if (ctx.native_handle() != id->verbs) {
    return errc::wrong_device;
  }
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  ibv_qp_init_attr_ex ax =
      qp_init_attr(*dev, made_.qp, pd.native_handle(), cq.native_handle(), cq.native_handle());
  auto n = std::make_shared<qp_node>();
  bool made = false;
  if (made_.qp.wr_api && ctx.supports(feature::wr_api)) {
    errno = 0;
    if (rdma_create_qp_ex(id, &ax) == 0) {
      made = true;
      n->qpx = ibv_qp_to_qp_ex(id->qp);
    } else if (!not_offered(errno)) {
      return rdma_error();
    }
  }
  if (!made) {
    ibv_qp_init_attr a = plain(ax);
    if (rdma_create_qp(id, pd.native_handle(), &a))
      return rdma_error();
  }
  n->qp = id->qp;
  n->kind = qp_node::owner_kind::rdma_cm;
  n->cm_id = id;
  n->owner = ids[peer];
  n->type = qp_type::rc;
  n->pd = access::node(pd);
  n->send_cq = n->recv_cq = access::node(cq);
  if (made_.qp.srq)
    n->srq = access::node(*made_.qp.srq);
  n->port = id->port_num;
  access::set(qps[peer], std::move(n));
  return {};
}

// The ACK timeout (before connect/accept, since the QP takes it on its way
// to RTS) and the connection parameters: data, the rd_atomic depths clamped
// to the device, the retry counts.
result<void> cm_group::pre_connect(std::size_t peer, rdma_conn_param &p,
                                   std::span<const std::byte> data) {
  std::uint8_t ack = transport.ack_timeout;
  if (ack != 0 &&
      rdma_set_option(ids[peer]->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack, sizeof ack))
    return rdma_error();
  p = {};
  p.private_data = data.data();
  p.private_data_len = static_cast<std::uint8_t>(std::min<std::size_t>(data.size(), 255));
  auto dev = ctx.query_device();
  const int resp = dev ? dev->max_qp_rd_atom : 1, init = dev ? dev->max_qp_init_rd_atom : 1;
  const int want = transport.max_rd_atomic;
  p.responder_resources =
      static_cast<std::uint8_t>(std::clamp(want ? std::min(want, resp) : resp, 0, 255));
  p.initiator_depth =
      static_cast<std::uint8_t>(std::clamp(want ? std::min(want, init) : init, 0, 255));
  p.retry_count = std::min<std::uint8_t>(transport.retry_count, 7);
  p.rnr_retry_count = std::min<std::uint8_t>(transport.rnr_retry, 7);
  return {};
}

result<void> cm_group::connect(std::size_t peer, const sockaddr_storage &addr,
                               std::span<const std::byte> data, std::vector<std::byte> *reply,
                               std::chrono::milliseconds tmo, const char **step,
                               const std::function<result<void>()> &before) {
  *step = "create the id";
  auto node = std::make_shared<cm_peer_id>();
  node->ch = ch_;
  if (rdma_create_id(native(), &node->id, nullptr, RDMA_PS_TCP)) {
    node->id = nullptr;
    return rdma_error();
  }
  ids[peer] = node;
  rdma_cm_id *id = node->id;
  const int cm_tmo = cm_timeout(tmo);
  sockaddr_storage dst = addr;
  *step = "resolve the address";
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr *>(&dst), cm_tmo))
    return rdma_error();
  if (auto r = expect(peer, RDMA_CM_EVENT_ADDR_RESOLVED, tmo); !r)
    return r;
  *step = "resolve the route";
  if (rdma_resolve_route(id, cm_tmo))
    return rdma_error();
  if (auto r = expect(peer, RDMA_CM_EVENT_ROUTE_RESOLVED, tmo); !r)
    return r;
  *step = "create the queue pair";
  if (auto r = add_qp(peer); !r)
    return r;
  *step = "prepare";
  if (before)
    if (auto r = before(); !r)
      return r;
  *step = "connect";
  rdma_conn_param p;
  if (auto r = pre_connect(peer, p, data); !r)
    return r;
  if (rdma_connect(id, &p))
    return rdma_error();
  if (auto r = expect(peer, RDMA_CM_EVENT_ESTABLISHED, tmo, reply); !r)
    return r;
  up[peer] = true;
  return {};
}

result<void> cm_group::adopt(std::size_t peer, rdma_cm_id *id) {
  auto node = std::make_shared<cm_peer_id>();
  node->id = id;
  node->ch = ch_;
  ids[peer] = node;
  if (rdma_migrate_id(id, native())) {
    auto ec = rdma_error();
    rdma_reject(id, nullptr, 0);
    return ec;
  }
  return {};
}

result<void> cm_group::accept(std::size_t peer, std::span<const std::byte> data,
                              const std::function<result<void>()> &before) {
  rdma_cm_id *id = ids[peer]->id;
  rdma_conn_param p;
  auto r = add_qp(peer);
  if (r)
    r = pre_connect(peer, p, data);
  if (r && before)
    r = before();
  if (r && cq_channel)
    r = cq.request_notify();
  if (r && rdma_accept(id, &p))
    r = rdma_error();
  // A request this side cannot take is rejected, so its client learns it
  // now rather than at its timeout.
  if (!r)
    rdma_reject(id, nullptr, 0);
  return r;
}

result<void> cm_group::expect(std::size_t peer, rdma_cm_event_type want,
                              std::chrono::milliseconds timeout, std::vector<std::byte> *data) {
  const auto until = deadline(timeout);
  rdma_event_channel *const chans[] = {native()};
  for (;;) {
    auto ev = take_cm_event(chans, until);
    if (!ev)
      return ev.error();
    std::error_code ec;
    const bool mine = (*ev)->id == ids[peer]->id;
    if (mine) {
      if ((*ev)->event != want) {
        ec = event_error(*ev);
      } else if (data) {
        auto d = event_data(*ev);
        data->assign(d.begin(), d.end());
      }
    } else if (std::size_t p = index_of((*ev)->id); p < ids.size()) {
      note(p, *ev);
    }
    rdma_ack_cm_event(*ev);
    if (mine)
      return ec ? result<void>(ec) : result<void>();
  }
}

result<void> cm_group::await_established(std::size_t peer, std::chrono::milliseconds timeout) {
  const auto until = deadline(timeout);
  for (bool watch = bool(cq_channel); watch;) {
    pollfd p[] = {{fd(), POLLIN, 0}, {cq_channel.fd(), POLLIN, 0}};
    if (auto ec = wait_ready(p, 2, until))
      return ec;
    if (p[1].revents) {
      // The peer's first message: it is connected, whatever became of its
      // RTU. rdma_notify answers EISCONN when ESTABLISHED is on its way.
      if (cq_channel.wait(std::chrono::milliseconds(0)) &&
          rdma_notify(ids[peer]->id, IBV_EVENT_COMM_EST) == 0)
        rdmadl_log_emit(RDMADL_LOG_INFO, "accept: a completion came before the RTU; "
                                         "told rdma_cm the connection is established");
      watch = false;
    }
    if (p[0].revents)
      break;
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      until - std::chrono::steady_clock::now());
  return expect(peer, RDMA_CM_EVENT_ESTABLISHED, std::max(left, std::chrono::milliseconds(0)));
}

void cm_group::hang_up(std::size_t peer) noexcept {
  if (up[peer]) {
    up[peer] = false;
    rdma_disconnect(ids[peer]->id);
  }
}

void cm_group::note(std::size_t peer, const rdma_cm_event *ev) {
  cm_peer_event e{peer, kind_of(ev->event), static_cast<int>(ev->event), ev->status};
  if (e.kind == cm_event_kind::disconnected || e.kind == cm_event_kind::connection_error ||
      e.kind == cm_event_kind::device_removal)
    hang_up(peer);
  queued.push_back(e);
}

result<cm_peer_event> cm_group::next_event(std::chrono::steady_clock::time_point until) {
  rdma_event_channel *const chans[] = {native()};
  while (queued.empty()) {
    auto ev = take_cm_event(chans, until);
    if (!ev)
      return ev.error();
    if (std::size_t p = index_of((*ev)->id); p < ids.size())
      note(p, *ev);
    rdma_ack_cm_event(*ev);
  }
  auto e = queued.front();
  queued.pop_front();
  return e;
}

result<void> cm_group::disconnect(std::size_t peer, std::chrono::milliseconds timeout) {
  if (!up[peer])
    return {};
  if (rdma_disconnect(ids[peer]->id))
    return rdma_error();
  up[peer] = false;
  return expect(peer, RDMA_CM_EVENT_DISCONNECTED, timeout);
}

result<void> cm_group::wait_disconnect(std::size_t peer, std::chrono::milliseconds timeout) {
  auto r = expect(peer, RDMA_CM_EVENT_DISCONNECTED, timeout);
  if (r)
    hang_up(peer);
  return r;
}

void cm_group::drop(std::size_t peer) noexcept {
  up[peer] = false;
  qps[peer] = queue_pair(); // rdma_destroy_qp; the QP's node held the id until here
  ids[peer].reset();
}

void cm_group::learn_paths() noexcept {
  for (std::size_t i = 0; i < qps.size(); i++) {
    auto &n = access::node(qps[i]);
    if (!n || !ids[i])
      continue;
    std::uint8_t port = ids[i]->id->port_num;
    if (!init_from_qp(*n, ctx, port, -1, {}).ok())
      n->port = port; // keep what rdma_cm said; the GID stays unknown
  }
}

cm_group::~cm_group() {
  std::size_t waiting = 0;
  for (std::size_t i = 0; i < ids.size(); i++)
    if (up[i] && rdma_disconnect(ids[i]->id) == 0)
      waiting++;
  const auto until = deadline(linger);
  rdma_event_channel *const chans[] = {native()};
  while (waiting) {
    auto ev = take_cm_event(chans, until);
    if (!ev)
      break;
    std::size_t p = index_of((*ev)->id);
    auto kind = kind_of((*ev)->event);
    if (p < ids.size() && up[p] && kind != cm_event_kind::other &&
        kind != cm_event_kind::timewait_exit) {
      up[p] = false;
      waiting--;
    }
    rdma_ack_cm_event(*ev);
  }
}

} // namespace rdmadl::detail
