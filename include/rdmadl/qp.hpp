// SPDX-License-Identifier: MIT
// rdmadl/qp.hpp - queue pairs (RC, UC, UD), their endpoints, work requests,
// send batches, shared receive queues and address handles.
#ifndef RDMADL_QP_HPP
#define RDMADL_QP_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "rdmadl/cq.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"
#include "rdmadl/memory.hpp"

namespace rdmadl {

enum class qp_type { rc, uc, ud };

// What a peer needs to reach a queue pair: QPN, PSN, LID (InfiniBand) and
// GID (RoCE), plus the UD Q_Key. Serialises to a fixed 44-byte blob with a
// magic and a format version.
struct endpoint {
  std::uint32_t qpn = 0;
  std::uint32_t psn = 0;
  std::uint16_t lid = 0;
  gid gid_value;
  std::uint32_t qkey = 0;
  std::uint32_t mtu = 0; // the sender's active MTU in bytes (informational)

  static constexpr std::uint8_t format_version = 1;
  static constexpr std::size_t serialized_size = 44;
  std::array<std::byte, serialized_size> serialize() const noexcept;
  // Parses a blob made by serialize(). Errors (all equal to
  // std::errc::invalid_argument): errc::bad_size, errc::bad_magic,
  // errc::newer_format.
  static result<endpoint> parse(std::span<const std::byte> blob);
  friend bool operator==(const endpoint &, const endpoint &) = default;
};

class shared_receive_queue;

// Creation options. Depths and sizes are clamped to the device's limits.
struct qp_options {
  qp_type type = qp_type::rc;
  std::uint32_t send_depth = 128;
  std::uint32_t recv_depth = 128;
  std::uint32_t max_send_sge = 1;
  std::uint32_t max_recv_sge = 1;
  std::uint32_t max_inline = 0;              // bytes; the provider may grant more
  std::uint8_t port = 0;                     // 0: the first active port
  gid_selector gid;                          // which local GID to use (RoCE)
  int gid_index = -1;                        // >= 0 forces a GID index
  std::uint32_t qkey = 0x11111111;           // UD only
  const shared_receive_queue *srq = nullptr; // receive from an SRQ
  bool wr_api = true; // use ibv_wr_* for batches when context::supports(wr_api)
};

// Options of connect(). Zero means "what the device reports".
struct connect_options {
  std::uint32_t mtu = 0;          // bytes; min(port active MTU, this)
  std::uint8_t max_rd_atomic = 0; // clamped to max_qp_rd_atom / max_qp_init_rd_atom
  std::uint8_t min_rnr_timer = 12;
  std::uint8_t timeout = 14; // 4.096 us * 2^timeout
  std::uint8_t retry_cnt = 7;
  std::uint8_t rnr_retry = 7;
  std::uint8_t sl = 0;
  std::uint8_t traffic_class = 0;
  std::uint8_t hop_limit = 64;
  // QP-level remote rights; the memory region's own rights still apply.
  access remote = access::remote_write | access::remote_read | access::remote_atomic;
};

// Send flags.
enum class send_flags : unsigned { none = 0, signaled = 1, solicited = 2, inline_data = 4 };
constexpr send_flags operator|(send_flags a, send_flags b) noexcept {
  return static_cast<send_flags>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}

// An address handle for UD sends (ibv_create_ah). Move-only.
class address_handle {
public:
  // The path to peer through ctx's port (RoCE: GRH with the selected GID).
  // Errors: operation_not_supported, errc::empty_object, or the errno.
  static result<address_handle> create(const protection_domain &pd, const queue_pair &local,
                                       const endpoint &peer);
  address_handle() noexcept = default;
  address_handle(address_handle &&o) noexcept;
  address_handle &operator=(address_handle &&o) noexcept;
  ~address_handle();
  ::ibv_ah *native_handle() const noexcept { return ah_; }

private:
  ::ibv_ah *ah_ = nullptr;
};

// A shared receive queue. Move-only.
class shared_receive_queue {
public:
  // depth and max_sge are clamped to max_srq_wr / max_srq_sge. Errors:
  // operation_not_supported, errc::empty_object, or the errno.
  static result<shared_receive_queue> create(const protection_domain &pd, std::uint32_t depth = 128,
                                             std::uint32_t max_sge = 1);
  shared_receive_queue() noexcept = default;
  shared_receive_queue(shared_receive_queue &&o) noexcept;
  shared_receive_queue &operator=(shared_receive_queue &&o) noexcept;
  ~shared_receive_queue();
  // Posts one receive buffer. Errors: errc::empty_object, or the errno.
  result<void> post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept;
  ::ibv_srq *native_handle() const noexcept { return srq_; }

private:
  ::ibv_srq *srq_ = nullptr;
};

namespace detail {
struct qp_state;
struct qp_state_deleter {
  void operator()(qp_state *s) const noexcept;
};
} // namespace detail

// A queue pair. Move-only. All post_* calls go straight to the provider
// (ibv_post_send/ibv_post_recv/ibv_wr_*: no dispatch stub, no allocation).
class queue_pair {
public:
  // Creates a QP on pd using send_cq/recv_cq. Selects the port and GID now
  // (see qp_options). Errors: operation_not_supported, errc::empty_object,
  // errc::no_active_port, errc::no_such_gid, or the errno.
  static result<queue_pair> create(const context &ctx, const protection_domain &pd,
                                   const completion_queue &send_cq, const completion_queue &recv_cq,
                                   const qp_options &opts = {});
  // Wraps a QP made elsewhere (rdma_cm) without owning it.
  static result<queue_pair> borrow(::ibv_qp *qp, qp_type type);

