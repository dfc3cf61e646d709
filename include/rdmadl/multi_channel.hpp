// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/multi_channel.hpp - channels to one peer or many: endpoints
/// exchanged out of band and connected in two calls, peer-indexed operations,
/// and polling scopes that never let a buffer be freed while the NIC may
/// still use it.
///
/// @code
/// auto mc = multi_channel::create(ctx, {.peers = 3}).value();   // prepared
/// send_to_peers(mc.local_endpoints().value()); // out of band: entry i for peer i
/// mc.handshake(endpoints_from_peers()).value();  // entry i: peer i's for us
/// // or, RDMA where both sides can and TCP elsewhere:
/// auto any = multi_channel::create({.peers = 3}).value();
/// send_to_peers(serialize_channel_endpoints(any.channel_endpoints().value()));
/// any.connect(parse_channel_endpoints(blob_from_peers()).value()).value();
/// {
///   auto s = mc.scope();
///   auto h = s.post_write(1, *mr.slice(0, 64), peer_region);
///   ...
/// } // every request posted in s has completed (or was flushed) here
/// @endcode
///
/// Every peer has its own RC queue pair; all share one protection domain (a
/// region registered once works with every peer) and one completion queue.
/// A channel (rdmadl/channel.hpp) is a multi_channel with one peer.
///
/// Transport-neutral channels (multi_channel::create(const channel_options
/// &)): each pair of peers uses RDMA when both sides can and the options
/// allow it, else TCP, decided on both sides from the channel_endpoint
/// blobs alone. Over TCP the same calls keep the same meaning: a peer writes
/// or reads only inside a region registered with that right (else the
/// initiator gets IBV_WC_REM_ACCESS_ERR and the target is unchanged), a send
/// waits for a posted receive, a send or write completes once the peer has
/// placed the bytes, and a failed peer's requests complete with the status a
/// failed RC queue pair gives. A group with a TCP peer runs one progress
/// thread ("rdmadl-tcp"), started by connect() and joined when the channel
/// and its last scope are gone: it moves the bytes straight between the
/// sockets and the registered buffers, so one-sided operations land without
/// the target calling anything.
#ifndef RDMADL_MULTI_CHANNEL_HPP
#define RDMADL_MULTI_CHANNEL_HPP

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/memory.hpp"
#include "rdmadl/qp.hpp"

namespace rdmadl {

/// Which wire a channel's peers use (channel_options::transport; not the
/// device's rdmadl::transport).
enum class channel_transport : std::uint8_t {
  rdma,     ///< RDMA only (RC queue pairs)
  tcp,      ///< TCP only, even where RDMA works
  automatic ///< per peer: RDMA when both sides can, else TCP
};
/// "rdma", "tcp" or "automatic".
RDMADL_CXX_API std::string_view name(channel_transport t) noexcept;

/// Options of multi_channel::create() and channel::create().
struct channel_options {
  std::size_t peers = 1; ///< the number of peers, one RC queue pair each (channel: always 1)
  std::uint32_t send_depth = 64; ///< per peer, clamped to the device
  std::uint32_t recv_depth = 64; ///< per peer, clamped to the device
  std::uint8_t port = 0;         ///< 0: the first active port
  gid_selector gid;              ///< which local GID (RoCE)
  connect_options connect;       ///< MTU, retries, remote rights of the QPs
  /// How long a scope's end waits for what is still pending before it moves
  /// those queue pairs to the error state and takes their flushed completions.
  std::chrono::milliseconds scope_limit{10000};
  /// The wire, for the create() overloads without a context (those with a
  /// context are RDMA only: they take rdma and automatic as rdma, and refuse
  /// tcp with errc::not_honoured) and for create_cm (where
  /// cm_channel_options makes rdma the default).
  channel_transport transport = channel_transport::automatic;
  /// The device to open when RDMA is allowed (empty: the first device).
  std::string device;
  /// TCP: the numeric IPv4 or IPv6 address to listen on and to give peers
  /// (empty: listen on every interface and give the host's first
  /// non-loopback address, else 127.0.0.1).
  std::string tcp_address;
  std::uint16_t tcp_port = 0; ///< TCP: the port to listen on (0: any free one)
};

/// The outcome of one work request of a scope.
struct work_result {
  std::size_t peer = 0;       ///< the peer it was posted to
  std::uint64_t id = 0;       ///< the handle's id
  int status = 0;             ///< enum ibv_wc_status; 0 = success
  std::uint32_t byte_len = 0; ///< received bytes (receives)
  /// True when the request succeeded (status 0).
  bool ok() const noexcept { return status == 0; }
  /// The status as an error_code in wc_category() (0 = success).
  std::error_code error() const noexcept {
    return status ? std::error_code(status, wc_category()) : std::error_code();
  }
};

/// A request posted in a scope. Only meaningful to the scope that made it.
struct work_handle {
  std::uint64_t id = 0; ///< the request's wr_id, unique within its channel
};

/// A list of endpoints as one blob: "RDEL", version 1, 3 reserved bytes, the
/// count (4 bytes, little-endian), then each endpoint's 44-byte blob.
RDMADL_CXX_API std::vector<std::byte> serialize_endpoints(std::span<const endpoint> list);
/// Parses serialize_endpoints()' blob; accepts exactly what it writes. Errors
/// (equal to invalid_argument): errc::bad_size, errc::bad_magic,
/// errc::newer_format, errc::bad_blob, and the endpoints' own errors.
RDMADL_CXX_API result<std::vector<endpoint>> parse_endpoints(std::span<const std::byte> blob);

/// What one side of a transport-neutral channel gives one peer (out of
/// band): what it can do, its RDMA endpoint when it can, its TCP address
/// and a random token that names this pair of peers. Serialises to a fixed
/// 84-byte blob: "RDCE", version 1, 3 reserved bytes, caps, address family
/// (0, 4 or 6), port (2 bytes), 4 reserved bytes, token (8), address (16,
/// an IPv4 one in the first 4), endpoint blob (44; zeros without RDMA),
/// little-endian.
struct RDMADL_CXX_API channel_endpoint {
  static constexpr std::uint8_t can_rdma = 1; ///< caps bit: endpoint is valid
  static constexpr std::uint8_t can_tcp = 2;  ///< caps bit: address and port are valid
  std::uint8_t caps = 0;                      ///< can_rdma | can_tcp
  std::uint8_t family = 0;                    ///< 4 or 6 with can_tcp, else 0
  std::uint16_t port = 0;                     ///< TCP port (host order)
  std::array<std::uint8_t, 16> address{};     ///< IPv4 in the first 4 bytes, or IPv6
  std::uint64_t token = 0;                    ///< random, names this pair of peers
  endpoint rdma;                              ///< with can_rdma

