// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <string>
#include <utility>

#include "cm_common.hpp"
#include "detail.hpp"
#include "lookup.hpp"
#include "nodes.hpp"
#include "rdmadl/cm.hpp"

namespace rdmadl {

namespace detail {

struct cm_state {
  std::shared_ptr<cm_id_node> idn = std::make_shared<cm_id_node>();
  context ctx;
  protection_domain pd;
  completion_queue cq;
  queue_pair qp;
  bool connected = false;
  bool answered = false; // connection request: accepted or rejected
  std::vector<std::byte> peer_data;

  rdma_cm_id *id() const noexcept { return idn->id; }
  rdma_event_channel *ch() const noexcept { return idn->ch.native_handle(); }
  // The members then go in reverse order: the QP, CQ, PD and context each
  // keep the id (and its channel) alive for as long as they live.
  ~cm_state() {
    if (connected && idn->id)
      rdma_disconnect(idn->id);
  }
};

void cm_state_deleter::operator()(cm_state *s) const noexcept {
  delete s;
}

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

result<rdma_cm_event *> take_cm_event(rdma_event_channel *ch,
                                      std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    rdma_cm_event *ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) == 0)
      return ev;
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return detail::rdma_error();
    int left = detail::poll_timeout(deadline);
    if (left == 0)
      return errc::timed_out;
    pollfd p{ch->fd, POLLIN, 0};
    if (::poll(&p, 1, left) < 0 && errno != EINTR)
      return detail::rdma_error();
  }
}

result<void> set_ack_timeout(rdma_cm_id *id, std::uint8_t ack_timeout) {
  if (ack_timeout == 0)
    return {};
  if (rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
                      sizeof ack_timeout))
    return detail::rdma_error();
  return {};
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

} // namespace detail

