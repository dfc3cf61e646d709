// SPDX-License-Identifier: MIT
// The one rdma_cm engine: a group of N peers whose ids report on one event
// channel, each with its RC queue pair on one shared PD and CQ (made on the
// first peer's device). connection/listener (cm.cpp) are a group of one;
// multi_channel::create_cm (multi_channel_cm.cpp) is a group of N whose
// queue pairs, PD and CQ it hands to the channel state.
//
// Every rdma_cm step lives here once: taking an event (take_cm_event), waiting
// for one (expect), the QP setup, the connection parameters, the read-back
// of the port and GID rdma_cm chose, and disconnect-and-linger.
#ifndef RDMADL_SRC_CM_GROUP_HPP
#define RDMADL_SRC_CM_GROUP_HPP

#include "rdmadl_verbs.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <sys/socket.h>
#include <system_error>
#include <vector>

#include "detail.hpp"
#include "rdmadl/cm.hpp"
#include "rdmadl/completion_channel.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl::detail {

// rdma_cm's millisecond timeouts are ints: clamped to [0, 2^30].
int cm_timeout(std::chrono::milliseconds t) noexcept;
// host:port as a socket address (numeric port; passive: host may be empty,
// any address). Errors: address_not_available.
result<sockaddr_storage> resolve_address(std::string_view host, std::uint16_t port, bool passive);
// The next event of any of chans, waiting until deadline; the caller acks
// it. Errors: errc::timed_out, or the errno.
result<rdma_cm_event *> take_cm_event(std::span<rdma_event_channel *const> chans,
                                      std::chrono::steady_clock::time_point deadline);
// What an event other than the awaited one means: errc::rejected, the
// status of an address, route or connect error, else errc::unexpected_event.
std::error_code cm_event_error(const rdma_cm_event *ev);
// The private data an event carries (connect request, established, reject).
std::span<const std::byte> event_data(const rdma_cm_event *ev) noexcept;
// What an rdma_cm event type means to a peer.
cm_event_kind kind_of(int event) noexcept;
// Errors of transport settings rdma_cm decides itself (mtu, min_rnr_timer
// not at their defaults): errc::not_honoured.
result<void> check_cm_transport(const transport_options &t);

// The event channel every id of a group reports on.
struct cm_chan {
  event_channel ch;
};

// One peer's id; destroyed before the channel it reports on (which it holds).
struct cm_peer_id {
  rdma_cm_id *id = nullptr;
  std::shared_ptr<cm_chan> ch;
  ~cm_peer_id();
};

// What the group makes on the first peer's device: the shared CQ's depth
// and each peer's queue pair options.
struct cm_sizes {
  qp_options qp;
  int cq_depth = 256;
};

class cm_group {
public:
  // peers peers, none with an id yet, on a new event channel. Errors: those
  // of event_channel::create().
  static result<std::unique_ptr<cm_group>> create(std::size_t peers);
  cm_group(const cm_group &) = delete;
  cm_group &operator=(const cm_group &) = delete;
  // Disconnects every connected peer, then waits (up to linger in all) for
  // their DISCONNECTED, so the peers' disconnects are answered.
  ~cm_group();

  // Settings, set by the user of the group before the first peer connects.
  transport_options transport;
  std::chrono::milliseconds step_timeout{5000};
  std::chrono::milliseconds linger{0};
  // The CQ depth and QP options, from the first peer's device.
  std::function<result<cm_sizes>(const device_attr &)> sizes;
  // What a rejection carrying private data means (null: errc::rejected).
  std::error_code (*rejection)(std::span<const std::byte> data) = nullptr;

  // The verbs objects the peers share, and each peer's queue pair.
  context ctx;
  protection_domain pd;
  completion_queue cq;
  // Set before the first peer's queue pair: the CQ gets this channel, armed
  // before an accept, so await_established() can take a first completion
  // for the RTU (cm_options::prepare).
  bool watch_first_completion = false;
  completion_channel cq_channel;
  std::vector<queue_pair> qps;

