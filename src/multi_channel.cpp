// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <utility>

#include "channel_state.hpp"
#include "detail.hpp"
#include "rdmadl/multi_channel.hpp"
#include "serial.hpp"

namespace rdmadl {

namespace {
constexpr char list_magic[5] = "RDEL";
constexpr std::uint8_t list_version = 1;
constexpr std::size_t list_header = 12;
using detail::k_read;
using detail::k_recv;
using detail::k_send;
using detail::k_write;
using clock = std::chrono::steady_clock;

// Ends the channel's open scope when it goes (the out-of-line tails of the
// inline forms, whose scope is open when they are called).
struct scope_end {
  detail::channel_core &s;
  ~scope_end() { s.end_scope(); }
};
} // namespace

std::vector<std::byte> serialize_endpoints(std::span<const endpoint> list) {
  std::vector<std::byte> b(list_header + list.size() * endpoint::serialized_size);
  detail::put_header(b.data(), list_magic, list_version);
  detail::put_le(b.data() + 8, static_cast<std::uint32_t>(list.size()));
  for (std::size_t i = 0; i < list.size(); i++) {
    auto one = list[i].serialize();
    std::copy(one.begin(), one.end(), b.begin() + list_header + i * endpoint::serialized_size);
  }
  return b;
}

result<std::vector<endpoint>> parse_endpoints(std::span<const std::byte> b) {
  if (b.size() < list_header)
    return errc::bad_size;
  const auto count = detail::get_le<std::uint32_t>(b.data() + 8);
  const std::size_t room = (b.size() - list_header) / endpoint::serialized_size;
  const std::size_t size =
      count <= room ? list_header + count * endpoint::serialized_size : b.size() + 1;
  if (auto ec = detail::check_header(b, list_magic, list_version, size))
    return ec;
  std::vector<endpoint> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; i++) {
    auto e = endpoint::parse(
        b.subspan(list_header + i * endpoint::serialized_size, endpoint::serialized_size));
    if (!e)
      return e.error();
    out.push_back(*e);
  }
  return out;
}

std::string_view name(channel_transport t) noexcept {
  switch (t) {
  case channel_transport::rdma:
    return "rdma";
  case channel_transport::tcp:
    return "tcp";
  default:
    return "automatic";
  }
}

namespace {
constexpr char chep_magic[5] = "RDCE";
constexpr char chep_list_magic[5] = "RDCL";
constexpr std::uint8_t known_caps = channel_endpoint::can_rdma | channel_endpoint::can_tcp;
} // namespace

// Layout: magic[4] version[1] pad[3] caps[1] family[1] port[2] pad[4]
// token[8] address[16] endpoint[44], little-endian.
std::array<std::byte, channel_endpoint::serialized_size>
channel_endpoint::serialize() const noexcept {
  std::array<std::byte, serialized_size> b{};
  detail::put_header(b.data(), chep_magic, format_version);
  b[8] = static_cast<std::byte>(caps);
  b[9] = static_cast<std::byte>(family);
  detail::put_le(b.data() + 10, port);
  detail::put_le(b.data() + 16, token);
  for (std::size_t i = 0; i < address.size(); i++)
    b[24 + i] = static_cast<std::byte>(address[i]);
  if (caps & can_rdma) {
    auto e = rdma.serialize();
    std::copy(e.begin(), e.end(), b.begin() + 40);
  }
  return b;
}

result<channel_endpoint> channel_endpoint::parse(std::span<const std::byte> b) {
  if (auto ec = detail::check_header(b, chep_magic, format_version, serialized_size))
    return ec;
  channel_endpoint c;
  c.caps = static_cast<std::uint8_t>(b[8]);
  c.family = static_cast<std::uint8_t>(b[9]);
  c.port = detail::get_le<std::uint16_t>(b.data() + 10);
  c.token = detail::get_le<std::uint64_t>(b.data() + 16);
  for (std::size_t i = 0; i < c.address.size(); i++)
    c.address[i] = static_cast<std::uint8_t>(b[24 + i]);
  const bool tcp = c.caps & can_tcp;
  if (c.caps == 0 || (c.caps & ~known_caps) || c.token == 0 || !detail::zero_bytes(b, 12, 4))
    return errc::bad_blob;
  if (tcp ? (c.family != 4 && c.family != 6) || c.port == 0
          : c.family != 0 || c.port != 0 || !detail::zero_bytes(b, 24, 16))
    return errc::bad_blob;
  if (c.family == 4 && !detail::zero_bytes(b, 28, 12))
    return errc::bad_blob;
  if (c.caps & can_rdma) {
    auto e = endpoint::parse(b.subspan(40, endpoint::serialized_size));
    if (!e)
      return e.error();
    c.rdma = *e;
  } else if (!detail::zero_bytes(b, 40, endpoint::serialized_size)) {
    return errc::bad_blob;
  }
  return c;
}

std::vector<std::byte> serialize_channel_endpoints(std::span<const channel_endpoint> list) {
  constexpr std::size_t one = channel_endpoint::serialized_size;
  std::vector<std::byte> b(list_header + list.size() * one);
  detail::put_header(b.data(), chep_list_magic, list_version);
  detail::put_le(b.data() + 8, static_cast<std::uint32_t>(list.size()));
  for (std::size_t i = 0; i < list.size(); i++) {
    auto e = list[i].serialize();
    std::copy(e.begin(), e.end(), b.begin() + list_header + i * one);
  }
  return b;
}

