// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/cq.hpp - completion queues, completions and poll sessions.
///
/// completion is the layout twin of struct ibv_wc (frozen by libibverbs.so.1;
/// every offset is checked in src/abi.cpp), so poll() hands the caller's span
/// straight to the provider's poll_cq: no copy, no conversion, no call into
/// rdmadl. Fields are rdma-core's raw values; the accessors convert.
#ifndef RDMADL_CQ_HPP
#define RDMADL_CQ_HPP

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <memory>
#include <span>
#include <system_error>

#include "rdmadl/completion_channel.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"

namespace rdmadl {

/// enum ibv_wc_opcode values.
enum class wc_opcode : int {
  send = 0,                 ///< IBV_WC_SEND: a send finished
  rdma_write = 1,           ///< IBV_WC_RDMA_WRITE: an RDMA write finished
  rdma_read = 2,            ///< IBV_WC_RDMA_READ: an RDMA read finished
  comp_swap = 3,            ///< IBV_WC_COMP_SWAP: a compare-and-swap finished
  fetch_add = 4,            ///< IBV_WC_FETCH_ADD: a fetch-and-add finished
  bind_mw = 5,              ///< IBV_WC_BIND_MW: a memory window bind finished
  local_inv = 6,            ///< IBV_WC_LOCAL_INV: a local invalidate finished
  tso = 7,                  ///< IBV_WC_TSO: a TCP segmentation offload send finished
  flush = 8,                ///< IBV_WC_FLUSH: a flush finished
  atomic_write = 9,         ///< IBV_WC_ATOMIC_WRITE: an atomic write finished
  recv = 128,               ///< IBV_WC_RECV: a receive took an incoming send
  recv_rdma_with_imm = 129, ///< IBV_WC_RECV_RDMA_WITH_IMM: a receive took a write's immediate
};

namespace detail {
constexpr std::uint32_t be32(std::uint32_t v) noexcept {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  return __builtin_bswap32(v);
#else
  return v;
#endif
}
} // namespace detail

/// One work completion: the layout twin of struct ibv_wc.
struct completion {
  std::uint64_t wr_id = 0; ///< the work request's wr_id, as posted
  int status = 0;          ///< enum ibv_wc_status; 0 = success
  /// enum ibv_wc_opcode; valid only when ok() (rdma-core leaves it undefined
  /// on error).
  wc_opcode opcode = wc_opcode::send;
  std::uint32_t vendor_err = 0; ///< provider's own code, kept beside status
  std::uint32_t byte_len = 0;   ///< bytes transferred (receives: bytes that arrived)
  std::uint32_t imm_be = 0;     ///< immediate data, network byte order (see imm())
  /// @name Queue pair numbers
  /**@{*/
  /// qp_num: the local queue pair's number; src_qp: the sender's QP number
  /// (UD receives).
  std::uint32_t qp_num = 0, src_qp = 0;
  /**@}*/
  unsigned wc_flags = 0; ///< IBV_WC_GRH = 1, IBV_WC_WITH_IMM = 2, ...
  /// @name Addressing of UD receives
  /**@{*/
  /// The P_Key index (GSI only), the sender's LID, its service level and the
  /// destination LID path bits (InfiniBand).
  std::uint16_t pkey_index = 0, slid = 0;
  std::uint8_t sl = 0, dlid_path_bits = 0;
  /**@}*/

  /// True when the work request succeeded (status 0).
  bool ok() const noexcept { return status == 0; }
  /// Whether the completion carries immediate data (success only).
  bool has_imm() const noexcept { return status == 0 && (wc_flags & 2u); }
  /// The immediate data in host byte order (0 without).
  std::uint32_t imm() const noexcept { return has_imm() ? detail::be32(imm_be) : 0; }
  /// The status as an error_code in wc_category() (0 = success).
  std::error_code error() const noexcept {
    return status ? std::error_code(status, wc_category()) : std::error_code();
  }
};

/// Options of completion_queue::create().
struct cq_options {
  int depth = 256; ///< clamped to [1, the device's max_cqe]
  /// For request_notify()/wait(); the queue keeps the channel alive.
  const completion_channel *channel = nullptr;
  /// The completion vector (interrupt) that signals the channel: 0 to the
  /// context's num_comp_vectors - 1.
  int comp_vector = 0;
  /// Create it with ibv_create_cq_ex when context::supports(extended_cq).
  /// poll() then reads it through ibv_start_poll (out of line); the default,
  /// a plain queue, is the one poll() hands straight to the provider.
  bool extended = false;
};

namespace detail {
using poll_cq_fn = int (*)(::ibv_cq *, int, ::ibv_wc *);
using notify_cq_fn = int (*)(::ibv_cq *, int);
/// The poll function of an empty or extended queue, in place of the
/// provider's: it returns -1 (a failure), so poll() needs no check before
/// the call and goes out of line (poll_other) only when it fails.
RDMADL_CXX_API int other_poll_cq(::ibv_cq *, int, ::ibv_wc *) noexcept;
} // namespace detail

/// A completion queue. Keeps its context (and channel) alive; destroyed when it
/// and the queue pairs using it are gone. Move-only.
class RDMADL_CXX_API completion_queue {
public:
  /// Creates a queue on ctx. Errors: operation_not_supported,
  /// errc::empty_object, or the errno (when the device refuses the CQ,
  /// last_error_detail() names the call and its max_cq, and for EAGAIN the
  /// rdma cgroup's rdma.max).
  static result<completion_queue> create(const context &ctx, const cq_options &opts = {});