  queue_pair() noexcept;
  queue_pair(queue_pair &&o) noexcept;
  queue_pair &operator=(queue_pair &&o) noexcept;
  ~queue_pair();

  // This QP's endpoint, to send to the peer. Errors: errc::empty_object.
  result<endpoint> local_endpoint() const;
  // RESET->INIT->RTR->RTS towards peer (RC/UC), or INIT->RTR->RTS (UD; peer
  // ignored). MTU = min(port active MTU, opts.mtu); rd_atomic clamped to the
  // device. Errors: errc::empty_object, or the errno of ibv_modify_qp.
  result<void> connect(const endpoint &peer, const connect_options &opts = {});
  // Moves the QP to the error state (flushes outstanding work requests).
  result<void> to_error() noexcept;

  result<void> post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept;
  result<void> post_send(const local_slice &buf, std::uint64_t wr_id,
                         send_flags flags = send_flags::signaled) noexcept;
  result<void> post_send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                             send_flags flags = send_flags::signaled) noexcept;
  // UD send to peer through ah.
  result<void> post_send_ud(const local_slice &buf, const address_handle &ah, const endpoint &peer,
                            std::uint64_t wr_id, send_flags flags = send_flags::signaled) noexcept;
  result<void> post_write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                          send_flags flags = send_flags::signaled) noexcept;
  result<void> post_write_imm(const local_slice &buf, const remote_region &dst, std::uint32_t imm,
                              std::uint64_t wr_id,
                              send_flags flags = send_flags::signaled) noexcept;
  result<void> post_read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                         send_flags flags = send_flags::signaled) noexcept;
  // 64-bit atomics on dst (8 bytes, 8-byte aligned); the old value lands in buf.
  result<void> post_fetch_add(const local_slice &buf, const remote_region &dst, std::uint64_t add,
                              std::uint64_t wr_id,
                              send_flags flags = send_flags::signaled) noexcept;
  result<void> post_compare_swap(const local_slice &buf, const remote_region &dst,
                                 std::uint64_t compare, std::uint64_t swap, std::uint64_t wr_id,
                                 send_flags flags = send_flags::signaled) noexcept;

  // A batch of send-queue work requests posted together: ibv_wr_start ..
  // ibv_wr_complete when uses_wr_api(), else one chained ibv_send_wr list.
  send_batch batch() noexcept;
  // Whether batches use the new WR API (ibv_qp_ex) on this QP.
  bool uses_wr_api() const noexcept;

  std::uint32_t qp_num() const noexcept;
  std::uint8_t port() const noexcept;
  qp_type type() const noexcept;
  ::ibv_qp *native_handle() const noexcept;

private:
  friend class send_batch;
  friend class address_handle;
  std::unique_ptr<detail::qp_state, detail::qp_state_deleter> s_;
};

// Work requests collected for one post. Obtained from queue_pair::batch();
// at most max_size requests. The first error is kept and returned by commit().
class send_batch {
public:
  static constexpr std::size_t max_size = 64;
  send_batch &send(const local_slice &buf, std::uint64_t wr_id,
                   send_flags flags = send_flags::signaled) noexcept;
  send_batch &send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                       send_flags flags = send_flags::signaled) noexcept;
  send_batch &write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                    send_flags flags = send_flags::signaled) noexcept;
  send_batch &read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                   send_flags flags = send_flags::signaled) noexcept;
  std::size_t size() const noexcept { return n_; }
  // Posts everything added. Errors: the first error of an add
  // (errc::batch_full, ...), or the provider's errno.
  result<void> commit() noexcept;
  // Drops what was added without posting (also done by the destructor).
  ~send_batch();
  send_batch(const send_batch &) = delete;
  send_batch &operator=(const send_batch &) = delete;

private:
  friend class queue_pair;
  explicit send_batch(detail::qp_state *s) noexcept;
  detail::qp_state *s_;
  std::size_t n_ = 0;
  std::error_code err_;
  bool started_ = false;
};

} // namespace rdmadl

#endif // RDMADL_QP_HPP