  /// The blob format serialize() writes; parse() refuses a newer one.
  static constexpr std::uint8_t format_version = 1;
  static constexpr std::size_t serialized_size = 84; ///< bytes of the blob
  /// The blob.
  std::array<std::byte, serialized_size> serialize() const noexcept;
  /// Parses a blob made by serialize(); accepts exactly what it can produce.
  /// Errors (equal to invalid_argument): errc::bad_size, errc::bad_magic,
  /// errc::newer_format, errc::bad_blob (unknown caps bits, no caps, a
  /// family or port that does not match the caps, token 0, non-zero
  /// reserved or unused bytes), and the endpoint's own errors.
  static result<channel_endpoint> parse(std::span<const std::byte> blob);
  /// Field-wise equality.
  friend bool operator==(const channel_endpoint &, const channel_endpoint &) = default;
};
/// A list of channel endpoints as one blob: "RDCL", version 1, 3 reserved
/// bytes, the count (4 bytes, little-endian), then each 84-byte blob.
RDMADL_CXX_API std::vector<std::byte>
serialize_channel_endpoints(std::span<const channel_endpoint> list);
/// Parses serialize_channel_endpoints()' blob; accepts exactly what it
/// writes. Errors: as parse_endpoints(), and channel_endpoint::parse()'s.
RDMADL_CXX_API result<std::vector<channel_endpoint>>
parse_channel_endpoints(std::span<const std::byte> blob);

class multi_channel;
class listener;
struct cm_channel_options;
struct cm_peer_event;
class polling_scope;
namespace detail {
struct channel_state;

enum channel_op { k_send, k_recv, k_write, k_read };

/// A batch's work request of kind K (multi_channel::run_parts()): built
/// once per batch with the first part's id, then each part patches its
/// buffer and remote region, posts it, and the id goes up by one (next()),
/// as a prepared send_request is posted again and again: the provider reads
/// the request, it does not change it. post() calls the provider itself and
/// answers its return value, so that nothing of the queue pair is needed
/// after the call unless it failed (error()). RC only: the queue pair's
/// type is not checked. (It holds nothing else: each field is a store per
/// batch, the parts and results are at hand for the out-of-line paths.)
template <int K> struct batch_request {
  send_request w;
  ::ibv_send_wr *bad; ///< the provider's answer on failure (unused)
  explicit batch_request(std::uint64_t id) noexcept {
    w.wr_id = id;
    w.next = nullptr;
    w.num_sge = 1;
    w.opcode = K == k_send    ? wr_opcode::send
               : K == k_write ? wr_opcode::rdma_write
                              : wr_opcode::rdma_read;
    w.flags = send_flags::signaled;
    w.imm_be = 0;
  }
  [[gnu::always_inline]] int post(const queue_pair &q, const local_slice &buf,
                                  const remote_region &r) noexcept {
    w.sg_list = &buf;
    if constexpr (K != k_send) {
      w.wr.rdma.remote_addr = r.addr;
      w.wr.rdma.rkey = r.rkey;
    }
    return q.send_.get()(q.qp_, reinterpret_cast<::ibv_send_wr *>(&w), &bad);
  }
  void next() noexcept { w.wr_id++; }
  /// The error of q's post that returned rc (as queue_pair's post_*).
  static status_code error(const queue_pair &q, int rc) noexcept { return q.failed(rc); }
};
template <> struct batch_request<k_recv> {
  recv_request w;
  ::ibv_recv_wr *bad; ///< the provider's answer on failure (unused)
  explicit batch_request(std::uint64_t id) noexcept : w{id, nullptr, nullptr, 1} {}
  [[gnu::always_inline]] int post(const queue_pair &q, const local_slice &buf,
                                  const remote_region &) noexcept {
    w.sg_list = &buf;
    w.num_sge = buf.length != 0; // (as queue_pair::post_recv)
    return q.recv_.get()(q.qp_, reinterpret_cast<::ibv_recv_wr *>(&w), &bad);
  }
  void next() noexcept { w.wr_id++; }
  static status_code error(const queue_pair &q, int rc) noexcept { return q.failed(rc); }
};

/// The part of a channel's state that the inline data path (polling_scope's
/// post_* and wait) reads; the rest is channel_state, private to the
/// library. Not an API: its layout follows the library's version, and only
/// the library makes one.
///
/// The busy word: k_open while a scope or a blocking call runs; k_orphan
/// once the channel is gone while a scope is open, the state then holding
/// the channel's reference to itself (orphan) until the scope's end drops
/// it. So a scope holds the state by a plain pointer: no reference count
/// is touched per scope.
struct RDMADL_CXX_API channel_core {
  static constexpr std::uint8_t k_open = 1, k_orphan = 2;
  /// A request of the open scope: slot i has id base + i. 16 bytes; the
  /// work_result is made from it when asked for (outcome()).
  struct slot {
    std::uint32_t peer;
    std::uint32_t done; ///< 0: pending; else its place in completion order, from 1
    int status;
    std::uint32_t byte_len;
  };

  /// k_open, k_orphan. First, so that its address is the state's own: the
  /// inline paths keep no register (or spill) for it beside the state's.
  std::atomic<std::uint8_t> busy{0};
  context ctx;
  protection_domain pd;
  completion_queue cq;
  std::vector<queue_pair> qps;
  connect_options conn;
  std::chrono::milliseconds limit{10000};
  bool connected = false;
  /// By peer: k_failed (its queue pair is in the error state), k_neutral
  /// (a transport-neutral channel's peer: its requests go out of line, where
  /// TCP is known). The inline path tests the whole byte.
  static constexpr std::uint8_t k_failed = 1, k_neutral = 2;
  std::vector<std::uint8_t> peer_state;
  /// By peer: its queue pair while its peer_state is 0, else null (what
  /// the inline batch path and a scope's post test and post to: one load
  /// per request, no index arithmetic). Kept by fail() and set_ready().
  std::vector<queue_pair *> ready;
  std::size_t nready = 0; ///< ready.size(), kept apart: one load where the size is two and a shift
  std::size_t failed_peers = 0;
  std::vector<slot> slot_store; ///< the slots' storage (capacity kept across scopes)
  slot *slots = nullptr;        ///< slot_store.data(): the open scope's requests
  /// Beside slot i, for a batch's usual path (multi_channel::run), which
  /// marks part i done by storing its id in tags[i] (and its byte count in
  /// the slot), and nothing else: ids only grow, so a stale tag never
  /// equals base + i, and no post has to clear one.
  std::vector<std::uint64_t> tag_store;
  std::uint64_t *tags = nullptr; ///< tag_store.data()
  std::size_t nslots = 0, slot_cap = 0;
  /// The id of the open scope's first slot; between scopes, the next id to
  /// hand out (a blocking call takes it). So every id is below every later
  /// scope's base, and a late completion of an earlier one finds no slot.
  std::uint64_t base = 1;
  std::size_t ndone = 0; ///< slots done (0 between scopes)
  /// The id of the open scope's first error completion; none while it is
  /// below base (so a scope's end need not reset it: base moves past it).
  std::uint64_t first_failed = 0;
  std::array<completion, 16> wc; ///< the poll buffer (not rebuilt per poll)
  /// By peer, with a TCP transport (transport-neutral channels only; empty
  /// otherwise, which is what the inline poll tests).
  std::vector<std::uint8_t> over_tcp;
  std::shared_ptr<channel_state> orphan; ///< see busy

  channel_core() noexcept;
  channel_core(const channel_core &) = delete;
  channel_core &operator=(const channel_core &) = delete;
  ~channel_core();