  /// An empty queue.
  completion_queue() noexcept = default;
  /// Moves; the source becomes empty.
  completion_queue(completion_queue &&o) noexcept = default;
  /// Moves; the source becomes empty and this handle's former queue is
  /// released (destroyed when no queue pair uses it).
  completion_queue &operator=(completion_queue &&o) noexcept = default;
  /// Releases this handle; the queue is destroyed with its last queue pair.
  ~completion_queue() = default;

  /// Takes up to out.size() completions without blocking; returns how many.
  /// Inline: calls the provider's poll_cq with out itself. Errors:
  /// errc::empty_span, errc::empty_object, or the provider's errno.
  result<std::size_t> poll(std::span<completion> out) noexcept {
    if (out.empty()) [[unlikely]]
      return poll_other(out);
    int n = poll_.get()(cq_, out.size() > INT_MAX ? INT_MAX : static_cast<int>(out.size()),
                        reinterpret_cast<::ibv_wc *>(out.data()));
    if (n < 0) [[unlikely]]
      return poll_other(out);
    return static_cast<std::size_t>(n);
  }
  /// Polls until out is full or timeout passed (busy-polling). Returns how
  /// many arrived (fewer than out.size() on timeout). A timeout of
  /// milliseconds::max() never expires. Errors: errc::timed_out when none
  /// arrived, as poll().
  result<std::size_t> poll_wait(std::span<completion> out, std::chrono::milliseconds timeout);
  /// A poll session (see poll_session): the extended-CQ way of reading
  /// completions field by field, or one completion at a time on a plain queue.
  result<poll_session> start_poll() noexcept;
  /// Arms the queue's channel for the next completion (solicited only if asked).
  result<void> request_notify(bool solicited_only = false) noexcept {
    if (!cq_.get()) [[unlikely]]
      return empty_status();
    if (int rc = notify_.get()(cq_, solicited_only ? 1 : 0)) [[unlikely]]
      return status_code::from_rc(rc);
    return {};
  }
  /// True when created with ibv_create_cq_ex (poll() then reads it through
  /// ibv_start_poll/ibv_next_poll).
  bool extended() const noexcept { return ex_.get() != nullptr; }
  /// The number of entries the provider made (the clamped depth asked for,
  /// or more); 0 when empty.
  int depth() const noexcept;

  /// The rdma-core queue (also for an extended one); null when empty.
  ::ibv_cq *native_handle() const noexcept { return cq_; }
  /// The extended queue; null unless extended().
  ::ibv_cq_ex *native_ex_handle() const noexcept { return ex_; }
  /// False for an empty (default-constructed or moved-from) queue.
  explicit operator bool() const noexcept { return cq_.get() != nullptr; }

private:
  friend struct detail::access;
  friend struct detail::channel_core;
  static status_code empty_status() noexcept;
  result<std::size_t> poll_other(std::span<completion> out) noexcept;
  detail::take<::ibv_cq *> cq_;
  detail::take<detail::poll_cq_fn, &detail::other_poll_cq> poll_;
  detail::take<detail::notify_cq_fn> notify_;
  detail::take<::ibv_cq_ex *> ex_;
  std::shared_ptr<detail::cq_node> n_;
};

/// Reading completions one at a time, each field on demand
/// (ibv_start_poll/ibv_next_poll/ibv_end_poll and ibv_wc_read_* on an
/// extended queue; one ibv_poll_cq per step on a plain one). The session ends
/// (ibv_end_poll) when the object dies; keep at most one per queue, and do not
/// poll() the queue while it lives. Move-only; keeps the queue alive.
///
/// @code
/// auto s = cq.start_poll();
/// for (; s && *s; (void)s->next()) use(s->wr_id(), s->status());
/// @endcode
class RDMADL_CXX_API poll_session {
public:
  /// An empty session (never on a completion).
  poll_session() noexcept = default;
  /// Moves; the source becomes empty.
  poll_session(poll_session &&o) noexcept = default;
  /// Ends this session (ibv_end_poll), then takes o's; o becomes empty.
  poll_session &operator=(poll_session &&o) noexcept;
  /// Ends the session (ibv_end_poll on an extended queue).
  ~poll_session();

  /// True while positioned on a completion.
  explicit operator bool() const noexcept { return on_; }
  /// Moves to the next completion. Returns false when there is none (the
  /// session then stays empty). Errors: the provider's errno.
  result<bool> next() noexcept;

  /// @name The current completion
  /// Its fields, each read on demand; 0 (false, send) when the session is
  /// not on a completion.
  /**@{*/
  /// The field of that name (see completion); 0 when not on a completion.
  std::uint64_t wr_id() const noexcept;
  int status() const noexcept;
  /// status() as an error_code in wc_category(); 0 (success) when not on one.
  std::error_code error() const noexcept;
  wc_opcode opcode() const noexcept; ///< valid when status() == 0
  std::uint32_t vendor_err() const noexcept;
  std::uint32_t byte_len() const noexcept;
  /// Whether it carries immediate data (success only); false when not on one.
  bool has_imm() const noexcept;
  std::uint32_t imm() const noexcept; ///< host byte order; 0 without
  std::uint32_t qp_num() const noexcept;
  std::uint32_t src_qp() const noexcept;
  std::uint16_t slid() const noexcept;
  /**@}*/

private:
  friend class completion_queue;
  void end() noexcept;
  detail::take<::ibv_cq_ex *> ex_;
  detail::take<bool> on_;
  completion cur_; ///< plain queues
  std::shared_ptr<detail::cq_node> n_;
};

} // namespace rdmadl

#endif // RDMADL_CQ_HPP
