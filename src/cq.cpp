// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <chrono>
#include <endian.h>
#include <fcntl.h>
#include <poll.h>
#include <utility>

#include "detail.hpp"
#include "rdmadl/channel.hpp"
#include "rdmadl/cq.hpp"

namespace rdmadl {

result<completion_channel> completion_channel::create(const context &ctx) {
  if (!ctx)
    return detail::empty_error();
  ibv_comp_channel *ch = ibv_create_comp_channel(ctx.native_handle());
  if (!ch)
    return detail::last_error();
  int fl = fcntl(ch->fd, F_GETFL);
  if (fl < 0 || fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    auto ec = detail::last_error();
    ibv_destroy_comp_channel(ch);
    return ec;
  }
  completion_channel c;
  c.ch_ = ch;
  return c;
}
completion_channel::completion_channel(completion_channel &&o) noexcept
    : ch_(std::exchange(o.ch_, nullptr)) {}
completion_channel &completion_channel::operator=(completion_channel &&o) noexcept {
  std::swap(ch_, o.ch_);
  return *this;
}
completion_channel::~completion_channel() {
  if (ch_)
    ibv_destroy_comp_channel(ch_);
}
int completion_channel::fd() const noexcept {
  return ch_ ? ch_->fd : -1;
}

result<ibv_cq *> completion_channel::wait(std::chrono::milliseconds timeout) const {
  if (!ch_)
    return detail::empty_error();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ibv_cq *cq = nullptr;
    void *cq_ctx = nullptr;
    if (ibv_get_cq_event(ch_, &cq, &cq_ctx) == 0) {
      ibv_ack_cq_events(cq, 1);
      return cq;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return detail::last_error();
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      return errc::timed_out;
    pollfd p{ch_->fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    if (rc < 0 && errno != EINTR)
      return detail::last_error();
  }
}

result<completion_queue> completion_queue::create(const context &ctx, const cq_options &opts) {
  if (!ctx)
    return detail::empty_error();
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  int depth = std::clamp(opts.depth, 1, dev->max_cqe > 0 ? dev->max_cqe : opts.depth);
  ibv_comp_channel *ch = opts.channel ? opts.channel->native_handle() : nullptr;
  completion_queue q;
  q.channel_ = opts.channel;
  if (opts.extended && ctx.supports(feature::extended_cq)) {
    ibv_cq_init_attr_ex a{};
    a.cqe = static_cast<uint32_t>(depth);
    a.channel = ch;
    a.comp_vector = static_cast<uint32_t>(opts.comp_vector);
    a.wc_flags = detail::cq_ex_wc_flags;
    errno = 0;
    if (ibv_cq_ex *ex = ibv_create_cq_ex(ctx.native_handle(), &a)) {
      q.ex_ = ex;
      q.cq_ = ibv_cq_ex_to_cq(ex);
      return q;
    }
    if (!detail::not_offered(errno))
      return detail::last_error();
  }
  ibv_cq *cq = ibv_create_cq(ctx.native_handle(), depth, nullptr, ch, opts.comp_vector);
  if (!cq)
    return detail::last_error();
  q.cq_ = cq;
  return q;
}
completion_queue::completion_queue(completion_queue &&o) noexcept
    : cq_(std::exchange(o.cq_, nullptr)), ex_(std::exchange(o.ex_, nullptr)),
      channel_(std::exchange(o.channel_, nullptr)) {}
completion_queue &completion_queue::operator=(completion_queue &&o) noexcept {
  std::swap(cq_, o.cq_);
  std::swap(ex_, o.ex_);
  std::swap(channel_, o.channel_);
  return *this;
}
completion_queue::~completion_queue() {
  if (cq_)
    ibv_destroy_cq(cq_);
}
int completion_queue::depth() const noexcept {
  return cq_ ? cq_->cqe : 0;
}

namespace {
wc_opcode to_opcode(int op) noexcept {
  if ((op >= IBV_WC_SEND && op <= IBV_WC_TSO) || op == IBV_WC_RECV ||
      op == IBV_WC_RECV_RDMA_WITH_IMM)
    return static_cast<wc_opcode>(op);
  return wc_opcode::other;
}

void read_ex(ibv_cq_ex *ex, completion &c) noexcept {
  c.wr_id = ex->wr_id;
  c.status = ex->status;
  c.qp_num = ibv_wc_read_qp_num(ex);
  if (ex->status != IBV_WC_SUCCESS) {
    c.vendor_err = ibv_wc_read_vendor_err(ex);
    c.opcode = wc_opcode::other;
    c.byte_len = 0;
    c.has_imm = false;
    return;
  }
  c.vendor_err = 0;
  c.opcode = to_opcode(ibv_wc_read_opcode(ex));
  c.byte_len = ibv_wc_read_byte_len(ex);
  unsigned flags = ibv_wc_read_wc_flags(ex);
  c.has_imm = (flags & IBV_WC_WITH_IMM) != 0;
  c.imm_data = c.has_imm ? be32toh(ibv_wc_read_imm_data(ex)) : 0;
  c.src_qp = ibv_wc_read_src_qp(ex);
  c.slid = static_cast<std::uint16_t>(ibv_wc_read_slid(ex));
}

void read_wc(const ibv_wc &w, completion &c) noexcept {
  c.wr_id = w.wr_id;
  c.status = w.status;
  c.vendor_err = w.vendor_err;
  c.qp_num = w.qp_num;
  c.opcode = w.status == IBV_WC_SUCCESS ? to_opcode(w.opcode) : wc_opcode::other;
  c.byte_len = w.byte_len;
  c.has_imm = w.status == IBV_WC_SUCCESS && (w.wc_flags & IBV_WC_WITH_IMM);
  c.imm_data = c.has_imm ? be32toh(w.imm_data) : 0;
  c.src_qp = w.src_qp;
  c.slid = w.slid;
}
} // namespace

result<std::size_t> completion_queue::poll(std::span<completion> out) noexcept {
  if (out.empty())
    return errc::empty_span;
  if (!cq_)
    return detail::empty_error();
  std::size_t n = 0;
  if (ex_) {
    ibv_poll_cq_attr attr{};
    int rc = ibv_start_poll(ex_, &attr);
    if (rc == ENOENT)
      return std::size_t{0};
    if (rc)
      return detail::rc_error(rc);
    for (;;) {
      read_ex(ex_, out[n++]);
      if (n == out.size())
        break;
      rc = ibv_next_poll(ex_);
      if (rc == ENOENT)
        break;
      if (rc) {
        ibv_end_poll(ex_);
        return detail::rc_error(rc);
      }
    }
    ibv_end_poll(ex_);
    return n;
  }
  ibv_wc wc[16];
  while (n < out.size()) {
    int want = static_cast<int>(std::min<std::size_t>(16, out.size() - n));
    int got = ibv_poll_cq(cq_, want, wc);
    if (got < 0)
      return n ? result<std::size_t>(n) : result<std::size_t>(errno_code(EIO));
    for (int i = 0; i < got; i++)
      read_wc(wc[i], out[n++]);
    if (got < want)
      break;
  }
  return n;
}

result<std::size_t> completion_queue::poll_wait(std::span<completion> out,
                                                std::chrono::milliseconds timeout) {
  if (out.empty())
    return errc::empty_span;
  if (!cq_)
    return detail::empty_error();
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t n = 0;
  for (;;) {
    auto r = poll(out.subspan(n));
    if (!r)
      return r.error();
    n += *r;
    if (n == out.size())
      return n;
    if (std::chrono::steady_clock::now() >= deadline)
      return n ? result<std::size_t>(n) : result<std::size_t>(errc::timed_out);
  }
}

result<void> completion_queue::request_notify(bool solicited_only) noexcept {
  if (!cq_)
    return detail::empty_error();
  if (int rc = ibv_req_notify_cq(cq_, solicited_only ? 1 : 0))
    return detail::rc_error(rc);
  return {};
}

} // namespace rdmadl
