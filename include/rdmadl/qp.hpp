// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/qp.hpp - queue pairs (RC, UC, UD), their endpoints, work requests,
/// send batches, shared receive queues and address handles.
///
/// The data path is inline: post_*() fill a send_request (the layout twin of
/// struct ibv_send_wr, checked in src/abi.cpp) on the stack, pointing at the
/// caller's local_slice (the twin of struct ibv_sge), and call the provider's
/// post_send taken once from the ABI-frozen ibv_context_ops when the queue
/// pair was made: no call into rdmadl, no allocation, no dispatch stub. The
/// provider validates the request (an operation the QP type lacks, a bad
/// length) and answers EINVAL, as ibv_post_send does. For the lowest cost,
/// build a send_request once and post() it again after patching fields.
#ifndef RDMADL_QP_HPP
#define RDMADL_QP_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"
#include "rdmadl/memory.hpp"

namespace rdmadl {

/// A queue pair's transport service.
enum class qp_type {
  rc, ///< reliable connected: sends, RDMA writes and reads, atomics
  uc, ///< unreliable connected: sends and RDMA writes
  ud  ///< unreliable datagram: sends of one MTU at most, through an address handle
};

/// What a peer needs to reach a queue pair: QPN, PSN, LID (InfiniBand) and
/// GID (RoCE), plus the UD Q_Key. Serialises to a fixed 44-byte blob with a
/// magic and a format version.
struct RDMADL_CXX_API endpoint {
  std::uint32_t qpn = 0;  ///< 24 bits
  std::uint32_t psn = 0;  ///< 24 bits
  std::uint16_t lid = 0;  ///< the port's LID (InfiniBand; 0 on RoCE)
  gid gid_value;          ///< the GID the QP sends from (RoCE; on InfiniBand the port GID)
  std::uint32_t qkey = 0; ///< UD: the Q_Key a sender must use; 0 otherwise
  /// The sender's active MTU in bytes; connect() uses no more (0: unknown).
  std::uint32_t mtu = 0;
  /// The type of the sender's GID (IB, RoCE v1, RoCE v2), so connect() can
  /// name a RoCE v1/v2 or InfiniBand/RoCE mismatch; empty: not said (a blob
  /// from a build before this field, or a QP whose GID was not selected).
  std::optional<gid_type> gid_kind;