result<std::vector<channel_endpoint>> parse_channel_endpoints(std::span<const std::byte> b) {
  constexpr std::size_t one = channel_endpoint::serialized_size;
  if (b.size() < list_header)
    return errc::bad_size;
  const auto count = detail::get_le<std::uint32_t>(b.data() + 8);
  const std::size_t room = (b.size() - list_header) / one;
  const std::size_t size = count <= room ? list_header + count * one : b.size() + 1;
  if (auto ec = detail::check_header(b, chep_list_magic, list_version, size))
    return ec;
  std::vector<channel_endpoint> out;
  out.reserve(count);
  for (std::size_t i = 0; i < count; i++) {
    auto e = channel_endpoint::parse(b.subspan(list_header + i * one, one));
    if (!e)
      return e.error();
    out.push_back(*e);
  }
  return out;
}

// ---- multi_channel ----

multi_channel::multi_channel() noexcept = default;
multi_channel::multi_channel(multi_channel &&o) noexcept
    : s_(std::move(o.s_)), core_(std::exchange(o.core_, nullptr)) {}
multi_channel &multi_channel::operator=(multi_channel &&o) noexcept {
  if (this != &o) {
    release();
    s_ = std::move(o.s_);
    core_ = std::exchange(o.core_, nullptr);
  }
  return *this;
}

void multi_channel::adopt(std::shared_ptr<detail::channel_state> s) noexcept {
  core_ = s.get();
  s_ = std::move(s);
}

status_code multi_channel::empty_error() noexcept {
  return detail::rdma_error(errc::empty_object);
}
multi_channel::~multi_channel() {
  release();
}

// The open scope holds the state by a plain pointer: with one open, the
// channel's reference goes into the state (orphan), and k_orphan tells the
// scope's end to drop it. Whichever of the two sees the other's mark last
// frees the state.
void multi_channel::release() noexcept {
  core_ = nullptr;
  if (!s_)
    return;
  detail::channel_state *s = s_.get();
  s->orphan = std::move(s_);
  if (!(s->busy.fetch_or(detail::channel_core::k_orphan, std::memory_order_acq_rel) &
        detail::channel_core::k_open))
    s->drop_orphan(); // no scope open: freed now (or by the state's other holders)
}

detail::channel_core::channel_core() noexcept = default;
detail::channel_core::~channel_core() = default;

void detail::channel_core::drop_orphan() noexcept {
  std::shared_ptr<channel_state> last = std::move(orphan);
  last.reset(); // may destroy *this: nothing touches it after
}

result<multi_channel> multi_channel::create(const context &ctx, const channel_options &opts) {
  if (!ctx)
    return detail::rdma_error(errc::empty_object);
  if (opts.peers == 0)
    return errc::no_peers;
  if (opts.transport == channel_transport::tcp)
    return errc::not_honoured;
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  auto depths = detail::plan_depths(*dev, opts.peers, opts.send_depth, opts.recv_depth);
  if (!depths)
    return depths.error();
  auto s = std::make_shared<detail::channel_state>();
  auto pd = protection_domain::create(ctx);
  if (!pd)
    return pd.error();
  s->pd = std::move(*pd);
  cq_options co;
  co.depth = depths->cqe;
  auto cq = completion_queue::create(ctx, co);
  if (!cq)
    return cq.error();
  s->cq = std::move(*cq);
  qp_options qo;
  qo.type = qp_type::rc;
  qo.send_depth = depths->send;
  qo.recv_depth = depths->recv;
  qo.port = opts.port;
  qo.gid = opts.gid;
  for (std::size_t i = 0; i < opts.peers; i++) {
    auto qp = queue_pair::create(ctx, s->pd, s->cq, s->cq, qo);
    if (!qp)
      return qp.error();
    s->qps.push_back(std::move(*qp));
  }
  s->index_qps();
  s->peer_state.assign(opts.peers, 0);
  s->set_ready();
  s->conn = opts.connect;
  s->limit = opts.scope_limit;
  multi_channel mc;
  mc.adopt(std::move(s));
  return mc;
}

std::size_t multi_channel::peers() const noexcept {
  return s_ ? s_->peers() : 0;
}
bool multi_channel::connected() const noexcept {
  return s_ && s_->connected && s_->failed_peers == 0;
}
bool multi_channel::connected(std::size_t peer) const noexcept {
  return s_ && s_->connected && peer < s_->peers() && !s_->failed(peer);
}
const protection_domain &multi_channel::pd() const noexcept {
  static const protection_domain none;
  return s_ ? s_->pd : none;
}
completion_queue *multi_channel::cq() noexcept {
  return s_ && s_->cq ? &s_->cq : nullptr;
}
queue_pair *multi_channel::qp(std::size_t peer) noexcept {
  return s_ && peer < s_->qps.size() ? &s_->qps[peer] : nullptr;
}

