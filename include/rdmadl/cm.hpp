// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/cm.hpp - connections through rdma_cm (librdmacm): a listener that
/// accepts or rejects with private data, and connect(host, port). Every wait
/// has a timeout (poll(2) on the event channel's fd).
#ifndef RDMADL_CM_HPP
#define RDMADL_CM_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/qp.hpp"

namespace rdmadl {

/// An rdma_cm event channel (rdma_create_event_channel); its fd is
/// non-blocking. Move-only.
class RDMADL_CXX_API event_channel {
public:
  /// Errors: operation_not_supported (librdmacm absent), or the errno.
  static result<event_channel> create();
  /// An empty channel.
  event_channel() noexcept = default;
  /// Moves; the source becomes empty.
  event_channel(event_channel &&o) noexcept;
  /// Swaps with o (o's destruction then frees what this held).
  event_channel &operator=(event_channel &&o) noexcept;
  /// Destroys the channel (rdma_destroy_event_channel).
  ~event_channel();
  /// The channel's file descriptor (non-blocking); -1 when empty.
  int fd() const noexcept;
  /// The rdma_cm event channel; null when empty.
  ::rdma_event_channel *native_handle() const noexcept { return ch_; }

private:
  ::rdma_event_channel *ch_ = nullptr;
};

/// rdma_cm decides the port and the GID from the route, so qp.port,
/// qp.gid and qp.gid_index must stay at their defaults (else
/// errc::not_honoured); qp.srq and qp.wr_api are honoured.
struct cm_options {
  qp_options qp;                           ///< type must be rc
  int cq_depth = 256;                      ///< one CQ for send and receive
  std::span<const std::byte> private_data; ///< sent with connect/accept (<= 56 bytes)
  std::chrono::milliseconds timeout{5000}; ///< for each step
  std::uint8_t responder_resources = 0;    ///< 0: device max_qp_rd_atom
  std::uint8_t initiator_depth = 0;        ///< 0: device max_qp_init_rd_atom
  /// How soon a peer that stopped answering turns into an error completion
  /// (IBV_WC_RETRY_EXC_ERR): each transmission waits 4.096 us * 2^ack_timeout
  /// for its acknowledgement and is retried retry_count times (0 to 7, more
  /// is clamped). ack_timeout 0 keeps rdma_cm's choice from the route, which
  /// on Soft-RoCE is about 2.3 s a try; a non-zero value goes through
  /// RDMA_OPTION_ID_ACK_TIMEOUT (rdma-core 19, Linux 4.17; else the errno).
  /// @name Dead-peer detection
  /**@{*/
  /// How soon a peer that stopped answering turns into an error completion
  /// (IBV_WC_RETRY_EXC_ERR): each transmission waits 4.096 us * 2^ack_timeout
  /// for its acknowledgement and is retried retry_count times (0 to 7, more
  /// is clamped). ack_timeout 0 keeps rdma_cm's choice from the route, which
  /// on Soft-RoCE is about 2.3 s a try; a non-zero value goes through
  /// RDMA_OPTION_ID_ACK_TIMEOUT (rdma-core 19, Linux 4.17; else the errno).
  /// The default of 6 retries, not 7, because Soft-RoCE reads 7 as "retry for
  /// ever", so a dead peer would never show.
  std::uint8_t ack_timeout = 0;
  std::uint8_t retry_count = 6;
  /**@}*/
};

namespace detail {
struct cm_state;
struct cm_state_deleter {
  void operator()(cm_state *s) const noexcept;
};
} // namespace detail

/// A connected RC queue pair with its own protection domain and completion
/// queue, made by connect() or listener::accept(). Move-only; disconnects and
/// frees everything on destruction.
class RDMADL_CXX_API connection {
public:
  /// An empty connection.
  connection() noexcept;
  /// Moves; the source becomes empty.
  connection(connection &&) noexcept;
  /// Moves; the source becomes empty, and a connection this held is
  /// disconnected (without waiting) and freed.
  connection &operator=(connection &&) noexcept;
  /// Disconnects (rdma_disconnect, without waiting) and frees everything.
  ~connection();