  /// The blob format serialize() writes; parse() refuses a newer one.
  static constexpr std::uint8_t format_version = 1;
  static constexpr std::size_t serialized_size = 44; ///< bytes of the blob
  /// The blob; QPN and PSN are written as their low 24 bits (all a QP has).
  std::array<std::byte, serialized_size> serialize() const noexcept;
  /// Parses a blob made by serialize(); accepts exactly what serialize() can
  /// produce. Errors (all equal to std::errc::invalid_argument):
  /// errc::bad_size, errc::bad_magic, errc::newer_format, errc::bad_blob
  /// (non-zero reserved bytes, QPN or PSN above 24 bits, an unknown GID type).
  static result<endpoint> parse(std::span<const std::byte> blob);
  /// Field-wise equality.
  friend bool operator==(const endpoint &, const endpoint &) = default;
};

/// Creation options. Depths and sizes are clamped to the device's limits.
struct qp_options {
  qp_type type = qp_type::rc;      ///< the transport service
  std::uint32_t send_depth = 128;  ///< send queue entries (clamped to max_qp_wr)
  std::uint32_t recv_depth = 128;  ///< receive queue entries (clamped; unused with srq)
  std::uint32_t max_send_sge = 1;  ///< scatter/gather elements per send (clamped to max_sge)
  std::uint32_t max_recv_sge = 1;  ///< scatter/gather elements per receive (unused with srq)
  std::uint32_t max_inline = 0;    ///< bytes; the provider may grant more
  std::uint8_t port = 0;           ///< 0: the first active port
  gid_selector gid;                ///< which local GID to use (RoCE)
  int gid_index = -1;              ///< >= 0 forces a GID index
  std::uint32_t qkey = 0x11111111; ///< UD only
  const shared_receive_queue *srq = nullptr; ///< receive from an SRQ (kept alive)
  bool wr_api = true; ///< use ibv_wr_* for batches when context::supports(wr_api)
};

/// The reliable-transport settings of a connected queue pair, one struct for
/// every way of connecting one: queue_pair::connect() (connect_options, and
/// so multi_channel::handshake()), rdmadl::connect() and
/// connection_request::accept() (cm_options), multi_channel::create_cm()
/// (cm_channel_options::channel.connect). The defaults are the same on every
/// path.
///
/// A peer that stopped answering turns into an error completion
/// (IBV_WC_RETRY_EXC_ERR) after retry_count + 1 transmissions of
/// 4.096 us * 2^ack_timeout each (the defaults: 7 times 67 ms).
///
/// retry_count bounds the retransmissions between two acknowledgements of
/// the peer, not per packet, and Soft-RoCE asks for one per message (or per
/// 64 packets): every packet of a message that is lost or reordered costs a
/// retry. The library posts messages as given; on a lossy path keep work
/// requests to a few MTUs (at MTU 1024 and 5% loss a 64 KiB send needs ~4.5
/// retries and fails, 4 KiB sends ~0.3: ci/vm/README.md, "Impaired frames").
struct transport_options {
  /// Each transmission waits 4.096 us * 2^ack_timeout for its
  /// acknowledgement (0 to 31). rdma_cm paths set it through
  /// RDMA_OPTION_ID_ACK_TIMEOUT (rdma-core 19, Linux 4.17; else the errno),
  /// and there 0 keeps rdma_cm's choice from the route (about 2.3 s a try on
  /// Soft-RoCE); queue_pair::connect() passes 0 on, which InfiniBand reads
  /// as "wait for ever".
  std::uint8_t ack_timeout = 14;
  /// Retransmissions before the error completion (0 to 7, more is clamped).
  /// 6, not 7, because Soft-RoCE reads 7 as "retry for ever", so a dead peer
  /// would never show.
  std::uint8_t retry_count = 6;
  /// RC: retries while the peer has no receive posted (0 to 7, more is
  /// clamped; 7: for ever).
  std::uint8_t rnr_retry = 7;
  /// RC: how long a sender that found no receive posted here waits before
  /// retrying (IB encoding: 12 = 0.64 ms). rdma_cm paths leave it to the
  /// kernel: any other value there is errc::not_honoured.
  std::uint8_t min_rnr_timer = 12;
  /// Path MTU in bytes; 0: min(port active MTU, peer's MTU), else no more
  /// than this. rdma_cm paths take it from the route: non-zero there is
  /// errc::not_honoured.
  std::uint32_t mtu = 0;
  /// RDMA reads and atomics in flight, each way; 0: what the device reports
  /// (max_qp_rd_atom as responder, max_qp_init_rd_atom as initiator), else
  /// clamped to those.
  std::uint8_t max_rd_atomic = 0;
};

/// Options of queue_pair::connect().
struct connect_options {
  transport_options transport;    ///< ACK timeout, retries, RNR timer, MTU, rd_atomic
  std::uint8_t sl = 0;            ///< service level of the path (InfiniBand)
  std::uint8_t traffic_class = 0; ///< GRH traffic class (RoCE, or a peer with a GID)
  std::uint8_t hop_limit = 64;    ///< GRH hop limit (RoCE, or a peer with a GID)
  /// QP-level remote rights; the memory region's own rights still apply.
  access remote = access::remote_write | access::remote_read | access::remote_atomic;
};

/// Send flags: enum ibv_send_flags values.
enum class send_flags : unsigned {
  none = 0,       ///< unsignaled: a completion only if the request fails
  fence = 1,      ///< IBV_SEND_FENCE: wait for earlier reads and atomics to finish first
  signaled = 2,   ///< IBV_SEND_SIGNALED: a completion also on success
  solicited = 4,  ///< IBV_SEND_SOLICITED: wakes a peer armed with request_notify(true)
  inline_data = 8 ///< IBV_SEND_INLINE: the data is copied into the request (up to max_inline)
};
/// The union of two sets of flags.
constexpr send_flags operator|(send_flags a, send_flags b) noexcept {
  return static_cast<send_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

/// Send operations: enum ibv_wr_opcode values.
enum class wr_opcode : int {
  rdma_write = 0,     ///< IBV_WR_RDMA_WRITE
  rdma_write_imm = 1, ///< IBV_WR_RDMA_WRITE_WITH_IMM: a write that also takes a peer's receive
  send = 2,           ///< IBV_WR_SEND
  send_imm = 3,       ///< IBV_WR_SEND_WITH_IMM
  rdma_read = 4,      ///< IBV_WR_RDMA_READ
  comp_swap = 5,      ///< IBV_WR_ATOMIC_CMP_AND_SWP
  fetch_add = 6,      ///< IBV_WR_ATOMIC_FETCH_AND_ADD
};

/// A send work request: the layout twin of struct ibv_send_wr. The factory
/// functions fill what each operation needs; a prepared request can be posted
/// again and again with queue_pair::post() after changing wr_id or a slice.
/// sg_list must stay valid until post() returns (not until completion).
struct send_request {
  std::uint64_t wr_id;        ///< returned in the request's completion
  send_request *next;         ///< the next request of a chain, or null
  const local_slice *sg_list; ///< the scatter/gather elements (num_sge of them)
  int num_sge;                ///< the number of elements at sg_list (0: no data)
  wr_opcode opcode;           ///< the operation
  send_flags flags;           ///< signaled, fence, solicited, inline
  std::uint32_t imm_be;       ///< network byte order
  /// The operation's target: rdma (writes, reads), atomic (compare-and-swap,
  /// fetch-and-add: compare_add holds the compare or the add value) or ud
  /// (address handle, remote QPN and Q_Key), as in struct ibv_send_wr.
  union {
    struct {
      std::uint64_t remote_addr;
      std::uint32_t rkey;
    } rdma;
    struct {
      std::uint64_t remote_addr, compare_add, swap;
      std::uint32_t rkey;
    } atomic;
    struct {
      ::ibv_ah *ah;
      std::uint32_t remote_qpn, remote_qkey;
    } ud;
  } wr;
  std::uint32_t xrc_remote_srqn; ///< XRC only: never used by rdmadl
  std::uint64_t reserved_[6];    ///< bind_mw / tso: never used by rdmadl

  /// A send of buf.
  static send_request send(const local_slice &buf, std::uint64_t wr_id,
                           send_flags f = send_flags::signaled) noexcept {
    send_request w;
    w.base(buf, wr_id, wr_opcode::send, f);
    return w;
  }
  /// A send of buf with immediate data imm (host byte order).
  static send_request send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                               send_flags f = send_flags::signaled) noexcept {
    send_request w;
    w.base(buf, wr_id, wr_opcode::send_imm, f);
    w.imm_be = detail::be32(imm);
    return w;
  }
  /// An RDMA write of buf to dst.
  static send_request write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                            send_flags f = send_flags::signaled) noexcept {
    send_request w;
    w.base(buf, wr_id, wr_opcode::rdma_write, f);
    w.wr.rdma.remote_addr = dst.addr;
    w.wr.rdma.rkey = dst.rkey;
    return w;
  }
  /// An RDMA write of buf to dst with immediate data imm (host byte order),
  /// which the peer receives in a completion (it takes one of its receives).
  static send_request write_imm(const local_slice &buf, const remote_region &dst, std::uint32_t imm,
                                std::uint64_t wr_id, send_flags f = send_flags::signaled) noexcept {
    send_request w = write(buf, dst, wr_id, f);
    w.opcode = wr_opcode::rdma_write_imm;
    w.imm_be = detail::be32(imm);
    return w;
  }
  /// An RDMA read of src into buf.
  static send_request read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                           send_flags f = send_flags::signaled) noexcept {
    send_request w = write(buf, src, wr_id, f);
    w.opcode = wr_opcode::rdma_read;
    return w;
  }
  /// 64-bit atomics on dst (8 bytes, 8-byte aligned); the old value lands in buf.
  static send_request fetch_add(const local_slice &buf, const remote_region &dst, std::uint64_t add,
                                std::uint64_t wr_id, send_flags f = send_flags::signaled) noexcept {
    send_request w;
    w.base(buf, wr_id, wr_opcode::fetch_add, f);
    w.wr.atomic.remote_addr = dst.addr;
    w.wr.atomic.rkey = dst.rkey;
    w.wr.atomic.compare_add = add;
    w.wr.atomic.swap = 0;
    return w;
  }
  /// A 64-bit compare-and-swap on dst (8 bytes, 8-byte aligned): swap is
  /// stored when the value there equals compare; the old value lands in buf.
  static send_request compare_swap(const local_slice &buf, const remote_region &dst,
                                   std::uint64_t compare, std::uint64_t swap, std::uint64_t wr_id,
                                   send_flags f = send_flags::signaled) noexcept {
    send_request w = fetch_add(buf, dst, compare, wr_id, f);
    w.opcode = wr_opcode::comp_swap;
    w.wr.atomic.swap = swap;
    return w;
  }
  /// A UD send to peer's QPN and Q_Key through ah.
  static send_request send_ud(const local_slice &buf, const address_handle &ah,
                              const endpoint &peer, std::uint64_t wr_id,
                              send_flags f = send_flags::signaled) noexcept;