result<endpoint> multi_channel::local_endpoint(std::size_t peer) const {
  if (!s_)
    return detail::rdma_error(errc::empty_object);
  if (peer >= s_->peers())
    return errc::no_such_peer;
  if (s_->qps.empty())
    return std::errc::operation_not_supported; // TCP only: no queue pairs
  return s_->qps[peer].local_endpoint();
}

result<std::vector<endpoint>> multi_channel::local_endpoints() const {
  detail::clear_error_detail();
  if (!s_)
    return detail::rdma_error(errc::empty_object);
  if (s_->qps.size() != s_->peers())
    return std::errc::operation_not_supported; // TCP only: no queue pairs
  std::vector<endpoint> out;
  out.reserve(s_->qps.size());
  for (std::size_t i = 0; i < s_->qps.size(); i++) {
    auto e = s_->qps[i].local_endpoint();
    if (!e)
      return detail::fail(e.error(), detail::format("multi_channel::local_endpoints: peer %zu: %s",
                                                    i, e.error().message().c_str()));
    out.push_back(*e);
  }
  return out;
}

result<void> multi_channel::handshake(std::span<const endpoint> remote) {
  detail::clear_error_detail();
  if (!s_)
    return detail::rdma_error(errc::empty_object);
  if (s_->qps.size() != s_->peers())
    return std::errc::operation_not_supported; // TCP only: no queue pairs
  if (remote.size() != s_->qps.size())
    return detail::fail(errc::endpoint_count,
                        detail::format("multi_channel::handshake: %zu endpoints for %zu peers",
                                       remote.size(), s_->qps.size()));
  for (std::size_t i = 0; i < remote.size(); i++)
    if (auto r = s_->qps[i].connect(remote[i], s_->conn); !r) {
      // connect() said what is wrong; say which peer.
      detail::set_error_detail(detail::format("multi_channel::handshake: peer %zu: ", i) +
                               std::string(last_error_detail()));
      return r;
    }
  s_->connected = true;
  return {};
}

