// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <chrono>
#include <endian.h>
#include <utility>

#include "detail.hpp"
#include "nodes.hpp"
#include "rdmadl/cq.hpp"

namespace rdmadl {

result<completion_queue> completion_queue::create(const context &ctx, const cq_options &opts) {
  if (!ctx)
    return detail::rdma_error(errc::empty_object);
  if (opts.channel && !*opts.channel)
    return detail::rdma_error(errc::empty_object);
  detail::clear_error_detail();
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  int depth = detail::clamp_to(opts.depth, dev->max_cqe);
  auto n = std::make_shared<detail::cq_node>();
  n->ctx = detail::access::node(ctx);
  ibv_comp_channel *ch = nullptr;
  if (opts.channel) {
    n->ch = detail::access::node(*opts.channel);
    ch = opts.channel->native_handle();
  }
  if (opts.extended && ctx.supports(feature::extended_cq)) {
    ibv_cq_init_attr_ex a{};
    a.cqe = static_cast<uint32_t>(depth);
    a.channel = ch;
    a.comp_vector = static_cast<uint32_t>(opts.comp_vector);
    a.wc_flags = detail::cq_ex_wc_flags;
    errno = 0;
    if (ibv_cq_ex *ex = ibv_create_cq_ex(ctx.native_handle(), &a)) {
      n->ex = ex;
      n->cq = ibv_cq_ex_to_cq(ex);
    } else if (!detail::not_offered(errno)) {
      return detail::resource_error("ibv_create_cq_ex", "completion queue", "max_cq", dev->max_cq,
                                    errno);
    }
  }
  if (!n->cq) {
    n->cq = ibv_create_cq(ctx.native_handle(), depth, nullptr, ch, opts.comp_vector);
    if (!n->cq)
      return detail::resource_error("ibv_create_cq", "completion queue", "max_cq", dev->max_cq,
                                    errno);
  }
  return detail::access::make<completion_queue>(std::move(n));
}

int completion_queue::depth() const noexcept {
  return cq_ ? cq_.get()->cqe : 0;
}

status_code completion_queue::empty_status() noexcept {
  return detail::rdma_error(errc::empty_object);
}

namespace {
// One completion of an extended queue, as ibv_poll_cq would have written it.
void read_ex(ibv_cq_ex *ex, completion &c) noexcept {
  c.wr_id = ex->wr_id;
  c.status = ex->status;
  c.qp_num = ibv_wc_read_qp_num(ex);
  c.vendor_err = ex->status != IBV_WC_SUCCESS ? ibv_wc_read_vendor_err(ex) : 0;
  if (ex->status != IBV_WC_SUCCESS) {
    c.opcode = wc_opcode::send;
    c.byte_len = 0;
    c.wc_flags = 0;
    c.imm_be = 0;
    c.src_qp = 0;
    c.slid = 0;
    return;
  }
  c.opcode = static_cast<wc_opcode>(ibv_wc_read_opcode(ex));
  c.byte_len = ibv_wc_read_byte_len(ex);
  c.wc_flags = static_cast<unsigned>(ibv_wc_read_wc_flags(ex));
  c.imm_be = (c.wc_flags & IBV_WC_WITH_IMM) ? ibv_wc_read_imm_data(ex) : 0;
  c.src_qp = ibv_wc_read_src_qp(ex);
  c.slid = static_cast<std::uint16_t>(ibv_wc_read_slid(ex));
  c.pkey_index = 0;
  c.sl = 0;
  c.dlid_path_bits = 0;
}
} // namespace

int detail::other_poll_cq(ibv_cq *, int, ibv_wc *) noexcept {
  return -1;
}

// The cases the inline poll() leaves to the library: an empty span or queue,
// a plain queue whose provider's poll_cq failed, and extended queues
// (ibv_start_poll .. ibv_end_poll).
result<std::size_t> completion_queue::poll_other(std::span<completion> out) noexcept {
  if (out.empty())
    return errc::empty_span;
  if (!cq_)
    return detail::rdma_error(errc::empty_object);
  ibv_cq_ex *ex = ex_;
  if (!ex)
    return status_code::from_errno(EIO);
  std::size_t n = 0;
  ibv_poll_cq_attr attr{};
  int rc = ibv_start_poll(ex, &attr);
  if (rc == ENOENT)
    return std::size_t{0};
  if (rc)
    return detail::rdma_error(rc);
  for (;;) {
    read_ex(ex, out[n++]);
    if (n == out.size())
      break;
    rc = ibv_next_poll(ex);
    if (rc == ENOENT)
      break;
    if (rc) {
      ibv_end_poll(ex);
      return detail::rdma_error(rc);
    }
  }
  ibv_end_poll(ex);
  return n;
}

result<std::size_t> completion_queue::poll_wait(std::span<completion> out,
                                                std::chrono::milliseconds timeout) {
  if (out.empty())
    return errc::empty_span;
  if (!cq_)
    return detail::rdma_error(errc::empty_object);
  auto deadline = detail::deadline(timeout);
  std::size_t n = 0;
  for (;;) {
    auto r = poll(out.subspan(n));
    if (!r)
      return r.error();
    n += *r;
    if (n == out.size())
      return n;
    if (detail::expired(deadline))
      return n ? result<std::size_t>(n) : result<std::size_t>(errc::timed_out);
  }
}

result<poll_session> completion_queue::start_poll() noexcept {
  if (!cq_)
    return detail::rdma_error(errc::empty_object);
  poll_session s;
  s.n_ = n_;
  if (ibv_cq_ex *ex = ex_) {
    ibv_poll_cq_attr attr{};
    int rc = ibv_start_poll(ex, &attr);
    if (rc == ENOENT)
      return s;
    if (rc)
      return detail::rdma_error(rc);
    s.ex_ = ex;
    s.on_ = true;
    return s;
  }
  int got = ibv_poll_cq(cq_, 1, reinterpret_cast<ibv_wc *>(&s.cur_));
  if (got < 0)
    return errno_code(EIO);
  s.on_ = got == 1;
  return s;
}

// ---- poll_session ----

void poll_session::end() noexcept {
  if (ex_ && on_)
    ibv_end_poll(ex_);
  on_ = false;
}
poll_session &poll_session::operator=(poll_session &&o) noexcept {
  if (this != &o) {
    end();
    ex_ = std::move(o.ex_);
    on_ = std::move(o.on_);
    cur_ = o.cur_;
    n_ = std::move(o.n_);
  }
  return *this;
}
poll_session::~poll_session() {
  end();
}

result<bool> poll_session::next() noexcept {
  if (!on_)
    return false;
  if (ibv_cq_ex *ex = ex_) {
    int rc = ibv_next_poll(ex);
    if (rc == 0)
      return true;
    end();
    if (rc == ENOENT)
      return false;
    return detail::rdma_error(rc);
  }
  int got = ibv_poll_cq(n_->cq, 1, reinterpret_cast<ibv_wc *>(&cur_));
  on_ = got == 1;
  if (got < 0)
    return errno_code(EIO);
  return got == 1;
}

std::uint64_t poll_session::wr_id() const noexcept {
  return !on_ ? 0 : ex_ ? ex_.get()->wr_id : cur_.wr_id;
}
int poll_session::status() const noexcept {
  return !on_ ? 0 : ex_ ? static_cast<int>(ex_.get()->status) : cur_.status;
}
std::error_code poll_session::error() const noexcept {
  int s = status();
  return s ? std::error_code(s, wc_category()) : std::error_code();
}
wc_opcode poll_session::opcode() const noexcept {
  return !on_  ? wc_opcode::send
         : ex_ ? static_cast<wc_opcode>(ibv_wc_read_opcode(ex_))
               : cur_.opcode;
}
std::uint32_t poll_session::vendor_err() const noexcept {
  return !on_ ? 0 : ex_ ? ibv_wc_read_vendor_err(ex_) : cur_.vendor_err;
}
std::uint32_t poll_session::byte_len() const noexcept {
  return !on_ ? 0 : ex_ ? ibv_wc_read_byte_len(ex_) : cur_.byte_len;
}
bool poll_session::has_imm() const noexcept {
  if (!on_ || status() != 0)
    return false;
  return ex_ ? (ibv_wc_read_wc_flags(ex_) & IBV_WC_WITH_IMM) != 0 : cur_.has_imm();
}
std::uint32_t poll_session::imm() const noexcept {
  if (!has_imm())
    return 0;
  return ex_ ? be32toh(ibv_wc_read_imm_data(ex_)) : cur_.imm();
}
std::uint32_t poll_session::qp_num() const noexcept {
  return !on_ ? 0 : ex_ ? ibv_wc_read_qp_num(ex_) : cur_.qp_num;
}
std::uint32_t poll_session::src_qp() const noexcept {
  return !on_ ? 0 : ex_ ? ibv_wc_read_src_qp(ex_) : cur_.src_qp;
}
std::uint16_t poll_session::slid() const noexcept {
  return !on_ ? 0 : ex_ ? static_cast<std::uint16_t>(ibv_wc_read_slid(ex_)) : cur_.slid;
}

} // namespace rdmadl
