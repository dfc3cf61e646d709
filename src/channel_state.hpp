// SPDX-License-Identifier: MIT
// The state behind a multi_channel and its polling scopes, whichever way it
// was connected (out of band in multi_channel.cpp, or through rdma_cm in
// multi_channel_cm.cpp, which hands it the queue pairs, PD and CQ).
//
// The data path allocates nothing once warm: a scope's slots (16 bytes: the
// peer, its place in completion order, the status and byte count) live in
// an array kept, not freed, when the scope ends; a completion finds its
// slot in O(1) (wr_id - base is the slot's index), and an error completion
// of no open request its peer in O(1) (by QP number). That part, and the
// queue pairs and CQ it uses, is channel_core (rdmadl/multi_channel.hpp):
// polling_scope's posts and waits are inline in the caller.
//
// The channel holds the state by a shared_ptr, an open scope by a plain
// pointer: a channel moved keeps the same state; a channel destroyed while
// a scope is open leaves its reference in the state (channel_core::orphan)
// for the scope's end to drop, so the scope keeps working on the same
// queue pairs until then.
//
// A peer whose queue pair went to the error state (an error completion, or
// a flush this side asked for after a timeout) is marked failed: RC cannot
// leave that state without a new connection, so every later post to it is
// refused with errc::peer_failed and connected() answers false.
//
// A transport-neutral channel (multi_channel::create(opts)) may have peers
// over TCP: tcp is then set (its engine, src/tcp_engine.hpp) and over_tcp
// says which peers; their completions come from the engine's ring beside
// the CQ. Every peer of such a channel carries k_neutral in peer_state, so
// its posts and blocking calls go out of line, where TCP is known; an
// RDMA-only channel pays one predictable branch per post (its peer's state
// byte is 0) and per poll (over_tcp is empty).
#ifndef RDMADL_SRC_CHANNEL_STATE_HPP
#define RDMADL_SRC_CHANNEL_STATE_HPP

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "detail.hpp"
#include "rdmadl/multi_channel.hpp"
#include "tcp_engine.hpp"

namespace rdmadl::detail {

// The queue depths of a channel of peers queue pairs on one CQ of dev.
struct channel_depths {
  std::uint32_t send = 1, recv = 1; // per peer
  int cqe = 2;                      // the shared CQ's
};
// Every peer's queue pair has send + recv entries on the shared CQ, so the
// CQ cannot overflow: each wish is clamped to max_qp_wr, then both are cut
// in proportion until peers * (send + recv) fits max_cqe. Errors:
// errc::too_many_peers (more peers than max_qp, or than max_cqe / 2: one
// send and one receive each), before anything is created. A limit the
// device reports as 0 or less is taken as no limit.
inline result<channel_depths> plan_depths(const device_attr &dev, std::size_t peers,
                                          std::uint32_t send, std::uint32_t recv) noexcept {
  if (dev.max_qp > 0 && peers > static_cast<std::size_t>(dev.max_qp))
    return errc::too_many_peers;
  const std::uint64_t cap = dev.max_cqe > 0 ? static_cast<std::uint64_t>(dev.max_cqe) : INT_MAX;
  if (peers > cap / 2)
    return errc::too_many_peers;
  channel_depths d;
  std::uint64_t s = clamp_to(send, dev.max_qp_wr), r = clamp_to(recv, dev.max_qp_wr);
  const std::uint64_t per = cap / peers; // >= 2
  if (s + r > per) {
    std::uint64_t s2 = std::clamp<std::uint64_t>(s * per / (s + r), 1, per - 1);
    r = std::min(r, per - s2);
    s = s2;
  }
  d.send = static_cast<std::uint32_t>(s);
  d.recv = static_cast<std::uint32_t>(r);
  d.cqe = static_cast<int>(peers * (s + r)); // <= cap <= INT_MAX
  return d;
}

// The fast path's part (the queue pairs, CQ, slots, busy word) is
// channel_core, in rdmadl/multi_channel.hpp, so that polling_scope's posts
// and waits are inline in the caller.
struct channel_state : channel_core {
  // Peer by QP number (note_error's lookup), filled by index_qps().
  std::unordered_map<std::uint32_t, std::uint32_t> peer_of_qpn;