namespace {
constexpr int wc_flush_err = 5; // IBV_WC_WR_FLUSH_ERR

// post_one() to a peer over TCP (out of line: the RDMA path stays small).
[[gnu::noinline, gnu::cold]] result<void> post_tcp(detail::channel_state &s, std::size_t peer,
                                                   int k, const local_slice &buf,
                                                   const remote_region *r,
                                                   std::uint64_t id) noexcept {
  return s.tcp->post(peer, k, buf, r, id);
}

// Posts one request of kind k with wr_id id to peer (queue pair or TCP).
[[gnu::always_inline]] inline result<void> post_one(detail::channel_state &s, std::size_t peer,
                                                    int k, const local_slice &buf,
                                                    const remote_region *r,
                                                    std::uint64_t id) noexcept {
  if (s.tcp && s.over_tcp[peer]) [[unlikely]]
    return post_tcp(s, peer, k, buf, r, id);
  queue_pair &qp = s.qps[peer];
  switch (k) {
  case k_send:
    return qp.post_send(buf, id);
  case k_recv:
    return qp.post_recv(buf, id);
  case k_write:
    return qp.post_write(buf, *r, id);
  default:
    return qp.post_read(buf, *r, id);
  }
}

// What a blocking request's completion says.
struct one_outcome {
  int status = 0;
  std::uint32_t byte_len = 0;
};

// Looks for id's completion among the n that s's last CQ poll took (true,
// its outcome in *out); error completions of other requests mark their peer
// failed, the rest are dropped, as a scope drops what is not its own.
[[gnu::always_inline]] inline bool take_id(detail::channel_state &s, std::size_t n,
                                           std::uint64_t id, one_outcome *out) noexcept {
  for (std::size_t i = 0; i < n; i++) {
    if (s.wc[i].wr_id == id) {
      *out = {s.wc[i].status, s.wc[i].byte_len};
      return true;
    }
    if (!s.wc[i].ok())
      s.note_error(s.wc[i]);
  }
  return false;
}

// Polls s's CQ until the completion of id arrives (true, its outcome in
// *out) or deadline passes (false). The clock is read only once a poll
// comes back without it.
[[gnu::noinline, gnu::cold]] result<bool> await_id_cold(detail::channel_state &s, std::uint64_t id,
                                                        one_outcome *out,
                                                        std::chrono::milliseconds timeout) noexcept;
[[gnu::noinline]] result<bool> await_id(detail::channel_state &s, std::uint64_t id,
                                        one_outcome *out,
                                        std::chrono::milliseconds timeout) noexcept {
  if (s.tcp) [[unlikely]]
    return await_id_cold(s, id, out, timeout);
  clock::time_point deadline{};
  bool timed = false;
  for (;;) {
    auto n = s.cq.poll(s.wc);
    if (!n)
      return n.error();
    if (take_id(s, *n, id, out))
      return true;
    if (!timed) {
      deadline = detail::deadline(timeout);
      timed = true;
    } else if (detail::expired(deadline)) {
      return false;
    }
  }
}

// Looks for id's completion among the n that s's last engine poll took
// (true, its outcome in *out); error completions mark their peer failed,
// the rest are dropped, as the CQ path drops them.
[[gnu::always_inline]] inline bool take_tcp_id(detail::channel_state &s, std::size_t n,
                                               std::uint64_t id, one_outcome *out) noexcept {
  bool found = false;
  for (std::size_t i = 0; i < n; i++) {
    if (s.twc[i].status)
      s.fail(s.twc[i].peer);
    if (s.twc[i].wr_id == id) {
      *out = {s.twc[i].status, s.twc[i].byte_len};
      found = true;
    }
  }
  return found;
}

// await_id() of a channel with a TCP engine: the CQ (if any) and the
// engine's ring. As there, the clock is read only once a poll comes back
// without it (the engine's first poll waits up to the timeout, at most
// tcp_wait_most, for it: the timeout then counts from there); polled: a
// poll (tcp_engine::post_poll()) came back without it already. Without a CQ
// each later poll waits up to the deadline (tcp_wait_until()). Inline in
// run_one_tcp(), out of line (await_id_cold()) for await_id().
[[gnu::always_inline]] inline result<bool> await_id_mixed(detail::channel_state &s,
                                                          std::uint64_t id, one_outcome *out,
                                                          std::chrono::milliseconds timeout,
                                                          bool polled = false) noexcept {
  clock::time_point deadline = polled ? detail::deadline(timeout) : clock::time_point{};
  bool timed = polled;
  auto wait = s.cq     ? std::chrono::microseconds(0)
              : polled ? s.tcp_wait_until(deadline)
                       : s.tcp_wait_for(timeout);
  for (;;) {
    if (s.cq) {
      auto n = s.cq.poll(s.wc);
      if (!n)
        return n.error();
      if (take_id(s, *n, id, out))
        return true;
    }
    if (take_tcp_id(s, s.tcp->poll(s.twc, wait), id, out))
      return true;
    if (!timed) {
      deadline = detail::deadline(timeout);
      timed = true;
    } else if (detail::expired(deadline)) {
      return false;
    }
    if (!s.cq)
      wait = s.tcp_wait_until(deadline);
  }
}

result<bool> await_id_cold(detail::channel_state &s, std::uint64_t id, one_outcome *out,
                           std::chrono::milliseconds timeout) noexcept {
  return await_id_mixed(s, id, out, timeout);
}

[[gnu::noinline, gnu::cold]] status_code abandon_one(detail::channel_state &s, std::size_t peer,
                                                     std::uint64_t id, result<bool> got) noexcept;

// What a blocking call returns once its request's completion came (o).
[[gnu::always_inline]] inline status_code one_result(detail::channel_state &s, std::size_t peer,
                                                     const one_outcome &o,
                                                     std::uint32_t *byte_len) noexcept {
  if (o.status != 0) [[unlikely]] {
    s.fail(peer); // RC: an error completion leaves the queue pair in error
    return std::error_code(o.status, wc_category());
  }
  if (byte_len)
    *byte_len = o.byte_len;
  return {};
}

// A blocking call once its request is posted and its first poll did not
// find it (got false), or failed (got's error): awaits it as a scope of its
// own would.
[[gnu::noinline]] status_code finish_one(detail::channel_state &s, std::size_t peer,
                                         std::uint64_t id, result<bool> got,
                                         std::chrono::milliseconds timeout,
                                         std::uint32_t *byte_len) noexcept {
  one_outcome o;
  if (got)
    got = await_id(s, id, &o, timeout);
  if (got && *got)
    return one_result(s, peer, o, byte_len);
  return abandon_one(s, peer, id, got);
}

// A blocking call to a peer over TCP: posts the request and awaits it as
// post_one() and finish_one() would, inline in run_one_slow(): one call
// into the engine for each, where those went through five functions of the
// channel's own (a tenth of a 64 B ping-pong's instructions over TCP).
[[gnu::always_inline]] inline status_code run_one_tcp(detail::channel_state &s, std::size_t peer,
                                                      int k, const local_slice &buf,
                                                      const remote_region *r, std::uint64_t id,
                                                      std::chrono::milliseconds timeout,
                                                      std::uint32_t *byte_len) noexcept {
  one_outcome o;
  bool polled = false;
  if (!s.cq) { // TCP only: the post and the first poll under one hold of the engine's mutex
    status_code posted;
    const std::size_t n =
        s.tcp->post_poll(peer, k, buf, r, id, posted, s.twc, s.tcp_wait_for(timeout));
    if (!posted.ok()) [[unlikely]]
      return posted;
    if (n == 1 && s.twc[0].wr_id == id) [[likely]] // (the usual poll: just this completion)
      return one_result(s, peer, {s.twc[0].status, s.twc[0].byte_len}, byte_len);
    if (take_tcp_id(s, n, id, &o))
      return one_result(s, peer, o, byte_len);
    polled = true;
  } else if (status_code posted = s.tcp->post(peer, k, buf, r, id); !posted.ok()) [[unlikely]] {
    return posted;
  }
  const result<bool> got = await_id_mixed(s, id, &o, timeout, polled);
  if (got && *got)
    return one_result(s, peer, o, byte_len);
  return abandon_one(s, peer, id, got);
}

// A blocking call whose request did not complete in time (got: false) or
// whose poll failed (got's error): as a scope's end, waits up to
// scope_limit more, then moves the queue pair to the error state and takes
// the flush. Returns errc::timed_out or the poll's error.
status_code abandon_one(detail::channel_state &s, std::size_t peer, std::uint64_t id,
                        result<bool> got) noexcept {
  one_outcome o;
  status_code err = got ? status_code(errc::timed_out) : status_code(got.error());
  auto more = got ? await_id(s, id, &o, s.limit) : result<bool>(false);
  if (!more || !*more) {
    s.fail(peer);
    s.to_error(peer);
    (void)await_id(s, id, &o, s.limit);
  } else if (o.status != 0) {
    s.fail(peer);
  }
  return err;
}

// Releases the busy word a blocking call took, on every return.
struct close_one {
  std::atomic<std::uint8_t> &busy;
  ~close_one() { busy.store(0, std::memory_order_release); }
};
} // namespace