  /// Takes the busy word for a scope or a blocking call; false when busy.
  /// The bookkeeping is ready: end_scope() left it so.
  bool open_scope() noexcept {
    std::uint8_t expected = 0;
    return busy.compare_exchange_strong(expected, k_open, std::memory_order_acquire,
                                        std::memory_order_relaxed);
  }
  /// Ends the open scope: settle() what is pending, clear the slots for the
  /// next one, release the busy word; if the channel is gone meanwhile,
  /// frees the state (this object: nothing may touch it after).
  void end_scope() noexcept {
    if (ndone != nslots) [[unlikely]]
      settle();
    base += nslots; // below every later scope's base
    nslots = 0;
    ndone = 0;
    release_busy();
  }
  /// Releases the busy word at a scope's end (end_scope(), and a batch's
  /// that kept no slot); if the channel is gone meanwhile, frees the state
  /// (this object: nothing may touch it after).
  [[gnu::always_inline]] void release_busy() noexcept {
    // (An exchange: one instruction where a fetch_and that returns the old
    // value is a compare-and-swap loop. Clearing k_orphan too is harmless:
    // this end then frees the state.)
    if (busy.exchange(0, std::memory_order_acq_rel) & k_orphan) [[unlikely]]
      drop_orphan();
  }
  /// The slot of id, or nullptr when id is not of the open scope.
  slot *find(std::uint64_t id) noexcept {
    std::uint64_t i = id - base; // wraps to huge for ids of earlier scopes
    return i < nslots ? &slots[static_cast<std::size_t>(i)] : nullptr;
  }
  /// The outcome of slot i of the open scope.
  work_result outcome(std::size_t i) const noexcept {
    const slot &s = slots[i];
    return work_result{s.peer, base + i, s.status, s.byte_len};
  }
  /// Marks peer failed (its queue pair is, or is being put, in the error state).
  void fail(std::size_t peer) noexcept {
    if (peer < peer_state.size() && !(peer_state[peer] & k_failed)) {
      peer_state[peer] |= k_failed;
      if (peer < ready.size())
        ready[peer] = nullptr;
      failed_peers++;
    }
  }
  /// Fills ready from peer_state and qps (after either changed, but for
  /// fail()). Allocates.
  void set_ready();
  /// Whether peer is failed (false for no such peer).
  bool failed(std::size_t peer) const noexcept {
    return peer < peer_state.size() && (peer_state[peer] & k_failed);
  }
  /// The number of peers.
  std::size_t peers() const noexcept { return peer_state.size(); }
  /// Marks s (not done yet) done with this outcome.
  void complete(slot &s, int status, std::uint32_t byte_len) noexcept {
    s.done = static_cast<std::uint32_t>(++ndone); // its place in completion order
    s.status = status;
    s.byte_len = byte_len;
    if (status != 0 && first_failed < base) [[unlikely]]
      first_failed = base + static_cast<std::size_t>(&s - slots);
  }
  /// Marks s (if of the open scope and not done yet) done with this outcome.
  void record(slot *s, int status, std::uint32_t byte_len) noexcept {
    if (s && !s->done)
      complete(*s, status, byte_len);
  }
  /// Takes what the CQ has (the provider's poll straight into wc); marks
  /// the matching slots done. A completion
  /// that matches no slot (of an earlier scope or blocking call) is dropped;
  /// an error one marks its peer failed. (A success leaves the slot's
  /// status 0, as its post wrote it.)
  [[gnu::always_inline]] status_code poll_cq() noexcept { return poll_cq(base, nslots); }
  /// poll_cq() given b and ns, the open scope's base and nslots (a
  /// polling_scope's own copies).
  [[gnu::always_inline]] status_code poll_cq(std::uint64_t b, std::size_t ns) noexcept {
    const int n = poll_wc();
    if (n <= 0) [[unlikely]] // nothing, or a failed or extended poll
      return n < 0 ? poll_cq_other() : status_code();
    take(b, ns, wc.data(), wc.data() + n);
    return {};
  }
  /// poll_cq() once poll_wc() was negative: what cq.poll(wc) answers
  /// (an extended queue's completions taken, else the error).
  status_code poll_cq_other() noexcept;
  /// Marks the slots of wc[from, got) (completions a poll took) done.
  [[gnu::always_inline]] void take(std::size_t from, std::size_t got) noexcept {
    if (from != got)
      take(base, nslots, wc.data() + from, wc.data() + got);
  }
  /// take() of [c, end), not empty, given the open scope's base and nslots.
  [[gnu::always_inline]] void take(std::uint64_t b, std::size_t ns, const completion *c,
                                   const completion *const end) noexcept {
    // (By pointer: one value to step, where an index and its address are
    // two. The loop calls nothing: an error completion hands it and the
    // rest of the poll to take_rest(), so that base, nslots, slots and
    // ndone stay in registers and ndone is stored once.)
    slot *const sl = slots;
    std::size_t nd = ndone;
    do {
      if (c->status != 0) [[unlikely]] {
        ndone = nd;
        return take_rest(static_cast<std::size_t>(c - wc.data()),
                         static_cast<std::size_t>(end - wc.data()));
      }
      // A slot found by index: huge for ids of earlier scopes.
      if (const std::uint64_t i = c->wr_id - b; i < ns) [[likely]] {
        if (slot &s = sl[i]; !s.done) [[likely]] {
          s.done = static_cast<std::uint32_t>(++nd);
          s.byte_len = c->byte_len;
        }
      }
    } while (++c != end);
    ndone = nd;
  }
  /// cq.poll(wc) as a count: the provider's poll_cq straight into wc.
  /// Negative when that failed or when the queue is empty or extended (its
  /// poll function is then a stub that answers -1); poll_wc_other() then
  /// answers what cq.poll() would have.
  [[gnu::always_inline]] int poll_wc() noexcept {
    return cq.poll_.get()(cq.cq_, static_cast<int>(wc.size()),
                          reinterpret_cast<::ibv_wc *>(wc.data()));
  }
  /// What cq.poll(wc) answers once poll_wc() was negative (it polls an
  /// extended queue; else the error).
  result<std::size_t> poll_wc_other() noexcept { return cq.poll_other(wc); }
  /// poll_cq(), and with a TCP engine its completions too.
  [[gnu::always_inline]] status_code poll_some() noexcept { return poll_some(base, nslots); }
  /// poll_some() given b and ns, the open scope's base and nslots. With TCP
  /// peers and no CQ, the engine's poll waits for a completion up to
  /// timeout, the caller's own (0: a millisecond; at most 20 ms); a CQ is
  /// polled once.
  [[gnu::always_inline]] status_code poll_some(std::uint64_t b, std::size_t ns,
                                               std::chrono::milliseconds timeout = {}) noexcept {
    if (!over_tcp.empty()) [[unlikely]]
      return poll_tcp(timeout);
    return poll_cq(b, ns);
  }
  /// Posts one request of kind K with id on qp.
  template <int K>
  [[gnu::always_inline]] static result<void> post_qp(queue_pair &qp, const local_slice &buf,
                                                     const remote_region *r, std::uint64_t id) {
    if constexpr (K == k_send)
      return qp.post_send(buf, id);
    else if constexpr (K == k_recv)
      return qp.post_recv(buf, id);
    else if constexpr (K == k_write)
      return qp.post_write(buf, *r, id);
    else
      return qp.post_read(buf, *r, id);
  }
  /// Posts one request of kind K on peer's queue pair and gives it the next
  /// slot of the open scope; its id in *id (unless id is null). The
  /// checks, TCP peers and a full slot array go out of line (post_slow).
  template <int K>
  [[gnu::always_inline]] status_code post(std::size_t peer, const local_slice &buf,
                                          const remote_region *r, std::uint64_t *id) {
    return post<K>(base, nslots, peer, buf, r, id);
  }
  /// post() given b and k, the open scope's base and nslots (a
  /// polling_scope keeps its own copies: base does not change while a scope
  /// is open, and only its posts add slots).
  template <int K>
  [[gnu::always_inline]] status_code post(std::uint64_t b, std::size_t k, std::size_t peer,
                                          const local_slice &buf, const remote_region *r,
                                          std::uint64_t *id) {
    queue_pair *q;
    if (peer >= nready || !(q = ready[peer]) || k == slot_cap) [[unlikely]]
      return post_slow(peer, K, buf, r, id);
    // The slot first, from what is in registers; it counts once posted.
    slots[k] = {static_cast<std::uint32_t>(peer), 0, 0, 0};
    const std::uint64_t i = b + k;
    if (result<void> posted = post_qp<K>(*q, buf, r, i); !posted) [[unlikely]]
      return posted.error();
    nslots = k + 1;
    if (id)
      *id = i;
    return {};
  }
  /// A blocking call: one request of kind K to peer, awaited up to timeout
  /// with a scope's guarantees (exclusive; what has not completed in time
  /// is flushed before the return) but without its slots. Inline down to
  /// the first poll; the usual outcome (that poll took just this request's
  /// completion, a success) returns here, everything else goes out of line
  /// (run_one_slow, run_one_rest). byte_len, when not null, receives the
  /// completion's byte count.
  template <int K>
  [[gnu::always_inline]] status_code
  run_one(std::size_t peer, const local_slice &buf, const remote_region *r,
          std::chrono::milliseconds timeout, std::uint32_t *byte_len) {
    if (!open_scope()) [[unlikely]]
      return busy_error();
    if (peer >= peer_state.size() || peer_state[peer]) [[unlikely]]
      return run_one_slow(peer, K, buf, r, timeout, byte_len);
    const std::uint64_t id = base++; // below every later scope's base
    if (result<void> posted = post_qp<K>(qps[peer], buf, r, id); !posted) [[unlikely]] {
      busy.store(0, std::memory_order_release);
      return posted.error();
    }
    auto n = cq.poll(wc);
    if (n && *n == 1 && wc[0].wr_id == id && wc[0].status == 0) [[likely]] {
      if (byte_len)
        *byte_len = wc[0].byte_len;
      // (No k_orphan can appear meanwhile: the channel is inside this call.)
      busy.store(0, std::memory_order_release);
      return {};
    }
    return run_one_rest(peer, id, n ? *n : 0, n ? status_code() : status_code(n.error()), timeout,
                        byte_len);
  }

