// SPDX-License-Identifier: MIT
// rdmadl/multi_channel.hpp - channels to one peer or many: endpoints
// exchanged out of band and connected in two calls, peer-indexed operations,
// and polling scopes that never let a buffer be freed while the NIC may
// still use it.
//
//   auto mc = multi_channel::create(ctx, {.peers = 3}).value();   // prepared
//   send_to_peers(mc.local_endpoints());       // out of band: entry i for peer i
//   mc.handshake(endpoints_from_peers()).value();  // entry i: peer i's for us
//   {
//     auto s = mc.scope();
//     auto h = s.post_write(1, *mr.slice(0, 64), peer_region);
//     ...
//   } // every request posted in s has completed (or was flushed) here
//
// Every peer has its own RC queue pair; all share one protection domain (a
// region registered once works with every peer) and one completion queue.
// A channel is a multi_channel with one peer.
#ifndef RDMADL_MULTI_CHANNEL_HPP
#define RDMADL_MULTI_CHANNEL_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/qp.hpp"

namespace rdmadl {

struct channel_options {
  std::size_t peers = 1;
  std::uint32_t send_depth = 64; // per peer, clamped to the device
  std::uint32_t recv_depth = 64; // per peer, clamped to the device
  std::uint8_t port = 0;         // 0: the first active port
  gid_selector gid;              // which local GID (RoCE)
  connect_options connect;       // MTU, retries, remote rights of the QPs
  // How long a scope's end waits for what is still pending before it moves
  // those queue pairs to the error state and takes their flushed completions.
  std::chrono::milliseconds scope_limit{10000};
};

// The outcome of one work request of a scope.
struct work_result {
  std::size_t peer = 0;
  std::uint64_t id = 0;       // the handle's id
  int status = 0;             // enum ibv_wc_status; 0 = success
  std::uint32_t byte_len = 0; // received bytes (receives)
  bool ok() const noexcept { return status == 0; }
  std::error_code error() const noexcept {
    return status ? std::error_code(status, wc_category()) : std::error_code();
  }
};

// A request posted in a scope. Only meaningful to the scope that made it.
struct work_handle {
  std::uint64_t id = 0;
};

// A list of endpoints as one blob: "RDEL", version 1, 3 reserved bytes, the
// count (4 bytes, little-endian), then each endpoint's 44-byte blob.
RDMADL_CXX_API std::vector<std::byte> serialize_endpoints(std::span<const endpoint> list);
// Parses serialize_endpoints()' blob; accepts exactly what it writes. Errors
// (equal to invalid_argument): errc::bad_size, errc::bad_magic,
// errc::newer_format, errc::bad_blob, and the endpoints' own errors.
RDMADL_CXX_API result<std::vector<endpoint>> parse_endpoints(std::span<const std::byte> blob);

class multi_channel;
class listener;
struct cm_channel_options;
struct cm_peer_event;
namespace detail {
struct channel_state;
}

// Tracks the requests posted through it. Its end (destructor) waits for every
// pending request; what has not completed within channel_options::scope_limit
// has its queue pair moved to the error state and its flushed completion
// taken, so when the scope is gone the NIC no longer touches any buffer
// named in it. One scope per channel at a time; not copied or moved.
class RDMADL_CXX_API polling_scope {
public:
  // Post one request to peer. Errors: errc::batch_busy (another scope is
  // open), errc::out_of_range (no such peer), the errors of queue_pair.
  result<work_handle> post_send(std::size_t peer, const local_slice &buf);
  result<work_handle> post_recv(std::size_t peer, const local_slice &buf);
  result<work_handle> post_write(std::size_t peer, const local_slice &buf,
                                 const remote_region &dst);
  result<work_handle> post_read(std::size_t peer, const local_slice &buf, const remote_region &src);
  // Waits up to timeout for h. The result carries the peer and the work
  // completion status (an error completion is a value with !ok()). Errors:
  // errc::timed_out, errc::out_of_range (not a handle of this scope).
  result<work_result> wait(work_handle h, std::chrono::milliseconds timeout);
  // Waits up to timeout for everything pending; returns every result taken
  // since the scope opened, in completion order. Errors: errc::timed_out.
  result<std::vector<work_result>> wait_all(std::chrono::milliseconds timeout);
  // Requests posted and not yet completed.
  std::size_t pending() const noexcept;
  ~polling_scope();
  polling_scope(const polling_scope &) = delete;
  polling_scope &operator=(const polling_scope &) = delete;

private:
  friend class multi_channel;
  explicit polling_scope(detail::channel_state *s) noexcept;
  result<work_handle> post(std::size_t peer, int kind, const local_slice &buf,
                           const remote_region *r);
  detail::channel_state *s_; // stable across moves of the channel
  status_code err_;
  bool owner_ = false;
};

// N reliable connections sharing one PD and CQ. Move-only.
class RDMADL_CXX_API multi_channel {
public:
  // Creates the PD, the CQ and one RC queue pair per peer, not connected.
  // Errors: operation_not_supported, errc::out_of_range (peers == 0), and
  // those of queue_pair::create.
  static result<multi_channel> create(const context &ctx, const channel_options &opts = {});