private:
  void base(const local_slice &buf, std::uint64_t id, wr_opcode op, send_flags f) noexcept {
    wr_id = id;
    next = nullptr;
    sg_list = &buf;
    num_sge = 1;
    opcode = op;
    flags = f;
    imm_be = 0;
  }
};

/// A receive work request: the layout twin of struct ibv_recv_wr.
struct recv_request {
  std::uint64_t wr_id;        ///< returned in the request's completion
  recv_request *next;         ///< the next request of a chain, or null
  const local_slice *sg_list; ///< where the data lands (num_sge elements)
  int num_sge;                ///< the number of elements at sg_list
};

namespace detail {
using post_send_fn = int (*)(::ibv_qp *, ::ibv_send_wr *, ::ibv_send_wr **);
using post_recv_fn = int (*)(::ibv_qp *, ::ibv_recv_wr *, ::ibv_recv_wr **);
using post_srq_recv_fn = int (*)(::ibv_srq *, ::ibv_recv_wr *, ::ibv_recv_wr **);
/// The error of a call on an empty object (out of line, error path only).
RDMADL_CXX_API status_code empty_status() noexcept;
/// @name The post functions of an empty queue pair or SRQ
/// What an empty (default-constructed or moved-from) handle holds instead of
/// the provider's function: they fail with ENXIO (setting *bad), so a post
/// needs no null check; its error path then answers errc::empty_object.
/**@{*/
RDMADL_CXX_API int empty_post_send(::ibv_qp *, ::ibv_send_wr *wr, ::ibv_send_wr **bad) noexcept;
RDMADL_CXX_API int empty_post_recv(::ibv_qp *, ::ibv_recv_wr *wr, ::ibv_recv_wr **bad) noexcept;
RDMADL_CXX_API int empty_post_srq_recv(::ibv_srq *, ::ibv_recv_wr *wr,
                                       ::ibv_recv_wr **bad) noexcept;
/**@}*/
} // namespace detail