  /// multi_channel::send_receive(): a receive into in from peer from, then
  /// a send of out to peer to, both awaited up to timeout as a scope of two
  /// would await them (its slots are used only off the usual path). Inline
  /// down to the first poll; when that poll took just these two
  /// completions, both successes, it returns there (the received bytes in
  /// *byte_len); everything else goes out of line (run_two_slow,
  /// run_two_rest).
  [[gnu::always_inline]] status_code run_two(std::size_t to, const local_slice &out,
                                             std::size_t from, const local_slice &in,
                                             std::chrono::milliseconds timeout,
                                             std::uint32_t *byte_len) {
    if (!open_scope()) [[unlikely]]
      return busy_error();
    const std::size_t np = peer_state.size();
    if (to >= np || from >= np || (peer_state[to] | peer_state[from])) [[unlikely]]
      return run_two_slow(to, out, from, in, timeout, byte_len);
    const std::uint64_t id = base; // the receive's; the send's is id + 1
    base = id + 2;
    if (result<void> posted = post_qp<k_recv>(qps[from], in, nullptr, id); !posted) [[unlikely]] {
      busy.store(0, std::memory_order_release);
      return posted.error();
    }
    if (result<void> posted = post_qp<k_send>(qps[to], out, nullptr, id + 1); !posted) [[unlikely]]
      return run_two_rest(to, from, id, 1, posted.error(), 0, timeout, byte_len);
    auto got = cq.poll(wc);
    const std::size_t n = got ? *got : 0;
    if (n == 2 && (wc[0].status | wc[1].status) == 0) [[likely]] {
      // The receive's completion first, or (else if) second.
      const bool recv_first = wc[0].wr_id == id && wc[1].wr_id == id + 1;
      if (recv_first || (wc[0].wr_id == id + 1 && wc[1].wr_id == id)) [[likely]] {
        *byte_len = wc[recv_first ? 0 : 1].byte_len;
        // (No k_orphan can appear meanwhile: the channel is inside this call.)
        busy.store(0, std::memory_order_release);
        return {};
      }
    }
    return run_two_rest(to, from, id, 2, got ? status_code() : status_code(got.error()), n, timeout,
                        byte_len);
  }