namespace {

using ms = std::chrono::milliseconds;

// Waits for want; copies the event's private data into data when asked.
result<void> expect(rdma_event_channel *ch, rdma_cm_event_type want, ms timeout,
                    std::vector<std::byte> *data = nullptr) {
  auto ev = detail::take_cm_event(ch, detail::deadline(timeout));
  if (!ev)
    return ev.error();
  std::error_code ec;
  if ((*ev)->event != want) {
    ec = detail::cm_event_error(*ev);
  } else if (data && (*ev)->param.conn.private_data) {
    auto p = static_cast<const std::byte *>((*ev)->param.conn.private_data);
    data->assign(p, p + (*ev)->param.conn.private_data_len);
  }
  rdma_ack_cm_event(*ev);
  if (ec)
    return ec;
  return {};
}

// PD, CQ and QP on the id's device, honouring opts.qp (SRQ, WR API) and
// refusing what rdma_cm decides itself (port, GID).
result<void> setup_qp(detail::cm_state &s, const cm_options &opts) {
  if (opts.qp.type != qp_type::rc)
    return errc::wrong_qp_type;
  const gid_selector default_sel;
  if (opts.qp.port != 0 || opts.qp.gid_index >= 0 || opts.qp.gid.type != default_sel.type ||
      opts.qp.gid.ipv4 != default_sel.ipv4)
    return errc::not_honoured;
  if (opts.qp.srq && !*opts.qp.srq)
    return detail::rdma_error(errc::empty_object);
  s.ctx = detail::borrow_context(s.id()->verbs, s.idn);
  auto pd = protection_domain::create(s.ctx);
  if (!pd)
    return pd.error();
  s.pd = std::move(*pd);
  cq_options co;
  co.depth = opts.cq_depth;
  co.extended = false;
  auto cq = completion_queue::create(s.ctx, co);
  if (!cq)
    return cq.error();
  s.cq = std::move(*cq);
  auto dev = s.ctx.query_device();
  if (!dev)
    return dev.error();
  ibv_qp_init_attr_ex ax = detail::qp_init_attr(*dev, opts.qp, s.pd.native_handle(),
                                                s.cq.native_handle(), s.cq.native_handle());
  auto n = std::make_shared<detail::qp_node>();
  bool made = false;
  if (opts.qp.wr_api && s.ctx.supports(feature::wr_api)) {
    errno = 0;
    if (rdma_create_qp_ex(s.id(), &ax) == 0) {
      made = true;
      n->qpx = ibv_qp_to_qp_ex(s.id()->qp);
    } else if (!detail::not_offered(errno)) {
      return detail::rdma_error();
    }
  }
  if (!made) {
    ibv_qp_init_attr a = detail::plain(ax);
    if (rdma_create_qp(s.id(), s.pd.native_handle(), &a))
      return detail::rdma_error();
  }
  n->qp = s.id()->qp;
  n->kind = detail::qp_node::owner_kind::rdma_cm;
  n->cm_id = s.id();
  n->owner = s.idn;
  n->type = qp_type::rc;
  n->pd = detail::access::node(s.pd);
  n->send_cq = n->recv_cq = detail::access::node(s.cq);
  if (opts.qp.srq)
    n->srq = detail::access::node(*opts.qp.srq);
  n->port = s.id()->port_num;
  detail::access::set(s.qp, std::move(n));
  return {};
}

// Once connected, the QP's port and source GID are the ones rdma_cm chose:
// read them back so local_endpoint() and address handles use them.
void learn_path(detail::cm_state &s) noexcept {
  auto &n = detail::access::node(s.qp);
  if (!n)
    return;
  std::uint8_t port = s.id()->port_num;
  if (!detail::init_from_qp(*n, s.ctx, port, -1, {}).ok())
    n->port = port; // keep what rdma_cm said; the GID stays unknown
}

// Any failure while RDMA cannot work here is reported as that (equal to
// operation_not_supported), not as the errno of the step that noticed.
rdma_conn_param conn_param(const detail::cm_state &s, const cm_options &opts) {
  rdma_conn_param p{};
  p.private_data = opts.private_data.data();
  p.private_data_len =
      static_cast<std::uint8_t>(std::min<std::size_t>(opts.private_data.size(), 255));
  auto dev = s.ctx.query_device();
  int resp = dev ? dev->max_qp_rd_atom : 1, init = dev ? dev->max_qp_init_rd_atom : 1;
  p.responder_resources = static_cast<std::uint8_t>(
      opts.responder_resources ? std::min<int>(opts.responder_resources, resp)
                               : std::min(resp, 255));
  p.initiator_depth = static_cast<std::uint8_t>(
      opts.initiator_depth ? std::min<int>(opts.initiator_depth, init) : std::min(init, 255));
  p.retry_count = std::min<std::uint8_t>(opts.retry_count, 7);
  p.rnr_retry_count = 7;
  return p;
}

} // namespace

// ---- event_channel ----

result<event_channel> event_channel::create() {
  rdma_event_channel *ch = rdma_create_event_channel();
  if (!ch)
    return detail::rdma_error();
  int fl = fcntl(ch->fd, F_GETFL);
  if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    auto ec = detail::rdma_error();
    rdma_destroy_event_channel(ch);
    return ec;
  }
  event_channel c;
  c.ch_ = ch;
  return c;
}
event_channel::event_channel(event_channel &&o) noexcept : ch_(std::exchange(o.ch_, nullptr)) {}
event_channel &event_channel::operator=(event_channel &&o) noexcept {
  std::swap(ch_, o.ch_);
  return *this;
}
event_channel::~event_channel() {
  if (ch_)
    rdma_destroy_event_channel(ch_);
}
int event_channel::fd() const noexcept {
  return ch_ ? ch_->fd : -1;
}

// ---- connection ----

connection::connection() noexcept = default;
connection::connection(connection &&) noexcept = default;
connection &connection::operator=(connection &&) noexcept = default;
connection::~connection() = default;

namespace {
const context empty_ctx;
const protection_domain empty_pd;
} // namespace