  multi_channel() noexcept;
  multi_channel(multi_channel &&) noexcept;
  multi_channel &operator=(multi_channel &&) noexcept;
  ~multi_channel();

  std::size_t peers() const noexcept;
  // The endpoint to give peer i; all of them in peer order.
  result<endpoint> local_endpoint(std::size_t peer) const;
  std::vector<endpoint> local_endpoints() const;
  /// Connects every peer's QP: remote[i] is the endpoint peer i made for
  /// this side. Errors: errc::bad_size (remote.size() != peers()), or what
  /// queue_pair::connect() answers for a peer (errc::gid_mismatch, no_lid,
  /// bad_peer_qpn, bad_peer_mtu, the errno of ibv_modify_qp); each sets
  /// last_error_detail(), naming the peer ("multi_channel::handshake: peer 3:
  /// ...").
  result<void> handshake(std::span<const endpoint> remote);
  bool connected() const noexcept;

  const protection_domain &pd() const noexcept;
  completion_queue &cq() noexcept;
  queue_pair &qp(std::size_t peer) noexcept;

  // A polling scope (see polling_scope). Opening a second one while one is
  // open gives a scope whose every call fails with errc::batch_busy.
  // Do not move or destroy the channel while a scope of it is open.
  polling_scope scope() noexcept { return polling_scope(s_.get()); }

  // Blocking forms: post, then wait up to timeout. An error completion is
  // returned as the error (wc_category). On timeout the scope's end flushes.
  result<void> send(std::size_t peer, const local_slice &buf, std::chrono::milliseconds timeout);
  result<std::uint32_t> receive(std::size_t peer, const local_slice &buf,
                                std::chrono::milliseconds timeout);
  result<void> write(std::size_t peer, const local_slice &buf, const remote_region &dst,
                     std::chrono::milliseconds timeout);
  result<void> read(std::size_t peer, const local_slice &buf, const remote_region &src,
                    std::chrono::milliseconds timeout);
  // One request per (peer, buffer) pair, all posted, then all awaited; what
  // is still pending at timeout is handled as at a scope's end (awaited up
  // to scope_limit more, then flushed). The error is the first failed
  // completion (wc_category, in completion order), errc::timed_out, or a
  // post's error. results, when not empty, receives every part's outcome in
  // part order: results[i] is parts[i]'s peer, work-completion status and
  // received bytes; a part never posted (its post or an earlier one failed)
  // has id 0 and status 5 (IBV_WC_WR_FLUSH_ERR). Errors before anything is
  // posted (results then untouched): errc::bad_size (results shorter than
  // parts), errc::batch_busy (a scope is open). None of these allocates
  // once the channel has run a batch of that size.
  struct part {
    std::size_t peer;
    local_slice buf;
    remote_region remote; // write / read only
  };
  result<void> scatter_send(std::span<const part> parts, std::chrono::milliseconds timeout,
                            std::span<work_result> results = {});
  result<void> gather_receive(std::span<const part> parts, std::chrono::milliseconds timeout,
                              std::span<work_result> results = {});
  result<void> scatter_write(std::span<const part> parts, std::chrono::milliseconds timeout,
                             std::span<work_result> results = {});
  result<void> gather_read(std::span<const part> parts, std::chrono::milliseconds timeout,
                           std::span<work_result> results = {});
  // The same buffer sent to each of peers; results[i] is peers[i]'s outcome.
  result<void> multicast_send(std::span<const std::size_t> peers, const local_slice &buf,
                              std::chrono::milliseconds timeout,
                              std::span<work_result> results = {});

