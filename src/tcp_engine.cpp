// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include "tcp_engine.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <ifaddrs.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "channel_state.hpp"
#include "fd.hpp"
#include "nodes.hpp"

namespace rdmadl::detail {

namespace {
// How long a waiting application thread's sleep of up to wait (poll(2)
// rounds it up to a millisecond) is to find the progress thread's timer
// still running: the sleep's first tcp_wait at most, a margin, and
// after_wait past its end. With less, the timer went off during a short
// sleep and woke the progress thread for nothing: between two one-vCPU
// VMs, about once per 64 KiB round trip when this was 500 us. (A longer
// sleep that the timer goes off in is found asleep by the progress thread,
// which sets the timer past its end: run().)
constexpr std::chrono::microseconds after_wait{500};
constexpr std::chrono::microseconds wait_cover(std::chrono::microseconds wait) noexcept {
  return std::min<std::chrono::microseconds>(std::chrono::ceil<std::chrono::milliseconds>(wait),
                                             channel_state::tcp_wait) +
         std::chrono::microseconds(100) + after_wait;
}

// ibv_wc_status values the engine completes with.
constexpr int wc_loc_len_err = 1, wc_loc_prot_err = 4, wc_flush_err = 5, wc_rem_inv_req_err = 9,
              wc_rem_access_err = 10, wc_rem_op_err = 11, wc_retry_exc_err = 12;
// Where an incoming payload goes.
enum dest { to_nothing, to_recv, to_region, to_read_buf, to_drop, to_stage };

using key_kind = region_table::key_kind;

status_code errno_code() noexcept {
  return status_code::from_errno(errno);
}

// TCP_NODELAY, and keepalive probes every secs once idle, count of them
// unanswered failing the connection (ETIMEDOUT).
void tune(int fd, int secs, int count) noexcept {
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof secs);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof secs);
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count);
  // The longest a waiting poll() blocks in recv(2) (read_blocking()).
  const timeval wait{0, static_cast<suseconds_t>(channel_state::tcp_wait_most.count())};
  (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
}

// The host's first non-loopback IPv4 address that is up, else 127.0.0.1.
std::uint32_t first_host_address() noexcept {
  std::uint32_t found = htonl(INADDR_LOOPBACK);
  ifaddrs *list = nullptr;
  if (getifaddrs(&list) != 0)
    return found;
  for (ifaddrs *i = list; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP) &&
        !(i->ifa_flags & IFF_LOOPBACK)) {
      found = reinterpret_cast<sockaddr_in *>(i->ifa_addr)->sin_addr.s_addr;
      break;
    }
  freeifaddrs(list);
  return found;
}
} // namespace

result<std::unique_ptr<tcp_engine>> tcp_engine::make(std::size_t peers, std::shared_ptr<pd_node> pd,
                                                     std::uint32_t send_depth,
                                                     std::uint32_t recv_depth) {
  std::unique_ptr<tcp_engine> e(new tcp_engine);
  e->pd_ = std::move(pd);
  e->peers_.resize(peers);
  std::size_t total = 0;
  for (auto &q : e->peers_) {
    q.sq.reserve(send_depth);
    q.rq.reserve(recv_depth);
    q.answers.reserve(send_depth); // the reading stops while it is full
    total += send_depth + recv_depth;
  }
  e->done_.reserve(total + 16);
  e->scratch_.resize(64 * 1024);
  return e;
}

result<std::unique_ptr<tcp_engine>> tcp_engine::listen(const std::string &address,
                                                       std::uint16_t port, std::size_t peers,
                                                       std::shared_ptr<pd_node> pd,
                                                       std::uint32_t send_depth,
                                                       std::uint32_t recv_depth) {
  auto made = make(peers, std::move(pd), send_depth, recv_depth);
  if (!made)
    return made.error();
  std::unique_ptr<tcp_engine> e = std::move(*made);
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (address.find(':') != std::string::npos) {
    auto *a = reinterpret_cast<sockaddr_in6 *>(&ss);
    a->sin6_family = AF_INET6;
    a->sin6_port = htons(port);
    if (inet_pton(AF_INET6, address.c_str(), &a->sin6_addr) != 1)
      return std::errc::invalid_argument;
    len = sizeof *a;
    e->family_ = 6;
    std::memcpy(e->addr_.data(), &a->sin6_addr, 16);
  } else {
    auto *a = reinterpret_cast<sockaddr_in *>(&ss);
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    if (address.empty())
      a->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, address.c_str(), &a->sin_addr) != 1)
      return std::errc::invalid_argument;
    len = sizeof *a;
    const std::uint32_t shown = address.empty() ? first_host_address() : a->sin_addr.s_addr;
    std::memcpy(e->addr_.data(), &shown, 4);
  }
  e->listen_fd_ = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (e->listen_fd_ < 0)
    return errno_code();
  int one = 1;
  (void)setsockopt(e->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(e->listen_fd_, reinterpret_cast<sockaddr *>(&ss), len) != 0 ||
      ::listen(e->listen_fd_, static_cast<int>(std::min<std::size_t>(peers + 16, 4096))) != 0)
    return errno_code();
  const auto bound = bound_port(e->listen_fd_);
  if (!bound)
    return errno_code();
  e->port_ = *bound;
  return e;
}

tcp_engine::~tcp_engine() {
  {
    std::lock_guard lock(m_);
    stop_ = true;
  }
  if (thread_.joinable()) {
    wake();
    thread_.join();
  }
  for (auto &q : peers_) {
    if (q.fd >= 0)
      ::close(q.fd);
    if (q.probe_fd >= 0)
      ::close(q.probe_fd);
  }
  for (auto &a : accepting_)
    ::close(a.fd);
  if (listen_fd_ >= 0)
    ::close(listen_fd_);
  if (wake_fd_ >= 0)
    ::close(wake_fd_);
  if (app_wake_fd_ >= 0)
    ::close(app_wake_fd_);
  if (timer_fd_ >= 0)
    ::close(timer_fd_);
  if (failure_fd_ >= 0)
    ::close(failure_fd_);
}

void tcp_engine::keep_alive(std::uint8_t ack_timeout, std::uint8_t retry_count) noexcept {
  const double secs = 4.096e-6 * std::ldexp(1.0, std::min<int>(ack_timeout, 31));
  probe_secs_ = static_cast<int>(std::clamp(std::ceil(secs), 1.0, 32767.0));
  probes_ = std::min(retry_count + 1, 127);
}

void tcp_engine::advertise(channel_endpoint &e) const noexcept {
  e.caps |= channel_endpoint::can_tcp;
  e.family = static_cast<std::uint8_t>(family_);
  e.port = port_;
  e.address = addr_;
}