const context &connection::ctx() const noexcept {
  return s_ ? s_->ctx : empty_ctx;
}
const protection_domain &connection::pd() const noexcept {
  return s_ ? s_->pd : empty_pd;
}
completion_queue &connection::cq() noexcept {
  static completion_queue none;
  return s_ ? s_->cq : none;
}
queue_pair &connection::qp() noexcept {
  static queue_pair none;
  return s_ ? s_->qp : none;
}
std::span<const std::byte> connection::peer_data() const noexcept {
  return s_ ? std::span<const std::byte>(s_->peer_data) : std::span<const std::byte>();
}
rdma_cm_id *connection::native_handle() const noexcept {
  return s_ ? s_->id() : nullptr;
}

result<void> connection::disconnect(std::chrono::milliseconds timeout) {
  if (!s_ || !s_->id())
    return detail::rdma_error(errc::empty_object);
  if (!s_->connected)
    return {};
  if (rdma_disconnect(s_->id()))
    return detail::rdma_error();
  s_->connected = false;
  return expect(s_->ch(), RDMA_CM_EVENT_DISCONNECTED, timeout);
}

result<void> connection::wait_disconnect(std::chrono::milliseconds timeout) {
  if (!s_ || !s_->id())
    return detail::rdma_error(errc::empty_object);
  auto r = expect(s_->ch(), RDMA_CM_EVENT_DISCONNECTED, timeout);
  if (r) {
    rdma_disconnect(s_->id());
    s_->connected = false;
  }
  return r;
}

result<connection> connect(std::string_view host, std::uint16_t port, const cm_options &opts) {
  return detail::rdma_error([&]() -> result<connection> {
    auto ch = event_channel::create();
    if (!ch)
      return ch.error();
    std::unique_ptr<detail::cm_state, detail::cm_state_deleter> s(new detail::cm_state);
    s->idn->ch = std::move(*ch);
    s->answered = true;
    if (rdma_create_id(s->ch(), &s->idn->id, nullptr, RDMA_PS_TCP)) {
      s->idn->id = nullptr;
      return detail::rdma_error();
    }
    auto addr = detail::resolve_address(host, port, false);
    if (!addr)
      return addr.error();
    int tmo = detail::cm_timeout(opts.timeout);
    if (rdma_resolve_addr(s->id(), nullptr, reinterpret_cast<sockaddr *>(&*addr), tmo))
      return detail::rdma_error();
    if (auto r = expect(s->ch(), RDMA_CM_EVENT_ADDR_RESOLVED, opts.timeout); !r)
      return r.error();
    if (rdma_resolve_route(s->id(), tmo))
      return detail::rdma_error();
    if (auto r = expect(s->ch(), RDMA_CM_EVENT_ROUTE_RESOLVED, opts.timeout); !r)
      return r.error();
    if (auto r = setup_qp(*s, opts); !r)
      return r.error();
    if (auto r = detail::set_ack_timeout(s->id(), opts.ack_timeout); !r)
      return r.error();
    rdma_conn_param p = conn_param(*s, opts);
    if (rdma_connect(s->id(), &p))
      return detail::rdma_error();
    if (auto r = expect(s->ch(), RDMA_CM_EVENT_ESTABLISHED, opts.timeout, &s->peer_data); !r)
      return r.error();
    s->connected = true;
    learn_path(*s);
    connection c;
    c.s_ = std::move(s);
    return c;
  }());
}

// ---- connection_request ----

connection_request::connection_request() noexcept = default;
connection_request::connection_request(connection_request &&) noexcept = default;
// A request nobody answered is refused, so the client hears REJECTED at once
// instead of waiting for its own timeout.
static void reject_unanswered(detail::cm_state *s) noexcept {
  if (s && s->id() && !s->answered) {
    rdma_reject(s->id(), nullptr, 0);
    s->answered = true;
  }
}
connection_request &connection_request::operator=(connection_request &&o) noexcept {
  if (this != &o) {
    reject_unanswered(s_.get());
    s_ = std::move(o.s_);
  }
  return *this;
}
connection_request::~connection_request() {
  reject_unanswered(s_.get());
}
std::span<const std::byte> connection_request::peer_data() const noexcept {
  return s_ ? std::span<const std::byte>(s_->peer_data) : std::span<const std::byte>();
}