/// An address handle for UD sends (ibv_create_ah). Keeps its PD alive.
/// Move-only.
class RDMADL_CXX_API address_handle {
public:
  /// The path to peer through local's port and GID (RoCE: GRH with it).
  /// Errors: operation_not_supported, errc::empty_object, or the errno.
  static result<address_handle> create(const protection_domain &pd, const queue_pair &local,
                                       const endpoint &peer);
  /// An empty address handle.
  address_handle() noexcept = default;
  /// Moves; the source becomes empty.
  address_handle(address_handle &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former address
  /// handle is released.
  address_handle &operator=(address_handle &&o) noexcept = default;
  /// Releases the address handle (ibv_destroy_ah).
  ~address_handle() = default;
  /// The rdma-core address handle; null when empty.
  ::ibv_ah *native_handle() const noexcept { return ah_; }
  /// False for an empty (default-constructed or moved-from) address handle.
  explicit operator bool() const noexcept { return ah_.get() != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_ah *> ah_;
  std::shared_ptr<detail::ah_node> n_;
};

inline send_request send_request::send_ud(const local_slice &buf, const address_handle &ah,
                                          const endpoint &peer, std::uint64_t wr_id,
                                          send_flags f) noexcept {
  send_request w;
  w.base(buf, wr_id, wr_opcode::send, f);
  w.wr.ud.ah = ah.native_handle();
  w.wr.ud.remote_qpn = peer.qpn;
  w.wr.ud.remote_qkey = peer.qkey;
  return w;
}

/// A shared receive queue. Keeps its PD alive. Move-only.
class RDMADL_CXX_API shared_receive_queue {
public:
  /// depth and max_sge are clamped to max_srq_wr / max_srq_sge. Errors:
  /// operation_not_supported, errc::empty_object, or the errno.
  static result<shared_receive_queue> create(const protection_domain &pd, std::uint32_t depth = 128,
                                             std::uint32_t max_sge = 1);
  /// An empty SRQ.
  shared_receive_queue() noexcept = default;
  /// Moves; the source becomes empty.
  shared_receive_queue(shared_receive_queue &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former SRQ is
  /// released (destroyed when no queue pair uses it).
  shared_receive_queue &operator=(shared_receive_queue &&o) noexcept = default;
  /// Releases this handle; the SRQ is destroyed with its last queue pair.
  ~shared_receive_queue() = default;
  /// Posts one receive buffer (inline, straight to the provider). Errors:
  /// errc::empty_object, or the errno.
  result<void> post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept {
    recv_request w{wr_id, nullptr, &buf, buf.length != 0};
    ::ibv_recv_wr *bad;
    if (int rc = post_.get()(srq_, reinterpret_cast<::ibv_recv_wr *>(&w), &bad)) [[unlikely]]
      return srq_.get() ? status_code::from_rc(rc) : detail::empty_status();
    return {};
  }
  /// The rdma-core SRQ; null when empty.
  ::ibv_srq *native_handle() const noexcept { return srq_; }
  /// False for an empty (default-constructed or moved-from) SRQ.
  explicit operator bool() const noexcept { return srq_.get() != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_srq *> srq_;
  detail::take<detail::post_srq_recv_fn, &detail::empty_post_srq_recv> post_;
  std::shared_ptr<detail::srq_node> n_;
};

/// A queue pair. Keeps its PD, CQs and SRQ alive. Move-only.
class RDMADL_CXX_API queue_pair {
public:
  /// Creates a QP on pd using send_cq/recv_cq. Selects the port and GID now
  /// (see qp_options). Errors: operation_not_supported, errc::empty_object,
  /// errc::no_active_port, errc::no_such_gid, or the errno (when the device
  /// refuses the QP, last_error_detail() names the call and its max_qp, and
  /// for EAGAIN the rdma cgroup's rdma.max).
  static result<queue_pair> create(const context &ctx, const protection_domain &pd,
                                   const completion_queue &send_cq, const completion_queue &recv_cq,
                                   const qp_options &opts = {});
  /// Wraps a QP made elsewhere without owning it (the caller keeps it alive).
  /// Port, LID, link layer and GID come from the QP when it is past RESET
  /// (its port, and the source GID index of its address vector when
  /// connected); otherwise from opts.port (0: first active port) and
  /// opts.gid / opts.gid_index, as create() selects them. Errors:
  /// errc::empty_object, errc::no_active_port, errc::no_such_gid, the errno.
  static result<queue_pair> borrow(::ibv_qp *qp, qp_type type, const qp_options &opts = {});

  /// An empty queue pair.
  queue_pair() noexcept = default;
  /// Moves; the source becomes empty.
  queue_pair(queue_pair &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former QP is released.
  queue_pair &operator=(queue_pair &&o) noexcept = default;
  /// Releases this handle; the QP is destroyed once nothing
  /// holds it (an open send_batch does), unless it was borrowed.
  ~queue_pair() = default;

  /// This QP's endpoint, to send to the peer. Errors: errc::empty_object.
  result<endpoint> local_endpoint() const;
  /// RESET->INIT->RTR->RTS towards peer (RC/UC), or INIT->RTR->RTS (UD; peer
  /// ignored). Path MTU = min(our port's active MTU, peer.mtu when set,
  /// opts.mtu when set), so both sides agree; rd_atomic clamped to the device.
  /// Before any modify, checks that peer can be reached from this QP's port:
  /// errc::bad_peer_qpn (QPN 0, 1 or over 24 bits), errc::bad_peer_mtu (not
  /// 256..4096), errc::no_lid (InfiniBand port, ours or the peer's, with LID 0),
  /// errc::gid_mismatch (RoCE: peer GID zero, IPv4 vs IPv6, link-local vs
  /// global, another /64 subnet on RoCE v1). Other errors: errc::empty_object,
  /// or the errno of ibv_modify_qp. Every failure but empty_object sets
  /// last_error_detail(): what is wrong and what to set (for a failed modify,
  /// every path field given: MTUs, QPN, PSN, LIDs, GIDs and GID type).
  result<void> connect(const endpoint &peer, const connect_options &opts = {});
  /// Moves the QP to the error state (flushes outstanding work requests).
  result<void> to_error() noexcept;

  /// Posts wr (a chain through next) as ibv_post_send does, unchecked: a UD
  /// QP needs wr.ud set, and only RC carries reads and atomics. Errors:
  /// errc::empty_object, or the provider's errno.
  result<void> post(send_request &wr) noexcept { return send_now(wr); }
  /// Posts wr (a chain through next) to the receive queue. Errors:
  /// errc::empty_object, or the provider's errno.
  result<void> post(recv_request &wr) noexcept {
    ::ibv_recv_wr *bad;
    if (int rc = recv_.get()(qp_, reinterpret_cast<::ibv_recv_wr *>(&wr), &bad)) [[unlikely]]
      return failed(rc);
    return {};
  }
  /// Posts one receive buffer (a zero-length slice posts no scatter
  /// element). Errors: as post(recv_request &).
  result<void> post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept {
    recv_request w{wr_id, nullptr, &buf, buf.length != 0};
    return post(w);
  }
  /// @name Posting one operation
  /// Each posts one work request with the one element buf, inline and
  /// straight to the provider; wr_id comes back in its completion (signaled
  /// by default). They refuse what the QP type cannot carry with
  /// errc::wrong_qp_type (a send without an address on UD, one-sided on UD,
  /// reads and atomics on UC), before the provider sees it. Errors:
  /// errc::wrong_qp_type, errc::empty_object, or the provider's errno.
  /**@{*/
  /// Sends buf (RC, UC).
  result<void> post_send(const local_slice &buf, std::uint64_t wr_id,
                         send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_send)) [[unlikely]]
      return refused();
    send_request w = send_request::send(buf, wr_id, flags);
    return send_now(w);
  }
  /// Sends buf with immediate data imm (host byte order) (RC, UC).
  result<void> post_send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                             send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_send)) [[unlikely]]
      return refused();
    send_request w = send_request::send_imm(buf, imm, wr_id, flags);
    return send_now(w);
  }
  /// Sends buf to peer's QPN and Q_Key through ah (UD; refused without ah).
  result<void> post_send_ud(const local_slice &buf, const address_handle &ah, const endpoint &peer,
                            std::uint64_t wr_id, send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_send_ud) || !ah) [[unlikely]]
      return refused();
    send_request w = send_request::send_ud(buf, ah, peer, wr_id, flags);
    return send_now(w);
  }
  /// Writes buf to dst (RC, UC).
  result<void> post_write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                          send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_write)) [[unlikely]]
      return refused();
    send_request w = send_request::write(buf, dst, wr_id, flags);
    return send_now(w);
  }
  /// Writes buf to dst with immediate data imm (host byte order), which the
  /// peer receives in a completion (it takes one of its receives) (RC, UC).
  result<void> post_write_imm(const local_slice &buf, const remote_region &dst, std::uint32_t imm,
                              std::uint64_t wr_id,
                              send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_write)) [[unlikely]]
      return refused();
    send_request w = send_request::write_imm(buf, dst, imm, wr_id, flags);
    return send_now(w);
  }
  /// Reads src into buf (RC).
  result<void> post_read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                         send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_read)) [[unlikely]]
      return refused();
    send_request w = send_request::read(buf, src, wr_id, flags);
    return send_now(w);
  }
  /// Adds add to the 64-bit value at dst (8 bytes, 8-byte aligned); the old
  /// value lands in buf (RC).
  result<void> post_fetch_add(const local_slice &buf, const remote_region &dst, std::uint64_t add,
                              std::uint64_t wr_id,
                              send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_read)) [[unlikely]]
      return refused();
    send_request w = send_request::fetch_add(buf, dst, add, wr_id, flags);
    return send_now(w);
  }
  /// Stores swap at dst (8 bytes, 8-byte aligned) when the value there
  /// equals compare; the old value lands in buf (RC).
  result<void> post_compare_swap(const local_slice &buf, const remote_region &dst,
                                 std::uint64_t compare, std::uint64_t swap, std::uint64_t wr_id,
                                 send_flags flags = send_flags::signaled) noexcept {
    if (!(ops_.get() & op_read)) [[unlikely]]
      return refused();
    send_request w = send_request::compare_swap(buf, dst, compare, swap, wr_id, flags);
    return send_now(w);
  }
  /**@}*/

  /// A batch of send-queue work requests posted together: ibv_wr_start to
  /// ibv_wr_complete when uses_wr_api(), else one chained ibv_send_wr list.
  /// At most one batch per QP is open at a time; a second one fails every add
  /// and its commit() with errc::batch_busy. The batch keeps the QP alive.
  send_batch batch() noexcept;
  /// Whether batches use the new WR API (ibv_qp_ex) on this QP.
  bool uses_wr_api() const noexcept;

  /// The QP number; 0 when empty.
  std::uint32_t qp_num() const noexcept { return qpn_; }
  /// The port it uses (from 1); 0 when empty.
  std::uint8_t port() const noexcept;
  /// Its transport service (rc when empty).
  qp_type type() const noexcept;
  /// The rdma-core queue pair; null when empty.
  ::ibv_qp *native_handle() const noexcept { return qp_; }
  /// False for an empty (default-constructed or moved-from) queue pair.
  explicit operator bool() const noexcept { return qp_.get() != nullptr; }