status_code detail::channel_core::busy_error() noexcept {
  return errc::channel_busy;
}

// channel_core::run_one() after its first poll: what that poll took (n
// completions in wc), then finish_one().
status_code detail::channel_core::run_one_rest(std::size_t peer, std::uint64_t id, std::size_t n,
                                               status_code polled,
                                               std::chrono::milliseconds timeout,
                                               std::uint32_t *byte_len) noexcept {
  auto &s = static_cast<channel_state &>(*this);
  close_one closer{busy};
  if (!polled.ok())
    return finish_one(s, peer, id, polled.code(), timeout, byte_len);
  one_outcome o;
  if (!take_id(s, n, id, &o))
    return finish_one(s, peer, id, false, timeout, byte_len);
  if (o.status != 0) {
    s.fail(peer); // RC: an error completion leaves the queue pair in error
    return std::error_code(o.status, wc_category());
  }
  if (byte_len)
    *byte_len = o.byte_len;
  return {};
}

// channel_core::run_one() for what its inline path does not take: the
// checks, and a channel with a TCP engine (post_one() and await_id() know
// both transports). The busy word is taken.
status_code detail::channel_core::run_one_slow(std::size_t peer, int k, const local_slice &buf,
                                               const remote_region *r,
                                               std::chrono::milliseconds timeout,
                                               std::uint32_t *byte_len) noexcept {
  auto &s = static_cast<channel_state &>(*this);
  if (peer >= peers() || failed(peer)) {
    close_one closer{busy};
    return peer >= peers() ? status_code(errc::no_such_peer) : errc::peer_failed;
  }
  const std::uint64_t id = base++; // below every later scope's base
  if (s.tcp && s.over_tcp[peer]) {
    close_one closer{busy};
    return run_one_tcp(s, peer, k, buf, r, id, timeout, byte_len);
  }
  if (auto posted = post_one(s, peer, k, buf, r, id); !posted) {
    close_one closer{busy};
    return posted.error();
  }
  if (s.tcp) {
    close_one closer{busy};
    return finish_one(s, peer, id, false, timeout, byte_len);
  }
  auto n = s.cq.poll(s.wc);
  return run_one_rest(peer, id, n ? *n : 0, n ? status_code() : status_code(n.error()), timeout,
                      byte_len);
}

namespace {
struct one_part {
  std::size_t peer;
  const local_slice *buf;
  const remote_region *remote;
  one_part operator()(std::size_t) const noexcept { return *this; }
};
struct each_part {
  std::span<const multi_channel::part> parts;
  one_part operator()(std::size_t i) const noexcept {
    return {parts[i].peer, &parts[i].buf, &parts[i].remote};
  }
};
struct each_peer {
  std::span<const std::size_t> peers;
  const local_slice *buf;
  one_part operator()(std::size_t i) const noexcept { return {peers[i], buf, nullptr}; }
};
} // namespace

status_code detail::channel_core::post_slow(std::size_t peer, int k, const local_slice &buf,
                                            const remote_region *r, std::uint64_t *id) {
  if (peer >= peers()) [[unlikely]]
    return errc::no_such_peer;
  if (failed(peer)) [[unlikely]]
    return errc::peer_failed;
  if (nslots == slot_cap)
    reserve_slots(nslots + 1);
  const std::uint64_t i = base + nslots;
  if (auto posted = post_one(static_cast<channel_state &>(*this), peer, k, buf, r, i); !posted)
      [[unlikely]]
    return posted.error();
  slots[nslots++] = {static_cast<std::uint32_t>(peer), 0, 0, 0};
  if (id)
    *id = i;
  return {};
}

status_code detail::channel_core::poll_cq_other() noexcept {
  auto n = poll_wc_other();
  if (!n) [[unlikely]]
    return n.error();
  take(0, *n);
  return {};
}

void detail::channel_core::set_ready() {
  ready.assign(peer_state.size(), nullptr);
  nready = ready.size();
  for (std::size_t p = 0; p < ready.size(); p++)
    if (!peer_state[p] && p < qps.size())
      ready[p] = &qps[p];
}

void detail::channel_core::reserve_slots(std::size_t n) {
  if (n <= slot_cap)
    return;
  std::size_t cap = slot_cap ? slot_cap * 2 : 16;
  while (cap < n)
    cap *= 2;
  slot_store.resize(cap); // (through operator new, which the tests count)
  slots = slot_store.data();
  tag_store.resize(cap); // (resize keeps the tags a batch stored so far)
  tags = tag_store.data();
  slot_cap = cap;
}