  /// @name Out of line (multi_channel.cpp)
  /**@{*/
  /// post() with its checks: errc::no_such_peer, errc::peer_failed, a TCP
  /// peer, the slot array grown.
  status_code post_slow(std::size_t peer, int k, const local_slice &buf, const remote_region *r,
                        std::uint64_t *id);
  /// errc::channel_busy.
  static status_code busy_error() noexcept;
  /// run_one() with its checks (errc::no_such_peer, errc::peer_failed) and
  /// a TCP engine; the busy word is taken, and released on return.
  status_code run_one_slow(std::size_t peer, int k, const local_slice &buf, const remote_region *r,
                           std::chrono::milliseconds timeout, std::uint32_t *byte_len) noexcept;
  /// run_one() once id is posted and its first poll took n completions
  /// (polled: the poll's error) without the usual outcome; releases the
  /// busy word.
  status_code run_one_rest(std::size_t peer, std::uint64_t id, std::size_t n, status_code polled,
                           std::chrono::milliseconds timeout, std::uint32_t *byte_len) noexcept;
  /// run_two() with its checks (errc::no_such_peer, errc::peer_failed) and
  /// TCP peers, through a scope's posts; the busy word is taken, and
  /// released on return.
  status_code run_two_slow(std::size_t to, const local_slice &out, std::size_t from,
                           const local_slice &in, std::chrono::milliseconds timeout,
                           std::uint32_t *byte_len) noexcept;
  /// run_two() off its usual path: the receive (id) and, when posted is 2,
  /// the send (id + 1) are posted (err: the send's post error, or the first
  /// poll's), and the first poll took n completions; becomes a scope of
  /// those requests and awaits them. Releases the busy word.
  status_code run_two_rest(std::size_t to, std::size_t from, std::uint64_t id, std::size_t posted,
                           status_code err, std::size_t n, std::chrono::milliseconds timeout,
                           std::uint32_t *byte_len) noexcept;
  /// Grows the slot array to at least n (through operator new; capacity is
  /// kept across scopes).
  void reserve_slots(std::size_t n);
  /// An error completion: marks its peer failed and its slot (if any) done.
  void error_completion(slot *s, const completion &c) noexcept;
  /// take() from an error completion, wc[from], on: each error through
  /// error_completion(), each success as take() marks it.
  void take_rest(std::size_t from, std::size_t got) noexcept;
  /// Marks the peer of an error completion failed (by its QP number).
  void note_error(const completion &c) noexcept;
  /// poll_some() of a channel with TCP peers (channel_state::poll_mixed).
  status_code poll_tcp(std::chrono::milliseconds timeout) noexcept;
  /// Polls until slot i is done or timeout passes.
  status_code await_slot(std::size_t i, std::chrono::milliseconds timeout) noexcept;
  /// What a scope's end does with what is pending: waits up to limit; then
  /// moves their queue pairs to the error state and takes the flushed
  /// completions (up to limit again).
  void settle() noexcept;
  /// Frees the state the channel left to its open scope.
  void drop_orphan() noexcept;
  /**@}*/
};
} // namespace detail

/// Tracks the requests posted through it. Its end (destructor) waits for every
/// pending request; what has not completed within channel_options::scope_limit
/// has its queue pair moved to the error state and its flushed completion
/// taken, so when the scope is gone the NIC no longer touches any buffer
/// named in it. One scope per channel at a time; not copied or moved.
///
/// The multi_channel it came from may be moved or destroyed while the scope
/// is open; the scope keeps working and its end still waits for (or
/// flushes) what it posted, after which the queue pairs, CQ and PD are
/// released if the channel is gone.
///
/// Posting and waiting are inline down to the provider's post and poll
/// functions; only the unusual (an error, a TCP peer, a wait that one poll
/// does not end) leaves the header.
///
/// Cost: a scope keeps a slot per request (its peer, whether it is done,
/// its status and byte count) so that any handle can be waited for in any
/// order and wait_all() can answer in completion order; that bookkeeping is
/// what a raw caller does not pay. For a fixed pattern, the forms that know
/// it are cheaper: the blocking calls for one request,
/// multi_channel::send_receive() for a receive and a send, the batch forms
/// (without results) for one request per part (bench/README.md has the
/// figures).
class RDMADL_CXX_API polling_scope {
public:
  /// @name Posting one request to peer
  /// Each posts one signaled request on peer's queue pair and tracks it.
  /// Errors: errc::channel_busy (another scope or a blocking call is
  /// running), errc::no_such_peer, errc::peer_failed (that peer's queue pair
  /// is in the error state, see multi_channel::connected(std::size_t)), the
  /// errors of queue_pair's post_* of the same name.
  /**@{*/
  /// Sends buf.
  [[gnu::always_inline]] result<work_handle> post_send(std::size_t peer, const local_slice &buf) {
    return post<detail::k_send>(peer, buf, nullptr);
  }
  /// Posts buf as a receive (its byte_len is in the work_result).
  [[gnu::always_inline]] result<work_handle> post_recv(std::size_t peer, const local_slice &buf) {
    return post<detail::k_recv>(peer, buf, nullptr);
  }
  /// Writes buf to dst.
  [[gnu::always_inline]] result<work_handle> post_write(std::size_t peer, const local_slice &buf,
                                                        const remote_region &dst) {
    return post<detail::k_write>(peer, buf, &dst);
  }
  /// Reads src into buf.
  [[gnu::always_inline]] result<work_handle> post_read(std::size_t peer, const local_slice &buf,
                                                       const remote_region &src) {
    return post<detail::k_read>(peer, buf, &src);
  }
  /**@}*/
  /// Waits up to timeout for h. The result carries the peer and the work
  /// completion status (an error completion is a value with !ok()). Errors:
  /// errc::timed_out, errc::unknown_handle (not a handle of this scope: one
  /// of another scope, or 0).
  [[gnu::always_inline]] result<work_result> wait(work_handle h,
                                                  std::chrono::milliseconds timeout) {
    if (!s_) [[unlikely]]
      return err_;
    detail::channel_core &s = *s_;
    const std::uint64_t i = h.id - base_; // (for this scope's handles: their slot)
    if (i >= n_) [[unlikely]]
      return errc::unknown_handle;
    const auto k = static_cast<std::size_t>(i);
    if (!s.slots[k].done) { // the clock is read only if one poll is not enough
      status_code st = s.poll_some(base_, n_, timeout);
      if (st.ok() && !s.slots[k].done) [[unlikely]]
        st = s.await_slot(k, timeout);
      if (!st.ok()) [[unlikely]]
        return st;
    }
    const detail::channel_core::slot &sl = s.slots[k];
    return work_result{sl.peer, h.id, sl.status, sl.byte_len};
  }
  /// Waits up to timeout for everything pending; returns every result taken
  /// since the scope opened, in completion order. Errors: errc::timed_out.
  result<std::vector<work_result>> wait_all(std::chrono::milliseconds timeout);
  /// Requests posted and not yet completed.
  std::size_t pending() const noexcept { return s_ ? s_->nslots - s_->ndone : 0; }
  ~polling_scope() {
    if (s_)
      s_->end_scope();
  }
  polling_scope(const polling_scope &) = delete;
  polling_scope &operator=(const polling_scope &) = delete;

private:
  friend class multi_channel;
  /// Opens a scope on s (inline: a compare-and-swap of the busy word); an
  /// empty or busy channel gives a scope whose every call fails.
  explicit polling_scope(detail::channel_core *s) noexcept {
    if (s && s->open_scope()) [[likely]] {
      s_ = s;
      base_ = s->base;
    } else
      err_ = refused(s);
  }
  /// errc::empty_object (s null) or errc::channel_busy.
  static status_code refused(const detail::channel_core *s) noexcept;
  template <int K>
  [[gnu::always_inline]] result<work_handle> post(std::size_t peer, const local_slice &buf,
                                                  const remote_region *r) {
    if (!s_) [[unlikely]]
      return err_;
    // Its id, as post() gives it (not through memory).
    const std::uint64_t id = base_ + n_;
    if (status_code st = s_->post<K>(base_, n_, peer, buf, r, nullptr); !st.ok()) [[unlikely]]
      return st;
    n_++;
    return work_handle{id};
  }
  detail::channel_core *s_ = nullptr; ///< the state, while this scope owns it
  status_code err_;                   ///< why s_ is null (empty or busy channel)
  /// s_->base, which does not change while this scope is open: a handle's
  /// slot is its id - base_ with nothing reloaded, and the compiler sees a
  /// handle's slot index where the handle is still in its hands.
  std::uint64_t base_ = 0;
  /// s_->nslots, kept here for the same reason: only this scope's posts
  /// change it while it is open, and it is 0 at the open (end_scope() and
  /// every path that fills slots outside a polling_scope leave it so).
  std::size_t n_ = 0;
};

/// N reliable connections sharing one PD and CQ. Move-only.
class RDMADL_CXX_API multi_channel {
public:
  /// Creates the PD, the CQ and one RC queue pair per peer, not connected.
  /// Errors: operation_not_supported, errc::no_peers (peers == 0),
  /// errc::too_many_peers (before anything is created: peers exceeds the
  /// device's max_qp or max_cqe / 2, since the shared CQ holds every peer's
  /// send and receive entries; send_depth and recv_depth are cut in
  /// proportion until peers * (send_depth + recv_depth) fits max_cqe), the
  /// errno of ibv_query_device, and those of queue_pair::create.
  static result<multi_channel> create(const context &ctx, const channel_options &opts = {});
  /// A transport-neutral channel: opens opts.device when opts.transport
  /// allows RDMA and listens for TCP when it allows TCP. With automatic, a
  /// host where RDMA cannot work (see diagnose()) gives a TCP-only channel
  /// (describe() says why). Exchange channel_endpoints() and pass the
  /// peers' to connect(). Its pd() is a
  /// software protection domain when there is no device. Errors: those of
  /// create(ctx, opts); with transport rdma, operation_not_supported (no
  /// RDMA here); for TCP, std::errc::invalid_argument (tcp_address not a
  /// numeric address) or the errno of socket, bind or listen.
  static result<multi_channel> create(const channel_options &opts);