private:
  friend struct detail::access;
  friend class send_batch;
  template <int K> friend struct detail::batch_request;
  /// What the QP type carries (ops_): sends without an address (RC, UC),
  /// writes (RC, UC), reads and atomics (RC), UD sends. 0 when empty.
  static constexpr std::uint8_t op_send = 1, op_write = 2, op_read = 4, op_send_ud = 8;
  result<void> send_now(send_request &w) noexcept {
    ::ibv_send_wr *bad;
    if (int rc = send_.get()(qp_, reinterpret_cast<::ibv_send_wr *>(&w), &bad)) [[unlikely]]
      return failed(rc);
    return {};
  }
  /// The error of a post that returned rc: the empty-object error when there
  /// is no QP (its post functions are the empty_post_* stubs), else rc's.
  status_code failed(int rc) const noexcept {
    return qp_.get() ? status_code::from_rc(rc) : detail::empty_status();
  }
  /// errc::wrong_qp_type, or the empty-object error when there is no QP.
  status_code refused() const noexcept;
  detail::take<::ibv_qp *> qp_;
  detail::take<std::uint8_t> ops_;
  detail::take<detail::post_send_fn, &detail::empty_post_send> send_;
  detail::take<detail::post_recv_fn, &detail::empty_post_recv> recv_;
  detail::take<std::uint32_t> qpn_;
  std::shared_ptr<detail::qp_node> n_;
};