  /// The device context the connection runs on (empty for an empty connection).
  const context &ctx() const noexcept;
  /// Its protection domain: register the buffers it uses here.
  const protection_domain &pd() const noexcept;
  /// Its one completion queue, for sends and receives.
  completion_queue &cq() noexcept;
  /// Its connected RC queue pair.
  queue_pair &qp() noexcept;
  /// The private data the peer sent with its connect or accept.
  std::span<const std::byte> peer_data() const noexcept;
  /// rdma_disconnect, then waits up to timeout for DISCONNECTED. Errors:
  /// errc::timed_out, errc::empty_object, or the errno.
  result<void> disconnect(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  /// Waits up to timeout for the peer to disconnect. Errors: errc::timed_out,
  /// errc::unexpected_event.
  result<void> wait_disconnect(std::chrono::milliseconds timeout);
  /// The rdma_cm id; null when empty.
  ::rdma_cm_id *native_handle() const noexcept;

private:
  friend class listener;
  friend class connection_request;
  friend result<connection> connect(std::string_view, std::uint16_t, const cm_options &);
  std::unique_ptr<detail::cm_state, detail::cm_state_deleter> s_;
};

/// An incoming connection request, from listener::get_request().
class RDMADL_CXX_API connection_request {
public:
  /// An empty request.
  connection_request() noexcept;
  /// Moves; the source becomes empty.
  connection_request(connection_request &&) noexcept;
  /// Moves; the source becomes empty. A request this held and had not
  /// answered is rejected first, as the destructor does.
  connection_request &operator=(connection_request &&) noexcept;
  ~connection_request(); ///< rejects if neither accepted nor rejected
  /// The private data the client sent.
  std::span<const std::byte> peer_data() const noexcept;
  /// Creates the QP and accepts, sending opts.private_data; waits for
  /// ESTABLISHED. Errors: errc::timed_out, errc::unexpected_event, the errno.
  result<connection> accept(const cm_options &opts = {});
  /// Rejects with private data. Errors: errc::empty_object, the errno.
  result<void> reject(std::span<const std::byte> private_data = {});

private:
  friend class listener;
  std::unique_ptr<detail::cm_state, detail::cm_state_deleter> s_;
};

/// A listening rdma_cm id. Move-only.
class RDMADL_CXX_API listener {
public:
  /// Binds to host:port (host empty: any address; port 0: any port) and
  /// listens. Errors: operation_not_supported, or the errno
  /// (address_in_use, address_not_available, ...).
  static result<listener> bind(std::string_view host, std::uint16_t port, int backlog = 16);
  /// An empty listener.
  listener() noexcept = default;
  /// Moves; the source becomes empty.
  listener(listener &&o) noexcept;
  /// Swaps with o (o's destruction then frees what this held).
  listener &operator=(listener &&o) noexcept;
  /// Stops listening and frees the id and its event channel.
  ~listener();
  /// The bound port.
  std::uint16_t port() const noexcept;
  /// Waits up to timeout for a connection request. Errors: errc::timed_out,
  /// errc::unexpected_event, the errno.
  result<connection_request> get_request(std::chrono::milliseconds timeout);
  /// The listening rdma_cm id; null when empty.
  ::rdma_cm_id *native_handle() const noexcept { return id_; }

private:
  event_channel ch_;
  ::rdma_cm_id *id_ = nullptr;
};

/// Resolves host:port, creates a QP (opts.qp) with its own PD and CQ,
/// connects with opts.private_data and waits for ESTABLISHED (opts.timeout per
/// step). Errors: operation_not_supported, errc::rejected (peer_data of the
/// reject is lost), errc::timed_out, errc::unexpected_event, or the errno.
RDMADL_CXX_API result<connection> connect(std::string_view host, std::uint16_t port,
                                          const cm_options &opts = {});

} // namespace rdmadl

#endif // RDMADL_CM_HPP
