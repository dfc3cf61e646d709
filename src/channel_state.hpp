// SPDX-License-Identifier: MIT
// The state behind a multi_channel and its polling scopes, whichever way it
// was connected (out of band in multi_channel.cpp, or through rdma_cm in
// multi_channel_cm.cpp, which hands it the queue pairs, PD and CQ).
//
// The data path allocates nothing once warm: a scope's slots (16 bytes: the
// peer, its place in completion order, the status and byte count) live in
// a vector that is cleared, not freed, when the scope ends; a
// completion finds its slot in O(1) (wr_id - base is the slot's index), and
// an error completion of no open request its peer in O(1) (by QP number).
//
// The state is shared: a multi_channel and each of its open polling scopes
// hold it, so a channel moved or destroyed while a scope is open leaves the
// scope working on the same queue pairs, freed when the last holder ends.
//
// A peer whose queue pair went to the error state (an error completion, or
// a flush this side asked for after a timeout) is marked failed: RC cannot
// leave that state without a new connection, so every later post to it is
// refused with errc::peer_failed and connected() answers false.
//
// A transport-neutral channel (multi_channel::create(opts)) may have peers
// over TCP: tcp is then set (its engine, src/tcp_engine.hpp) and over_tcp
// says which peers; their completions come from the engine's ring beside
// the CQ. An RDMA-only channel pays one predictable branch (tcp is null) per
// post and per poll.
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

enum channel_op { k_send, k_recv, k_write, k_read };

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

struct channel_state {
  context ctx;
  protection_domain pd;
  completion_queue cq;
  std::vector<queue_pair> qps;
  connect_options conn;
  std::chrono::milliseconds limit{10000};
  bool connected = false;
  std::vector<std::uint8_t> failed; // by peer: its queue pair is in the error state
  std::size_t failed_peers = 0;
  std::atomic<bool> scope_open{false};
  // A request of the open scope: slot i has id base + i. 16 bytes, the
  // work_result is made from it when asked for (result()).
  struct slot {
    std::uint32_t peer;
    std::uint32_t done; // 0: pending; else its place in completion order, from 1
    int status;
    std::uint32_t byte_len;
  };
  std::vector<slot> pending; // posted in the open scope (slot i has id base + i)
  std::uint64_t next_id = 1;
  std::uint64_t base = 1;              // the id of the open scope's first slot
  std::size_t outstanding = 0;         // slots of pending not yet done
  std::size_t first_failed = SIZE_MAX; // index in pending of the first error completion
  std::array<completion, 16> wc;       // poll_some's buffer (not rebuilt per poll)
  // Peer by QP number (note_error's lookup), filled by index_qps().
  std::unordered_map<std::uint32_t, std::uint32_t> peer_of_qpn;

