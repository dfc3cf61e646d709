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
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/multi_channel.hpp"
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

class connection;

/// Options of rdmadl::connect() and connection_request::accept().
///
/// rdma_cm decides the port and the GID from the route, so qp.port,
/// qp.gid and qp.gid_index must stay at their defaults (else
/// errc::not_honoured); qp.srq and qp.wr_api are honoured. Of transport,
/// mtu and min_rnr_timer must stay at their defaults too (the route and the
/// kernel decide them).
struct cm_options {
  qp_options qp;                                ///< type must be rc
  int cq_depth = 256;                           ///< one CQ for send and receive
  std::span<const std::byte> private_data;      ///< sent with connect/accept (<= 56 bytes)
  std::chrono::milliseconds step_timeout{5000}; ///< how long each step may take
  transport_options transport;                  ///< ACK timeout, retries, rd_atomic
  /// Called with the connection being made once its protection domain,
  /// completion queue and queue pair exist, before the connect or accept
  /// goes out: register memory on c.pd() and post the receives the peer's
  /// first messages need there (c is the object connect() or accept() then
  /// returns, moved; keep no reference to it). A peer may send as soon as it
  /// is connected, and a message that meets an empty receive queue waits
  /// for one (RNR retries). An error it returns fails the call (an accept
  /// rejects the request) and is the call's error.
  ///
  /// With it, accept() also watches the completion queue (which then has a
  /// completion channel of its own): the first completion shows the client
  /// connected, and rdma_cm is told so (rdma_notify(), IBV_EVENT_COMM_EST).
  /// That matters when the client's confirmation of the accept (the RTU) is
  /// lost on a device that raises no communication-established event of
  /// its own (Soft-RoCE): without it, ESTABLISHED waits for rdma_cm to
  /// resend its answer, seconds later, while the client's messages wait. The
  /// completion stays in the queue for the caller to poll.
  std::function<result<void>(connection &c)> prepare;
};

namespace detail {
struct cm_state;
struct cm_state_deleter {
  void operator()(cm_state *s) const noexcept;
};
} // namespace detail

/// A connected RC queue pair with its own protection domain and completion
/// queue, made by connect() or connection_request::accept(). Move-only.
class RDMADL_CXX_API connection {
public:
  /// @name Empty, moved, destroyed
  /**@{*/
  /// Default-constructed or moved from, a connection is empty. Assigned over
  /// or destroyed, one that is not disconnects (rdma_disconnect, without
  /// waiting) and frees everything.
  connection() noexcept;
  connection(connection &&) noexcept;
  connection &operator=(connection &&) noexcept;
  ~connection();
  /**@}*/

  /// The device context the connection runs on (empty for an empty connection).
  const context &ctx() const noexcept;
  /// Its protection domain: register the buffers it uses here.
  const protection_domain &pd() const noexcept;
  /// Its one completion queue, for sends and receives; null for an empty
  /// connection. The connection owns it: use it, do not move from it.
  completion_queue *cq() noexcept;
  /// Its connected RC queue pair; null for an empty connection. The
  /// connection owns it: do not move from it.
  queue_pair *qp() noexcept;
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
  /// Creates the QP, calls opts.prepare, and accepts, sending
  /// opts.private_data; waits for ESTABLISHED (up to opts.step_timeout), or
  /// with opts.prepare for the first completion, which stands for a lost
  /// RTU (see cm_options::prepare). Options rdma_cm decides itself
  /// are refused first (errc::not_honoured, errc::wrong_qp_type; the request
  /// stays unanswered); a failure after that rejects the request. Errors:
  /// errc::empty_object (no request, or answered already), errc::timed_out,
  /// errc::unexpected_event, the errno.
  result<connection> accept(const cm_options &opts = {});
  /// Rejects with private data. Errors: errc::empty_object, the errno.
  result<void> reject(std::span<const std::byte> private_data = {});

private:
  friend class listener;
  std::unique_ptr<detail::cm_state, detail::cm_state_deleter> s_;
};