  // ---- rdma_cm: built from a listener and addresses (see cm_channel_options
  // below and src/multi_channel_cm.cpp) ----

  // Connects to every opts.connect address (peers 0 .. C-1, in that order;
  // each is sent opts.rank), then accepts opts.accept connections from
  // accept_from (peer C + rank - opts.first_rank for the client that sent
  // rank). All peers share one PD and one CQ, on the device of the first
  // peer's rdma_cm id; returns the channel connected (no handshake()).
  // Errors found before any RDMA call: errc::out_of_range (no peer at all,
  // or first_rank + accept past 2^32), errc::empty_object (accept > 0 and
  // no listener), std::errc::address_not_available (an address with an
  // empty or unknown host, or port 0), errc::not_honoured (channel.port or
  // channel.gid set: rdma_cm picks them). Then: operation_not_supported (no
  // stack), errc::timed_out (a step took longer than opts.timeout; if
  // clients were refused meanwhile, errc::rank_refused instead),
  // errc::rank_refused (an acceptor refused our rank), errc::rejected,
  // errc::wrong_device (a peer's id is on another device than the first's;
  // such a client is rejected), errc::unexpected_event, or the errno. A
  // client whose rank is malformed, outside the range or already taken is
  // rejected and the accepting goes on.
  static result<multi_channel> create_cm(listener *accept_from, const cm_channel_options &opts);
  // The rdma_cm event channel's fd (non-blocking; readable when an event is
  // waiting), for epoll/poll; -1 when not built with create_cm.
  int cm_fd() const noexcept;
  // Takes one rdma_cm event of a peer, waiting up to timeout (0: do not
  // wait). A peer that disconnects (or whose connection fails) is reported
  // once, with its index; this side then disconnects it too, which flushes
  // its queue pair. Errors: errc::timed_out (nothing waiting),
  // errc::empty_object (not built with create_cm), or the errno.
  result<cm_peer_event> next_cm_event(std::chrono::milliseconds timeout = {});
  // Whether peer is still connected through rdma_cm (false for a channel
  // built out of band, or after next_cm_event reported it disconnected).
  bool cm_connected(std::size_t peer) const noexcept;

private:
  // Posts n requests (part_at(i) gives peer, buffer and remote region) in a
  // scope of this channel and awaits them; defined in multi_channel.cpp.
  template <class PartAt>
  result<void> run(std::size_t n, int kind, const PartAt &part_at,
                   std::chrono::milliseconds timeout, std::span<work_result> results,
                   std::uint32_t *byte_len = nullptr);
  std::unique_ptr<detail::channel_state> s_;
};

// One peer: a multi_channel of one.
class RDMADL_CXX_API channel {
public:
  static result<channel> create(const context &ctx, channel_options opts = {});
  // multi_channel::create_cm with exactly one peer (one address, or accept
  // == 1); else errc::out_of_range. Events: base().next_cm_event().
  static result<channel> create_cm(listener *accept_from, const cm_channel_options &opts);
  channel() noexcept = default;
  result<endpoint> local_endpoint() const { return mc_.local_endpoint(0); }
  result<void> handshake(const endpoint &remote) { return mc_.handshake({&remote, 1}); }
  bool connected() const noexcept { return mc_.connected(); }
  const protection_domain &pd() const noexcept { return mc_.pd(); }
  polling_scope scope() noexcept { return mc_.scope(); }
  result<void> send(const local_slice &buf, std::chrono::milliseconds timeout) {
    return mc_.send(0, buf, timeout);
  }
  result<std::uint32_t> receive(const local_slice &buf, std::chrono::milliseconds timeout) {
    return mc_.receive(0, buf, timeout);
  }
  result<void> write(const local_slice &buf, const remote_region &dst,
                     std::chrono::milliseconds timeout) {
    return mc_.write(0, buf, dst, timeout);
  }
  result<void> read(const local_slice &buf, const remote_region &src,
                    std::chrono::milliseconds timeout) {
    return mc_.read(0, buf, src, timeout);
  }
  multi_channel &base() noexcept { return mc_; }

private:
  multi_channel mc_;
};

// ---- rdma_cm: peers from a listener and from addresses ----
//
// No out-of-band exchange: a node connects to the addresses it knows and
// accepts the rest. Each connecting side sends a rank (12 bytes of rdma_cm
// private data: "RDMC", version 1, 3 zero bytes, the rank as 4 bytes
// little-endian); the accepting side turns it into a stable peer index.
// A full mesh of K nodes: node k connects to nodes 0..k-1 and accepts nodes
// k+1..K-1, so node j is peer j (j < k) or j - 1 (j > k) of node k; see
// cm_mesh().

struct cm_address {
  std::string host; // name or numeric address
  std::uint16_t port = 0;
};

struct cm_channel_options {
  // send_depth, recv_depth (clamped to the device) and scope_limit apply;
  // peers and connect are unused (the count is connect.size() + accept;
  // rdma_cm sets the path and the rights); port and gid must stay at their
  // defaults (else errc::not_honoured).
  channel_options channel;
  std::vector<cm_address> connect;         // peers 0 .. connect.size() - 1, in order
  std::uint32_t rank = 0;                  // sent to every address connected to
  std::size_t accept = 0;                  // peers connected from the listener
  std::uint32_t first_rank = 0;            // accepted ranks: [first_rank, first_rank + accept)
  std::chrono::milliseconds timeout{5000}; // each step (resolve, connect, each accept)
  std::uint8_t ack_timeout = 0;            // as cm_options::ack_timeout
  std::uint8_t retry_count = 6;            // as cm_options::retry_count (7: for ever on rxe)
  // How long destruction waits, in all, for peers to confirm the disconnect.
  std::chrono::milliseconds disconnect_timeout{1000};
};

enum class cm_event_kind {
  disconnected,     // the peer disconnected, or the connection broke
  connection_error, // CONNECT_ERROR, UNREACHABLE
  device_removal,
  address_change,
  timewait_exit, // the peer's queue pair may be reused
  other,
};

struct cm_peer_event {
  std::size_t peer = 0;
  cm_event_kind kind = cm_event_kind::other;
  int event = 0;  // enum rdma_cm_event_type
  int status = 0; // the event's status (0 or a negated errno)
};

// The options of node rank of a full mesh of nodes.size() nodes (nodes[i]
// is where node i listens): connect to nodes 0 .. rank-1, accept the
// nodes.size() - 1 - rank after it; base gives the other fields. Errors:
// errc::out_of_range (rank >= nodes.size()).
RDMADL_CXX_API result<cm_channel_options>
cm_mesh(std::size_t rank, std::span<const cm_address> nodes, cm_channel_options base = {});

} // namespace rdmadl

#endif // RDMADL_MULTI_CHANNEL_HPP