/// Work requests collected for one post: an exclusive guard over its queue
/// pair's batch storage, obtained from queue_pair::batch(); neither copied nor
/// moved, so it lives in the scope that opened it. At most max_size requests.
/// The first error is kept and returned by commit().
class RDMADL_CXX_API send_batch {
public:
  static constexpr std::size_t max_size = 64; ///< requests one batch holds
  /// @name Adding a request
  /// Each adds the operation of the queue_pair::post_* of the same name and
  /// returns *this. Nothing fails here: the first error (errc::wrong_qp_type,
  /// errc::batch_full past max_size, errc::batch_busy, errc::empty_object)
  /// is kept, later adds are ignored, and commit() returns it.
  /**@{*/
  /// Adds the operation of that name (see above).
  send_batch &send(const local_slice &buf, std::uint64_t wr_id,
                   send_flags flags = send_flags::signaled) noexcept;
  send_batch &send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                       send_flags flags = send_flags::signaled) noexcept;
  send_batch &write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                    send_flags flags = send_flags::signaled) noexcept;
  send_batch &write_imm(const local_slice &buf, const remote_region &dst, std::uint32_t imm,
                        std::uint64_t wr_id, send_flags flags = send_flags::signaled) noexcept;
  send_batch &read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                   send_flags flags = send_flags::signaled) noexcept;
  /**@}*/
  /// The number of requests added since the batch opened or last committed.
  std::size_t size() const noexcept { return n_; }
  /// Posts everything added. Errors: the first error of an add
  /// (errc::wrong_qp_type, errc::batch_full, errc::batch_busy,
  /// errc::empty_object), errc::empty_span when nothing was added, or the
  /// provider's errno. The batch can be filled again afterwards.
  result<void> commit() noexcept;
  /// Drops what was added without posting, and releases the queue pair.
  ~send_batch();
  send_batch(const send_batch &) = delete;
  send_batch &operator=(const send_batch &) = delete;

private:
  friend class queue_pair;
  explicit send_batch(const std::shared_ptr<detail::qp_node> &q) noexcept;
  void add(const send_request &w) noexcept;
  std::shared_ptr<detail::qp_node> q_;
  std::size_t n_ = 0;
  status_code err_;
  bool started_ = false;
  bool owner_ = false;
};

} // namespace rdmadl

#endif // RDMADL_QP_HPP
