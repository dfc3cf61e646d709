// SPDX-License-Identifier: MIT
// rdmadl/cq.hpp - completion queues and completions.
#ifndef RDMADL_CQ_HPP
#define RDMADL_CQ_HPP

#include <cstdint>
#include <span>
#include <system_error>

#include "rdmadl/channel.hpp"
#include "rdmadl/device.hpp"
#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"

namespace rdmadl {

// enum ibv_wc_opcode values.
enum class wc_opcode : std::uint8_t {
  send = 0,
  rdma_write = 1,
  rdma_read = 2,
  comp_swap = 3,
  fetch_add = 4,
  bind_mw = 5,
  local_inv = 6,
  tso = 7,
  flush = 8,
  atomic_write = 9,
  recv = 128,
  recv_rdma_with_imm = 129,
  other = 255
};

// One work completion.
struct completion {
  std::uint64_t wr_id = 0;
  int status = 0;               // enum ibv_wc_status; 0 = success
  std::uint32_t vendor_err = 0; // provider's own code, kept beside status
  wc_opcode opcode = wc_opcode::other;
  std::uint32_t byte_len = 0;
  std::uint32_t imm_data = 0; // host byte order, valid when has_imm
  bool has_imm = false;
  std::uint32_t qp_num = 0, src_qp = 0;
  std::uint16_t slid = 0;

  bool ok() const noexcept { return status == 0; }
  // The status as an error_code in wc_category() (0 = success).
  std::error_code error() const noexcept {
    return status ? std::error_code(status, wc_category()) : std::error_code();
  }
};

struct cq_options {
  int depth = 256;                             // clamped to the device's max_cqe
  const completion_channel *channel = nullptr; // for request_notify()/wait()
  int comp_vector = 0;
  bool extended = true; // use ibv_create_cq_ex when context::supports(extended_cq)
};

// A completion queue. Move-only.
class completion_queue {
public:
  // Creates a queue on ctx. Errors: operation_not_supported,
  // errc::empty_object, or the errno.
  static result<completion_queue> create(const context &ctx, const cq_options &opts = {});

  completion_queue() noexcept = default;
  completion_queue(completion_queue &&o) noexcept;
  completion_queue &operator=(completion_queue &&o) noexcept;
  ~completion_queue();

  // Takes up to out.size() completions without blocking; returns how many.
  // Calls the provider directly (no allocation, no dispatch stub). Errors:
  // errc::empty_span, errc::empty_object, or the provider's errno.
  result<std::size_t> poll(std::span<completion> out) noexcept;
  // Polls until out is full or timeout passed (busy-polling). Returns how
  // many arrived (fewer than out.size() on timeout). Errors: errc::timed_out
  // when none arrived, as poll().
  result<std::size_t> poll_wait(std::span<completion> out, std::chrono::milliseconds timeout);
  // Arms the queue's channel for the next completion (solicited only if asked).
  result<void> request_notify(bool solicited_only = false) noexcept;
  // True when created with ibv_create_cq_ex and polled with ibv_start_poll.
  bool extended() const noexcept { return ex_ != nullptr; }
  int depth() const noexcept;

  ::ibv_cq *native_handle() const noexcept { return cq_; }
  explicit operator bool() const noexcept { return cq_ != nullptr; }

private:
  ::ibv_cq *cq_ = nullptr;
  ::ibv_cq_ex *ex_ = nullptr;
  const completion_channel *channel_ = nullptr;
};

} // namespace rdmadl

#endif // RDMADL_CQ_HPP
