// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "cm_group.hpp"
#include "detail.hpp"
#include "fd.hpp"
#include "rdmadl/cm.hpp"

namespace rdmadl {

namespace detail {

// A connection, or a connection request, is a group of one peer (peer 0).
struct cm_state {
  std::unique_ptr<cm_group> g;
  bool answered = false; // connection request: accepted or rejected
  std::vector<std::byte> peer_data;

  rdma_cm_id *id() const noexcept { return g && g->ids[0] ? g->ids[0]->id : nullptr; }
  // A request nobody answered is refused, so the client hears REJECTED at
  // once instead of waiting for its own timeout.
  void reject_unanswered() noexcept {
    if (id() && !answered) {
      rdma_reject(id(), nullptr, 0);
      answered = true;
    }
  }
  ~cm_state() { reject_unanswered(); }
};

void cm_state_deleter::operator()(cm_state *s) const noexcept {
  delete s;
}

} // namespace detail

namespace {

using state_ptr = std::unique_ptr<detail::cm_state, detail::cm_state_deleter>;

// What rdma_cm decides itself (port, GID, path MTU, RNR timer) is refused
// rather than ignored; the rest of opts.qp is honoured.
result<void> check(const cm_options &opts) {
  if (opts.qp.type != qp_type::rc)
    return errc::wrong_qp_type;
  const gid_selector default_sel;
  if (opts.qp.port != 0 || opts.qp.gid_index >= 0 || opts.qp.gid.type != default_sel.type ||
      opts.qp.gid.ipv4 != default_sel.ipv4)
    return errc::not_honoured;
  if (opts.qp.srq && !*opts.qp.srq)
    return detail::rdma_error(errc::empty_object);
  return detail::check_cm_transport(opts.transport);
}

// The group settings of opts: one CQ of opts.cq_depth, the QP of opts.qp.
void configure(detail::cm_group &g, const cm_options &opts) {
  g.transport = opts.transport;
  g.step_timeout = opts.step_timeout;
  g.sizes = [qp = opts.qp, depth = opts.cq_depth](const device_attr &) -> result<detail::cm_sizes> {
    return detail::cm_sizes{qp, depth};
  };
}

// last_error_detail() for a failed call: "<what>: <step>: <error>".
std::error_code failed(const std::string &what, const char *step, std::error_code ec) {
  detail::set_error_detail(what + ": " + step + ": " + ec.message());
  return ec;
}

std::string where(const char *call, const char *prep, std::string_view host, std::uint16_t port) {
  return std::string(call) + " " + prep + " " +
         (host.empty() ? std::string("*") : std::string(host)) + ":" + std::to_string(port);
}

} // namespace

// ---- event_channel ----

result<event_channel> event_channel::create() {
  rdma_event_channel *ch = rdma_create_event_channel();
  if (!ch)
    return detail::rdma_error();
  if (auto ec = detail::set_nonblocking(ch->fd)) {
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
  return s_ ? s_->g->ctx : empty_ctx;
}
const protection_domain &connection::pd() const noexcept {
  return s_ ? s_->g->pd : empty_pd;
}
completion_queue *connection::cq() noexcept {
  return s_ ? &s_->g->cq : nullptr;
}
queue_pair *connection::qp() noexcept {
  return s_ ? &s_->g->qps[0] : nullptr;
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
  return s_->g->disconnect(0, timeout);
}

result<void> connection::wait_disconnect(std::chrono::milliseconds timeout) {
  if (!s_ || !s_->id())
    return detail::rdma_error(errc::empty_object);
  return s_->g->wait_disconnect(0, timeout);
}

result<connection> connect(std::string_view host, std::uint16_t port, const cm_options &opts) {
  detail::clear_error_detail();
  const std::string what = where("rdmadl::connect", "to", host, port);
  if (auto r = check(opts); !r)
    return failed(what, "options", r.error());
  const char *step = "resolve the host name";
  auto r = detail::rdma_error([&]() -> result<connection> {
    auto addr = detail::resolve_address(host, port, false);
    if (!addr)
      return addr.error();
    step = "create the event channel";
    auto g = detail::cm_group::create(1);
    if (!g)
      return g.error();
    connection c;
    c.s_.reset(new detail::cm_state);
    auto &s = *c.s_;
    s.g = std::move(*g);
    s.answered = true;
    configure(*s.g, opts);
    std::function<result<void>()> before;
    if (opts.prepare)
      before = [&] { return opts.prepare(c); };
    if (auto made = s.g->connect(0, *addr, opts.private_data, &s.peer_data, s.g->step_timeout,
                                 &step, before);
        !made)
      return made.error();
    s.g->learn_paths();
    return c;
  }());
  if (!r)
    return failed(what, step, r.error());
  return r;
}

// ---- connection_request ----

connection_request::connection_request() noexcept = default;
connection_request::connection_request(connection_request &&) noexcept = default;
connection_request &connection_request::operator=(connection_request &&o) noexcept {
  if (this != &o) {
    if (s_)
      s_->reject_unanswered();
    s_ = std::move(o.s_);
  }
  return *this;
}
connection_request::~connection_request() = default;
std::span<const std::byte> connection_request::peer_data() const noexcept {
  return s_ ? std::span<const std::byte>(s_->peer_data) : std::span<const std::byte>();
}

result<connection> connection_request::accept(const cm_options &opts) {
  if (!s_ || !s_->id() || s_->answered)
    return detail::rdma_error(errc::empty_object);
  if (auto r = check(opts); !r)
    return r.error();
  s_->answered = true;
  configure(*s_->g, opts);
  // The connection holds the state from here, so opts.prepare sees the
  // object it gets back; a failure hands the state back to the request.
  connection c;
  c.s_ = std::move(s_);
  auto &g = *c.s_->g;
  std::function<result<void>()> before;
  if (opts.prepare) {
    g.watch_first_completion = true;
    before = [&] { return opts.prepare(c); };
  }
  auto r = g.accept(0, opts.private_data, before);
  if (r)
    r = g.await_established(0, opts.step_timeout);
  if (!r) {
    s_ = std::move(c.s_);
    return r.error();
  }
  g.up[0] = true;
  g.learn_paths();
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
  detail::clear_error_detail();
  const char *step = "create the event channel";
  auto r = detail::rdma_error([&]() -> result<listener> {
    auto ch = event_channel::create();
    if (!ch)
      return ch.error();
    listener l;
    l.ch_ = std::move(*ch);
    step = "create the id";
    if (rdma_create_id(l.ch_.native_handle(), &l.id_, nullptr, RDMA_PS_TCP)) {
      l.id_ = nullptr;
      return detail::rdma_error();
    }
    step = "resolve the host name";
    auto addr = detail::resolve_address(host, port, true);
    if (!addr)
      return addr.error();
    step = "bind";
    if (rdma_bind_addr(l.id_, reinterpret_cast<sockaddr *>(&*addr)))
      return detail::rdma_error();
    step = "listen";
    if (rdma_listen(l.id_, backlog))
      return detail::rdma_error();
    return l;
  }());
  if (!r)
    return failed(where("rdmadl::listener::bind", "on", host, port), step, r.error());
  return r;
}
result<listener> listener::bind(std::string_view host, std::uint16_t port,
                                channel_transport transport, int backlog) {
  if (transport == channel_transport::rdma)
    return bind(host, port, backlog);
  detail::clear_error_detail();
  const std::string what = where("rdmadl::listener::bind", "on", host, port);
  auto addr = detail::resolve_address(host, port, true);
  if (!addr)
    return failed(what, "resolve the host name", addr.error());
  // Port 0 with rdma_cm: the TCP socket picks a port, rdma_cm takes the
  // same one, and another is tried while rdma_cm finds it taken.
  for (int attempt = 0;; attempt++) {
    detail::fd_guard t(::socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    int one = 1;
    if (t.get() < 0 || ::setsockopt(t.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        ::bind(t.get(), reinterpret_cast<const sockaddr *>(&*addr), detail::sockaddr_len(*addr)) !=
            0 ||
        ::listen(t.get(), backlog) != 0)
      return failed(what, "listen on TCP", errno_code(errno));
    const auto bound = detail::bound_port(t.get());
    if (!bound)
      return failed(what, "listen on TCP", errno_code(errno));
    listener l;
    if (transport == channel_transport::automatic) {
      auto r = bind(host, *bound, backlog);
      if (r) {
        l = std::move(*r);
      } else if (r.error() == std::errc::address_in_use) {
        if (port == 0 && attempt < 8)
          continue;
        return r.error(); // bind() said where
      } else {
        detail::clear_error_detail(); // no rdma_cm here: the TCP socket alone
      }
    }
    l.tcp_fd_ = t.release();
    return l;
  }
}
listener::listener(listener &&o) noexcept
    : ch_(std::move(o.ch_)), id_(std::exchange(o.id_, nullptr)),
      tcp_fd_(std::exchange(o.tcp_fd_, -1)) {}
listener &listener::operator=(listener &&o) noexcept {
  std::swap(ch_, o.ch_);
  std::swap(id_, o.id_);
  std::swap(tcp_fd_, o.tcp_fd_);
  return *this;
}
listener::~listener() {
  if (id_)
    rdma_destroy_id(id_);
  if (tcp_fd_ >= 0)
    ::close(tcp_fd_);
}
std::uint16_t listener::port() const noexcept {
  if (id_)
    return be16toh(rdma_get_src_port(id_));
  return tcp_fd_ >= 0 ? detail::bound_port(tcp_fd_).value_or(0) : 0;
}

result<connection_request> listener::get_request(std::chrono::milliseconds timeout) {
  if (!id_)
    return detail::rdma_error(errc::empty_object);
  rdma_event_channel *const chans[] = {ch_.native_handle()};
  auto ev = detail::take_cm_event(chans, detail::deadline(timeout));
  if (!ev)
    return ev.error();
  if ((*ev)->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
    auto ec = detail::cm_event_error(*ev);
    rdma_ack_cm_event(*ev);
    return ec;
  }
  rdma_cm_id *id = (*ev)->id;
  auto data = detail::event_data(*ev);
  std::vector<std::byte> peer_data(data.begin(), data.end());
  rdma_ack_cm_event(*ev);
  // A group of its own, so its events never mix with other requests'.
  auto g = detail::cm_group::create(1);
  if (!g) {
    rdma_reject(id, nullptr, 0);
    rdma_destroy_id(id);
    return g.error();
  }
  state_ptr s(new detail::cm_state);
  s->g = std::move(*g);
  s->peer_data = std::move(peer_data);
  s->answered = true; // until adopted: a failed adopt has rejected it
  if (auto r = s->g->adopt(0, id); !r)
    return r.error();
  s->answered = false;
  connection_request r;
  r.s_ = std::move(s);
  return r;
}

} // namespace rdmadl