  /// An empty channel.
  multi_channel() noexcept;
  /// Moves; the source becomes empty. An open scope keeps working.
  multi_channel(multi_channel &&) noexcept;
  /// Moves; the source becomes empty and what this held is freed (once no
  /// scope of it is open any more).
  multi_channel &operator=(multi_channel &&) noexcept;
  /// Frees the queue pairs, CQ and PD (create_cm: disconnects the peers
  /// first, waiting up to disconnect_timeout); an open scope defers that to
  /// its own end.
  ~multi_channel();

  /// The number of peers; 0 when empty.
  std::size_t peers() const noexcept;
  /// The endpoint to give peer (to pass to its handshake()). Errors:
  /// errc::no_such_peer, errc::empty_object.
  result<endpoint> local_endpoint(std::size_t peer) const;
  /// Every peer's local_endpoint(), in peer order: entry i is always peer
  /// i's. Errors: errc::empty_object, or the first peer whose endpoint
  /// cannot be had (its queue pair was moved out through qp()), with
  /// last_error_detail() naming it ("multi_channel::local_endpoints: peer
  /// 1: ...").
  result<std::vector<endpoint>> local_endpoints() const;
  /// Every peer's channel_endpoint, in peer order (entry i for peer i): what
  /// this side can do, its RDMA endpoint for that peer, its TCP address and
  /// a fresh token. Errors: errc::empty_object, local_endpoints()' errors.
  result<std::vector<channel_endpoint>> channel_endpoints() const;
  /// Connects every peer over the transport both sides allow: RDMA when
  /// both advertise it and this channel's transport is not tcp, else TCP.
  /// TCP connections are made by the progress thread (this call does not
  /// wait for the peer to call its connect()); what is posted before one is
  /// up waits for it. Errors: errc::endpoint_count, errc::no_common_transport
  /// (a peer and this side share no transport), errc::bad_blob (a peer's
  /// token equals ours), std::errc::already_connected (called before, with
  /// TCP peers), the errno of eventfd(2), or what handshake(std::span<const
  /// endpoint>) answers for an RDMA peer; each names the peer in
  /// last_error_detail().
  result<void> connect(std::span<const channel_endpoint> remote);
  /// The transport peer uses (rdma before connect(), and for no such peer).
  channel_transport transport_of(std::size_t peer) const noexcept;
  /// One sentence on peer's transport and why: "peer 2 over TCP: this host
  /// has no RDMA: ...", "peer 0 over RDMA". Each fallback to TCP is also
  /// logged once (log_level::warn, see set_log_handler()).
  std::string describe(std::size_t peer) const;
  /// Connects every peer's QP: remote[i] is the endpoint peer i made for
  /// this side. Errors: errc::endpoint_count (remote.size() != peers()), or what
  /// queue_pair::connect() answers for a peer (errc::gid_mismatch, no_lid,
  /// bad_peer_qpn, bad_peer_mtu, the errno of ibv_modify_qp); each sets
  /// last_error_detail(), naming the peer ("multi_channel::handshake: peer 3:
  /// ...").
  result<void> handshake(std::span<const endpoint> remote);
  /// Whether every peer is connected: handshake() (or create_cm()) succeeded
  /// and no peer has failed since (see connected(std::size_t)).
  bool connected() const noexcept;
  /// Whether peer is connected and its queue pair still usable. A peer
  /// fails for good when one of its requests completes with an error or is
  /// flushed by this side because it did not complete in time (a blocking
  /// call's timeout, a scope's scope_limit): RC leaves the error state only
  /// through a new connection, so every later request to that peer fails at
  /// once with errc::peer_failed (equal to std::errc::not_connected), and
  /// connected() is false. The other peers go on working; to talk to the
  /// failed peer again, both sides build a new channel. A create_cm peer
  /// that next_cm_event() reports gone is failed too. False for no such
  /// peer.
  bool connected(std::size_t peer) const noexcept;

  /// The protection domain all peers share: register buffers here.
  const protection_domain &pd() const noexcept;
  /// The completion queue all peers share (the scopes poll it); null when
  /// the channel is empty. The channel owns it: use it, do not move from it.
  completion_queue *cq() noexcept;
  /// peer's queue pair, for requests of one's own beside the channel's; null
  /// when the channel is empty or has no such peer. The channel owns it: do
  /// not move from it (the peer would be left without one).
  queue_pair *qp(std::size_t peer) noexcept;

  /// A polling scope (see polling_scope). Opening a second one while one is
  /// open gives a scope whose every call fails with errc::channel_busy. The
  /// channel may be moved or destroyed while the scope is open (its state
  /// is then freed by the scope's end). Inline.
  polling_scope scope() noexcept { return polling_scope(core_); }