namespace {
// What a scope of requests (slots 0 to nslots - 1) ends with, once every
// request is posted (err: a post's or a poll's error, else success): awaits
// them up to timeout, then as a scope's end does (settle()) if that failed.
// The error, or the first failed completion's.
status_code await_scope(detail::channel_state &s, status_code err,
                        std::chrono::milliseconds timeout) noexcept {
  if (err.ok())
    err = s.drain(timeout); // the clock is read only if one poll is not enough
  if (!err.ok()) [[unlikely]]
    s.settle(); // so every outcome is known, and every buffer free
  if (!err.ok())
    return err;
  if (s.first_failed >= s.base) [[unlikely]]
    return s.outcome(static_cast<std::size_t>(s.first_failed - s.base)).error();
  return {};
}
} // namespace

// send_receive() as a scope of two: the receive (slot 0) and the send.
status_code detail::channel_core::run_two_slow(std::size_t to, const local_slice &out,
                                               std::size_t from, const local_slice &in,
                                               std::chrono::milliseconds timeout,
                                               std::uint32_t *byte_len) noexcept {
  auto &s = static_cast<channel_state &>(*this);
  scope_end end{*this};
  for (std::size_t p : {from, to}) // (refused before anything is posted)
    if (p >= peers() || failed(p))
      return p >= peers() ? status_code(errc::no_such_peer) : errc::peer_failed;
  if (status_code st = post<k_recv>(from, in, nullptr, nullptr); !st.ok())
    return st;
  status_code st = await_scope(s, post<k_send>(to, out, nullptr, nullptr), timeout);
  if (st.ok() && byte_len)
    *byte_len = slots[0].byte_len;
  return st;
}

status_code detail::channel_core::run_two_rest(std::size_t to, std::size_t from, std::uint64_t id,
                                               std::size_t posted, status_code err, std::size_t n,
                                               std::chrono::milliseconds timeout,
                                               std::uint32_t *byte_len) noexcept {
  auto &s = static_cast<channel_state &>(*this);
  scope_end end{*this};
  // The two requests become the open scope's slots 0 and 1 (ids id, id + 1).
  base = id;
  if (slot_cap < 2) [[unlikely]]
    reserve_slots(2); // once per channel, off the usual path
  slots[0] = {static_cast<std::uint32_t>(from), 0, 0, 0};
  slots[1] = {static_cast<std::uint32_t>(to), 0, 0, 0};
  nslots = posted;
  take(0, n);
  status_code st = await_scope(s, err, timeout);
  if (st.ok() && byte_len)
    *byte_len = slots[0].byte_len;
  return st;
}

void detail::channel_core::error_completion(slot *s, const completion &c) noexcept {
  s && !s->done ? fail(s->peer) : note_error(c);
  record(s, c.status, c.byte_len);
}

void detail::channel_core::take_rest(std::size_t from, std::size_t got) noexcept {
  for (std::size_t k = from; k < got; k++) {
    const completion &c = wc[k];
    if (c.status != 0)
      error_completion(find(c.wr_id), c);
    else
      record(find(c.wr_id), 0, c.byte_len);
  }
}

void detail::channel_core::note_error(const completion &c) noexcept {
  auto &m = static_cast<channel_state *>(this)->peer_of_qpn;
  if (auto it = m.find(c.qp_num); it != m.end())
    fail(it->second);
}

status_code detail::channel_core::poll_tcp(std::chrono::milliseconds timeout) noexcept {
  return static_cast<channel_state *>(this)->poll_mixed(channel_state::tcp_wait_for(timeout));
}

status_code detail::channel_core::await_slot(std::size_t i,
                                             std::chrono::milliseconds timeout) noexcept {
  const auto deadline = detail::deadline(timeout);
  while (!slots[i].done) {
    if (auto st = static_cast<channel_state *>(this)->poll_until(deadline); !st.ok())
      return st;
    if (!slots[i].done && detail::expired(deadline))
      return errc::timed_out;
  }
  return {};
}