status_code tcp_engine::start(std::vector<peer_setup> setups) {
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  app_wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (wake_fd_ < 0 || app_wake_fd_ < 0 || timer_fd_ < 0) {
    const status_code st = errno_code();
    for (auto &q : setups) // the engine owns them from here
      if (q.fd >= 0)
        ::close(q.fd);
    return st;
  }
  for (std::size_t p = 0; p < peers_.size() && p < setups.size(); p++) {
    auto &q = peers_[p];
    q.setup = setups[p];
    if (!q.setup.tcp)
      continue;
    q.connector = q.setup.mine < q.setup.theirs;
    q.st = state::waiting;
    q.stage.resize(tcp_eager_sends * tcp_eager_max);
    q.inbuf.resize(tcp_read_ahead);
    q.staged.reserve(tcp_eager_sends);
    if (q.setup.fd >= 0) { // connected and matched already (create_cm's rendezvous)
      q.fd = q.setup.fd;
      q.setup.fd = -1;
      tune(q.fd, probe_secs_, probes_);
      go_up(q);
      continue;
    }
    if (!q.connector)
      continue;
    q.fd = ::socket(q.setup.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (q.fd < 0) {
      fail(p, "cannot make a socket: " + std::string(std::strerror(errno)), wc_retry_exc_err);
      continue;
    }
    tune(q.fd, probe_secs_, probes_);
    q.hello = encode(tcp_hello{q.setup.theirs, q.setup.mine});
    if (::connect(q.fd, reinterpret_cast<sockaddr *>(&q.setup.addr), q.setup.addr_len) == 0)
      q.st = state::hello;
    else if (errno == EINPROGRESS)
      q.st = state::connecting;
    else
      fail(p, "cannot connect: " + std::string(std::strerror(errno)), wc_retry_exc_err);
  }
  // Connections being accepted (accept_new() keeps at most this many): a
  // peer's probe (probe_waiting()) may come while the data path is warm.
  accepting_.reserve(peers_.size() + 16);
  thread_ = std::thread([this] { run(); });
  pthread_setname_np(thread_.native_handle(), "rdmadl-tcp");
  return {};
}

void tcp_engine::wake() noexcept {
  std::uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
}

status_code tcp_engine::post(std::size_t p, int kind, const local_slice &buf,
                             const remote_region *r, std::uint64_t wr_id) noexcept {
  bool wake_it = false;
  status_code st;
  {
    std::lock_guard lock(m_);
    st = post_locked(p, kind, buf, r, wr_id, wake_it);
  }
  if (wake_it)
    wake();
  return st;
}

std::size_t tcp_engine::post_poll(std::size_t p, int kind, const local_slice &buf,
                                  const remote_region *r, std::uint64_t wr_id, status_code &posted,
                                  std::span<tcp_completion> out,
                                  std::chrono::microseconds wait) noexcept {
  bool wake_it = false;
  std::unique_lock lock(m_);
  auto &q = peers_[p];
  // A ping-pong's calls go their own way (lean_place(), lean_send(),
  // lean_wait()): a 64 B round trip runs a fifth fewer distinct
  // instructions a side than through the general one (1,360 against 1,710),
  // and under emulation each distinct one costs (bench/README.md,
  // 2026-11-30: between two VMs the round trip's ratio to a plain socket
  // loop's went from ~1.2 to ~1.15).
  if (kind == k_recv ? lean_placeable(q, buf) : kind == k_send && lean_sendable(q, buf)) {
    posted = {};
    const bool wrote_before = q.wrote;
    if (kind == k_recv)
      lean_place(q, p, buf, wr_id);
    else
      lean_send(q, p, buf, wr_id);
    wake_it = wake_for(q, wrote_before);
    // poll_locked() when nothing is held: what completed (the receive), or
    // else the wait lean_wait() makes as it would.
    if (!wake_it && !held_any_ && (!done_.empty() || lean_waitable(q, wait))) [[likely]] {
      if (done_.empty())
        lean_wait(lock, q, p, wait);
      return take_done(out);
    }
  } else {
    posted = post_locked(p, kind, buf, r, wr_id, wake_it);
    if (!posted.ok()) [[unlikely]]
      return 0;
  }
  if (wake_it) [[unlikely]] { // (not while holding the mutex: the thread would wait for it)
    lock.unlock();
    wake();
    lock.lock();
  }
  return poll_locked(lock, out, wait);
}

// A receive posted while the send it takes is read ahead whole (in_dest
// to_nothing: it came before any receive; nothing of it moved yet), with
// room for its ack and no other thread in recv(2) on the socket.
inline bool tcp_engine::lean_placeable(const peer &q, const local_slice &buf) noexcept {
  return q.st == state::up && q.in_payload && q.in_dest == to_nothing &&
         q.in_f.op == tcp_op::send && q.in_done == 0 && q.rq.empty() && !q.rq.full() &&
         q.staged.empty() && q.in_f.length <= buf.length && q.in_end - q.in_beg >= q.in_f.length &&
         !q.answers.full() && !q.close_after_output && !q.app_reading;
}

// What post_locked() and pump_in() do for such a receive: it takes the
// send's bytes from the read-ahead buffer (begin_payload(): to_recv), both
// complete, and the ack is queued. When nothing else is read ahead and the
// ack is held (holds_back(): the application keeps waiting), that is all;
// else the general step goes on from there.
void tcp_engine::lean_place(peer &q, std::size_t p, const local_slice &buf,
                            std::uint64_t wr_id) noexcept {
  q.rq.push(op{k_recv, buf, 0, 0, wr_id});
  q.credit_owed++;
  q.in_dest = to_recv;
  if (const std::uint32_t len = q.in_f.length; len > 0) {
    const std::byte *from = q.inbuf.data() + q.in_beg;
    if (pd_->regions.use(
            key_kind::local, buf.lkey, buf.addr, len, rdmadl::access::local,
            [&] { std::memcpy(reinterpret_cast<void *>(buf.addr), from, len); }, &q.hint))
        [[likely]] {
      q.in_beg += len;
      q.in_done = len;
    } else {
      region_ended(q); // pump_in() drops the bytes and fails the receive
    }
  }
  if (q.in_dest == to_recv)
    (void)finish_frame(q, p); // (a send's: it cannot fail)
  const bool settled = !q.in_payload && q.in_end - q.in_beg < tcp_header_size &&
                       (q.in_drained || q.app_reading) && !q.out_busy && ticking_ &&
                       !sendable(q, q.sent) && q.responses == 0;
  if (settled) [[likely]]
    return;
  hold_out_ = true;
  step_up(p);
  hold_out_ = false;
}

// A send to an idle connection (nothing on the wire, nothing held, at most
// an ack owed, which it takes along) that may go eagerly (sendable()).
inline bool tcp_engine::lean_sendable(const peer &q, const local_slice &buf) const noexcept {
  return q.st == state::up && q.sq.empty() && !q.sq.full() && !q.out_busy && !held_any_ &&
         q.responses == 0 && !q.close_after_output && !q.app_reading && q.lost_err < 0 &&
         q.credit_owed <= 0xffff &&
         (q.answers.empty() || (q.answers.size() == 1 && q.answers.front().f.op == tcp_op::ack)) &&
         buf.length < tcp_eager_max && q.credits > -static_cast<std::int64_t>(tcp_eager_sends);
}

// What post_locked(), pump_out() and send_batches() do for it: one batch
// of the ack owed (if any) and the send, the credits owed riding on the
// first, in one sendmsg(2) under one hold of the region table. A buffer
// outside the PD's regions, or a socket that takes part of the batch, goes
// on the general way.
void tcp_engine::lean_send(peer &q, std::size_t p, const local_slice &buf,
                           std::uint64_t wr_id) noexcept {
  q.sq.push(op{k_send, buf, 0, 0, wr_id});
  ssize_t n = -1;
  int err = 0;
  {
    region_table::reader regions(pd_->regions);
    if (!regions.allows(key_kind::local, buf.lkey, buf.addr, buf.length, rdmadl::access::local,
                        &q.hint)) [[unlikely]]
      n = -2;
    else {
      q.held = false;
      std::size_t k = 0;
      auto put = [&](tcp_frame f, const peer::out_frame &from) {
        const auto ride = static_cast<std::uint16_t>(q.credit_owed);
        f.credit = ride;
        q.credit_owed -= ride;
        q.granted += ride;
        const auto h = encode(f);
        std::memcpy(q.out_hdr.data() + k * tcp_header_size, h.data(), h.size());
        q.out_frames[k++] = from;
      };
      if (!q.answers.empty()) {
        put(q.answers.front().f, {});
        q.answers.pop();
      }
      q.credits--;
      put(tcp_frame{tcp_op::send, buf.length, wr_id, 0, 0, 0},
          {buf.addr, buf.length, buf.lkey, true});
      q.sent = 1;
      q.out_n = k;
      q.out_off = 0;
      q.out_len = k * tcp_header_size + buf.length;
      q.out_busy = true;
      q.out_more = false;
      std::array<iovec, 2> iov{{{q.out_hdr.data(), k * tcp_header_size},
                                {reinterpret_cast<void *>(buf.addr), buf.length}}};
      msghdr mh{};
      mh.msg_iov = iov.data();
      mh.msg_iovlen = buf.length > 0 ? 2 : 1;
      n = ::sendmsg(q.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      err = errno;
    }
  }
  if (n >= 0) [[likely]] {
    q.out_off = static_cast<std::size_t>(n);
    q.wrote = true;
    if (q.out_off == q.out_len) [[likely]] {
      q.out_busy = false;
      return;
    }
  } else if (n == -1) {
    if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
      return; // (out_busy: it goes once poll(2) says the socket takes it)
    return lost(p, err, nullptr);
  }
  // The rest of the batch (out_busy), or the failure of a buffer outside
  // the regions (next_batch()).
  hold_out_ = posting_ = true;
  (void)pump_out(q, p);
  hold_out_ = posting_ = false;
}

// Whether the waiting poll() after that send would block in recv(2) on the
// one peer (poll_locked()'s "alone") with nothing else to do first: nothing
// completed, nothing read ahead, nothing to send (wanted(): POLLIN only).
inline bool tcp_engine::lean_waitable(const peer &q,
                                      std::chrono::microseconds wait) const noexcept {
  return wait >= channel_state::tcp_wait_most && peers_.size() == 1 && q.st == state::up &&
         q.blocking && !q.app_reading && q.lost_err < 0 && done_.empty() && !held_any_ &&
         q.in_drained && !q.in_payload && q.in_end - q.in_beg < tcp_header_size &&
         q.staged.empty() && !q.close_after_output && !q.out_busy && q.answers.empty() &&
         !credit_due(q) && !sendable(q, q.sent);
}

// poll_locked()'s wait for it: the blocking recv(2), then the headers read
// (pump_in()'s, inline here) until a send waits for its receive; a frame
// with a payload to move, or any other state, is left to drive().
void tcp_engine::lean_wait(std::unique_lock<light_mutex> &lock, peer &q, std::size_t p,
                           std::chrono::microseconds wait) noexcept {
  app_waits(wait_cover(wait));
  read_blocking(lock, p);
  while (q.st == state::up && !q.in_payload && q.in_end - q.in_beg >= tcp_header_size &&
         !q.answers.full() && !q.close_after_output && (q.staged.empty() || q.rq.empty())) {
    const auto f = parse_frame(std::span(q.inbuf).subspan(q.in_beg, tcp_header_size));
    if (!f) [[unlikely]]
      break; // (pump_in() fails the peer)
    take_header(q, *f);
    if (!begin_payload(q, p)) [[unlikely]]
      return;
    if (q.in_payload)
      break;
  }
  const bool settled = q.st != state::up || idle(q) ||
                       (q.in_payload && q.in_dest == to_nothing &&
                        (q.staged.empty() || q.rq.empty()) && !q.out_busy && nothing_to_send(q));
  if (settled) [[likely]]
    return;
  hold_out_ = true;
  drive();
  hold_out_ = false;
}

inline bool tcp_engine::wake_for(peer &q, bool wrote_before) noexcept {
  if (!sleeping_)
    return false;
  // (With no frame half in, wanted() is POLLIN and POLLOUT at most.)
  const bool covered = !q.in_payload && (q.polled & (POLLIN | POLLOUT)) == (POLLIN | POLLOUT);
  const bool wake_it =
      (!covered && (wanted(q) & ~q.polled) != 0) || (q.wrote && !wrote_before && !timed_sleep_);
  if (wake_it)
    sleeping_ = false;
  return wake_it;
}

inline std::size_t tcp_engine::take_done(std::span<tcp_completion> out) noexcept {
  std::size_t n = 0;
  for (; n < out.size() && !done_.empty(); n++) {
    out[n] = done_.front();
    done_.pop();
  }
  return n;
}

inline status_code tcp_engine::post_locked(std::size_t p, int kind, const local_slice &buf,
                                           const remote_region *r, std::uint64_t wr_id,
                                           bool &wake_it) noexcept {
  auto &q = peers_[p];
  auto &ring = kind == k_recv ? q.rq : q.sq;
  if (ring.full())
    return std::errc::not_enough_memory;
  ring.push(op{kind, buf, r ? r->addr : 0, r ? r->rkey : 0, wr_id});
  if (q.st == state::dead) { // as a QP in the error state: flushed at once
    complete(p, wr_id, wc_flush_err, 0);
    kind == k_recv ? q.rq.pop() : q.sq.pop();
    return {};
  }
  if (kind == k_recv) // the peer may send one more (told once the connection is up)
    q.credit_owed++;
  const bool wrote_before = q.wrote;
  // The fast path: the posting thread moves what it can without blocking
  // (a request onto an idle socket; for a receive, the send that waited
  // for it, and its ack), and wakes the thread only when it must now watch
  // for something it does not (output that would block, input that the
  // receive unblocked).
  if (q.st == state::up) {
    hold_out_ = true;
    posting_ = kind != k_recv;
    kind == k_recv ? step_up(p) : (void)pump_out(q, p);
    hold_out_ = posting_ = false;
  }
  // ... or when bytes went out while it sleeps with no timeout: their
  // acknowledgement is to be checked (check_acks()).
  wake_it = wake_for(q, wrote_before);
  return {};
}

// Moves what every connected peer's socket takes or has, without blocking
// (a peer with nothing to move is skipped: a waiting poll() drives every
// peer two or three times per wait). Returns whether it stepped one (false:
// every peer was idle, whatever was held, so a second pass would be too).
// The pass is inline in poll(), the stepping out of line (drive_step()):
// the pass before a wait mostly finds every peer idle.
inline bool tcp_engine::drive() noexcept {
  bool stepped = false;
  for (std::size_t p = 0; p < peers_.size(); p++)
    if (peers_[p].st == state::up && !idle(peers_[p])) {
      drive_step(p);
      stepped = true;
    }
  return stepped;
}

void tcp_engine::drive_step(std::size_t p) noexcept {
  step_up(p);
}

// Whether step(p, 0) would do nothing: no input known to be waiting (the
// socket drained, no whole header read ahead, no frame begun, nothing
// staged) and no output (the test pump_out() makes before a batch).
inline bool tcp_engine::idle(const peer &q) noexcept {
  return (q.in_drained || q.app_reading) && !q.in_payload &&
         q.in_end - q.in_beg < tcp_header_size && q.staged.empty() && !q.close_after_output &&
         !q.out_busy && nothing_to_send(q);
}

// Whether no frame is owed to the peer: no answer (or only an ack that
// waits, see ack_waits()), no credit due, and the next request may not go
// (a request held back stays sendable).
inline bool tcp_engine::nothing_to_send(const peer &q) noexcept {
  return (q.answers.empty() || ack_waits(q)) && !credit_due(q) && !sendable(q, q.sent);
}

// An ack of one request, all this side owes, waits while the peer's next
// request (a send or write of at most tcp_eager_max bytes, which will be
// acked too) is coming in, so that one ack answers both, as TCP's delayed
// ACK answers every second segment: a stream of sends or writes gets half
// as many acks (each a frame the peer's host must take in, and a wake-up
// of its waiting thread). The wait is bounded by that payload's arrival,
// which needs nothing from this side's application or from the ack (the
// peer has sent its header, and TCP moves the rest); a ping-pong is not
// delayed (no request comes in until the ack has gone out). Anything else
// to send takes the ack along.
inline bool tcp_engine::ack_waits(const peer &q) noexcept {
  if (q.answers.size() != 1 || !q.in_payload || q.in_f.length > tcp_eager_max)
    return false;
  const tcp_frame &a = q.answers.front().f;
  const bool next_acked = (q.in_f.op == tcp_op::send || q.in_f.op == tcp_op::write) &&
                          q.in_dest != to_nothing && q.in_dest != to_drop;
  return a.op == tcp_op::ack && a.length == 1 && next_acked;
}

std::size_t tcp_engine::poll(std::span<tcp_completion> out,
                             std::chrono::microseconds wait) noexcept {
  std::unique_lock lock(m_, std::defer_lock);
  if (wait.count() > 0)
    lock.lock();
  else if (!lock.try_lock()) // the progress thread is at work: take its completions next time
    return 0;
  return poll_locked(lock, out, wait);
}

inline std::size_t tcp_engine::poll_locked(std::unique_lock<light_mutex> &lock,
                                           std::span<tcp_completion> out,
                                           std::chrono::microseconds wait) noexcept {
  if (held_any_)
    flush_held();
  if (done_.empty() && wait.count() > 0) {
    // A waiting application thread reads and writes the sockets itself
    // rather than sleeping until the progress thread has done it: that
    // saves two thread wake-ups per message. It sleeps in poll(2) on the
    // sockets (the progress thread keeps them open meanwhile, see run()).
    // What it reads is answered when it next posts or sleeps (next_batch()).
    // Every such call counts as a wait (run()), whether or not it sleeps: a
    // thread that finds its completions ready each time still drives the
    // sockets, and the progress thread stays off them.
    app_waits(wait_cover(wait));
    hold_out_ = true;
    const bool stepped = drive();
    hold_out_ = false;
    if (done_.empty()) {
      if (stepped)
        drive(); // it sleeps: what the first pass held goes out (no recv(2): drained)
      // Every connected peer is watched, also one with no event wanted (a
      // send waiting for a credit): poll(2) reports its hang-up or error,
      // which is how a peer whose host is gone is failed (check_broken()).
      std::array<pollfd, app_poll_max + 1> fds;
      std::array<std::size_t, app_poll_max> who;
      std::size_t n = 0;
      // A peer that the progress thread may yet connect (or past those
      // watched here) could complete something while this thread sleeps.
      bool others = peers_.size() > app_poll_max;
      for (std::size_t p = 0; p < peers_.size() && p < app_poll_max; p++)
        if (const auto &q = peers_[p]; q.st == state::up) {
          const short ev = wanted(q);
          // Reported already (poll(2) would return at once), or its loss
          // waits for another thread's recv(2) (lost()).
          if ((ev == 0 && q.hung_up) || q.lost_err >= 0)
            continue;
          who[n] = p;
          fds[n++] = {q.fd, ev, 0};
        } else if (q.st == state::waiting || q.st == state::connecting || q.st == state::hello) {
          others = true;
        }
      // Blocked in recv(2), this thread cannot be woken (wake_app()): only
      // when nothing else could come, and for a whole SO_RCVTIMEO (tune()):
      // a header, or the rest of a large payload straight to its place (in
      // poll(2), that rest would wake this thread a few times per message).
      const bool alone = n == 1 && fds[0].events == POLLIN && !others && peers_[who[0]].blocking &&
                         !peers_[who[0]].app_reading && wait >= channel_state::tcp_wait_most;
      if (alone && (!peers_[who[0]].in_payload ||
                    (payload_blockable(peers_[who[0]]) &&
                     payload_reader_.load(std::memory_order_relaxed) == SIZE_MAX))) {
        if (peers_[who[0]].in_payload)
          read_payload_blocking(lock, who[0]);
        else
          read_blocking(lock, who[0]);
        hold_out_ = true;
        drive();
        hold_out_ = false;
      } else if (n > 0) {
        fds[n] = {app_wake_fd_, POLLIN, 0};
        note_sleep(wait);
        app_polling_++;
        app_sleepers_++;
        lock.unlock();
        const auto ms = std::chrono::ceil<std::chrono::milliseconds>(wait).count();
        (void)::poll(fds.data(), n + 1, static_cast<int>(std::min<std::int64_t>(ms, INT_MAX)));
        lock.lock();
        app_sleepers_--;
        app_polling_--;
        if (app_woken_ && app_sleepers_ == 0) {
          std::uint64_t v;
          (void)!::read(app_wake_fd_, &v, sizeof v);
          app_woken_ = false;
        }
        after_sleep();
        for (std::size_t i = 0; i < n; i++)
          if (fds[i].revents)
            note_input(peers_[who[i]], fds[i].revents);
        hold_out_ = true;
        drive();
        hold_out_ = false;
        // A hang-up or error that drive() did not take (nothing to read or
        // write on that socket) fails its peer now.
        for (std::size_t i = 0; i < n; i++)
          if (fds[i].revents & (POLLHUP | POLLERR))
            check_broken(who[i], fds[i].revents);
      } else {
        cv_waiters_++;
        cv_.wait_for(lock, wait, [&] { return !done_.empty(); });
        cv_waiters_--;
      }
    }
  }
  return take_done(out);
}

void tcp_engine::flush_held() noexcept {
  held_any_ = false;
  hold_out_ = true;
  for (std::size_t p = 0; p < peers_.size(); p++)
    if (auto &q = peers_[p]; q.held && q.st == state::up)
      (void)pump_out(q, p);
  hold_out_ = false;
}

void tcp_engine::flush(std::size_t p) noexcept {
  {
    std::lock_guard lock(m_);
    fail(p, "this side flushed it (a request did not complete in time)", wc_flush_err);
  }
  wake();
}

std::string tcp_engine::failure(std::size_t p) const {
  std::lock_guard lock(m_);
  return p < peers_.size() ? peers_[p].why : std::string();
}

result<int> tcp_engine::watch_failures() {
  if (failure_fd_ < 0)
    failure_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (failure_fd_ < 0)
    return errno_code();
  return failure_fd_;
}

// fail() adds one to the eventfd per failed peer; this takes the count
// (so the fd stops being readable) and puts one back while a peer is left.
std::size_t tcp_engine::take_failure() noexcept {
  std::lock_guard lock(m_);
  if (failure_fd_ < 0)
    return SIZE_MAX;
  std::uint64_t v = 0;
  (void)!::read(failure_fd_, &v, sizeof v);
  std::size_t found = SIZE_MAX;
  bool more = false;
  for (std::size_t p = 0; p < peers_.size(); p++) {
    if (!peers_[p].unreported)
      continue;
    if (found == SIZE_MAX) {
      found = p;
      peers_[p].unreported = false;
    } else {
      more = true;
      break;
    }
  }
  if (more) {
    std::uint64_t one = 1;
    (void)!::write(failure_fd_, &one, sizeof one);
  }
  return found;
}

inline void tcp_engine::complete(std::size_t p, std::uint64_t wr_id, int status,
                                 std::uint32_t len) noexcept {
  if (done_.full()) [[unlikely]]
    grow_done();
  done_.push(tcp_completion{wr_id, p, status, len});
  if (cv_waiters_ > 0) // (a waiting poll() mostly sleeps in poll(2) or recv(2) instead)
    cv_.notify_all();
  if (app_sleepers_ > 0) [[unlikely]] // (this thread is not one of them: they sleep)
    wake_app();
}

void tcp_engine::wake_app() noexcept {
  if (app_woken_)
    return;
  app_woken_ = true;
  std::uint64_t one = 1;
  (void)!::write(app_wake_fd_, &one, sizeof one);
}

void tcp_engine::note_sleep(std::chrono::microseconds wait) noexcept {
  const auto since = last_wait_ != std::chrono::steady_clock::time_point{}
                         ? last_wait_
                         : std::chrono::steady_clock::now();
  app_sleep_until_ = since + std::chrono::ceil<std::chrono::milliseconds>(wait);
}

void tcp_engine::after_sleep() noexcept {
  if (!timer_extended_) [[likely]]
    return;
  timer_extended_ = false;
  if (!ticking_)
    return;
  const auto now = std::chrono::steady_clock::now();
  last_wait_ = now;
  arm_timer(now, after_wait + timer_lead);
}

// The application has not polled for a long time: the completions' ring
// doubles (out of line: complete() stays small).
void tcp_engine::grow_done() noexcept {
  fifo<tcp_completion> bigger;
  bigger.reserve(done_.size() * 2);
  while (!done_.empty()) {
    bigger.push(done_.front());
    done_.pop();
  }
  done_ = std::move(bigger);
}

// The peer's connection is over: send-side request number at (the oldest
// by default) gets head_status, everything else is flushed, as in a failed
// RC queue pair.
void tcp_engine::fail(std::size_t p, const std::string &why, int head_status,
                      std::size_t at) noexcept {
  auto &q = peers_[p];
  if (q.st == state::dead || q.st == state::rdma)
    return;
  q.st = state::dead;
  q.why = why;
  if (failure_fd_ >= 0) { // multi_channel::next_cm_event() reports it (take_failure())
    q.unreported = true;
    std::uint64_t one = 1;
    (void)!::write(failure_fd_, &one, sizeof one);
  }
  if (q.fd >= 0)
    ::shutdown(q.fd, SHUT_RDWR); // closed by the thread (it may be polling it)
  // A thread in recv(2) straight into a receive's or a read's buffer
  // (read_payload_blocking(); this is then the progress thread, as in
  // check_acks()) may still be copying what had come: their flushes go back
  // to the application once it is out (the shutdown ends it at once), so
  // nothing lands in a buffer after its completion.
  if (q.app_reading)
    while (payload_reader_.load(std::memory_order_acquire) == p)
      std::this_thread::yield();
  for (std::size_t i = 0; i < q.sq.size(); i++)
    complete(p, q.sq[i].wr_id, i == at ? head_status : wc_flush_err, 0);
  q.sq.clear();
  q.sent = 0;
  while (!q.rq.empty()) {
    complete(p, q.rq.front().wr_id, wc_flush_err, 0);
    q.rq.pop();
  }
  q.answers.clear();
  q.responses = 0;
  q.staged.clear();
  q.out_busy = false;
  q.held = false;
  q.credits = 0;
  q.credit_owed = 0;
  q.granted = 0;
}

inline bool tcp_engine::sendable(const peer &q, std::size_t i) noexcept {
  if (i >= q.sq.size())
    return false;
  const op &o = q.sq[i];
  return o.kind != k_send || q.credits > 0 ||
         (q.credits > -static_cast<std::int64_t>(tcp_eager_sends) && o.buf.length <= tcp_eager_max);
}

// Credits owed go in a frame of their own only once they are at least as
// many as the peer still has (the receives it was told of, less its sends
// that this side has read): while it has more, each send it makes is
// answered, and the answer carries them (next_batch()). A stream of sends
// then needs no frame per receive posted again (a streaming receiver made
// one sendmsg(2) per receive); a peer that used every credit gets the next
// at once, and a run of posts tells it in about log2(n) frames. Its sends
// still in flight count as unused here; they are answered once read.
inline bool tcp_engine::credit_due(const peer &q) noexcept {
  return q.credit_owed > 0 && q.credit_owed >= q.granted;
}

// The events a connected peer's socket is to be watched for: input, unless
// a send waits for a receive or answers wait to go out (the data would be
// there at once and poll(2) would spin); output while some is queued.
inline short tcp_engine::wanted(const peer &q) const noexcept {
  const bool waits = q.in_payload && q.in_dest == to_nothing && !stage_now(q);
  const bool stalled = waits || q.answers.full() || q.close_after_output;
  // An eager send left in the socket: the peer's close is read (and the
  // send staged) at once, so its failure is noticed as before.
  short ev = stalled ? (waits && eager_fits(q) ? POLLRDHUP : 0) : POLLIN;
  // (Requests a post held back go once an answer is read: see next_batch().)
  if (q.out_busy || (!q.answers.empty() && !ack_waits(q)) || credit_due(q) ||
      (sendable(q, q.sent) && !q.held))
    ev |= POLLOUT;
  return ev;
}

// A peer that has left bytes unacknowledged (by TCP) for the probes' whole
// span is failed as keepalive fails an idle one: its host is gone, and TCP
// itself would retransmit for many minutes (keepalive does not probe a
// connection with bytes in flight). Any bytes count, not only requests: a
// credit or an answer written just before the peer's host died is enough
// to keep keepalive off. A peer whose receive window is closed (a send
// waiting for its receive) still acknowledges the window probes, so it is
// not failed.
void tcp_engine::check_acks() noexcept {
  const unsigned limit_ms = // one interval more than keepalive needs: its ACKs count
      static_cast<unsigned>(probe_secs_) * static_cast<unsigned>(probes_ + 1) * 1000;
  for (std::size_t p = 0; p < peers_.size(); p++) {
    auto &q = peers_[p];
    if (q.st != state::up || !(q.wrote || q.sent > 0 || q.out_busy))
      continue;
    int queued = 0; // bytes written and not yet acknowledged by the peer's TCP
    if (::ioctl(q.fd, SIOCOUTQ, &queued) == 0 && queued == 0) {
      q.wrote = false;
      continue;
    }
    tcp_info ti{};
    socklen_t len = sizeof ti;
    if (getsockopt(q.fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
      continue;
    if (ti.tcpi_last_ack_recv > limit_ms)
      fail(p,
           "it stopped acknowledging (nothing for " + std::to_string(ti.tcpi_last_ack_recv / 1000) +
               " s)",
           wc_retry_exc_err);
  }
}

// poll(2) reported a connected peer's socket broken (POLLHUP: closed both
// ways; POLLERR: an error is pending) and step() did not fail the peer:
// nothing read or wrote the socket, as when a send waits for a credit,
// input waits for a receive or answers wait to go out. That is how a peer
// whose host is gone is noticed once keepalive gives up on an idle
// connection (ETIMEDOUT), so it must not wait for the application to post
// again: the peer is failed now. POLLERR with no error pending (only the
// error queue has something) fails nothing (and hung_up keeps poll(2) from
// reporting it again and again while no event is wanted).
void tcp_engine::check_broken(std::size_t p, short revents) noexcept {
  auto &q = peers_[p];
  if (q.st != state::up || !(revents & (POLLHUP | POLLERR)))
    return;
  q.hung_up = true;
  int err = 0;
  socklen_t len = sizeof err;
  (void)getsockopt(q.fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err || (revents & POLLHUP))
    lost(p, err, "the connection is closed");
}

// A peer that refuses this side's hello (one of another release of rdmadl's
// wire, or one that does not know the tokens: a stale endpoint) closes
// before it sends anything, and names the reason in its own failure
// (read_hellos()). Whether this side then reads the close, or its next
// frame draws a reset (EPIPE, ECONNRESET), depends on timing: each gives
// the same hint.
void tcp_engine::lost(std::size_t p, int err, const char *closed) noexcept {
  auto &q = peers_[p];
  // A thread in recv(2) on the socket (read_blocking()) may hold what the
  // peer sent last, an answer or the first frame it ever sent: read those
  // before failing the peer (a request the peer answered before it closed
  // completes), as a failure now would drop them. Until then the socket is
  // not polled (it would report the close again and again).
  if (q.app_reading) {
    if (q.lost_err < 0) {
      q.lost_err = err;
      q.lost_closed = closed;
    }
    return;
  }
  std::string why = err ? "the connection failed: " + std::string(std::strerror(err)) : closed;
  if (q.connector && !q.heard && (err == 0 || err == EPIPE || err == ECONNRESET))
    why += ", before it sent anything, as a peer that refuses this side's hello does (another "
           "release of rdmadl, or an endpoint it does not know)";
  fail(p, why, wc_retry_exc_err);
}

namespace {
// Whether a failed probe says that the peer is gone (its listener, or its
// host: no answer to ARP), not that this side lacked something (ports,
// descriptors, memory). Not ETIMEDOUT: the SYN of a probe goes unanswered
// also when the peer is there but its listener's backlog is full (a peer
// that has not started taking connections yet): the probe is tried again.
bool peer_gone(int err) noexcept {
  return err == ECONNREFUSED || err == ECONNRESET || err == EHOSTUNREACH || err == ENETUNREACH ||
         err == EHOSTDOWN;
}
} // namespace

// A peer this side waits for (it is the connector) would only be noticed
// gone at the application's timeout: its connect never comes. So, once per
// probe interval while it waits, this side connects to the peer's listener
// itself and closes that connection at once (the peer drops a connection
// that brings no hello). Refused or reset: the peer's listener is gone (its
// process or its channel ended) and it can never connect: the peer is failed
// at once, as the connector fails a peer whose listener refuses it. A probe
// that is not answered at all fails nothing (see peer_gone()): a peer whose
// host died before its connection is noticed only at the application's
// timeout.
void tcp_engine::probe_waiting(std::size_t p) noexcept {
  auto &q = peers_[p];
  if (q.st != state::waiting || q.connector || q.probe_fd >= 0)
    return;
  q.probe_fd = ::socket(q.setup.addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (q.probe_fd < 0)
    return; // tried again at the next interval
  if (::connect(q.probe_fd, reinterpret_cast<sockaddr *>(&q.setup.addr), q.setup.addr_len) == 0 ||
      errno != EINPROGRESS) {
    const int err = errno;
    const bool connected = err == 0 || err == EISCONN;
    ::close(q.probe_fd);
    q.probe_fd = -1;
    if (!connected && peer_gone(err))
      fail(p,
           "it is gone before its connection came: its listener: " +
               std::string(std::strerror(err)),
           wc_retry_exc_err);
  }
}

// The acceptor's probe of a waiting peer's listener (probe_waiting()) is done.
void tcp_engine::probe_result(std::size_t p) noexcept {
  auto &q = peers_[p];
  int err = 0;
  socklen_t len = sizeof err;
  (void)getsockopt(q.probe_fd, SOL_SOCKET, SO_ERROR, &err, &len);
  ::close(q.probe_fd);
  q.probe_fd = -1;
  if (err && peer_gone(err) && q.st == state::waiting)
    fail(p,
         "it is gone before its connection came: its listener: " + std::string(std::strerror(err)),
         wc_retry_exc_err);
}

bool tcp_engine::timed_watch() const noexcept {
  for (const auto &q : peers_)
    if ((q.st == state::up && (q.wrote || q.sent > 0 || q.out_busy)) ||
        (q.st == state::waiting && !q.connector))
      return true;
  return false;
}

// A waiting application thread is at work (run()): counted, and, while the
// progress thread leaves the sockets to it, the timer that would hand them
// back is kept at least for_at_least ahead, set timer_lead further than
// that when it is not (one timerfd_settime(2), no wake-up; about once per
// timer_lead of waiting).
inline void tcp_engine::app_waits(std::chrono::microseconds for_at_least) noexcept {
  app_calls_++;
  if (!ticking_) {
    last_wait_ = {};
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  last_wait_ = now;
  if (timer_armed_ && armed_until_ - now >= for_at_least)
    return;
  arm_timer(now, for_at_least + timer_lead);
}

void tcp_engine::arm_timer(std::chrono::steady_clock::time_point now,
                           std::chrono::microseconds in) noexcept {
  itimerspec t{};
  t.it_value.tv_sec = static_cast<time_t>(in.count() / 1000000);
  t.it_value.tv_nsec = static_cast<long>(in.count() % 1000000) * 1000;
  (void)timerfd_settime(timer_fd_, 0, &t, nullptr);
  timer_armed_ = true;
  armed_until_ = now + in;
}

void tcp_engine::run() noexcept {
  constexpr std::size_t probe_bit = SIZE_MAX / 2 + 1;
  std::vector<pollfd> fds;
  // fds[i] is peer who[i]'s connection, or its probe (with probe_bit); SIZE_MAX:
  // the eventfd, - 1: the listener, - 2: an accepted connection's hello
  std::vector<std::size_t> who;
  fds.reserve(2 * peers_.size() + 18);
  who.reserve(2 * peers_.size() + 18);
  std::unique_lock lock(m_);
  std::uint64_t calls_seen = app_calls_;
  std::chrono::steady_clock::time_point next_ack_check{};
  for (;;) {
    if (stop_)
      return;
    // While an application thread keeps waiting on the engine (it moves the
    // bytes itself, see poll()), the thread keeps its hands off the sockets,
    // so that a message wakes one thread, not two; it takes them back once
    // a few milliseconds pass with no such wait. It learns of that from a
    // timer the waiting thread keeps setting ahead (app_waits(),
    // timer_lead), not by waking every millisecond to look: between two
    // one-vCPU VMs, a 64 B round trip takes about that long, and a
    // wake-up per message and side cost ~100 us of it.
    // An application thread asleep on the sockets now (in poll(2) or a
    // recv(2), up to app_sleep_until_) keeps them too: what it waits for
    // wakes it, and what this thread completes wakes it (wake_app()); one
    // blocked in recv(2) (read_blocking()) is alone on its one peer.
    const bool asleep = app_polling_ > 0;
    const bool hands_off = app_calls_ != calls_seen || asleep;
    calls_seen = app_calls_;
    // Work that needs no event: output queued by a post, input a receive
    // unblocked (not for the peers a waiting application thread drives).
    for (std::size_t p = 0; p < peers_.size(); p++)
      if (!hands_off || peers_[p].st != state::up || p >= app_poll_max)
        step(p, 0);
    // With bytes written, once per probe interval: whether the peer still
    // acknowledges them (keepalive only covers idle connections); with a
    // peer to connect to this side, a probe of it (a waiting application
    // thread makes this loop turn every millisecond).
    const bool watch = timed_watch();
    if (watch && std::chrono::steady_clock::now() >= next_ack_check) {
      check_acks();
      for (std::size_t p = 0; p < peers_.size(); p++)
        probe_waiting(p);
      next_ack_check = std::chrono::steady_clock::now() + std::chrono::seconds(probe_secs_);
    }
    fds.clear();
    who.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    who.push_back(SIZE_MAX);
    fds.push_back({timer_fd_, POLLIN, 0});
    who.push_back(SIZE_MAX - 3);
    for (std::size_t p = 0; p < peers_.size(); p++) {
      auto &q = peers_[p];
      if (q.st == state::dead && q.fd >= 0 && app_polling_ == 0) { // no poll(2) has it
        ::close(q.fd);
        q.fd = -1;
      }
      if (q.probe_fd >= 0 && q.st != state::waiting) {
        ::close(q.probe_fd);
        q.probe_fd = -1;
      }
      if (q.probe_fd >= 0) {
        fds.push_back({q.probe_fd, POLLOUT, 0});
        who.push_back(p | probe_bit);
      }
      if (q.fd < 0)
        continue;
      short ev = 0;
      if (q.st == state::connecting || q.st == state::hello)
        ev = POLLOUT;
      else if (q.st == state::up)
        ev = wanted(q);
      q.polled = ev;
      // Left to a waiting application thread (poll() watches the first
      // app_poll_max peers); a post need not wake the thread for them.
      const bool theirs = hands_off && q.st == state::up && p < app_poll_max;
      if (theirs)
        q.polled = POLLIN | POLLOUT;
      // A hang-up: poll(2) would report it again and again; a loss that
      // waits for a thread's recv(2) (lost()): the same.
      if (theirs || (ev == 0 && q.hung_up) || q.lost_err >= 0)
        continue;
      fds.push_back({q.fd, ev, 0});
      who.push_back(p);
    }
    // The listener is watched even with no peer waiting: the connections of
    // others' probes (probe_waiting()) and of strangers are taken and closed,
    // not left to fill its backlog.
    if (listen_fd_ >= 0) { // none when every peer came connected (make())
      fds.push_back({listen_fd_, POLLIN, 0});
      who.push_back(SIZE_MAX - 1);
    }
    for (auto &a : accepting_) {
      fds.push_back({a.fd, POLLIN, 0});
      who.push_back(SIZE_MAX - 2);
    }
    sleeping_ = true;
    ticking_ = hands_off;
    // The sockets are left to the waiting thread. While it sleeps on them,
    // the timer is to go off no sooner than that sleep's end (a waiting
    // thread sleeps up to its caller's deadline, at most tcp_wait_most:
    // without this, this thread would wake every millisecond of it); the
    // sleeping thread sets it back when it wakes (after_sleep()). Else the
    // timer is to go off a millisecond from now if that thread does not set
    // it again. (10 ms past the sleep's end: SO_RCVTIMEO's sleep ends on a
    // kernel tick, and an idle one was seen to run several milliseconds
    // long, which woke this thread a second time. The margin costs
    // nothing: that thread sets the timer back once it wakes.)
    if (ticking_ && asleep) {
      const auto now = std::chrono::steady_clock::now();
      const auto end = app_sleep_until_ + std::chrono::milliseconds(10) + after_wait;
      if (!timer_armed_ || armed_until_ < end) {
        arm_timer(now, std::max<std::chrono::microseconds>(
                           std::chrono::ceil<std::chrono::microseconds>(end - now), timer_lead));
        timer_extended_ = true;
      }
    } else if (ticking_ && !timer_armed_) {
      arm_timer(std::chrono::steady_clock::now(), std::chrono::milliseconds(1));
    }
    timed_sleep_ = watch || (ticking_ && timer_armed_);
    lock.unlock();
    int n;
    for (;;) {
      n = ::poll(fds.data(), fds.size(), watch ? probe_secs_ * 1000 : -1);
      // The timer alone went off while an application thread holds the
      // mutex: that thread is at work (a long sendmsg(2) or recvmsg(2) of
      // its own), not gone. Rather than wait for the mutex (a spin, then a
      // futex wake-up and a switch when it lets go: between two one-vCPU
      // VMs, about once per 64 KiB round trip), the timer is set to look
      // again a millisecond later; the waiting thread's next wait sets it
      // further (armed_until_, now past, tells it to).
      if (n == 1 && fds[1].revents && !lock.try_lock()) {
        std::uint64_t v;
        (void)!::read(timer_fd_, &v, sizeof v);
        itimerspec left{};
        if (timerfd_gettime(timer_fd_, &left) == 0 && left.it_value.tv_sec == 0 &&
            left.it_value.tv_nsec == 0) { // (not set again meanwhile by that thread)
          itimerspec again{};
          again.it_value.tv_nsec = 1000000;
          (void)timerfd_settime(timer_fd_, 0, &again, nullptr);
        }
        continue;
      }
      break;
    }
    if (!lock.owns_lock())
      lock.lock();
    sleeping_ = false;
    if (n < 0)
      continue; // EINTR
    if (fds[0].revents) {
      std::uint64_t v;
      (void)!::read(wake_fd_, &v, sizeof v);
    }
    if (fds[1].revents) { // a while without an application thread's wait
      std::uint64_t v;
      (void)!::read(timer_fd_, &v, sizeof v);
      timer_armed_ = false;
    }
    bool listen_ready = false, hello_ready = false;
    for (std::size_t i = 2; i < fds.size(); i++) {
      if (!fds[i].revents)
        continue;
      if (who[i] == SIZE_MAX - 1)
        listen_ready = true;
      else if (who[i] == SIZE_MAX - 2)
        hello_ready = true;
      else if (who[i] & probe_bit)
        peers_[who[i] & ~probe_bit].probe_fd == fds[i].fd ? probe_result(who[i] & ~probe_bit)
                                                          : void();
      else if (peers_[who[i]].fd == fds[i].fd)
        step(who[i], fds[i].revents);
    }
    if (listen_ready)
      accept_new();
    if (hello_ready || listen_ready)
      read_hellos();
  }
}

void tcp_engine::accept_new() noexcept {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return;
    if (accepting_.size() >= peers_.size() + 16) { // more strangers than peers: refuse
      ::close(fd);
      continue;
    }
    tune(fd, probe_secs_, probes_);
    accepting_.push_back({fd, {}, 0});
  }
}

// Reads what the accepted connections sent of their hello; one that names a
// waiting peer by both tokens becomes that peer's, any other is closed.
void tcp_engine::read_hellos() noexcept {
  for (std::size_t i = 0; i < accepting_.size();) {
    auto &a = accepting_[i];
    ssize_t n = ::recv(a.fd, a.buf.data() + a.off, a.buf.size() - a.off, 0);
    bool drop = n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    if (n > 0)
      a.off += static_cast<std::size_t>(n);
    if (!drop && a.off == a.buf.size()) {
      drop = true;
      const auto h = parse_hello(a.buf);
      const auto seen = peek_hello(a.buf); // (for a peer of another release)
      for (std::size_t p = 0; p < peers_.size(); p++) {
        auto &q = peers_[p];
        const tcp_hello t = h ? *h : seen.tokens;
        if (q.st != state::waiting || q.connector || q.setup.mine != t.acceptor_token ||
            q.setup.theirs != t.connector_token)
          continue;
        if (h) {
          q.fd = a.fd;
          go_up(q);
          drop = false;
          a.fd = -1;
        } else if (seen.version != 0 && seen.version != tcp_hello_version) {
          // Its tokens are this pair's: a build of another release of rdmadl.
          fail(p,
               "it speaks version " + std::to_string(seen.version) +
                   " of rdmadl's TCP protocol, this build version " +
                   std::to_string(tcp_hello_version) +
                   " (both ends must run the same 0.x minor release)",
               wc_retry_exc_err);
        }
        break;
      }
    }
    if (drop || a.fd < 0) {
      if (a.fd >= 0)
        ::close(a.fd);
      accepting_[i] = accepting_.back();
      accepting_.pop_back();
    } else {
      i++;
    }
  }
}

void tcp_engine::go_up(peer &q) noexcept {
  q.st = state::up;
  q.blocking = !set_blocking(q.fd);
  if (app_sleepers_ > 0)
    wake_app();
}

void tcp_engine::note_input(peer &q, short revents) noexcept {
  if (revents & (POLLIN | POLLHUP | POLLERR | POLLRDHUP))
    q.in_drained = false;
  if (revents & (POLLRDHUP | POLLHUP | POLLERR))
    q.rdhup = true;
}

bool tcp_engine::eager_fits(const peer &q) noexcept {
  return q.in_f.op == tcp_op::send && q.staged.size() < tcp_eager_sends &&
         q.in_f.length <= tcp_eager_max;
}

// An eager send that came before its receive is read into the staging
// buffer only once something behind it may be needed: an answer or a credit
// for a request of this side's, or the peer's close. Until then its bytes
// stay in the socket (or the read-ahead buffer), and the receive, once
// posted, takes them straight from there: in a blocking ping-pong, where
// each side posts its receive only once its own send has completed (after
// the peer's next message came), that saves copying each message twice.
bool tcp_engine::stage_now(const peer &q) noexcept {
  return eager_fits(q) && (!q.sq.empty() || q.rdhup);
}

void tcp_engine::step(std::size_t p, short revents) noexcept {
  auto &q = peers_[p];
  note_input(q, revents);
  if (revents & (POLLHUP | POLLERR))
    q.hung_up = true;
  if (q.st == state::connecting && revents) {
    int err = 0;
    socklen_t len = sizeof err;
    (void)getsockopt(q.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err)
      return fail(p, "cannot connect: " + std::string(std::strerror(err)), wc_retry_exc_err);
    q.st = state::hello;
  }
  if (q.st == state::hello) {
    ssize_t n =
        ::send(q.fd, q.hello.data() + q.hello_off, q.hello.size() - q.hello_off, MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return fail(p, "cannot connect: " + std::string(std::strerror(errno)), wc_retry_exc_err);
    if (n > 0)
      q.hello_off += static_cast<std::size_t>(n);
    if (q.hello_off < q.hello.size())
      return;
    go_up(q);
  }
  if (q.st != state::up)
    return;
  if (!(revents & (POLLHUP | POLLERR)))
    return step_up(p);
  if (!pump(q, p))
    return;
  check_broken(p, revents);
  if (refusal_out(q))
    refused_sent(p);
}

inline void tcp_engine::step_up(std::size_t p) noexcept {
  auto &q = peers_[p];
  if (pump(q, p) && refusal_out(q)) [[unlikely]]
    refused_sent(p);
}

// A refused request's answers have all gone out (see refused_sent()).
inline bool tcp_engine::refusal_out(const peer &q) noexcept {
  return q.close_after_output && q.st == state::up && !q.out_busy && q.answers.empty();
}

// Frames already read ahead wait for no poll(2): once the answers they wait
// on have gone out, they are taken at once. False once the peer failed.
inline bool tcp_engine::pump(peer &q, std::size_t p) noexcept {
  do {
    if (!pump_in(q, p) || !pump_out(q, p))
      return false;
  } while (in_ready(q));
  return true;
}

// The answers to a request this side refused went out: the peer fails, as
// the requester's queue pair does.
void tcp_engine::refused_sent(std::size_t p) noexcept {
  fail(p, "it sent a request this side refused (see its completion)", wc_flush_err);
}

// Whether next_batch() is to send nothing now (a request held back is
// marked so: held, held_any_). Inline: pump_out() asks it before calling
// send_batches(), and while an application thread keeps waiting most of
// its calls with something queued hold it (an ack held for the next
// request).
//
// An application thread (a post, or a poll() that returns to it) holds
// back the acks and credits it produced (a receive posted: its credit; a
// send placed: its ack) while the progress thread ticks (run(): an
// application thread keeps waiting on the engine): they ride on its next
// request, or go before it next sleeps in poll(), or from the progress
// thread within a few milliseconds (a turn that finds no application
// wait steps every peer). In a blocking ping-pong an ack then reaches the
// peer with the next message, one wake-up instead of two; in a stream,
// acks and credits go together.
//
// Likewise a post holds back its request while requests to the peer are
// on the wire (their answers still to come), and either an application
// thread keeps waiting or every send among them had a credit (the peer
// posted its receive, so it answers each once read, with no call of its
// application's; writes and reads need none): the requests posted
// meanwhile go together, one sendmsg for a window's worth (as a doorbell
// rung once for a list of work requests), at the next poll()
// (flush_held()), when an answer is read (by whichever thread reads: the
// progress thread when no application thread waits), or, after the last
// wait of a thread that kept waiting, from the progress thread within a
// few milliseconds. A stream of posts
// from a thread that does not wait in between (the progress thread then
// reads the answers) thus goes a window per answer, not a sendmsg per
// post. A request posted to an idle connection goes at once, and so does
// one behind an eager send that may wait for the peer's receive. A read
// response is never held.
inline bool tcp_engine::holds_back(peer &q) noexcept {
  const bool hold_answers = hold_out_ && ticking_ && !sendable(q, q.sent);
  const bool hold_requests = posting_ && q.sent > 0 && (ticking_ || q.credits >= 0);
  if (!(hold_answers || hold_requests) || q.responses != 0)
    return false;
  if (hold_requests && sendable(q, q.sent))
    q.held = held_any_ = true;
  return true;
}

// Gathers the next frames to go out into one batch (one sendmsg): the
// answers owed, then the requests that may go, each header carrying the
// credits owed (a credit frame of its own only when nothing else goes), up
// to tcp_out_frames frames and, payloads included, until the batch carries
// tcp_eager_max payload bytes (so no answer waits behind more than that).
// Answers and requests leave their queues here ("on the wire": no answer to
// a request can come before its bytes went). False once the peer failed.
inline bool tcp_engine::next_batch(peer &q, std::size_t p,
                                   const region_table::reader &regions) noexcept {
  if (holds_back(q))
    return true;
  q.held = false;
  q.out_n = 0;
  q.out_off = 0;
  q.out_len = 0;
  std::size_t bytes = 0; // payload bytes in the batch
  while (q.out_n < tcp_out_frames && bytes < tcp_eager_max) {
    tcp_frame f;
    peer::out_frame from; // where its payload comes from (none: length 0)
    if (!q.answers.empty()) {
      f = q.answers.front().f;
      q.answers.pop();
      if (f.op == tcp_op::read_response) {
        q.responses--;
        // Served only if the region still grants it (the check is redone per call).
        from = {f.addr, f.length, f.rkey, false};
        f.addr = 0;
        f.rkey = 0;
        if (!regions.allows(key_kind::remote, from.key, from.addr, f.length,
                            rdmadl::access::remote_read, &q.hint)) {
          f = tcp_frame{tcp_op::nack, 0, f.wr_id, 0, 0, wc_rem_access_err};
          from = {};
        }
      }
    } else if (sendable(q, q.sent)) {
      const op &o = q.sq[q.sent];
      f = tcp_frame{};
      f.wr_id = o.wr_id;
      f.length = o.buf.length;
      if (o.kind == k_send) {
        f.op = tcp_op::send;
        q.credits--;
      } else {
        f.op = o.kind == k_write ? tcp_op::write : tcp_op::read_request;
        f.addr = o.raddr;
        f.rkey = o.rkey;
      }
      if (!regions.allows(key_kind::local, o.buf.lkey, o.buf.addr, o.buf.length,
                          rdmadl::access::local, &q.hint)) {
        fail(p, "a local buffer is not inside a region of the channel's PD", wc_loc_prot_err,
             q.sent);
        return false;
      }
      from = {o.buf.addr, f.payload(), o.buf.lkey, true};
      q.sent++;
    } else if (q.out_n == 0 && credit_due(q)) { // receives posted here since the last one
      f = tcp_frame{tcp_op::credit, q.credit_owed, 0, 0, 0, 0};
      q.granted += q.credit_owed;
      q.credit_owed = 0;
    } else {
      break;
    }
    const auto ride = static_cast<std::uint16_t>(std::min<std::uint32_t>(q.credit_owed, 0xffff));
    f.credit = ride;
    q.credit_owed -= ride;
    q.granted += ride;
    const auto h = encode(f);
    std::memcpy(q.out_hdr.data() + q.out_n * tcp_header_size, h.data(), h.size());
    q.out_frames[q.out_n++] = from;
    q.out_len += tcp_header_size + from.length;
    bytes += from.length;
  }
  q.out_busy = q.out_n > 0;
  // Else everything that may go is in it (nothing that decides it changes
  // until the mutex is let go): pump_out() need not come back for more.
  q.out_more = q.out_n == tcp_out_frames || bytes >= tcp_eager_max || credit_due(q);
  return true;
}

// Sends what is queued until the socket is full (see next_batch() for what
// a post holds back). False once the peer failed. Inline in its callers (a
// post, step(), flush_held()), as the test for nothing to go (a request
// held back stays sendable: see next_batch()); send_batches() does the rest,
// with next_batch() inline in it.
inline bool tcp_engine::pump_out(peer &q, std::size_t p) noexcept {
  if (!q.out_busy && (nothing_to_send(q) || holds_back(q)))
    return true;
  return send_batches(q, p);
}

bool tcp_engine::send_batches(peer &q, std::size_t p) noexcept {
  for (;;) {
    std::array<iovec, 2 * tcp_out_frames> iov;
    std::size_t cnt = 0;
    msghdr mh{};
    mh.msg_iov = iov.data();
    ssize_t n = -1;
    int err = 0;
    auto send_it = [&] {
      mh.msg_iovlen = cnt;
      n = ::sendmsg(q.fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
      err = errno;
    };
    if (!q.out_busy) {
      // A new batch: next_batch() checks each payload's range in its region
      // under one shared hold of the region table, which keeps them in
      // place through the batch's first sendmsg(2) (no second check).
      region_table::reader regions(pd_->regions);
      if (!next_batch(q, p, regions))
        return false;
      if (!q.out_busy)
        return true;
      // Each run of headers up to a payload is one iovec.
      std::byte *run = q.out_hdr.data();
      std::size_t run_len = 0;
      for (std::size_t i = 0; i < q.out_n; i++) {
        run_len += tcp_header_size;
        const peer::out_frame &o = q.out_frames[i];
        if (o.length == 0)
          continue;
        iov[cnt++] = {run, run_len};
        iov[cnt++] = {reinterpret_cast<std::byte *>(o.addr), o.length};
        run += run_len;
        run_len = 0;
      }
      if (run_len > 0)
        iov[cnt++] = {run, run_len};
      send_it();
    } else {
      // The rest of a batch a sendmsg(2) took part of (or none, EAGAIN):
      // from out_off on, the headers (adjacent ones in one iovec) and the
      // payloads, each of these checked again and held in its region
      // during the call.
      std::array<region_table::range, tcp_out_frames> held;
      std::size_t nheld = 0, at = 0;
      auto add = [&](std::byte *base, std::size_t len) {
        const std::size_t skip = q.out_off > at ? std::min(q.out_off - at, len) : 0;
        at += len;
        if (skip == len)
          return std::size_t{0};
        if (cnt > 0 &&
            static_cast<std::byte *>(iov[cnt - 1].iov_base) + iov[cnt - 1].iov_len == base + skip)
          iov[cnt - 1].iov_len += len - skip;
        else
          iov[cnt++] = {base + skip, len - skip};
        return skip;
      };
      for (std::size_t i = 0; i < q.out_n; i++) {
        (void)add(q.out_hdr.data() + i * tcp_header_size, tcp_header_size);
        const peer::out_frame &o = q.out_frames[i];
        if (o.length == 0 || at + o.length <= q.out_off) {
          at += o.length;
          continue;
        }
        const std::size_t skip = add(reinterpret_cast<std::byte *>(o.addr), o.length);
        held[nheld++] = {o.local ? key_kind::local : key_kind::remote, o.key, o.addr + skip,
                         o.length - skip,
                         o.local ? rdmadl::access::local : rdmadl::access::remote_read};
      }
      if (nheld > 0) {
        if (!pd_->regions.use_each(std::span(held.data(), nheld), send_it, &q.hint)) {
          fail(p, "a region ended while its bytes were being sent", wc_loc_prot_err);
          return false;
        }
      } else {
        send_it();
      }
    }
    if (n < 0) {
      if (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)
        return true;
      lost(p, err, nullptr); // (err is never 0 here)
      return false;
    }
    q.out_off += static_cast<std::size_t>(n);
    q.wrote = true;
    if (q.out_off < q.out_len)
      continue;
    q.out_busy = false;
    if (!q.out_more)
      return true;
  }
}

// Moves the bytes not yet taken to the front of the read-ahead buffer, so a
// read appends to them (none: it only starts over).
void tcp_engine::compact_in(peer &q) noexcept {
  if (q.in_beg == q.in_end) {
    q.in_beg = q.in_end = 0;
  } else if (q.in_beg > 0) {
    std::memmove(q.inbuf.data(), q.inbuf.data() + q.in_beg, q.in_end - q.in_beg);
    q.in_end -= q.in_beg;
    q.in_beg = 0;
  }
}

// Reads what the socket has into the peer's read-ahead buffer, after the
// bytes still unparsed there. 1: some came (drained: all the socket had),
// 0: none (it would block), -1: the peer failed. Inline: most calls find
// the socket drained; the recv(2) is read_in()'s.
inline int tcp_engine::fill_in(peer &q, std::size_t p, bool &drained) noexcept {
  if (q.in_drained || q.app_reading)
    return 0; // no recv(2) until poll(2) says there is more (note_input()), or
              // while a waiting poll() blocks in one (read_blocking())
  return read_in(q, p, drained);
}

int tcp_engine::read_in(peer &q, std::size_t p, bool &drained) noexcept {
  compact_in(q);
  const std::size_t room = q.inbuf.size() - q.in_end;
  const ssize_t n = ::recv(q.fd, q.inbuf.data() + q.in_end, room, MSG_DONTWAIT);
  if (n > 0) {
    q.heard = true;
    q.in_end += static_cast<std::size_t>(n);
    drained = static_cast<std::size_t>(n) < room;
    q.in_drained = drained;
    return 1;
  }
  return read_failed(q, p, n, errno);
}

// A recv(2) into the read-ahead buffer that gave nothing (n: 0 or -1, err:
// its errno): 0 if the socket is only empty (drained noted), else the peer
// is failed and -1.
int tcp_engine::read_failed(peer &q, std::size_t p, ssize_t n, int err) noexcept {
  if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR)) {
    q.in_drained = err != EINTR;
    return 0;
  }
  lost(p, n == 0 ? 0 : err,
       q.in_payload ? "it closed the connection inside a frame" : "it closed the connection");
  return -1;
}

// A waiting poll() with one connected peer to watch, for input only, and
// waiting for a header: rather than poll(2) and then recv(2), it blocks in
// the recv(2) itself (the socket is blocking once up, every other call
// passes MSG_DONTWAIT, and SO_RCVTIMEO bounds the wait: tune()), as a plain
// blocking socket loop does. The mutex is released meanwhile; app_reading
// keeps every other thread off the socket's input and the buffer's free
// end (fill_in(), pump_in(), run()). Called and returns with lock held.
void tcp_engine::read_blocking(std::unique_lock<light_mutex> &lock, std::size_t p) noexcept {
  auto &q = peers_[p];
  compact_in(q);
  std::byte *to = q.inbuf.data() + q.in_end;
  const std::size_t room = q.inbuf.size() - q.in_end;
  if (room == 0) // (a header takes less: in_ready() saw none whole)
    return;
  const int fd = q.fd;
  const auto since = block_begin(q);
  lock.unlock();
  const ssize_t n = ::recv(fd, to, room, 0);
  const int err = errno;
  lock.lock();
  const int deferred = block_end(q, since);
  if (q.st != state::up)
    return;
  if (n > 0) {
    q.heard = true;
    q.in_end += static_cast<std::size_t>(n);
    q.in_drained = static_cast<std::size_t>(n) < room;
  } else {
    (void)read_failed(q, p, n, err);
  }
  if (deferred >= 0 && q.st == state::up && pump(q, p) && q.st == state::up)
    lost(p, deferred, q.lost_closed);
}

// A payload that goes straight to its place (pump_in()'s direct read), with
// nothing of it read ahead and at least a read-ahead buffer's half to come.
inline bool tcp_engine::payload_blockable(const peer &q) noexcept {
  return q.in_payload && q.in_end == q.in_beg &&
         (q.in_dest == to_recv || q.in_dest == to_region || q.in_dest == to_read_buf) &&
         q.in_f.payload() - q.in_done >= q.inbuf.size() / 2;
}

// read_blocking() for the rest of a large payload (payload_blockable()):
// one recv(MSG_WAITALL) straight into its place, copying while the bytes
// come, where poll(2) and recvmsg(2) would take them a few segments a
// wake-up. The region is held for the call (use_blocking(): deregistering
// that region waits for it, no other does); SO_RCVTIMEO bounds it.
void tcp_engine::read_payload_blocking(std::unique_lock<light_mutex> &lock,
                                       std::size_t p) noexcept {
  auto &q = peers_[p];
  const std::uint32_t left = q.in_f.payload() - q.in_done;
  const payload_place at = place_of(q);
  void *to = reinterpret_cast<void *>(at.addr + q.in_done);
  const int fd = q.fd;
  const auto since = block_begin(q);
  payload_reader_.store(p, std::memory_order_relaxed); // (fail())
  lock.unlock();
  ssize_t n = -1;
  int err = 0;
  const bool used =
      pd_->regions.use_blocking(at.kind, at.key, at.addr + q.in_done, left, at.right, [&] {
        n = ::recv(fd, to, left, MSG_WAITALL);
        err = errno;
      });
  payload_reader_.store(SIZE_MAX, std::memory_order_release);
  lock.lock();
  const int deferred = block_end(q, since);
  if (q.st != state::up)
    return;
  if (!used) { // the region ended: the rest is dropped, the request fails (as in pump_in())
    region_ended(q);
  } else if (n > 0) {
    q.heard = true;
    q.in_done += static_cast<std::uint32_t>(n);
    q.in_drained = static_cast<std::uint32_t>(n) < left; // it timed out on an empty socket
  } else {
    (void)read_failed(q, p, n, err);
  }
  if (deferred >= 0 && q.st == state::up && pump(q, p) && q.st == state::up)
    lost(p, deferred, q.lost_closed);
}

// Whether the progress thread's timer covers a blocking recv(2) that began
// at since (block_begin()).
inline bool tcp_engine::timer_covers(std::chrono::steady_clock::time_point since) const noexcept {
  return ticking_ && since != std::chrono::steady_clock::time_point{} && timer_armed_ &&
         armed_until_ - since >= wait_cover(channel_state::tcp_wait);
}

std::chrono::steady_clock::time_point tcp_engine::block_begin(peer &q) noexcept {
  // The progress thread's timer is not to go off in the first millisecond
  // this thread blocks (SO_RCVTIMEO: up to tcp_wait_most; a timer that goes
  // off later finds it asleep and is set past its end: run()), nor less
  // than after_wait after a recv(2) that returned by then: it would wake
  // that thread for nothing. The poll() that calls this read the clock a
  // few microseconds ago (app_waits()): that reading (since) and
  // wait_cover() tell whether the timer covers both, so neither this nor
  // block_end() reads the clock again (it was set timer_lead ahead: most
  // waits find it so).
  auto since = last_wait_;
  if (timer_covers(since)) {
    app_calls_++;
  } else {
    app_waits(wait_cover(channel_state::tcp_wait));
    since = last_wait_;
  }
  note_sleep(channel_state::tcp_wait_most);
  q.app_reading = true;
  app_polling_++;
  return since;
}

int tcp_engine::block_end(peer &q, std::chrono::steady_clock::time_point since) noexcept {
  app_polling_--;
  q.app_reading = false;
  // Its return counts as a wait too (run()): on a slow link a thread may
  // spend a millisecond and more in one recv(2). Unless the timer still
  // covers it (not gone off, not set nearer meanwhile), the clock is read:
  // the progress thread may have set ticking_ during the recv(2); when it
  // set the timer to this recv(2)'s latest end, the timer is set back
  // (after_sleep()).
  if (timer_extended_) {
    app_calls_++;
    after_sleep();
  } else if (timer_covers(since)) {
    app_calls_++;
  } else {
    app_waits(after_wait);
  }
  const int deferred = q.lost_err; // a loss found meanwhile (lost())
  q.lost_err = -1;
  return deferred;
}

// Reads frames until the socket is empty or a send waits for a receive:
// small frames several to a recv(2) through the read-ahead buffer, the rest
// of a large payload straight into its destination. False once the peer
// failed.
bool tcp_engine::pump_in(peer &q, std::size_t p) noexcept {
  bool drained = false; // a recv(2) of this call found the socket emptied
  for (;;) {
    if (!q.staged.empty() && !q.rq.empty() && !q.answers.full() && !q.close_after_output) {
      place_staged(q, p);
      continue;
    }
    // A header to take, or a send that waited for a receive: where its
    // payload goes (begin_payload(), inline, so called from here only).
    if (!q.in_payload || q.in_dest == to_nothing) {
      if (!q.in_payload) {
        if (q.answers.full() || q.close_after_output)
          return true; // read on once the answers owed have gone out
        if (q.in_end - q.in_beg < tcp_header_size) {
          if (drained)
            return true;
          if (const int r = fill_in(q, p, drained); r <= 0)
            return r == 0;
          continue;
        }
        auto f = parse_frame(std::span(q.inbuf).subspan(q.in_beg, tcp_header_size));
        if (!f) {
          fail(p, "it sent a malformed frame (" + f.error().message() + ")", wc_retry_exc_err);
          return false;
        }
        take_header(q, *f);
      }
      if (!begin_payload(q, p))
        return false;
      if (!q.in_payload)
        continue;
      // A send still waiting for a receive: asked again on a later call,
      // once one may have been posted (nothing that decides it changes
      // before).
      if (q.in_dest == to_nothing)
        return true;
    }
    const std::uint32_t left = q.in_f.payload() - q.in_done;
    if (left > 0) {
      const payload_place place = place_of(q);
      const std::uint64_t at = place.addr;
      // Moves len bytes to the destination, from from (the read-ahead
      // buffer) or, if null, from the socket (n: what recvmsg(2) gave), and
      // what follows them into the read-ahead buffer (empty then): the
      // next headers come with the payload's end.
      ssize_t n = -1;
      int err = 0;
      auto move = [&](const std::byte *from, std::size_t len) {
        void *to = reinterpret_cast<void *>(at + q.in_done);
        if (from) {
          std::memcpy(to, from, len);
          n = static_cast<ssize_t>(len);
        } else {
          q.in_beg = q.in_end = 0;
          iovec iov[2] = {{to, len}, {q.inbuf.data(), q.inbuf.size()}};
          msghdr mh{};
          mh.msg_iov = iov;
          mh.msg_iovlen = 2;
          n = ::recvmsg(q.fd, &mh, MSG_DONTWAIT);
          err = errno;
        }
      };
      const std::size_t have = q.in_end - q.in_beg;
      const bool direct = have == 0 && left >= q.inbuf.size() / 2 && q.in_dest != to_drop;
      if (have == 0 && !direct) {
        if (drained)
          return true;
        if (const int r = fill_in(q, p, drained); r <= 0)
          return r == 0;
        continue;
      }
      if (direct && (drained || q.in_drained || q.app_reading))
        return true;
      const std::byte *from = direct ? nullptr : q.inbuf.data() + q.in_beg;
      const std::size_t len = direct ? left : std::min<std::size_t>(have, left);
      if (q.in_dest == to_drop) {
        n = static_cast<ssize_t>(len);
      } else if (q.in_dest == to_stage) {
        move(from, len);
      } else if (!pd_->regions.use(
                     place.kind, place.key, at + q.in_done, len, place.right,
                     [&] { move(from, len); }, &q.hint)) {
        region_ended(q); // under the transfer: the rest is dropped, the request fails
        continue;
      }
      if (n <= 0) // (in_payload: read_failed() says "inside a frame")
        return read_failed(q, p, n, err) == 0;
      if (direct) {
        q.in_drained = drained = static_cast<std::size_t>(n) < len + q.inbuf.size();
        if (static_cast<std::size_t>(n) > len) { // the next frames, read ahead
          q.in_end = static_cast<std::size_t>(n) - len;
          n = static_cast<ssize_t>(len);
        }
      } else {
        q.in_beg += static_cast<std::size_t>(n);
      }
      q.in_done += static_cast<std::uint32_t>(n);
      if (q.in_done < q.in_f.payload())
        continue;
    }
    if (!finish_frame(q, p))
      return false;
  }
}

// Where the payload on its way in goes (in_dest): its address and the key
// and right its region is checked with (to_stage: this side's own buffer,
// no region to check).
inline tcp_engine::payload_place tcp_engine::place_of(const peer &q) noexcept {
  switch (q.in_dest) {
  case to_recv:
    return {q.rq.front().buf.addr, q.rq.front().buf.lkey, key_kind::local, rdmadl::access::local};
  case to_read_buf:
    return {q.sq.front().buf.addr, q.sq.front().buf.lkey, key_kind::local, rdmadl::access::local};
  case to_region:
    return {q.in_f.addr, q.in_f.rkey, key_kind::remote, rdmadl::access::remote_write};
  case to_stage:
    return {reinterpret_cast<std::uintptr_t>(q.stage.data() +
                                             std::size_t{q.stage_next} * tcp_eager_max),
            0, key_kind::local, rdmadl::access::local};
  default:
    return {};
  }
}

// The region a payload was going to ended before all of it came: the rest
// is dropped, and the request fails as an RC queue pair's would.
inline void tcp_engine::region_ended(peer &q) noexcept {
  q.in_status = q.in_dest == to_region ? wc_rem_access_err : wc_loc_prot_err;
  q.in_dest = to_drop;
}

// Whether pump_in() would move on at once, from what the read-ahead buffer
// holds: a header or payload bytes it is free to take.
inline bool tcp_engine::in_ready(const peer &q) noexcept {
  if (q.in_payload)
    return q.in_dest != to_nothing && q.in_end > q.in_beg;
  return q.in_end - q.in_beg >= tcp_header_size && !q.answers.full() && !q.close_after_output;
}

// A header parsed at the read-ahead buffer's front: its frame is on its way
// in, nothing of its payload moved yet (begin_payload() says where it goes).
inline void tcp_engine::take_header(peer &q, const tcp_frame &f) noexcept {
  q.in_beg += tcp_header_size;
  q.in_f = f;
  q.credits += f.credit; // receives the peer posted, told on any frame
  if (f.op == tcp_op::send)
    q.granted--;
  q.in_payload = true;
  q.in_done = 0;
  q.in_dest = to_nothing;
  q.in_status = 0;
}

// A header has arrived: decide where its payload goes (or act at once on a
// frame without one). Leaves in_dest to_nothing for a send with no receive
// posted. False once the peer failed.
inline bool tcp_engine::begin_payload(peer &q, std::size_t p) noexcept {
  const tcp_frame &f = q.in_f;
  switch (f.op) {
  case tcp_op::send:
    if (!q.staged.empty() || q.rq.empty()) {
      // An eager send (tcp_frame.hpp): staged until a receive is posted, or
      // left in the socket while nothing behind it can be needed (see
      // stage_now()). A send beyond that (a peer that breaks the flow
      // control) waits.
      if (stage_now(q))
        q.in_dest = to_stage;
      return true;
    }
    if (f.length > q.rq.front().buf.length) {
      q.in_status = wc_loc_len_err;
      q.in_dest = to_drop;
    } else {
      q.in_dest = to_recv;
    }
    return true;
  case tcp_op::write:
    q.in_dest = pd_->regions.use(
                    key_kind::remote, f.rkey, f.addr, f.length, rdmadl::access::remote_write, [] {},
                    &q.hint)
                    ? to_region
                    : to_drop;
    if (q.in_dest == to_drop)
      q.in_status = wc_rem_access_err;
    return true;
  case tcp_op::credit: // the peer posted receives: that many sends may go
    q.credits += f.length;
    q.in_payload = false;
    return true;
  case tcp_op::read_request:
    q.answers.push(answer{tcp_frame{tcp_op::read_response, f.length, f.wr_id, f.addr, f.rkey, 0}});
    q.responses++;
    q.in_payload = false;
    return true;
  default:
    break;
  }
  // An answer: it must be to the oldest requests on the wire (an ack: to a
  // run of them, the last one's wr_id in it), and fit them.
  const std::size_t n = f.op == tcp_op::ack ? f.length : 1;
  if (n > q.sent || (n == 1 ? q.sq.front() : q.sq[n - 1]).wr_id != f.wr_id) {
    fail(p, "it answered a request this side did not make", wc_retry_exc_err);
    return false;
  }
  const op &o = q.sq.front();
  if (f.op == tcp_op::read_response) {
    if (o.kind != k_read || f.length != o.buf.length) {
      fail(p, "its read response does not match the read (kind or length)", wc_retry_exc_err);
      return false;
    }
    q.in_dest = to_read_buf;
    return true;
  }
  q.in_payload = false;
  if (f.op == tcp_op::ack) {
    // The whole run is checked before any of it completes (a peer that is
    // failed has none of its requests completed as placed).
    bool read = o.kind == k_read;
    for (std::size_t i = 1; i < n && !read; i++)
      read = q.sq[i].kind == k_read;
    if (read) {
      fail(p, "it acknowledged a read without its bytes", wc_retry_exc_err);
      return false;
    }
    for (std::size_t i = 0; i < n; i++) {
      complete(p, q.sq.front().wr_id, 0, 0);
      q.sq.pop();
    }
    q.sent -= n;
    return true;
  }
  // A nack. As RC: the queue pair is in error, the rest is flushed.
  const int status = static_cast<int>(f.status);
  complete(p, o.wr_id, status, 0);
  q.sq.pop();
  q.sent--;
  fail(p, "it refused a request (status " + std::to_string(status) + ")", wc_flush_err);
  return false;
}

// A payload is all in: complete or answer it. False once the peer failed.
inline bool tcp_engine::finish_frame(peer &q, std::size_t p) noexcept {
  const tcp_frame &f = q.in_f;
  q.in_payload = false;
  switch (f.op) {
  case tcp_op::send: {
    if (q.in_dest == to_stage) { // placed (and acknowledged) by place_staged()
      q.staged.push(peer::staged_send{f.wr_id, f.length, q.stage_next});
      q.stage_next = (q.stage_next + 1) % tcp_eager_sends;
      return true;
    }
    const std::uint64_t id = q.rq.front().wr_id;
    q.rq.pop();
    complete(p, id, q.in_status, q.in_status ? 0 : f.length);
    answer_send(q, f.wr_id, q.in_status);
    return true;
  }
  case tcp_op::write:
    if (q.in_status)
      q.answers.push(answer{
          tcp_frame{tcp_op::nack, 0, f.wr_id, 0, 0, static_cast<std::uint32_t>(q.in_status)}});
    else
      queue_ack(q, f.wr_id);
    return true;
  default: { // read response
    const std::uint64_t id = q.sq.front().wr_id;
    q.sq.pop();
    q.sent--;
    complete(p, id, q.in_status, 0);
    if (q.in_status) {
      fail(p, "a local buffer ended while a read was landing in it", wc_flush_err);
      return false;
    }
    return true;
  }
  }
}

// Places the oldest staged eager send in the oldest receive, completes the
// receive and answers the send, as finish_frame() does for one that came
// after its receive. Needs a receive and room for the answer.
void tcp_engine::place_staged(peer &q, std::size_t p) noexcept {
  const peer::staged_send s = q.staged.front();
  const op r = q.rq.front();
  q.staged.pop();
  q.rq.pop();
  int status = 0;
  if (s.length > r.buf.length)
    status = wc_loc_len_err;
  else if (s.length > 0 &&
           !pd_->regions.use(
               key_kind::local, r.buf.lkey, r.buf.addr, s.length, rdmadl::access::local,
               [&] {
                 std::memcpy(reinterpret_cast<void *>(r.buf.addr),
                             q.stage.data() + std::size_t{s.slot} * tcp_eager_max, s.length);
               },
               &q.hint))
    status = wc_loc_prot_err;
  complete(p, r.wr_id, status, status ? 0 : s.length);
  answer_send(q, s.wr_id, status);
}

// A receive too short: the sender's is an invalid request; a receive
// outside any region: a remote operation error. Either fails both sides.
inline void tcp_engine::answer_send(peer &q, std::uint64_t wr_id, int status) noexcept {
  if (!status) {
    queue_ack(q, wr_id);
    return;
  }
  const auto theirs =
      static_cast<std::uint32_t>(status == wc_loc_len_err ? wc_rem_inv_req_err : wc_rem_op_err);
  q.answers.push(answer{tcp_frame{tcp_op::nack, 0, wr_id, 0, 0, theirs}});
  q.close_after_output = true; // as RC: both sides' queue pairs go to error
}

// (An ack in the answers owed has not gone out yet: next_batch() takes an
// answer off the queue as it puts it in a batch.)
inline void tcp_engine::queue_ack(peer &q, std::uint64_t wr_id) noexcept {
  if (!q.answers.empty()) {
    tcp_frame &last = q.answers.back().f;
    if (last.op == tcp_op::ack && last.length < UINT32_MAX) {
      last.length++;
      last.wr_id = wr_id;
      return;
    }
  }
  q.answers.push(answer{tcp_frame{tcp_op::ack, 1, wr_id, 0, 0, 0}});
}

status_code channel_state::poll_mixed(std::chrono::microseconds wait) noexcept {
  if (cq)
    if (auto st = poll_cq(); !st.ok())
      return st;
  if (!tcp) // transport-neutral but RDMA only (channel_transport::rdma): no engine
    return {};
  const std::size_t n = tcp->poll(twc, cq ? std::chrono::microseconds(0) : wait);
  for (std::size_t i = 0; i < n; i++) {
    if (twc[i].status)
      fail(twc[i].peer);
    record(find(twc[i].wr_id), twc[i].status, twc[i].byte_len);
  }
  return {};
}

} // namespace rdmadl::detail