result<connection> connection_request::accept(const cm_options &opts) {
  if (!s_ || !s_->id() || s_->answered)
    return detail::rdma_error(errc::empty_object);
  s_->answered = true;
  if (auto r = setup_qp(*s_, opts); !r)
    return r.error();
  if (auto r = detail::set_ack_timeout(s_->id(), opts.ack_timeout); !r)
    return r.error();
  rdma_conn_param p = conn_param(*s_, opts);
  if (rdma_accept(s_->id(), &p))
    return detail::rdma_error();
  if (auto r = expect(s_->ch(), RDMA_CM_EVENT_ESTABLISHED, opts.timeout); !r)
    return r.error();
  s_->connected = true;
  learn_path(*s_);
  connection c;
  c.s_ = std::move(s_);
  return c;
}

result<void> connection_request::reject(std::span<const std::byte> data) {
  if (!s_ || !s_->id() || s_->answered)
    return detail::rdma_error(errc::empty_object);
  s_->answered = true;
  if (rdma_reject(s_->id(), data.data(),
                  static_cast<std::uint8_t>(std::min<std::size_t>(data.size(), 255))))
    return detail::rdma_error();
  s_.reset();
  return {};
}

// ---- listener ----

result<listener> listener::bind(std::string_view host, std::uint16_t port, int backlog) {
  return detail::rdma_error([&]() -> result<listener> {
    auto ch = event_channel::create();
    if (!ch)
      return ch.error();
    listener l;
    l.ch_ = std::move(*ch);
    if (rdma_create_id(l.ch_.native_handle(), &l.id_, nullptr, RDMA_PS_TCP)) {
      l.id_ = nullptr;
      return detail::rdma_error();
    }
    auto addr = detail::resolve_address(host, port, true);
    if (!addr)
      return addr.error();
    if (rdma_bind_addr(l.id_, reinterpret_cast<sockaddr *>(&*addr)))
      return detail::rdma_error();
    if (rdma_listen(l.id_, backlog))
      return detail::rdma_error();
    return l;
  }());
}
listener::listener(listener &&o) noexcept
    : ch_(std::move(o.ch_)), id_(std::exchange(o.id_, nullptr)) {}
listener &listener::operator=(listener &&o) noexcept {
  std::swap(ch_, o.ch_);
  std::swap(id_, o.id_);
  return *this;
}
listener::~listener() {
  if (id_)
    rdma_destroy_id(id_);
}
std::uint16_t listener::port() const noexcept {
  return id_ ? be16toh(rdma_get_src_port(id_)) : 0;
}

result<connection_request> listener::get_request(std::chrono::milliseconds timeout) {
  if (!id_)
    return detail::rdma_error(errc::empty_object);
  auto ev = detail::take_cm_event(ch_.native_handle(), detail::deadline(timeout));
  if (!ev)
    return ev.error();
  if ((*ev)->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    auto ec = detail::cm_event_error(*ev);
    rdma_ack_cm_event(*ev);
    return ec;
  }
  std::unique_ptr<detail::cm_state, detail::cm_state_deleter> s(new detail::cm_state);
  s->idn->id = (*ev)->id;
  if ((*ev)->param.conn.private_data) {
    auto p = static_cast<const std::byte *>((*ev)->param.conn.private_data);
    s->peer_data.assign(p, p + (*ev)->param.conn.private_data_len);
  }
  rdma_ack_cm_event(*ev);
  // Its own channel, so its events never mix with other requests'.
  auto ch = event_channel::create();
  if (!ch)
    return ch.error();
  if (rdma_migrate_id(s->id(), ch->native_handle()))
    return detail::rdma_error();
  s->idn->ch = std::move(*ch);
  connection_request r;
  r.s_ = std::move(s);
  return r;
}

} // namespace rdmadl
