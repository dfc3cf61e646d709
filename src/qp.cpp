// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <chrono>
#include <endian.h>
#include <utility>

#include "detail.hpp"
#include "rdmadl/qp.hpp"
#include "serial.hpp"

namespace rdmadl {

namespace detail {

struct qp_state {
  ibv_qp *qp = nullptr;
  ibv_qp_ex *qpx = nullptr;
  bool owned = false;
  qp_type type = qp_type::rc;
  std::uint8_t port = 1;
  int gid_index = 0;
  gid local_gid;
  std::uint16_t lid = 0;
  std::uint32_t psn = 0;
  std::uint32_t qkey = 0;
  std::uint32_t active_mtu = 0;
  link_layer link = link_layer::unspecified;
  int max_rd_atom = 1, max_init_rd_atom = 1;
  // Storage for chained batches, so posting allocates nothing.
  ibv_send_wr wrs[send_batch::max_size];
  ibv_sge sges[send_batch::max_size];
};

void qp_state_deleter::operator()(qp_state *s) const noexcept {
  if (s->qp && s->owned)
    ibv_destroy_qp(s->qp);
  delete s;
}

} // namespace detail

namespace {
constexpr char endpoint_magic[5] = "RDEP";

enum class op_kind { send, send_imm, write, write_imm, read, fetch_add, cmp_swap };

struct op {
  op_kind kind;
  const local_slice *buf;
  std::uint64_t raddr = 0;
  std::uint32_t rkey = 0;
  std::uint32_t imm = 0;
  std::uint64_t a = 0, b = 0;
  ibv_ah *ah = nullptr;
  std::uint32_t rqpn = 0, rqkey = 0;
  std::uint64_t wr_id = 0;
  send_flags flags = send_flags::signaled;
};

unsigned to_ibv_flags(send_flags f) noexcept {
  unsigned v = static_cast<unsigned>(f), r = 0;
  if (v & static_cast<unsigned>(send_flags::signaled))
    r |= IBV_SEND_SIGNALED;
  if (v & static_cast<unsigned>(send_flags::solicited))
    r |= IBV_SEND_SOLICITED;
  if (v & static_cast<unsigned>(send_flags::inline_data))
    r |= IBV_SEND_INLINE;
  return r;
}

// Adds o through the WR API (between ibv_wr_start and ibv_wr_complete).
void emit_wr(ibv_qp_ex *x, const op &o) noexcept {
  x->wr_id = o.wr_id;
  x->wr_flags = to_ibv_flags(o.flags) & ~IBV_SEND_INLINE;
  switch (o.kind) {
  case op_kind::send:
    ibv_wr_send(x);
    break;
  case op_kind::send_imm:
    ibv_wr_send_imm(x, htobe32(o.imm));
    break;
  case op_kind::write:
    ibv_wr_rdma_write(x, o.rkey, o.raddr);
    break;
  case op_kind::write_imm:
    ibv_wr_rdma_write_imm(x, o.rkey, o.raddr, htobe32(o.imm));
    break;
  case op_kind::read:
    ibv_wr_rdma_read(x, o.rkey, o.raddr);
    break;
  case op_kind::fetch_add:
    ibv_wr_atomic_fetch_add(x, o.rkey, o.raddr, o.a);
    break;
  case op_kind::cmp_swap:
    ibv_wr_atomic_cmp_swp(x, o.rkey, o.raddr, o.a, o.b);
    break;
  }
  if (o.ah)
    ibv_wr_set_ud_addr(x, o.ah, o.rqpn, o.rqkey);
  if (static_cast<unsigned>(o.flags) & static_cast<unsigned>(send_flags::inline_data))
    ibv_wr_set_inline_data(x, o.buf->data(), o.buf->length);
  else
    ibv_wr_set_sge(x, o.buf->lkey, o.buf->addr, o.buf->length);
}

// Fills a classic work request for o.
void fill_wr(ibv_send_wr &w, ibv_sge &s, const op &o) noexcept {
  w = {};
  s.addr = o.buf->addr;
  s.length = o.buf->length;
  s.lkey = o.buf->lkey;
  w.wr_id = o.wr_id;
  w.sg_list = &s;
  w.num_sge = 1;
  w.send_flags = to_ibv_flags(o.flags);
  switch (o.kind) {
  case op_kind::send:
    w.opcode = IBV_WR_SEND;
    break;
  case op_kind::send_imm:
    w.opcode = IBV_WR_SEND_WITH_IMM;
    w.imm_data = htobe32(o.imm);
    break;
  case op_kind::write:
    w.opcode = IBV_WR_RDMA_WRITE;
    break;
  case op_kind::write_imm:
    w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.imm_data = htobe32(o.imm);
    break;
  case op_kind::read:
    w.opcode = IBV_WR_RDMA_READ;
    break;
  case op_kind::fetch_add:
    w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    w.wr.atomic.remote_addr = o.raddr;
    w.wr.atomic.rkey = o.rkey;
    w.wr.atomic.compare_add = o.a;
    break;
  case op_kind::cmp_swap:
    w.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    w.wr.atomic.remote_addr = o.raddr;
    w.wr.atomic.rkey = o.rkey;
    w.wr.atomic.compare_add = o.a;
    w.wr.atomic.swap = o.b;
    break;
  }
  if (o.kind == op_kind::write || o.kind == op_kind::write_imm || o.kind == op_kind::read) {
    w.wr.rdma.remote_addr = o.raddr;
    w.wr.rdma.rkey = o.rkey;
  }
  if (o.ah) {
    w.wr.ud.ah = o.ah;
    w.wr.ud.remote_qpn = o.rqpn;
    w.wr.ud.remote_qkey = o.rqkey;
  }
}

std::error_code check_op(const detail::qp_state *s, const op &o) noexcept {
  if (!s || !s->qp)
    return detail::empty_error();
  if (!o.buf->length && o.kind != op_kind::send && o.kind != op_kind::send_imm &&
      o.kind != op_kind::write_imm)
    return make_error_code(errc::empty_span);
  bool one_sided = o.kind != op_kind::send && o.kind != op_kind::send_imm;
  if (one_sided && s->type == qp_type::ud)
    return make_error_code(errc::wrong_qp_type);
  if ((o.kind == op_kind::read || o.kind == op_kind::fetch_add || o.kind == op_kind::cmp_swap) &&
      s->type != qp_type::rc)
    return make_error_code(errc::wrong_qp_type);
  if ((o.kind == op_kind::fetch_add || o.kind == op_kind::cmp_swap) &&
      (o.buf->length != 8 || (o.raddr & 7)))
    return make_error_code(std::errc::invalid_argument);
  if (s->type == qp_type::ud && !o.ah)
    return make_error_code(errc::wrong_qp_type);
  return {};
}

result<void> post_one(detail::qp_state *s, const op &o) noexcept {
  if (auto ec = check_op(s, o))
    return ec;
  if (s->qpx) {
    ibv_wr_start(s->qpx);
    emit_wr(s->qpx, o);
    if (int rc = ibv_wr_complete(s->qpx))
      return detail::rc_error(rc);
    return {};
  }
  ibv_send_wr w;
  ibv_sge sge;
  fill_wr(w, sge, o);
  ibv_send_wr *bad = nullptr;
  if (int rc = ibv_post_send(s->qp, &w, &bad))
    return detail::rc_error(rc);
  return {};
}

std::uint32_t fresh_psn(std::uint32_t qpn) noexcept {
  auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t x = (t ^ (static_cast<std::uint64_t>(qpn) << 32)) * 0x9e3779b97f4a7c15ull;
  return static_cast<std::uint32_t>(x >> 40) & 0xffffff;
}
} // namespace

// Layout: magic[4] version[1] pad[3] qpn[4] psn[4] lid[2] pad[2] gid[16]
// qkey[4] mtu[4], little-endian (the GID as its 16 raw bytes). QPN and PSN
// are 24-bit values: their upper 8 bits are written as zero, so parse()
// accepts every blob serialize() makes.
std::array<std::byte, endpoint::serialized_size> endpoint::serialize() const noexcept {
  std::array<std::byte, serialized_size> b{};
  detail::put_header(b.data(), endpoint_magic, format_version);
  detail::put_le(b.data() + 8, qpn & detail::max_24bit);
  detail::put_le(b.data() + 12, psn & detail::max_24bit);
  detail::put_le(b.data() + 16, lid);
  for (int i = 0; i < 16; i++)
    b[20 + i] = static_cast<std::byte>(gid_value.raw[i]);
  detail::put_le(b.data() + 36, qkey);
  detail::put_le(b.data() + 40, mtu);
  return b;
}

// Accepts exactly what serialize() writes: the header, QPN and PSN below
// 2^24, the reserved bytes zero (otherwise std::errc::invalid_argument).
result<endpoint> endpoint::parse(std::span<const std::byte> b) {
  if (auto ec = detail::check_header(b, endpoint_magic, format_version, serialized_size))
    return ec;
  endpoint e;
  e.qpn = detail::get_le<std::uint32_t>(b.data() + 8);
  e.psn = detail::get_le<std::uint32_t>(b.data() + 12);
  if (e.qpn > detail::max_24bit || e.psn > detail::max_24bit || !detail::zero_bytes(b, 18, 2))
    return std::make_error_code(std::errc::invalid_argument);
  e.lid = detail::get_le<std::uint16_t>(b.data() + 16);
  for (int i = 0; i < 16; i++)
    e.gid_value.raw[i] = static_cast<std::uint8_t>(b[20 + i]);
  e.qkey = detail::get_le<std::uint32_t>(b.data() + 36);
  e.mtu = detail::get_le<std::uint32_t>(b.data() + 40);
  return e;
}

// ---- address_handle, shared_receive_queue ----

namespace {
void fill_ah(ibv_ah_attr &a, const detail::qp_state &s, const endpoint &peer, std::uint8_t sl,
             std::uint8_t hop_limit, std::uint8_t tclass) noexcept {
  a = {};
  a.dlid = peer.lid;
  a.sl = sl;
  a.port_num = s.port;
  if (s.link != link_layer::infiniband || !peer.gid_value.is_zero()) {
    a.is_global = 1;
    __builtin_memcpy(a.grh.dgid.raw, peer.gid_value.raw.data(), 16);
    a.grh.sgid_index = static_cast<std::uint8_t>(s.gid_index);
    a.grh.hop_limit = hop_limit;
    a.grh.traffic_class = tclass;
  }
}
} // namespace

result<address_handle> address_handle::create(const protection_domain &pd, const queue_pair &local,
                                              const endpoint &peer) {
  if (!pd || !local.s_ || !local.s_->qp)
    return detail::empty_error();
  ibv_ah_attr a;
  fill_ah(a, *local.s_, peer, 0, 64, 0);
  ibv_ah *ah = ibv_create_ah(pd.native_handle(), &a);
  if (!ah)
    return detail::last_error();
  address_handle h;
  h.ah_ = ah;
  return h;
}
address_handle::address_handle(address_handle &&o) noexcept : ah_(std::exchange(o.ah_, nullptr)) {}
address_handle &address_handle::operator=(address_handle &&o) noexcept {
  std::swap(ah_, o.ah_);
  return *this;
}
address_handle::~address_handle() {
  if (ah_)
    ibv_destroy_ah(ah_);
}

result<shared_receive_queue> shared_receive_queue::create(const protection_domain &pd,
                                                          std::uint32_t depth,
                                                          std::uint32_t max_sge) {
  if (!pd)
    return detail::empty_error();
  ibv_device_attr da{};
  if (int rc = ibv_query_device(pd.native_handle()->context, &da))
    return detail::rc_error(rc);
  ibv_srq_init_attr a{};
  a.attr.max_wr = std::clamp<std::uint32_t>(depth, 1, static_cast<std::uint32_t>(da.max_srq_wr));
  a.attr.max_sge =
      std::clamp<std::uint32_t>(max_sge, 1, static_cast<std::uint32_t>(da.max_srq_sge));
  ibv_srq *srq = ibv_create_srq(pd.native_handle(), &a);
  if (!srq)
    return detail::last_error();
  shared_receive_queue q;
  q.srq_ = srq;
  return q;
}
shared_receive_queue::shared_receive_queue(shared_receive_queue &&o) noexcept
    : srq_(std::exchange(o.srq_, nullptr)) {}
shared_receive_queue &shared_receive_queue::operator=(shared_receive_queue &&o) noexcept {
  std::swap(srq_, o.srq_);
  return *this;
}
shared_receive_queue::~shared_receive_queue() {
  if (srq_)
    ibv_destroy_srq(srq_);
}
result<void> shared_receive_queue::post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept {
  if (!srq_)
    return detail::empty_error();
  ibv_sge s{buf.addr, buf.length, buf.lkey};
  ibv_recv_wr w{};
  w.wr_id = wr_id;
  w.sg_list = &s;
  w.num_sge = 1;
  ibv_recv_wr *bad = nullptr;
  if (int rc = ibv_post_srq_recv(srq_, &w, &bad))
    return detail::rc_error(rc);
  return {};
}

// ---- queue_pair ----

result<queue_pair> queue_pair::create(const context &ctx, const protection_domain &pd,
                                      const completion_queue &send_cq,
                                      const completion_queue &recv_cq, const qp_options &opts) {
  if (!ctx || !pd || !send_cq || !recv_cq)
    return detail::empty_error();
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  std::uint8_t port = opts.port;
  if (!port) {
    auto p = ctx.first_active_port();
    if (!p)
      return p.error();
    port = *p;
  }
  auto pa = ctx.query_port(port);
  if (!pa)
    return pa.error();

  std::unique_ptr<detail::qp_state, detail::qp_state_deleter> s(new detail::qp_state);
  s->type = opts.type;
  s->port = port;
  s->lid = pa->lid;
  s->link = pa->link;
  s->active_mtu = pa->active_mtu;
  s->qkey = opts.type == qp_type::ud ? opts.qkey : 0;
  s->max_rd_atom = std::max(1, dev->max_qp_rd_atom);
  s->max_init_rd_atom = std::max(1, dev->max_qp_init_rd_atom);
  if (opts.gid_index >= 0) {
    auto table = ctx.gid_table(port);
    if (!table)
      return table.error();
    auto it = std::find_if(table->begin(), table->end(), [&](const gid_entry &e) {
      return e.index == static_cast<std::uint32_t>(opts.gid_index);
    });
    if (it == table->end())
      return errc::no_such_gid;
    s->gid_index = opts.gid_index;
    s->local_gid = it->value;
  } else {
    auto g = ctx.select_gid(port, opts.gid);
    if (g) {
      s->gid_index = static_cast<int>(g->index);
      s->local_gid = g->value;
    } else if (pa->link != link_layer::infiniband) {
      return g.error();
    }
  }

  auto clamp = [](std::uint32_t v, int max) {
    return std::clamp<std::uint32_t>(v, 1, static_cast<std::uint32_t>(std::max(1, max)));
  };
  ibv_qp_cap cap{};
  cap.max_send_wr = clamp(opts.send_depth, dev->max_qp_wr);
  cap.max_recv_wr = opts.srq ? 0 : clamp(opts.recv_depth, dev->max_qp_wr);
  cap.max_send_sge = clamp(opts.max_send_sge, dev->max_sge);
  cap.max_recv_sge = opts.srq ? 0 : clamp(opts.max_recv_sge, dev->max_sge);
  cap.max_inline_data = opts.max_inline;
  ibv_qp_type t = opts.type == qp_type::rc   ? IBV_QPT_RC
                  : opts.type == qp_type::uc ? IBV_QPT_UC
                                             : IBV_QPT_UD;
  ibv_srq *srq = opts.srq ? opts.srq->native_handle() : nullptr;

  if (opts.wr_api && ctx.supports(feature::wr_api)) {
    ibv_qp_init_attr_ex ax{};
    ax.qp_type = t;
    ax.send_cq = send_cq.native_handle();
    ax.recv_cq = recv_cq.native_handle();
    ax.srq = srq;
    ax.cap = cap;
    ax.pd = pd.native_handle();
    ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ax.send_ops_flags = detail::qp_ex_send_ops(t);
    errno = 0;
    if (ibv_qp *qp = ibv_create_qp_ex(ctx.native_handle(), &ax)) {
      s->qp = qp;
      s->owned = true;
      s->qpx = ibv_qp_to_qp_ex(qp);
      if (!s->qpx) {
        ibv_destroy_qp(qp);
        s->qp = nullptr;
      }
    } else if (!detail::not_offered(errno)) {
      return detail::last_error();
    }
  }
  if (!s->qp) {
    ibv_qp_init_attr a{};
    a.qp_type = t;
    a.send_cq = send_cq.native_handle();
    a.recv_cq = recv_cq.native_handle();
    a.srq = srq;
    a.cap = cap;
    ibv_qp *qp = ibv_create_qp(pd.native_handle(), &a);
    if (!qp)
      return detail::last_error();
    s->qp = qp;
    s->owned = true;
  }
  s->psn = fresh_psn(s->qp->qp_num);
  queue_pair q;
  q.s_ = std::move(s);
  return q;
}

result<queue_pair> queue_pair::borrow(ibv_qp *qp, qp_type type) {
  if (!qp)
    return detail::empty_error();
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  std::unique_ptr<detail::qp_state, detail::qp_state_deleter> s(new detail::qp_state);
  s->qp = qp;
  s->type = type;
  if (ibv_query_qp(qp, &a, IBV_QP_PORT | IBV_QP_SQ_PSN, &ia) == 0) {
    s->port = a.port_num;
    s->psn = a.sq_psn;
  }
  queue_pair q;
  q.s_ = std::move(s);
  return q;
}

queue_pair::queue_pair() noexcept = default;
queue_pair::queue_pair(queue_pair &&o) noexcept = default;
queue_pair &queue_pair::operator=(queue_pair &&o) noexcept = default;
queue_pair::~queue_pair() = default;

std::uint32_t queue_pair::qp_num() const noexcept {
  return s_ && s_->qp ? s_->qp->qp_num : 0;
}
std::uint8_t queue_pair::port() const noexcept {
  return s_ ? s_->port : 0;
}
qp_type queue_pair::type() const noexcept {
  return s_ ? s_->type : qp_type::rc;
}
ibv_qp *queue_pair::native_handle() const noexcept {
  return s_ ? s_->qp : nullptr;
}
bool queue_pair::uses_wr_api() const noexcept {
  return s_ && s_->qpx;
}

result<endpoint> queue_pair::local_endpoint() const {
  if (!s_ || !s_->qp)
    return detail::empty_error();
  endpoint e;
  e.qpn = s_->qp->qp_num;
  e.psn = s_->psn;
  e.lid = s_->lid;
  e.gid_value = s_->local_gid;
  e.qkey = s_->qkey;
  e.mtu = s_->active_mtu;
  return e;
}

result<void> queue_pair::connect(const endpoint &peer, const connect_options &opts) {
  if (!s_ || !s_->qp)
    return detail::empty_error();
  detail::qp_state &s = *s_;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = s.port;
  int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
  if (s.type == qp_type::ud) {
    a.qkey = s.qkey;
    mask |= IBV_QP_QKEY;
  } else {
    unsigned acc = 0;
    if (has(opts.remote, access::remote_write))
      acc |= IBV_ACCESS_REMOTE_WRITE;
    if (s.type == qp_type::rc && has(opts.remote, access::remote_read))
      acc |= IBV_ACCESS_REMOTE_READ;
    if (s.type == qp_type::rc && has(opts.remote, access::remote_atomic))
      acc |= IBV_ACCESS_REMOTE_ATOMIC;
    a.qp_access_flags = acc;
    mask |= IBV_QP_ACCESS_FLAGS;
  }
  if (int rc = ibv_modify_qp(s.qp, &a, mask))
    return detail::rc_error(rc);

  a = {};
  a.qp_state = IBV_QPS_RTR;
  mask = IBV_QP_STATE;
  if (s.type != qp_type::ud) {
    std::uint32_t mtu = s.active_mtu ? s.active_mtu : 1024;
    if (opts.mtu)
      mtu = std::min(mtu, opts.mtu);
    a.path_mtu = detail::mtu_enum(mtu);
    a.dest_qp_num = peer.qpn;
    a.rq_psn = peer.psn & 0xffffff;
    fill_ah(a.ah_attr, s, peer, opts.sl, opts.hop_limit, opts.traffic_class);
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (s.type == qp_type::rc) {
      int rd =
          opts.max_rd_atomic ? std::min<int>(opts.max_rd_atomic, s.max_rd_atom) : s.max_rd_atom;
      a.max_dest_rd_atomic = static_cast<std::uint8_t>(std::min(rd, 255));
      a.min_rnr_timer = opts.min_rnr_timer;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  if (int rc = ibv_modify_qp(s.qp, &a, mask))
    return detail::rc_error(rc);

  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = s.psn & 0xffffff;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (s.type == qp_type::rc) {
    int rd = opts.max_rd_atomic ? std::min<int>(opts.max_rd_atomic, s.max_init_rd_atom)
                                : s.max_init_rd_atom;
    a.max_rd_atomic = static_cast<std::uint8_t>(std::min(rd, 255));
    a.timeout = opts.timeout;
    a.retry_cnt = opts.retry_cnt;
    a.rnr_retry = opts.rnr_retry;
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (int rc = ibv_modify_qp(s.qp, &a, mask))
    return detail::rc_error(rc);
  return {};
}

result<void> queue_pair::to_error() noexcept {
  if (!s_ || !s_->qp)
    return detail::empty_error();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(s_->qp, &a, IBV_QP_STATE))
    return detail::rc_error(rc);
  return {};
}

result<void> queue_pair::post_recv(const local_slice &buf, std::uint64_t wr_id) noexcept {
  if (!s_ || !s_->qp)
    return detail::empty_error();
  ibv_sge sge{buf.addr, buf.length, buf.lkey};
  ibv_recv_wr w{};
  w.wr_id = wr_id;
  w.sg_list = &sge;
  w.num_sge = buf.length ? 1 : 0;
  ibv_recv_wr *bad = nullptr;
  if (int rc = ibv_post_recv(s_->qp, &w, &bad))
    return detail::rc_error(rc);
  return {};
}

result<void> queue_pair::post_send(const local_slice &buf, std::uint64_t wr_id,
                                   send_flags flags) noexcept {
  return post_one(s_.get(), {op_kind::send, &buf, 0, 0, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
}
result<void> queue_pair::post_send_imm(const local_slice &buf, std::uint32_t imm,
                                       std::uint64_t wr_id, send_flags flags) noexcept {
  return post_one(s_.get(),
                  {op_kind::send_imm, &buf, 0, 0, imm, 0, 0, nullptr, 0, 0, wr_id, flags});
}
result<void> queue_pair::post_send_ud(const local_slice &buf, const address_handle &ah,
                                      const endpoint &peer, std::uint64_t wr_id,
                                      send_flags flags) noexcept {
  if (!ah.native_handle())
    return detail::empty_error();
  return post_one(s_.get(), {op_kind::send, &buf, 0, 0, 0, 0, 0, ah.native_handle(), peer.qpn,
                             peer.qkey, wr_id, flags});
}
result<void> queue_pair::post_write(const local_slice &buf, const remote_region &dst,
                                    std::uint64_t wr_id, send_flags flags) noexcept {
  return post_one(s_.get(),
                  {op_kind::write, &buf, dst.addr, dst.rkey, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
}
result<void> queue_pair::post_write_imm(const local_slice &buf, const remote_region &dst,
                                        std::uint32_t imm, std::uint64_t wr_id,
                                        send_flags flags) noexcept {
  return post_one(s_.get(), {op_kind::write_imm, &buf, dst.addr, dst.rkey, imm, 0, 0, nullptr, 0, 0,
                             wr_id, flags});
}
result<void> queue_pair::post_read(const local_slice &buf, const remote_region &src,
                                   std::uint64_t wr_id, send_flags flags) noexcept {
  return post_one(s_.get(),
                  {op_kind::read, &buf, src.addr, src.rkey, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
}
result<void> queue_pair::post_fetch_add(const local_slice &buf, const remote_region &dst,
                                        std::uint64_t add, std::uint64_t wr_id,
                                        send_flags flags) noexcept {
  return post_one(s_.get(), {op_kind::fetch_add, &buf, dst.addr, dst.rkey, 0, add, 0, nullptr, 0, 0,
                             wr_id, flags});
}
result<void> queue_pair::post_compare_swap(const local_slice &buf, const remote_region &dst,
                                           std::uint64_t compare, std::uint64_t swap,
                                           std::uint64_t wr_id, send_flags flags) noexcept {
  return post_one(s_.get(), {op_kind::cmp_swap, &buf, dst.addr, dst.rkey, 0, compare, swap, nullptr,
                             0, 0, wr_id, flags});
}

// ---- send_batch ----

send_batch queue_pair::batch() noexcept {
  return send_batch(s_.get());
}

send_batch::send_batch(detail::qp_state *s) noexcept : s_(s) {
  if (!s_ || !s_->qp)
    err_ = detail::empty_error();
}

send_batch::~send_batch() {
  if (started_ && s_->qpx)
    ibv_wr_abort(s_->qpx);
}

namespace {
void batch_add(detail::qp_state *s, std::size_t &n, std::error_code &err, bool &started,
               const op &o) noexcept {
  if (err)
    return;
  if (auto ec = check_op(s, o)) {
    err = ec;
    return;
  }
  if (n == send_batch::max_size) {
    err = make_error_code(errc::batch_full);
    return;
  }
  if (s->qpx) {
    if (!started) {
      ibv_wr_start(s->qpx);
      started = true;
    }
    emit_wr(s->qpx, o);
  } else {
    fill_wr(s->wrs[n], s->sges[n], o);
    if (n)
      s->wrs[n - 1].next = &s->wrs[n];
  }
  n++;
}
} // namespace

send_batch &send_batch::send(const local_slice &buf, std::uint64_t wr_id,
                             send_flags flags) noexcept {
  batch_add(s_, n_, err_, started_,
            {op_kind::send, &buf, 0, 0, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
  return *this;
}
send_batch &send_batch::send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                                 send_flags flags) noexcept {
  batch_add(s_, n_, err_, started_,
            {op_kind::send_imm, &buf, 0, 0, imm, 0, 0, nullptr, 0, 0, wr_id, flags});
  return *this;
}
send_batch &send_batch::write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                              send_flags flags) noexcept {
  batch_add(s_, n_, err_, started_,
            {op_kind::write, &buf, dst.addr, dst.rkey, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
  return *this;
}
send_batch &send_batch::read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                             send_flags flags) noexcept {
  batch_add(s_, n_, err_, started_,
            {op_kind::read, &buf, src.addr, src.rkey, 0, 0, 0, nullptr, 0, 0, wr_id, flags});
  return *this;
}

result<void> send_batch::commit() noexcept {
  if (err_) {
    if (started_)
      ibv_wr_abort(s_->qpx);
    started_ = false;
    n_ = 0;
    return err_;
  }
  if (!n_)
    return errc::empty_span;
  std::size_t n = n_;
  n_ = 0;
  if (s_->qpx) {
    started_ = false;
    if (int rc = ibv_wr_complete(s_->qpx))
      return detail::rc_error(rc);
    return {};
  }
  s_->wrs[n - 1].next = nullptr;
  ibv_send_wr *bad = nullptr;
  if (int rc = ibv_post_send(s_->qp, &s_->wrs[0], &bad))
    return detail::rc_error(rc);
  return {};
}

} // namespace rdmadl