/// A listening rdma_cm id, a listening TCP socket for multi_channel::create_cm
/// over TCP, or both on the same port. Move-only.
class RDMADL_CXX_API listener {
public:
  /// Binds an rdma_cm id to host:port (host empty: any address; port 0: any
  /// port) and listens. Errors: operation_not_supported, or the errno
  /// (address_in_use, address_not_available, ...). A failure sets
  /// last_error_detail(), naming host, port and the step
  /// ("rdmadl::listener::bind on host:port: listen: ...").
  static result<listener> bind(std::string_view host, std::uint16_t port, int backlog = 16);
  /// Binds for multi_channel::create_cm() peers of the given transport
  /// (cm_channel_options::channel.transport): rdma is bind(host, port,
  /// backlog); tcp listens on a TCP socket at host:port alone (no rdma_cm:
  /// works without rdma-core); automatic does both on the same port number
  /// where rdma_cm can bind here (port 0: a port free for both), and the TCP
  /// socket alone where it cannot (no rdma-core, no kernel support, an
  /// address no RDMA device has). The TCP socket takes create_cm's
  /// rendezvous (the ranks and what each side can do) from every peer whose
  /// transport is not rdma. Errors: as bind(host, port, backlog) for rdma
  /// and for the rdma_cm side of automatic when rdma_cm works here but its
  /// port is taken (address_in_use), else the errno of socket, bind or
  /// listen; std::errc::address_not_available (host does not resolve).
  /// A failure sets last_error_detail() as bind(host, port, backlog) does.
  static result<listener> bind(std::string_view host, std::uint16_t port,
                               channel_transport transport, int backlog = 16);
  /// An empty listener.
  listener() noexcept = default;
  /// Moves; the source becomes empty.
  listener(listener &&o) noexcept;
  /// Swaps with o (o's destruction then frees what this held).
  listener &operator=(listener &&o) noexcept;
  /// Stops listening and frees the id and its event channel.
  ~listener();
  /// The bound port (the TCP socket's when there is no rdma_cm id); 0 when empty.
  std::uint16_t port() const noexcept;
  /// The listening TCP socket (non-blocking) that create_cm's rendezvous
  /// comes to; -1 when the listener has none (bound for rdma, or empty).
  int tcp_fd() const noexcept { return tcp_fd_; }
  /// Waits up to timeout for a connection request. Errors: errc::timed_out,
  /// errc::unexpected_event, the errno.
  result<connection_request> get_request(std::chrono::milliseconds timeout);
  /// The listening rdma_cm id; null when empty.
  ::rdma_cm_id *native_handle() const noexcept { return id_; }

private:
  event_channel ch_;
  ::rdma_cm_id *id_ = nullptr;
  int tcp_fd_ = -1;
};

/// Resolves host:port, creates a QP (opts.qp) with its own PD and CQ, calls
/// opts.prepare, connects with opts.private_data and waits for ESTABLISHED
/// (opts.step_timeout per step). Errors: operation_not_supported,
/// std::errc::address_not_available (host does not resolve), errc::rejected
/// (peer_data of the reject is lost), errc::timed_out, errc::unexpected_event,
/// errc::not_honoured (see cm_options), or the errno. A failure sets
/// last_error_detail(), naming host, port and the step ("rdmadl::connect to
/// host:port: resolve route: timed out").
RDMADL_CXX_API result<connection> connect(std::string_view host, std::uint16_t port,
                                          const cm_options &opts = {});

// ---- rdma_cm channels: peers from a listener and from addresses (multi_channel::create_cm) ----

/// Where a node listens for rdma_cm connections (cm_channel_options::connect,
/// cm_mesh()).
struct cm_address {
  std::string host;       ///< name or numeric address
  std::uint16_t port = 0; ///< the port (not 0)
};