  /// @name Blocking operations on one peer
  /// Each posts one request, then waits up to timeout for it, as a scope of
  /// its own would: what has not completed then is awaited up to
  /// scope_limit more, then flushed, so buf is free again on return. A
  /// timeout or an error completion leaves that peer failed (see
  /// connected(std::size_t)). Errors: an error completion (wc_category),
  /// errc::timed_out, errc::channel_busy (a scope or another blocking call
  /// is running), errc::no_such_peer, errc::peer_failed, or a post's error.
  /**@{*/
  /// Inline down to the provider's post and poll (channel_core::run_one).
  /// Sends buf to peer.
  [[gnu::always_inline]] result<void> send(std::size_t peer, const local_slice &buf,
                                           std::chrono::milliseconds timeout) {
    if (!core_) [[unlikely]]
      return empty_error();
    return core_->run_one<detail::k_send>(peer, buf, nullptr, timeout, nullptr);
  }
  /// Receives into buf from peer; returns the bytes received.
  [[gnu::always_inline]] result<std::uint32_t> receive(std::size_t peer, const local_slice &buf,
                                                       std::chrono::milliseconds timeout) {
    if (!core_) [[unlikely]]
      return empty_error();
    std::uint32_t len = 0;
    if (status_code st = core_->run_one<detail::k_recv>(peer, buf, nullptr, timeout, &len);
        !st.ok()) [[unlikely]]
      return st;
    return len;
  }
  /// Writes buf to dst at peer.
  [[gnu::always_inline]] result<void> write(std::size_t peer, const local_slice &buf,
                                            const remote_region &dst,
                                            std::chrono::milliseconds timeout) {
    if (!core_) [[unlikely]]
      return empty_error();
    return core_->run_one<detail::k_write>(peer, buf, &dst, timeout, nullptr);
  }
  /// Reads src at peer into buf.
  [[gnu::always_inline]] result<void> read(std::size_t peer, const local_slice &buf,
                                           const remote_region &src,
                                           std::chrono::milliseconds timeout) {
    if (!core_) [[unlikely]]
      return empty_error();
    return core_->run_one<detail::k_read>(peer, buf, &src, timeout, nullptr);
  }
  /// A receive into in from peer from and a send of out to peer to (the
  /// same peer or two), both awaited: a ping-pong's step, or a ring's,
  /// with one call (as MPI_Sendrecv). The receive is posted first, so the
  /// peer's message can land while ours is on its way. Returns the bytes
  /// received. Both are awaited as a scope of two awaits them: on return,
  /// in and out are free again whatever happened (a failed send post leaves
  /// the receive to be awaited and flushed as a scope's end would). Errors:
  /// as the calls above (the first failed completion, in completion
  /// order). Inline down to the provider's posts and poll
  /// (channel_core::run_two).
  [[gnu::always_inline]] result<std::uint32_t> send_receive(std::size_t to, const local_slice &out,
                                                            std::size_t from, const local_slice &in,
                                                            std::chrono::milliseconds timeout) {
    if (!core_) [[unlikely]]
      return empty_error();
    std::uint32_t len; // (written on success)
    if (status_code st = core_->run_two(to, out, from, in, timeout, &len); !st.ok()) [[unlikely]]
      return st;
    return len;
  }
  /**@}*/
  /// One request of scatter_send(), gather_receive(), scatter_write() or
  /// gather_read().
  struct part {
    std::size_t peer;     ///< the peer
    local_slice buf;      ///< the local buffer
    remote_region remote; ///< write / read only
  };
  /// @name Many requests at once
  /// One request per (peer, buffer) pair, all posted, then all awaited; what
  /// is still pending at timeout is handled as at a scope's end (awaited up
  /// to scope_limit more, then flushed). The error is the first failed
  /// completion (wc_category, in completion order), errc::timed_out, or a
  /// post's error. results, when not empty, receives every part's outcome in
  /// part order: results[i] is parts[i]'s peer, work-completion status and
  /// received bytes; a part never posted (its post or an earlier one failed)
  /// has id 0 and status 5 (IBV_WC_WR_FLUSH_ERR). Errors before anything is
  /// posted (results then untouched): errc::short_results (results shorter
  /// than parts), errc::channel_busy (a scope is open). A part naming no peer
  /// fails with errc::no_such_peer, one naming a failed peer with
  /// errc::peer_failed (the parts before it were posted). None of these
  /// allocates once the channel has run a batch of that size.
  ///
  /// Outcomes are materialised only when asked for: without results, the
  /// usual path (every part's peer usable, every completion a success of
  /// this batch) keeps no record per part beyond what a raw caller keeps
  /// (its completion counted; a poll that leaves parts pending stores each
  /// completion's id in a slot, so a later timeout knows what to flush);
  /// with results, each part's outcome is written into results as its
  /// completion is taken (again at the end by a batch over polls). The
  /// error, the flush of what did not complete and the failed peers are the
  /// same either way. The four forms taking parts are inline down to the
  /// provider's posts and polls (run_parts()).
  /**@{*/
  /// Sends each part's buf to its peer.
  [[gnu::always_inline]] result<void> scatter_send(std::span<const part> parts,
                                                   std::chrono::milliseconds timeout,
                                                   std::span<work_result> results = {}) {
    return run_parts<detail::k_send>(parts, timeout, results);
  }
  /// Receives into each part's buf from its peer.
  [[gnu::always_inline]] result<void> gather_receive(std::span<const part> parts,
                                                     std::chrono::milliseconds timeout,
                                                     std::span<work_result> results = {}) {
    return run_parts<detail::k_recv>(parts, timeout, results);
  }
  /// Writes each part's buf to its remote at its peer.
  [[gnu::always_inline]] result<void> scatter_write(std::span<const part> parts,
                                                    std::chrono::milliseconds timeout,
                                                    std::span<work_result> results = {}) {
    return run_parts<detail::k_write>(parts, timeout, results);
  }
  /// Reads each part's remote at its peer into its buf.
  [[gnu::always_inline]] result<void> gather_read(std::span<const part> parts,
                                                  std::chrono::milliseconds timeout,
                                                  std::span<work_result> results = {}) {
    return run_parts<detail::k_read>(parts, timeout, results);
  }
  /// The same buffer sent to each of peers; results[i] is peers[i]'s outcome.
  result<void> multicast_send(std::span<const std::size_t> peers, const local_slice &buf,
                              std::chrono::milliseconds timeout,
                              std::span<work_result> results = {});
  /**@}*/

  // ---- rdma_cm: built from a listener and addresses (cm_channel_options,
  // cm_peer_event and cm_mesh() are in rdmadl/cm.hpp) ----