  // Fills peer_of_qpn from qps; called once the queue pairs are in place.
  void index_qps() {
    peer_of_qpn.clear();
    peer_of_qpn.reserve(qps.size());
    for (std::size_t p = 0; p < qps.size(); p++)
      peer_of_qpn.emplace(qps[p].qp_num(), static_cast<std::uint32_t>(p));
  }
  // Takes the busy flag and opens a scope's bookkeeping; false when busy.
  bool open_scope() noexcept {
    bool expected = false;
    if (!scope_open.compare_exchange_strong(expected, true, std::memory_order_acquire,
                                            std::memory_order_relaxed)) [[unlikely]]
      return false;
    begin();
    return true;
  }
  // Ends the open scope: settle(), then the slots are cleared (capacity
  // kept for the next scope) and the busy flag released.
  void end_scope() {
    settle();
    pending.clear();
    scope_open.store(false, std::memory_order_release);
  }
  // Opens a scope's bookkeeping (the caller owns scope_open).
  void begin() noexcept {
    pending.clear();
    base = next_id;
    outstanding = 0;
    first_failed = SIZE_MAX;
  }
  // The slot of id, or nullptr when id is not of the open scope.
  slot *find(std::uint64_t id) noexcept {
    std::uint64_t i = id - base; // wraps to huge for ids of earlier scopes
    return i < pending.size() ? &pending[static_cast<std::size_t>(i)] : nullptr;
  }
  // The outcome of slot i of the open scope.
  work_result result(std::size_t i) const noexcept {
    const slot &s = pending[i];
    return work_result{s.peer, base + i, s.status, s.byte_len};
  }
  // Records a posted request (capacity is kept across scopes).
  [[gnu::always_inline]] std::uint64_t add(std::size_t peer) {
    std::uint64_t id = base + pending.size();
    next_id = id + 1;
    pending.push_back({static_cast<std::uint32_t>(peer), 0, 0, 0});
    outstanding++;
    return id;
  }
  // Marks peer failed (its queue pair is, or is being put, in the error state).
  void fail(std::size_t peer) noexcept {
    if (peer < failed.size() && !failed[peer]) {
      failed[peer] = 1;
      failed_peers++;
    }
  }
  // Marks the peer of an error completion failed (found by its QP number:
  // the completion may be of no open request), in O(1) whatever the peers.
  void note_error(const completion &c) noexcept {
    if (auto it = peer_of_qpn.find(c.qp_num); it != peer_of_qpn.end())
      fail(it->second);
  }
  // Takes what the CQ has; marks the matching slots done. A completion that
  // matches no slot (of a scope that ended on a poll error) is dropped.
  status_code poll_cq() noexcept {
    auto n = cq.poll(wc);
    if (!n)
      return n.error();
    for (std::size_t i = 0; i < *n; i++) {
      slot *s = find(wc[i].wr_id);
      if (!wc[i].ok())
        s && !s->done ? fail(s->peer) : note_error(wc[i]);
      record(s, wc[i].status, wc[i].byte_len);
    }
    return {};
  }
  // poll_cq(), and with a TCP engine its completions too.
  status_code poll_some() noexcept {
    if (tcp) [[unlikely]]
      return poll_mixed();
    return poll_cq();
  }
  // Marks s (not done yet) done with this outcome.
  void complete(slot &s, int status, std::uint32_t byte_len) noexcept {
    s.done = static_cast<std::uint32_t>(pending.size() - outstanding) + 1; // completed so far + 1
    s.status = status;
    s.byte_len = byte_len;
    outstanding--;
    if (status != 0 && first_failed == SIZE_MAX)
      first_failed = static_cast<std::size_t>(&s - pending.data());
  }
  // Marks s (if of the open scope and not done yet) done with this outcome.
  void record(slot *s, int status, std::uint32_t byte_len) noexcept {
    if (s && !s->done)
      complete(*s, status, byte_len);
  }
  // poll_some() of a channel with a TCP engine: the CQ if there is one,
  // then the engine's ring (waiting a little for it when there is no CQ to
  // poll, so a waiting scope does not spin against the progress thread).
  // In tcp_engine.cpp: out of line, the RDMA path's code stays as it was.
  [[gnu::noinline, gnu::cold]] status_code poll_mixed() noexcept;
  // What a timeout does to peer: its queue pair (or TCP connection) goes to
  // the error state, which flushes what it still has.
  void to_error(std::size_t peer) noexcept {
    if (tcp && over_tcp[peer])
      tcp->flush(peer);
    else
      (void)qps[peer].to_error();
  }
  bool all_done() const noexcept { return outstanding == 0; }
  // Polls until everything pending is done or timeout passes (the clock is
  // read only when the first poll leaves something pending).
  status_code drain(std::chrono::milliseconds timeout) noexcept {
    if (all_done())
      return {};
    if (auto st = poll_some(); !st.ok() || all_done())
      return st;
    return drain(deadline(timeout));
  }
  // Polls until everything pending is done or deadline passes.
  status_code drain(std::chrono::steady_clock::time_point deadline) noexcept {
    while (!all_done()) {
      if (auto st = poll_some(); !st.ok())
        return st;
      if (!all_done() && expired(deadline))
        return errc::timed_out;
    }
    return {};
  }
  // What a scope's end does: waits up to limit; then moves the queue pairs
  // of what is still pending to the error state and takes the flushed
  // completions (up to limit again).
  void settle();

  // The TCP side of a transport-neutral channel (null otherwise): the
  // engine, which peers use it, and per peer why it is on its transport.
  std::unique_ptr<tcp_engine> tcp;
  std::vector<std::uint8_t> over_tcp;
  std::vector<std::string> why;
  std::vector<std::uint64_t> tokens; // what channel_endpoints() gives each peer
  channel_transport allowed = channel_transport::rdma;
  std::string no_rdma; // why this side has no RDMA (a TCP-only channel)
  bool tcp_started = false;
  std::array<tcp_completion, 16> twc; // poll_mixed's buffer
  static constexpr std::chrono::microseconds tcp_wait{1000};

  // What connected the peers and must end before their queue pairs (for
  // multi_channel::create_cm, its rdma_cm group: the ids and their event
  // channel); null for a channel built out of band. Last, so it is
  // destroyed (disconnecting every peer) while the queue pairs still exist.
  std::shared_ptr<void> link;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CHANNEL_STATE_HPP