/// Options of multi_channel::create_cm() (and channel::create_cm()).
///
/// No out-of-band exchange: a node connects to the addresses it knows and
/// accepts the rest. Each connecting side sends a rank (12 bytes of rdma_cm
/// private data: "RDMC", version 1, 3 zero bytes, the rank as 4 bytes
/// little-endian); the accepting side turns it into a stable peer index.
/// A full mesh of K nodes: node k connects to nodes 0..k-1 and accepts nodes
/// k+1..K-1, so node j is peer j (j < k) or j - 1 (j > k) of node k; see
/// cm_mesh().
struct cm_channel_options {
  /// send_depth, recv_depth (clamped to the device), scope_limit and
  /// connect.transport apply (its mtu and min_rnr_timer must stay at their
  /// defaults: the route and the kernel decide them); peers and the rest of
  /// connect are unused (the count is connect.size() + accept; rdma_cm sets
  /// the path and the rights); port and gid must stay at their defaults
  /// (else errc::not_honoured). transport is rdma by default here (rdma_cm
  /// only, as before create_cm had transports); tcp and automatic meet each
  /// peer over TCP first (see multi_channel::create_cm), and tcp_address,
  /// tcp_port and device are unused (the rendezvous connection is the TCP
  /// connection).
  channel_options channel = [] {
    channel_options c;
    c.transport = channel_transport::rdma;
    return c;
  }();
  std::vector<cm_address> connect; ///< peers 0 to connect.size() - 1, in order
  std::uint32_t rank = 0;          ///< sent to every address connected to
  std::size_t accept = 0;          ///< peers connected from the listener
  std::uint32_t first_rank = 0;    ///< accepted ranks: [first_rank, first_rank + accept)
  /// How long each connect step may take; the accepting takes no longer, in all.
  std::chrono::milliseconds step_timeout{5000};
  /// How long destruction waits, in all, for peers to confirm the disconnect.
  std::chrono::milliseconds disconnect_timeout{1000};
};

/// What happened to a peer of a channel built with create_cm (cm_peer_event).
enum class cm_event_kind {
  disconnected,     ///< the peer disconnected, or the connection broke
  connection_error, ///< CONNECT_ERROR, UNREACHABLE
  device_removal,   ///< DEVICE_REMOVAL: the device went away
  address_change,   ///< ADDR_CHANGE: the local address the connection uses changed
  timewait_exit,    ///< the peer's queue pair may be reused
  other,            ///< any other rdma_cm event (see event)
};

/// One rdma_cm event of a peer (multi_channel::next_cm_event()).
struct cm_peer_event {
  std::size_t peer = 0;                      ///< the peer's index
  cm_event_kind kind = cm_event_kind::other; ///< what happened
  int event = 0;                             ///< enum rdma_cm_event_type
  int status = 0; ///< the event's status: 0, a negated errno, or a rejection's reason code
  /// The status as an error: none for 0 (but connection_error with status 0
  /// is std::errc::host_unreachable), the errno (generic category) for a
  /// negated errno, errc::rejected for a rejection's (positive) reason code.
  std::error_code error() const noexcept {
    if (status < 0)
      return errno_code(-status);
    if (status > 0)
      return make_error_code(errc::rejected);
    if (kind == cm_event_kind::connection_error)
      return std::make_error_code(std::errc::host_unreachable);
    return {};
  }
};

/// The options of node rank of a full mesh of nodes.size() nodes (nodes[i]
/// is where node i listens): connect to nodes 0 to rank-1, accept the
/// nodes.size() - 1 - rank after it; base gives the other fields. Errors:
/// errc::no_peers (nodes empty), errc::bad_rank (rank >= nodes.size(), or
/// more than 2^32 nodes).
RDMADL_CXX_API result<cm_channel_options>
cm_mesh(std::size_t rank, std::span<const cm_address> nodes, cm_channel_options base = {});

} // namespace rdmadl

#endif // RDMADL_CM_HPP