  // Each peer's id (null until made), by peer index.
  std::vector<std::shared_ptr<cm_peer_id>> ids;
  // Connected, by peer index; read from any thread.
  std::unique_ptr<std::atomic<bool>[]> up;
  // Events of peers taken while waiting for something else.
  std::deque<cm_peer_event> queued;

  rdma_event_channel *native() const noexcept { return ch_->ch.native_handle(); }
  int fd() const noexcept { return ch_->ch.fd(); }
  // The peer index of id, or ids.size().
  std::size_t index_of(const rdma_cm_id *id) const noexcept;
  // What an event other than the awaited one means: what rejection says of
  // a rejection's private data, else cm_event_error().
  std::error_code event_error(const rdma_cm_event *ev) const;

  // Makes peer's id, resolves addr and its route, makes peer's queue pair,
  // connects sending data and waits for ESTABLISHED (each step up to tmo);
  // the peer's private data goes to *reply when asked. Errors: as
  // rdmadl::connect(); *step names the step that failed. before, when given,
  // runs once the queue pair exists, before the connect goes out.
  result<void> connect(std::size_t peer, const sockaddr_storage &addr,
                       std::span<const std::byte> data, std::vector<std::byte> *reply,
                       std::chrono::milliseconds tmo, const char **step,
                       const std::function<result<void>()> &before = {});
  // Takes id (of a connection request) as peer's, moving it onto this
  // group's channel. On failure the request is rejected. Errors: the errno.
  result<void> adopt(std::size_t peer, rdma_cm_id *id);
  // Makes peer's queue pair, runs before (when given), arms the CQ's
  // channel (when watched) and accepts peer's request, sending data; does
  // not wait for ESTABLISHED. On failure the request is rejected. Errors:
  // errc::wrong_device, those of the QP setup or of before, or the errno.
  result<void> accept(std::size_t peer, std::span<const std::byte> data,
                      const std::function<result<void>()> &before = {});
  // Waits up to timeout for peer's ESTABLISHED, as expect() does; with a
  // watched CQ, a completion first tells rdma_cm that the peer is connected
  // (rdma_notify, COMM_EST), so a lost RTU costs no resent REP.
  result<void> await_established(std::size_t peer, std::chrono::milliseconds timeout);
  // Waits up to timeout for event want on peer; the events of other peers
  // that come meanwhile are noted. data, when given, receives the event's
  // private data. Errors: errc::timed_out, what cm_event_error() or
  // rejection say, or the errno.
  result<void> expect(std::size_t peer, rdma_cm_event_type want, std::chrono::milliseconds timeout,
                      std::vector<std::byte> *data = nullptr);
  // An event of peer taken elsewhere: a peer that is gone is disconnected
  // from this side too (flushing its queue pair), and the event queued.
  void note(std::size_t peer, const rdma_cm_event *ev);
  // The next event of a peer (queued, else taken until deadline). Errors:
  // errc::timed_out, or the errno.
  result<cm_peer_event> next_event(std::chrono::steady_clock::time_point deadline);
  // rdma_disconnect on peer, then waits up to timeout for its DISCONNECTED
  // (nothing to do when it is not connected). Errors: errc::timed_out,
  // errc::unexpected_event, or the errno.
  result<void> disconnect(std::size_t peer, std::chrono::milliseconds timeout);
  // Waits up to timeout for peer's DISCONNECTED, then disconnects this side
  // too. Errors: as expect().
  result<void> wait_disconnect(std::size_t peer, std::chrono::milliseconds timeout);
  // rdma_disconnect on peer without waiting, if it is connected.
  void hang_up(std::size_t peer) noexcept;
  // Gives up peer: its queue pair and id go, so it may connect again.
  void drop(std::size_t peer) noexcept;
  // Reads back the port and source GID rdma_cm chose for every peer's queue
  // pair, for local_endpoint() and address handles.
  void learn_paths() noexcept;

private:
  explicit cm_group(std::size_t peers);
  result<void> add_qp(std::size_t peer);
  result<void> pre_connect(std::size_t peer, rdma_conn_param &p, std::span<const std::byte> data);
  std::shared_ptr<cm_chan> ch_ = std::make_shared<cm_chan>();
  cm_sizes made_; // what sizes() said for the first peer's device
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_CM_GROUP_HPP
