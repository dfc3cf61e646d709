// SPDX-License-Identifier: MIT
// The reference-counted state behind each C++ object. Every node destroys its
// own rdma-core object in its destructor and then drops its references to
// its parents, so rdma-core always sees children destroyed before parents,
// whatever order the user's handles die in. Include after "rdmadl_verbs.h".
#ifndef RDMADL_SRC_NODES_HPP
#define RDMADL_SRC_NODES_HPP

#include <atomic>
#include <memory>
#include <optional>

#include "detail.hpp"
#include "rdmadl/rdmadl.hpp"
#include "region_table.hpp"

namespace rdmadl::detail {

// Something a node must keep alive without knowing its type (an rdma_cm id
// that owns the context or the QP).
using keepalive = std::shared_ptr<void>;

struct ctx_node {
  ibv_context *ctx = nullptr;
  bool owned = false;
  keepalive owner;
  // Cached probe answers: per probed feature, bit 2k = asked, bit 2k+1 = yes.
  std::atomic<std::uint8_t> probes{0};
  ~ctx_node() {
    if (owned && ctx)
      ibv_close_device(ctx);
  }
};

// A PD without pd is a software one (a channel with no device): its
// regions exist only in its table, for the TCP engine.
struct pd_node {
  ibv_pd *pd = nullptr;
  bool owned = false;
  std::shared_ptr<ctx_node> ctx;
  region_table regions; // every region registered on it
  ~pd_node() {
    if (owned && pd)
      ibv_dealloc_pd(pd);
  }
};

// A region of a software PD has no mr, only its keys in the PD's table.
struct mr_node {
  ibv_mr *mr = nullptr;
  std::uint32_t lkey = 0, rkey = 0;
  std::shared_ptr<pd_node> pd;
  ~mr_node() {
    if (pd && lkey)
      pd->regions.remove(lkey); // before the NIC lets go: no new TCP copy starts
    if (mr)
      ibv_dereg_mr(mr);
  }
};

struct channel_node {
  ibv_comp_channel *ch = nullptr;
  std::shared_ptr<ctx_node> ctx;
  ~channel_node() {
    if (ch)
      ibv_destroy_comp_channel(ch);
  }
};

struct cq_node {
  ibv_cq *cq = nullptr;
  ibv_cq_ex *ex = nullptr;
  std::shared_ptr<ctx_node> ctx;
  std::shared_ptr<channel_node> ch;
  ~cq_node() {
    if (cq)
      ibv_destroy_cq(cq);
  }
};

struct srq_node {
  ibv_srq *srq = nullptr;
  std::shared_ptr<pd_node> pd;
  ~srq_node() {
    if (srq)
      ibv_destroy_srq(srq);
  }
};

struct ah_node {
  ibv_ah *ah = nullptr;
  std::shared_ptr<pd_node> pd;
  ~ah_node() {
    if (ah)
      ibv_destroy_ah(ah);
  }
};

struct qp_node {
  enum class owner_kind { borrowed, verbs, rdma_cm };
  ibv_qp *qp = nullptr;
  ibv_qp_ex *qpx = nullptr;
  owner_kind kind = owner_kind::borrowed;
  rdma_cm_id *cm_id = nullptr; // rdma_cm: destroyed with rdma_destroy_qp
  std::shared_ptr<pd_node> pd;
  std::shared_ptr<cq_node> send_cq, recv_cq;
  std::shared_ptr<srq_node> srq;
  keepalive owner;
  qp_type type = qp_type::rc;
  std::uint8_t port = 1;
  int gid_index = 0;
  gid local_gid;
  std::optional<gid_type> local_gid_type; // unknown when no GID was selected
  std::uint16_t lid = 0;
  std::uint32_t psn = 0;
  std::uint32_t qkey = 0;
  std::uint32_t active_mtu = 0;
  link_layer link = link_layer::unspecified;
  int max_rd_atom = 1, max_init_rd_atom = 1;
  // One send_batch at a time owns the storage below. A batch without the WR
  // API (no qpx) chains its requests there; it is made by the first such
  // batch, not with the QP: 9 KB that a channel's many QPs never use.
  std::atomic<bool> batch_open{false};
  struct batch_storage {
    ibv_send_wr wrs[send_batch::max_size];
    ibv_sge sges[send_batch::max_size];
  };
  std::unique_ptr<batch_storage> batch;
  ~qp_node() {
    if (kind == owner_kind::verbs && qp)
      ibv_destroy_qp(qp);
    else if (kind == owner_kind::rdma_cm && qp)
      rdma_destroy_qp(cm_id);
  }
};

// A protection domain with no ibv_pd: the pd() of a channel without a
// device (src/memory.cpp).
protection_domain software_pd();

// Port, LID, link, MTU, atomics limits and GID of q (src/qp.cpp).
status_code init_path(qp_node &q, const context &ctx, const device_attr &dev, std::uint8_t port,
                      int gid_index, const gid_selector &sel);
status_code init_from_qp(qp_node &q, const context &ctx, std::uint8_t port, int gid_index,
                         const gid_selector &sel);

// The creation attributes of a QP made with opts on a device with dev's
// limits (depths and SGEs clamped), for ibv_create_qp_ex / rdma_create_qp_ex
// with the WR API's send operations; plain() gives the classic subset.
ibv_qp_init_attr_ex qp_init_attr(const device_attr &dev, const qp_options &opts, ibv_pd *pd,
                                 ibv_cq *send_cq, ibv_cq *recv_cq) noexcept;
inline ibv_qp_init_attr plain(const ibv_qp_init_attr_ex &ax) noexcept {
  ibv_qp_init_attr a{};
  a.send_cq = ax.send_cq;
  a.recv_cq = ax.recv_cq;
  a.srq = ax.srq;
  a.cap = ax.cap;
  a.qp_type = ax.qp_type;
  return a;
}

// Reaches the private members of every public class.
struct access {
  template <class T> static auto &node(T &h) noexcept { return h.n_; }
  template <class T> static const auto &node(const T &h) noexcept { return h.n_; }
  // A handle of type H owning node N: what every create() and borrow() that
  // has built its node returns.
  template <class H, class N> static H make(std::shared_ptr<N> n) noexcept {
    H h;
    set(h, std::move(n));
    return h;
  }
  // What RAW, just returned by an rdma-core create call, becomes: the
  // call's error (errno) if RAW is null, else a handle of type H whose new
  // node N holds RAW in FIELD and gets its parents from FILL(node).
  template <class H, class N, class R, class Fill>
  static result<H> adopt(R *raw, R *N::*field, Fill fill) {
    if (!raw)
      return rdma_error();
    auto n = std::make_shared<N>();
    (*n).*field = raw;
    fill(*n);
    return make<H>(std::move(n));
  }