namespace {
// What a batch's fast path records of a part's successful completion c.
inline void mark(detail::channel_core &s, std::uint64_t i, const completion &c) noexcept {
  s.tags[i] = c.wr_id;
  s.slots[i].byte_len = c.byte_len;
}

// Writes every part's outcome into results (when not empty) from the open
// scope's slots: slot i is part i (the scope posted nothing else); a part
// never posted (posted <= i) has id 0 and IBV_WC_WR_FLUSH_ERR.
template <class PartAt>
void copy_outcomes(const detail::channel_state &s, std::size_t n, const PartAt &part_at,
                   std::size_t posted, std::span<work_result> results) noexcept {
  if (results.empty())
    return;
  // (Read once: a store to results could alias them.)
  const detail::channel_core::slot *const sl = s.slots;
  const std::uint64_t b = s.base;
  for (std::size_t i = 0; i < posted; i++)
    results[i] = work_result{sl[i].peer, b + i, sl[i].status, sl[i].byte_len};
  for (std::size_t i = posted; i < n; i++)
    results[i] = work_result{part_at(i).peer, 0, wc_flush_err, 0};
}

// A batch once its fast path (multi_channel::run, run_parts) stopped: parts
// 0 to posted - 1 are posted (ids base + i) and those whose tag is their id
// are done; wc[0, from) are successes of parts that a poll took and the
// fast path checked but did not mark, wc[from, got) the rest of that poll;
// err is a post's or a poll's error. The batch becomes an ordinary scope
// of its parts: the slots are filled, the rest of wc taken, the other
// parts posted, all awaited. Ends the scope.
template <int K, class PartAt>
[[gnu::noinline]] result<void>
batch_rest(detail::channel_state &s, std::size_t n, const PartAt &part_at, std::size_t posted,
           status_code err, std::size_t from, std::size_t got, std::chrono::milliseconds timeout,
           std::span<work_result> results) {
  scope_end ender{s};
  s.reserve_slots(n); // (once per batch size)
  const std::uint64_t b = s.base;
  for (std::size_t k = 0; k < from; k++)
    mark(s, s.wc[k].wr_id - b, s.wc[k]);
  for (std::size_t i = 0; i < posted; i++) {
    detail::channel_core::slot &sl = s.slots[i];
    const bool done = s.tags[i] == b + i;
    sl.peer = static_cast<std::uint32_t>(part_at(i).peer);
    sl.done = done ? static_cast<std::uint32_t>(++s.ndone) : 0;
    sl.status = 0; // (the fast path took successes only)
    if (!done)
      sl.byte_len = 0;
  }
  s.nslots = posted;
  s.take(from, got);
  if (err.ok()) {
    for (; posted < n; posted++) {
      one_part p = part_at(posted);
      if (err = s.post<K>(p.peer, *p.buf, p.remote, nullptr); !err.ok()) [[unlikely]]
        break;
    }
  }
  err = await_scope(s, err, timeout);
  copy_outcomes(s, n, part_at, posted, results);
  if (!err.ok())
    return err;
  return {};
}
} // namespace

// The batch forms run a scope of their own on the state directly (no
// polling_scope). Their usual path keeps no slot: the parts are posted
// straight to their queue pairs (ids base + i), and the polls mark a part
// done by storing its id as its tag, until all are in; an outcome
// is written only where results asks for it. Anything else (a peer that
// fails the checks or is over TCP, a failed post or poll, an error
// completion, one of no part, a poll that finds nothing: the clock) goes
// to batch_rest, which makes it an ordinary scope.
template <int K, class PartAt>
inline result<void> multi_channel::run(std::size_t n, const PartAt &part_at,
                                       std::chrono::milliseconds timeout,
                                       std::span<work_result> results) {
  if (!results.empty() && results.size() < n)
    return errc::short_results;
  if (!core_) [[unlikely]]
    return empty_error();
  auto &s = static_cast<detail::channel_state &>(*core_);
  if (n == 1 && results.empty()) {
    one_part p = part_at(0);
    return s.run_one<K>(p.peer, *p.buf, p.remote, timeout, nullptr);
  }
  if (!s.open_scope()) [[unlikely]]
    return errc::channel_busy;
  const std::uint64_t b = s.base;
  std::size_t posted = 0;
  if (n <= s.slot_cap) [[likely]] {
    const std::size_t np = s.peer_state.size();
    const std::uint8_t *const state = s.peer_state.data();
    queue_pair *const qps = s.qps.data();
    for (; posted < n; posted++) {
      one_part p = part_at(posted);
      if (p.peer >= np || state[p.peer]) [[unlikely]]
        break;
      if (result<void> r =
              detail::channel_core::post_qp<K>(qps[p.peer], *p.buf, p.remote, b + posted);
          !r) [[unlikely]]
        return batch_rest<K>(s, n, part_at, posted, r.error(), 0, 0, timeout, results);
    }
  }
  if (posted != n) [[unlikely]]
    return batch_rest<K>(s, n, part_at, posted, {}, 0, 0, timeout, results);
  std::size_t left = n;
  detail::channel_core::slot *const sl = s.slots;
  while (left) {
    auto got = s.cq.poll(s.wc);
    if (!got) [[unlikely]]
      return batch_rest<K>(s, n, part_at, n, got.error(), 0, 0, timeout, results);
    const std::size_t m = *got;
    // Each a success of a part (ids are unique, so m of them are m parts);
    // else the rest goes out of line, from the first that is not.
    for (std::size_t j = 0; j < m; j++) {
      const completion &c = s.wc[j];
      if (c.wr_id - b >= n || c.status != 0) [[unlikely]]
        return batch_rest<K>(s, n, part_at, n, {}, j, m, timeout, results);
    }
    if (m == left && results.empty()) [[likely]]
      break; // all in, and no outcome to hand over: nothing to mark
    if (m == 0) [[unlikely]]
      return batch_rest<K>(s, n, part_at, n, {}, 0, 0, timeout, results);
    for (std::size_t j = 0; j < m; j++) {
      const completion &c = s.wc[j];
      mark(s, c.wr_id - b, c);
    }
    left -= m;
  }
  if (!results.empty())
    for (std::size_t i = 0; i < n; i++)
      results[i] = work_result{part_at(i).peer, b + i, 0, sl[i].byte_len};
  s.base = b + n; // below every later scope's base
  s.release_busy();
  return {};
}

