// SPDX-License-Identifier: MIT
// The state behind a multi_channel and its polling scopes, shared by the
// out-of-band (multi_channel.cpp) and the rdma_cm ways of building one.
#ifndef RDMADL_SRC_CHANNEL_STATE_HPP
#define RDMADL_SRC_CHANNEL_STATE_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "rdmadl/multi_channel.hpp"

namespace rdmadl::detail {

enum channel_op { k_send, k_recv, k_write, k_read };
struct cm_group;

struct channel_state {
  context ctx;
  protection_domain pd;
  completion_queue cq;
  std::vector<queue_pair> qps;
  connect_options conn;
  std::chrono::milliseconds limit{10000};
  bool connected = false;
  std::atomic<bool> scope_open{false};
  struct slot {
    std::uint64_t id;
    std::size_t peer;
    bool done;
    work_result r;
  };
  std::vector<slot> pending;         // posted in the open scope, not yet taken
  std::vector<work_result> finished; // completed in the open scope, in order
  std::uint64_t next_id = 1;

  // Takes what the CQ has; marks the matching slots done.
  status_code poll_some() noexcept {
    completion wc[16];
    auto n = cq.poll(wc);
    if (!n)
      return n.error();
    for (std::size_t i = 0; i < *n; i++) {
      for (auto &s : pending) {
        if (s.id != wc[i].wr_id || s.done)
          continue;
        s.done = true;
        s.r = work_result{s.peer, s.id, wc[i].status, wc[i].byte_len};
        finished.push_back(s.r);
        break;
      }
    }
    return {};
  }
  bool all_done() const noexcept {
    return std::all_of(pending.begin(), pending.end(), [](const slot &s) { return s.done; });
  }
  // Polls until everything pending is done or deadline passes.
  status_code drain(std::chrono::steady_clock::time_point deadline) noexcept {
    while (!all_done()) {
      if (auto st = poll_some(); !st.ok())
        return st;
      if (!all_done() && deadline != std::chrono::steady_clock::time_point::max() &&
          std::chrono::steady_clock::now() >= deadline)
        return errc::timed_out;
    }
    return {};
  }

  // rdma_cm (src/multi_channel_cm.cpp): the peers' ids and their event
  // channel; null for a channel built out of band. Last, so it is destroyed
  // (disconnecting every peer) while the queue pairs still exist.
  std::shared_ptr<cm_group> cm;
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CHANNEL_STATE_HPP