  // Fills peer_of_qpn from qps; called once the queue pairs are in place.
  // A peer without one (over TCP, in a channel made by create_cm) has none
  // to index.
  void index_qps() {
    peer_of_qpn.clear();
    peer_of_qpn.reserve(qps.size());
    for (std::size_t p = 0; p < qps.size(); p++)
      if (qps[p])
        peer_of_qpn.emplace(qps[p].qp_num(), static_cast<std::uint32_t>(p));
  }
  // What a timeout does to peer: its queue pair (or TCP connection) goes to
  // the error state, which flushes what it still has.
  void to_error(std::size_t peer) noexcept {
    if (tcp && over_tcp[peer])
      tcp->flush(peer);
    else
      (void)qps[peer].to_error();
  }
  bool all_done() const noexcept { return ndone == nslots; }
  // Polls until everything pending is done or timeout passes (the clock is
  // read only when the first poll leaves something pending).
  status_code drain(std::chrono::milliseconds timeout) noexcept {
    if (all_done())
      return {};
    if (auto st = poll_some(base, nslots, timeout); !st.ok() || all_done())
      return st;
    return drain(deadline(timeout));
  }
  // poll_some() of a caller whose deadline is known: the TCP engine's poll
  // waits up to it (tcp_wait_until()).
  status_code poll_until(std::chrono::steady_clock::time_point deadline) noexcept {
    return over_tcp.empty() ? poll_some() : poll_mixed(tcp_wait_until(deadline));
  }
  // Polls until everything pending is done or deadline passes.
  status_code drain(std::chrono::steady_clock::time_point deadline) noexcept {
    while (!all_done()) {
      if (auto st = poll_until(deadline); !st.ok())
        return st;
      if (!all_done() && expired(deadline))
        return errc::timed_out;
    }
    return {};
  }
  // poll_some() of a transport-neutral channel: the CQ if there is one,
  // then the TCP engine's ring if there is one (waiting up to wait for it
  // when there is no CQ to poll, so a waiting scope does not spin against
  // the progress thread; a caller that knows its deadline waits up to it,
  // tcp_wait_until()). In tcp_engine.cpp; channel_core::poll_tcp() calls
  // it.
  [[gnu::noinline, gnu::cold]] status_code
  poll_mixed(std::chrono::microseconds wait = tcp_wait) noexcept;

  // The TCP side of a transport-neutral channel (null otherwise): the
  // engine, which peers use it, and per peer why it is on its transport.
  std::unique_ptr<tcp_engine> tcp;
  std::vector<std::string> why;
  std::vector<std::uint64_t> tokens; // what channel_endpoints() gives each peer
  channel_transport allowed = channel_transport::rdma;
  std::string no_rdma; // why this side has no RDMA (a TCP-only channel)
  bool tcp_started = false;
  // Sets peer's transport and describe()'s sentence by connect()'s rule
  // (multi_channel_tcp.cpp): TCP unless rdma_here and rdma_there; each
  // fallback to TCP is logged once (log_level::warn), with rdma_failed as
  // the reason when given (both could, RDMA did not connect). Returns
  // whether the peer is over TCP. over_tcp and why must be sized already.
  bool choose(std::size_t peer, bool rdma_here, bool rdma_there, std::string_view rdma_failed = {});
  std::array<tcp_completion, 16> twc; // poll_mixed's buffer
  // How long one poll of the TCP engine waits when there is no CQ to poll:
  // tcp_wait when the caller's deadline is not known (poll_some() without
  // one), else up to that timeout or deadline, but never less than
  // tcp_wait (what the first poll of a call always waited) nor more than
  // tcp_wait_most. The engine sleeps that long unless something for it
  // comes (it is woken for what another thread completes: tcp_engine.cpp),
  // so a waiting thread wakes about once per tcp_wait_most, not once per
  // tcp_wait, when nothing comes; and a wait of at least tcp_wait_most is
  // what lets it block in recv(2) itself (tcp_engine::read_blocking()).
  static constexpr std::chrono::microseconds tcp_wait{1000};
  static constexpr std::chrono::microseconds tcp_wait_most{20000};
  static constexpr std::chrono::microseconds tcp_wait_for(std::chrono::milliseconds t) noexcept {
    return t >= tcp_wait_most ? tcp_wait_most
           : t <= tcp_wait    ? tcp_wait
                              : std::chrono::microseconds(t);
  }
  static std::chrono::microseconds
  tcp_wait_until(std::chrono::steady_clock::time_point d) noexcept {
    if (d == std::chrono::steady_clock::time_point::max())
      return tcp_wait_most;
    const auto left =
        std::chrono::ceil<std::chrono::microseconds>(d - std::chrono::steady_clock::now());
    return std::clamp(left, tcp_wait, tcp_wait_most);
  }

  // What connected the peers and must end before their queue pairs (for
  // multi_channel::create_cm, its rdma_cm group: the ids and their event
  // channel); null for a channel built out of band. Last, so it is
  // destroyed (disconnecting every peer) while the queue pairs still exist.
  std::shared_ptr<void> link;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CHANNEL_STATE_HPP