result<void> multi_channel::run_parts_slow(int k, std::span<const part> parts,
                                           std::chrono::milliseconds timeout,
                                           std::span<work_result> results) {
  const each_part at{parts};
  switch (k) {
  case k_send:
    return run<k_send>(parts.size(), at, timeout, results);
  case k_recv:
    return run<k_recv>(parts.size(), at, timeout, results);
  case k_write:
    return run<k_write>(parts.size(), at, timeout, results);
  default:
    return run<k_read>(parts.size(), at, timeout, results);
  }
}
namespace {
// A batch's usual end: its n parts done, the scope ends (as end_scope(),
// without slots to settle).
result<void> scope_done(detail::channel_core &s, std::size_t n) noexcept {
  s.base += n; // below every later scope's base
  s.release_busy();
  return {};
}
} // namespace

result<void> multi_channel::run_parts_more(detail::channel_core &s, int k,
                                           std::span<const part> parts, int polled,
                                           std::chrono::milliseconds timeout,
                                           std::span<work_result> results) {
  const std::size_t n = parts.size();
  const std::uint64_t b = s.base;
  if (n == 0)
    return scope_done(s, 0);
  for (std::size_t left = n;;) {
    if (polled < 0) [[unlikely]] {
      auto got = s.poll_wc_other();
      return got ? run_parts_rest(s, k, parts, n, {}, 0, *got, timeout, results)
                 : run_parts_rest(s, k, parts, n, got.error(), 0, 0, timeout, results);
    }
    const auto m = static_cast<std::size_t>(polled);
    if (m == 0) [[unlikely]] // the clock
      return run_parts_rest(s, k, parts, n, {}, 0, 0, timeout, results);
    for (std::size_t j = 0; j < m; j++) {
      const completion &c = s.wc[j];
      if (c.wr_id - b >= n || c.status != 0) [[unlikely]]
        return run_parts_rest(s, k, parts, n, {}, j, m, timeout, results);
    }
    if (m == left)
      break;
    // A tag per part: the slot array must hold n (if it does not,
    // run_parts_rest makes it so and marks them).
    if (n > s.slot_cap) [[unlikely]]
      return run_parts_rest(s, k, parts, n, {}, m, m, timeout, results);
    // (A byte count only for an outcome asked for.)
    for (std::size_t j = 0; j < m; j++)
      if (const completion &c = s.wc[j]; results.empty())
        s.tags[c.wr_id - b] = c.wr_id;
      else
        mark(s, c.wr_id - b, c);
    left -= m;
    polled = s.poll_wc();
  }
  if (!results.empty()) { // (this poll's parts from wc, the earlier ones from their slots)
    for (std::size_t i = 0; i < n; i++)
      results[i] = work_result{parts[i].peer, b + i, 0, s.slots[i].byte_len};
    for (std::size_t j = 0; j < static_cast<std::size_t>(polled); j++)
      results[s.wc[j].wr_id - b].byte_len = s.wc[j].byte_len;
  }
  return scope_done(s, n);
}
result<void> multi_channel::run_parts_rest(detail::channel_core &core, int k,
                                           std::span<const part> parts, std::size_t posted,
                                           status_code err, std::size_t from, std::size_t got,
                                           std::chrono::milliseconds timeout,
                                           std::span<work_result> results) {
  auto &s = static_cast<detail::channel_state &>(core);
  const each_part at{parts};
  const std::size_t n = parts.size();
  switch (k) {
  case k_send:
    return batch_rest<k_send>(s, n, at, posted, err, from, got, timeout, results);
  case k_recv:
    return batch_rest<k_recv>(s, n, at, posted, err, from, got, timeout, results);
  case k_write:
    return batch_rest<k_write>(s, n, at, posted, err, from, got, timeout, results);
  default:
    return batch_rest<k_read>(s, n, at, posted, err, from, got, timeout, results);
  }
}
result<void> multi_channel::multicast_send(std::span<const std::size_t> to, const local_slice &buf,
                                           std::chrono::milliseconds timeout,
                                           std::span<work_result> results) {
  return run<k_send>(to.size(), each_peer{to, &buf}, timeout, results);
}

void detail::channel_core::settle() noexcept {
  auto &st = static_cast<channel_state &>(*this);
  if (st.drain(limit).ok())
    return;
  // Whatever has not completed: its queue pair goes to the error state, so
  // the NIC stops and flushes it; take the flushed completions.
  for (std::size_t i = 0; i < nslots; i++) {
    const slot &p = slots[i];
    if (!p.done && !failed(p.peer)) {
      fail(p.peer);
      st.to_error(p.peer);
    }
  }
  (void)st.drain(detail::deadline(limit));
}

// ---- polling_scope ----

status_code polling_scope::refused(const detail::channel_core *s) noexcept {
  if (!s)
    return detail::rdma_error(errc::empty_object);
  return errc::channel_busy;
}

result<std::vector<work_result>> polling_scope::wait_all(std::chrono::milliseconds timeout) {
  if (!s_)
    return err_;
  auto &s = static_cast<detail::channel_state &>(*s_);
  if (auto st = s.drain(detail::deadline(timeout)); !st.ok())
    return st;
  std::vector<work_result> all;
  all.resize(s.nslots); // every slot is done: in completion order
  for (std::size_t i = 0; i < s.nslots; i++)
    all[s.slots[i].done - 1] = s.outcome(i);
  return all;
}

} // namespace rdmadl