  static void set(context &c, std::shared_ptr<ctx_node> n) noexcept {
    c.ctx_ = n->ctx;
    c.n_ = std::move(n);
  }
  static void set(protection_domain &p, std::shared_ptr<pd_node> n) noexcept {
    p.pd_ = n->pd;
    p.n_ = std::move(n);
  }
  static void set(memory_region &m, std::shared_ptr<mr_node> n, std::byte *base, std::size_t len,
                  rdmadl::access rights) noexcept {
    m.mr_ = n->mr;
    m.lkey_ = n->lkey;
    m.rkey_ = n->rkey;
    m.base_ = base;
    m.len_ = len;
    m.access_ = rights;
    m.n_ = std::move(n);
  }
  static void set(completion_channel &c, std::shared_ptr<channel_node> n) noexcept {
    c.ch_ = n->ch;
    c.n_ = std::move(n);
  }
  static void set(completion_queue &q, std::shared_ptr<cq_node> n) noexcept {
    q.cq_ = n->cq;
    q.ex_ = n->ex;
    // An extended queue is read out of line (poll_other): the stub sends it there.
    q.poll_ = n->ex ? &other_poll_cq : n->cq->context->ops.poll_cq;
    q.notify_ = n->cq->context->ops.req_notify_cq;
    q.n_ = std::move(n);
  }
  static void set(shared_receive_queue &q, std::shared_ptr<srq_node> n) noexcept {
    q.srq_ = n->srq;
    q.post_ = n->srq->context->ops.post_srq_recv;
    q.n_ = std::move(n);
  }
  static void set(address_handle &a, std::shared_ptr<ah_node> n) noexcept {
    a.ah_ = n->ah;
    a.n_ = std::move(n);
  }
  static void set(queue_pair &q, std::shared_ptr<qp_node> n) noexcept {
    q.qp_ = n->qp;
    q.qpn_ = n->qp->qp_num;
    q.ops_ = n->type == qp_type::rc
                 ? queue_pair::op_send | queue_pair::op_write | queue_pair::op_read
             : n->type == qp_type::uc ? queue_pair::op_send | queue_pair::op_write
                                      : queue_pair::op_send_ud;
    q.send_ = n->qp->context->ops.post_send;
    q.recv_ = n->qp->context->ops.post_recv;
    q.n_ = std::move(n);
  }
};

} // namespace rdmadl::detail

#endif // RDMADL_SRC_NODES_HPP