  /// Connects to every opts.connect address (peers 0 to C-1, in that order;
  /// each is sent opts.rank), then accepts opts.accept connections from
  /// accept_from (peer C + rank - opts.first_rank for the client that sent
  /// rank). All peers share one PD and one CQ, on the device of the first
  /// peer's rdma_cm id; returns the channel connected (no handshake()).
  /// Errors found before any RDMA call: errc::no_peers (no peer at all),
  /// errc::bad_rank (first_rank + accept past 2^32), errc::no_listener (accept > 0 and
  /// accept_from null), errc::empty_object (accept > 0 and accept_from an
  /// empty listener), std::errc::address_not_available (an address with an
  /// empty or unknown host, or port 0), errc::not_honoured (channel.port or
  /// channel.gid, or channel.connect.transport's mtu or min_rnr_timer set:
  /// rdma_cm picks them). Then: operation_not_supported (no
  /// stack), errc::timed_out (a step took longer than opts.step_timeout; if
  /// clients were refused meanwhile, errc::rank_refused instead),
  /// errc::rank_refused (an acceptor refused our rank), errc::rejected,
  /// errc::wrong_device (a peer's id is on another device than the first's;
  /// such a client is rejected), errc::unexpected_event, or the errno. A
  /// client whose rank is malformed, outside the range or already taken is
  /// rejected and the accepting goes on.
  ///
  /// The accepting has one deadline, opts.step_timeout from its start, which no
  /// client restarts: a stream of refused clients cannot keep it going.
  /// Clients are taken as they come; one that does not complete its
  /// connection holds up no other, and one whose connection fails before it
  /// is established frees its rank for a new attempt, so the channel is
  /// made if every rank is connected in time (else errc::timed_out, or
  /// errc::rank_refused if clients were refused meanwhile). Also
  /// errc::too_many_peers (more peers than the first peer's device allows,
  /// as in create()). A failed connect sets last_error_detail(), naming the
  /// peer, its address and the step ("multi_channel::create_cm: peer 0
  /// (192.0.2.2:18515): connect: timed out").
  ///
  /// All of the above is opts.channel.transport rdma, the default of
  /// cm_channel_options. With tcp or automatic, each peer first meets over
  /// TCP (a rendezvous at accept_from's TCP socket, see listener::bind(host,
  /// port, channel_transport)): the rank and what each side can do travel
  /// there, and each pair uses RDMA (then through rdma_cm, as above) when
  /// both sides can and neither side's transport is tcp, else TCP on the
  /// rendezvous connection itself, as connect() chooses (transport_of(),
  /// describe(), one log line per fallback). A pair that chose RDMA and
  /// whose rdma_cm connect then fails (each of its steps gets half of
  /// step_timeout: no route, a fabric that carries no RoCE between the two,
  /// another device at the acceptor) falls back to TCP on the rendezvous
  /// connection, which stays open for the connecting side's word on the
  /// outcome; describe() then says why ("peer 0 over TCP: rdma_cm could not
  /// connect: connect: timed out"). That word also stands for a lost RTU at
  /// the accepting side. A node without rdma-core takes
  /// part over TCP; its pd() is then a software one and cq() null. Ranks
  /// are refused as above (the refused client gets errc::rank_refused, its
  /// last_error_detail() says why), and opts.step_timeout bounds the whole
  /// accepting and each peer's rendezvous. Errors then, besides those
  /// above: errc::empty_object (accept > 0 and accept_from an empty
  /// listener), errc::not_honoured (accept > 0 and accept_from has no TCP
  /// socket), the errno of the rendezvous connect
  /// (std::errc::connection_refused: nothing listens there),
  /// std::errc::connection_reset (the acceptor closed without answering),
  /// errc::bad_magic, errc::newer_format, errc::bad_blob (a malformed
  /// answer), or the errno of eventfd(2) or epoll_create1(2); a failed
  /// rendezvous names the peer and step in last_error_detail()
  /// ("multi_channel::create_cm: peer 1 (192.0.2.2:18515): rendezvous:
  /// connect: Connection refused").
  static result<multi_channel> create_cm(listener *accept_from, const cm_channel_options &opts);
  /// The rdma_cm event channel's fd (non-blocking; readable when an event is
  /// waiting), for epoll/poll; -1 when not built with create_cm. When a peer
  /// of create_cm is over TCP, an epoll fd instead, readable also while a
  /// TCP peer's end waits to be taken by next_cm_event().
  int cm_fd() const noexcept;
  /// Takes one rdma_cm event of a peer, waiting up to timeout (0: do not
  /// wait). A peer that disconnects (or whose connection fails) is reported
  /// once, with its index; this side then disconnects it too, which flushes
  /// its queue pair. A TCP peer whose connection ends, for whatever reason
  /// (closed, reset, silent past keepalive, flushed by this side), is
  /// reported once as kind disconnected (event RDMA_CM_EVENT_DISCONNECTED,
  /// status 0; describe() says why) and is failed. Errors: errc::timed_out
  /// (nothing waiting), errc::empty_object (not built with create_cm), or
  /// the errno.
  result<cm_peer_event> next_cm_event(std::chrono::milliseconds timeout = {});
  /// Whether peer is still connected through rdma_cm (false for a channel
  /// built out of band, or after next_cm_event reported it disconnected);
  /// for a TCP peer of create_cm, whether its connection has not ended.
  bool cm_connected(std::size_t peer) const noexcept;

private:
  /// Posts n requests (part_at(i) gives peer, buffer and remote region) in a
  /// scope of this channel and awaits them; defined in multi_channel.cpp.
  template <int K, class PartAt>
  [[gnu::always_inline]] result<void> run(std::size_t n, const PartAt &part_at,
                                          std::chrono::milliseconds timeout,
                                          std::span<work_result> results);
  /// The batch forms of parts, requests of kind K, inline: the busy word,
  /// each part posted straight to its ready queue pair (channel_core::ready;
  /// id base + i) with one request patched per part, then one poll whose
  /// completions are checked (each a success of a part) and, with results,
  /// turned into their parts' outcomes. Out of line: an empty channel or
  /// short results (run_parts_slow), a poll that leaves parts pending or
  /// finds nothing (run_parts_more), and a peer failing the checks or over
  /// TCP, a failed post or poll, an error completion or one of no part
  /// (run_parts_rest, where the batch becomes an ordinary scope).
  template <int K>
  [[gnu::always_inline]] result<void> run_parts(std::span<const part> parts,
                                                std::chrono::milliseconds timeout,
                                                std::span<work_result> results) {
    detail::channel_core *const s = core_;
    if (!s || (!results.empty() && results.size() < parts.size())) [[unlikely]]
      return run_parts_slow(K, parts, timeout, results);
    if (!s->open_scope()) [[unlikely]]
      return detail::channel_core::busy_error();
    // (Read once: the provider's post could, for all the compiler knows,
    // change them. The ids go from base, which no one else changes while
    // the busy word is taken.)
    const std::size_t np = s->nready;
    queue_pair *const *const ready = s->ready.data();
    detail::batch_request<K> wr(s->base);
    const std::size_t n = parts.size();
    const part *const end = parts.data() + n;
    for (const part *p = parts.data(); p != end; p++) {
      queue_pair *q;
      if (p->peer >= np || !(q = ready[p->peer])) [[unlikely]]
        return run_parts_rest(*s, K, parts, wr.w.wr_id - s->base, {}, 0, 0, timeout, results);
      if (int rc = wr.post(*q, p->buf, p->remote)) [[unlikely]]
        return run_parts_rest(*s, K, parts, wr.w.wr_id - s->base, wr.error(*ready[p->peer], rc), 0,
                              0, timeout, results);
      wr.next();
    }
    const std::uint64_t b = s->base; // part i's id is b + i
    if (n == 0) [[unlikely]]         // (nothing to poll for)
      return run_parts_more(*s, K, parts, 0, timeout, results);
    // The usual poll brings in the whole batch: tested first, so that the
    // checks below run n times (a constant for a caller's fixed batch);
    // anything else (fewer, none, a failed or extended poll: negative) goes
    // on out of line.
    const int polled = s->poll_wc();
    if (static_cast<std::size_t>(polled) != n) [[unlikely]]
      return run_parts_more(*s, K, parts, polled, timeout, results);
    // Each a success of a part (ids are unique, so n of them are the n
    // parts); else the rest goes out of line, from the first that is not.
    const completion *const wc = s->wc.data();
    for (const completion *c = wc; c != wc + n; c++) {
      if (c->wr_id - b >= n || c->status != 0) [[unlikely]]
        return run_parts_rest(*s, K, parts, n, {}, static_cast<std::size_t>(c - wc), n, timeout,
                              results);
      // Its outcome, when asked for (if the batch goes on out of line, every
      // outcome is written again there).
      if (!results.empty()) {
        const std::size_t i = c->wr_id - b;
        results[i] = work_result{parts[i].peer, c->wr_id, 0, c->byte_len};
      }
    }
    s->base = b + n; // below every later scope's base
    s->release_busy();
    return {};
  }
  /// run_parts() out of line: on an empty channel, or results shorter than
  /// parts.
  result<void> run_parts_slow(int k, std::span<const part> parts, std::chrono::milliseconds timeout,
                              std::span<work_result> results);
  /// run_parts() once its first poll answered polled, not n (none marked
  /// yet): a failed or extended poll (negative), or m < n completions, which
  /// it checks as run_parts() does and marks; then polls for the rest as
  /// run_parts() does, and goes on as it does (a poll that finds nothing:
  /// the clock, in run_parts_rest). With no parts, only ends the scope.
  static result<void> run_parts_more(detail::channel_core &s, int k, std::span<const part> parts,
                                     int polled, std::chrono::milliseconds timeout,
                                     std::span<work_result> results);
  /// run_parts() once its usual path stopped (the scope is open): parts 0 to
  /// posted - 1 are posted, those whose tag is their id are done, wc[0,
  /// from) are successes of parts not marked yet and wc[from, got) the rest
  /// of that poll; err is a post's or a poll's error. Ends the scope.
  static result<void> run_parts_rest(detail::channel_core &s, int k, std::span<const part> parts,
                                     std::size_t posted, status_code err, std::size_t from,
                                     std::size_t got, std::chrono::milliseconds timeout,
                                     std::span<work_result> results);
  /// Gives up s_: freed now, or by the open scope's end (channel_core::busy).
  void release() noexcept;
  /// Holds s (s_, and core_ for the inline data path).
  void adopt(std::shared_ptr<detail::channel_state> s) noexcept;
  /// What a call on an empty channel answers (errc::empty_object, or
  /// operation_not_supported when RDMA cannot work here).
  static status_code empty_error() noexcept;
  std::shared_ptr<detail::channel_state> s_;
  detail::channel_core *core_ = nullptr; ///< s_'s core (null when empty)
};

} // namespace rdmadl

#endif // RDMADL_MULTI_CHANNEL_HPP
