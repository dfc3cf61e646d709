// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <endian.h>
#include <new>
#include <string>
#include <utility>

#include "detail.hpp"
#include "nodes.hpp"
#include "rdmadl/qp.hpp"
#include "serial.hpp"

namespace rdmadl {

namespace {
constexpr char endpoint_magic[5] = "RDEP";

std::uint32_t fresh_psn(std::uint32_t qpn) noexcept {
  auto t = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  std::uint64_t x = (t ^ (static_cast<std::uint64_t>(qpn) << 32)) * 0x9e3779b97f4a7c15ull;
  return static_cast<std::uint32_t>(x >> 40) & 0xffffff;
}
} // namespace

// Layout: magic[4] version[1] pad[3] qpn[4] psn[4] lid[2] gid_type[1] pad[1]
// gid[16] qkey[4] mtu[4], little-endian (the GID as its 16 raw bytes). QPN
// and PSN are 24-bit values: their upper 8 bits are written as zero, so
// parse() accepts every blob serialize() makes. gid_type is 0 (not said), 1
// (IB), 2 (RoCE v1) or 3 (RoCE v2); it was a reserved zero byte before, so
// older blobs parse as "not said" (an older parser refuses a newer blob that
// says a type, errc::bad_blob).
std::array<std::byte, endpoint::serialized_size> endpoint::serialize() const noexcept {
  std::array<std::byte, serialized_size> b{};
  detail::put_header(b.data(), endpoint_magic, format_version);
  detail::put_le(b.data() + 8, qpn & detail::max_24bit);
  detail::put_le(b.data() + 12, psn & detail::max_24bit);
  detail::put_le(b.data() + 16, lid);
  b[18] = static_cast<std::byte>(gid_kind ? static_cast<int>(*gid_kind) + 1 : 0);
  for (int i = 0; i < 16; i++)
    b[20 + i] = static_cast<std::byte>(gid_value.raw[i]);
  detail::put_le(b.data() + 36, qkey);
  detail::put_le(b.data() + 40, mtu);
  return b;
}

// Accepts exactly what serialize() writes: the header, QPN and PSN below
// 2^24, the reserved bytes zero (otherwise errc::bad_blob).
result<endpoint> endpoint::parse(std::span<const std::byte> b) {
  if (auto ec = detail::check_header(b, endpoint_magic, format_version, serialized_size))
    return ec;
  endpoint e;
  e.qpn = detail::get_le<std::uint32_t>(b.data() + 8);
  e.psn = detail::get_le<std::uint32_t>(b.data() + 12);
  const auto kind = static_cast<std::uint8_t>(b[18]);
  if (e.qpn > detail::max_24bit || e.psn > detail::max_24bit || kind > 3 ||
      !detail::zero_bytes(b, 19, 1))
    return errc::bad_blob;
  if (kind)
    e.gid_kind = static_cast<gid_type>(kind - 1);
  e.lid = detail::get_le<std::uint16_t>(b.data() + 16);
  for (int i = 0; i < 16; i++)
    e.gid_value.raw[i] = static_cast<std::uint8_t>(b[20 + i]);
  e.qkey = detail::get_le<std::uint32_t>(b.data() + 36);
  e.mtu = detail::get_le<std::uint32_t>(b.data() + 40);
  return e;
}

namespace detail {

// Port, LID, link layer, MTU, atomics limits and GID of q, from the device
// (dev: its attributes, which the caller has queried already): port 0 means
// the first active port; gid_index >= 0 forces that entry, else opts.gid
// selects one (required on RoCE).
status_code init_path(qp_node &q, const context &ctx, const device_attr &dev, std::uint8_t port,
                      int gid_index, const gid_selector &sel) {
  if (!port) {
    auto p = ctx.first_active_port();
    if (!p)
      return p.error();
    port = *p;
  }
  auto pa = ctx.query_port(port);
  if (!pa)
    return pa.error();
  q.port = port;
  q.lid = pa->lid;
  q.link = pa->link;
  q.active_mtu = pa->active_mtu;
  q.max_rd_atom = std::max(1, dev.max_qp_rd_atom);
  q.max_init_rd_atom = std::max(1, dev.max_qp_init_rd_atom);
  if (gid_index >= 0) {
    auto table = ctx.gid_table(port);
    if (!table)
      return table.error();
    auto it = std::find_if(table->begin(), table->end(), [&](const gid_entry &e) {
      return e.index == static_cast<std::uint32_t>(gid_index);
    });
    if (it == table->end())
      return errc::no_such_gid;
    q.gid_index = gid_index;
    q.local_gid = it->value;
    q.local_gid_type = it->type;
    return {};
  }
  auto g = ctx.select_gid(port, sel);
  if (g) {
    q.gid_index = static_cast<int>(g->index);
    q.local_gid = g->value;
    q.local_gid_type = g->type;
  } else if (pa->link != link_layer::infiniband) {
    return g.error();
  }
  return {};
}

// What a QP made elsewhere tells about its path: its port once past RESET,
// and the source GID index of its address vector once connected. The rest
// comes from init_path.
status_code init_from_qp(qp_node &q, const context &ctx, std::uint8_t port, int gid_index,
                         const gid_selector &sel) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  if (ibv_query_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_AV | IBV_QP_SQ_PSN, &ia) == 0) {
    if (a.qp_state != IBV_QPS_RESET && a.port_num)
      port = a.port_num;
    q.psn = a.sq_psn & 0xffffff;
    if (a.qp_state >= IBV_QPS_RTR && a.qp_state <= IBV_QPS_SQD && a.ah_attr.is_global)
      gid_index = a.ah_attr.grh.sgid_index;
  }
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  return init_path(q, ctx, *dev, port, gid_index, sel);
}

} // namespace detail

// ---- address_handle, shared_receive_queue ----

namespace {
void fill_ah(ibv_ah_attr &a, const detail::qp_node &s, const endpoint &peer, std::uint8_t sl,
             std::uint8_t hop_limit, std::uint8_t tclass) noexcept {
  a = {};
  a.dlid = peer.lid;
  a.sl = sl;
  a.port_num = s.port;
  if (s.link != link_layer::infiniband || !peer.gid_value.is_zero()) {
    a.is_global = 1;
    std::memcpy(a.grh.dgid.raw, peer.gid_value.raw.data(), 16);
    a.grh.sgid_index = static_cast<std::uint8_t>(s.gid_index);
    a.grh.hop_limit = hop_limit;
    a.grh.traffic_class = tclass;
  }
}
} // namespace

result<address_handle> address_handle::create(const protection_domain &pd, const queue_pair &local,
                                              const endpoint &peer) {
  auto &q = detail::access::node(local);
  if (!pd || !q)
    return detail::rdma_error(errc::empty_object);
  if (!pd.native_handle()) // a software PD (a channel without a device)
    return std::errc::operation_not_supported;
  ibv_ah_attr a;
  fill_ah(a, *q, peer, 0, 64, 0);
  return detail::access::adopt<address_handle>(
      ibv_create_ah(pd.native_handle(), &a), &detail::ah_node::ah,
      [&](detail::ah_node &n) { n.pd = detail::access::node(pd); });
}

result<shared_receive_queue> shared_receive_queue::create(const protection_domain &pd,
                                                          std::uint32_t depth,
                                                          std::uint32_t max_sge) {
  if (!pd)
    return detail::rdma_error(errc::empty_object);
  if (!pd.native_handle()) // a software PD (a channel without a device)
    return std::errc::operation_not_supported;
  ibv_device_attr da{};
  if (int rc = ibv_query_device(pd.native_handle()->context, &da))
    return detail::rdma_error(rc);
  ibv_srq_init_attr a{};
  a.attr.max_wr = detail::clamp_to(depth, da.max_srq_wr);
  a.attr.max_sge = detail::clamp_to(max_sge, da.max_srq_sge);
  return detail::access::adopt<shared_receive_queue>(
      ibv_create_srq(pd.native_handle(), &a), &detail::srq_node::srq,
      [&](detail::srq_node &n) { n.pd = detail::access::node(pd); });
}

// ---- queue_pair ----

ibv_qp_init_attr_ex detail::qp_init_attr(const device_attr &dev, const qp_options &opts, ibv_pd *pd,
                                         ibv_cq *send_cq, ibv_cq *recv_cq) noexcept {
  ibv_qp_init_attr_ex ax{};
  ax.qp_type = opts.type == qp_type::rc   ? IBV_QPT_RC
               : opts.type == qp_type::uc ? IBV_QPT_UC
                                          : IBV_QPT_UD;
  ax.send_cq = send_cq;
  ax.recv_cq = recv_cq;
  ax.srq = opts.srq ? opts.srq->native_handle() : nullptr;
  ax.cap.max_send_wr = clamp_to(opts.send_depth, dev.max_qp_wr);
  ax.cap.max_recv_wr = opts.srq ? 0 : clamp_to(opts.recv_depth, dev.max_qp_wr);
  ax.cap.max_send_sge = clamp_to(opts.max_send_sge, dev.max_sge);
  ax.cap.max_recv_sge = opts.srq ? 0 : clamp_to(opts.max_recv_sge, dev.max_sge);
  ax.cap.max_inline_data = opts.max_inline;
  ax.pd = pd;
  ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ax.send_ops_flags = qp_ex_send_ops(ax.qp_type);
  return ax;
}

result<queue_pair> queue_pair::create(const context &ctx, const protection_domain &pd,
                                      const completion_queue &send_cq,
                                      const completion_queue &recv_cq, const qp_options &opts) {
  if (!ctx || !pd || !send_cq || !recv_cq || (opts.srq && !*opts.srq))
    return detail::rdma_error(errc::empty_object);
  if (!pd.native_handle()) // a software PD (a channel without a device)
    return std::errc::operation_not_supported;
  detail::clear_error_detail();
  auto n = std::make_shared<detail::qp_node>();
  n->type = opts.type;
  n->qkey = opts.type == qp_type::ud ? opts.qkey : 0;
  // One query of the device for both the path and the queue sizes.
  auto dev = ctx.query_device();
  if (!dev)
    return dev.error();
  if (auto st = detail::init_path(*n, ctx, *dev, opts.port, opts.gid_index, opts.gid); !st.ok())
    return st;

  ibv_qp_init_attr_ex ax = detail::qp_init_attr(*dev, opts, pd.native_handle(),
                                                send_cq.native_handle(), recv_cq.native_handle());
  if (opts.wr_api && ctx.supports(feature::wr_api)) {
    errno = 0;
    if (ibv_qp *qp = ibv_create_qp_ex(ctx.native_handle(), &ax)) {
      n->qpx = ibv_qp_to_qp_ex(qp);
      if (n->qpx) {
        n->qp = qp;
      } else {
        detail::forget_refusal(); // a plain QP instead
        ibv_destroy_qp(qp);
      }
    } else if (!detail::not_offered(errno)) {
      return detail::resource_error("ibv_create_qp_ex", "queue pair", "max_qp", dev->max_qp, errno);
    }
  }
  if (!n->qp) {
    ibv_qp_init_attr a = detail::plain(ax);
    n->qp = ibv_create_qp(pd.native_handle(), &a);
    if (!n->qp)
      return detail::resource_error("ibv_create_qp", "queue pair", "max_qp", dev->max_qp, errno);
  }
  n->kind = detail::qp_node::owner_kind::verbs;
  n->pd = detail::access::node(pd);
  n->send_cq = detail::access::node(send_cq);
  n->recv_cq = detail::access::node(recv_cq);
  if (opts.srq)
    n->srq = detail::access::node(*opts.srq);
  n->psn = fresh_psn(n->qp->qp_num);
  return detail::access::make<queue_pair>(std::move(n));
}

result<queue_pair> queue_pair::borrow(ibv_qp *qp, qp_type type, const qp_options &opts) {
  if (!qp)
    return detail::rdma_error(errc::empty_object);
  auto n = std::make_shared<detail::qp_node>();
  n->qp = qp;
  n->type = type;
  n->qkey = type == qp_type::ud ? opts.qkey : 0;
  context ctx = detail::borrow_context(qp->context, nullptr);
  if (auto st = detail::init_from_qp(*n, ctx, opts.port, opts.gid_index, opts.gid); !st.ok())
    return st;
  return detail::access::make<queue_pair>(std::move(n));
}

namespace detail {
int empty_post_send(ibv_qp *, ibv_send_wr *wr, ibv_send_wr **bad) noexcept {
  *bad = wr;
  return ENXIO;
}
int empty_post_recv(ibv_qp *, ibv_recv_wr *wr, ibv_recv_wr **bad) noexcept {
  *bad = wr;
  return ENXIO;
}
int empty_post_srq_recv(ibv_srq *, ibv_recv_wr *wr, ibv_recv_wr **bad) noexcept {
  *bad = wr;
  return ENXIO;
}
} // namespace detail

status_code queue_pair::refused() const noexcept {
  if (!qp_)
    return detail::empty_status();
  return errc::wrong_qp_type;
}

std::uint8_t queue_pair::port() const noexcept {
  return n_ ? n_->port : 0;
}
qp_type queue_pair::type() const noexcept {
  return n_ ? n_->type : qp_type::rc;
}
bool queue_pair::uses_wr_api() const noexcept {
  return n_ && n_->qpx;
}

result<endpoint> queue_pair::local_endpoint() const {
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  endpoint e;
  e.qpn = n_->qp->qp_num;
  e.psn = n_->psn;
  e.lid = n_->lid;
  e.gid_value = n_->local_gid;
  e.qkey = n_->qkey;
  e.mtu = n_->active_mtu;
  e.gid_kind = n_->local_gid_type;
  return e;
}

namespace {

// A GID as an address: "::ffff:192.0.2.1", "fe80::202:c9ff:fe12:3456".
std::string show(const gid &g) {
  char buf[INET6_ADDRSTRLEN];
  if (!inet_ntop(AF_INET6, g.raw.data(), buf, sizeof buf))
    return g.to_string();
  return buf;
}

bool link_local(const gid &g) noexcept {
  return g.raw[0] == 0xfe && (g.raw[1] & 0xc0) == 0x80;
}

bool valid_mtu(std::uint32_t m) noexcept {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

// "fe80::1 (GID index 2, RoCE v2, port 1)": our side of the path.
std::string ours(const detail::qp_node &s) {
  return detail::format("%s (GID index %d, %s, port %u)", show(s.local_gid).c_str(), s.gid_index,
                        s.local_gid_type ? std::string(name(*s.local_gid_type)).c_str() : "no type",
                        static_cast<unsigned>(s.port));
}

const char *family(const gid &g) noexcept {
  return g.is_ipv4_mapped() ? "IPv4" : "IPv6";
}

// The path MTU connect() uses: the smallest of our port's active MTU (1024
// when it reports none), the peer's (when its endpoint says one) and
// opts.transport.mtu (when set).
std::uint32_t path_mtu(const detail::qp_node &s, const endpoint &peer,
                       const connect_options &opts) noexcept {
  std::uint32_t mtu = s.active_mtu ? s.active_mtu : 1024;
  if (peer.mtu)
    mtu = std::min(mtu, peer.mtu);
  if (opts.transport.mtu)
    mtu = std::min(mtu, opts.transport.mtu);
  return mtu;
}

// What the verbs would refuse with a bare EINVAL, or accept and then fail
// with RETRY_EXC_ERR: a peer endpoint this QP cannot reach. Checked before
// the first modify, with a sentence for last_error_detail().
status_code check_peer(const detail::qp_node &s, const endpoint &peer) {
  if (peer.qpn < 2 || peer.qpn > detail::max_24bit)
    return detail::fail(
        errc::bad_peer_qpn,
        detail::format("peer's QPN is 0x%x: QPs 0 and 1 are the management QPs and a QPN has 24 "
                       "bits, so the endpoint is empty or garbled (pass what the peer's "
                       "queue_pair::local_endpoint() gave, serialised and parsed)",
                       peer.qpn));
  if (peer.mtu && !valid_mtu(peer.mtu))
    return detail::fail(errc::bad_peer_mtu,
                        detail::format("peer's MTU is %u bytes, which no port has (256, 512, "
                                       "1024, 2048 or 4096): the endpoint is garbled",
                                       peer.mtu));
  const unsigned port = s.port;
  if (s.link == link_layer::infiniband) {
    if (peer.gid_kind && *peer.gid_kind != gid_type::ib)
      return detail::fail(
          errc::gid_mismatch,
          detail::format("peer's GID %s is %s: the peer is on Ethernet (RoCE), but our port %u "
                         "is InfiniBand; the two cannot reach each other",
                         show(peer.gid_value).c_str(), std::string(name(*peer.gid_kind)).c_str(),
                         port));
    if (s.lid == 0)
      return detail::fail(errc::no_lid,
                          detail::format("our port %u is InfiniBand with LID 0: no subnet manager "
                                         "has configured it (start one, e.g. opensm; `ibstat` "
                                         "shows the port's base LID)",
                                         port));
    if (peer.lid == 0)
      return detail::fail(
          errc::no_lid,
          detail::format("peer's LID is 0 but our port %u is InfiniBand, which routes by LID: "
                         "the peer's port has no subnet manager, or the peer is on RoCE (its "
                         "GID %s) and cannot reach an InfiniBand port",
                         port, show(peer.gid_value).c_str()));
    return {};
  }
  if (s.link != link_layer::ethernet)
    return {};
  if (peer.gid_kind == gid_type::ib)
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID %s is an InfiniBand one: the peer is on InfiniBand, but our "
                       "port %u is Ethernet (RoCE); the two cannot reach each other",
                       show(peer.gid_value).c_str(), port));
  if (peer.gid_value.is_zero())
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID is zero (its LID %u): it is on InfiniBand or its endpoint came "
                       "from a port without a RoCE GID, but our port %u is Ethernet (RoCE), "
                       "which routes by GID",
                       static_cast<unsigned>(peer.lid), port));
  if (s.local_gid.is_zero())
    return {}; // a borrowed QP whose GID we could not learn: let the verbs decide
  const gid &mine = s.local_gid, &theirs = peer.gid_value;
  if (peer.gid_kind && s.local_gid_type && *peer.gid_kind != *s.local_gid_type)
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID is %s (%s), ours %s: both sides need the same RoCE version; "
                       "set qp_options::gid.type (or qp_options::gid_index) so they match",
                       std::string(name(*peer.gid_kind)).c_str(), show(theirs).c_str(),
                       ours(s).c_str()));
  if (mine.is_ipv4_mapped() != theirs.is_ipv4_mapped())
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID is %s (%s), ours %s (%s): both sides need GIDs of one address "
                       "family; choose ours with qp_options::gid (gid_selector::ipv4 picks an "
                       "IPv4 one) or qp_options::gid_index, and the peer's the same way",
                       show(theirs).c_str(), family(theirs), ours(s).c_str(), family(mine)));
  if (!mine.is_ipv4_mapped() && link_local(mine) != link_local(theirs))
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID is %s (%s), ours %s (%s): a link-local GID reaches only its "
                       "own link; use GIDs of the same scope on both sides (qp_options::gid_index)",
                       show(theirs).c_str(), link_local(theirs) ? "link-local" : "global",
                       ours(s).c_str(), link_local(mine) ? "link-local" : "global"));
  if (!mine.is_ipv4_mapped() && s.local_gid_type == gid_type::roce_v1 &&
      !std::equal(mine.raw.begin(), mine.raw.begin() + 8, theirs.raw.begin()))
    return detail::fail(
        errc::gid_mismatch,
        detail::format("peer's GID %s is on another /64 subnet than ours %s, and RoCE v1 is not "
                       "routed: use RoCE v2 GIDs (qp_options::gid.type = gid_type::roce_v2) on "
                       "both sides, or GIDs of one subnet",
                       show(theirs).c_str(), ours(s).c_str()));
  return {};
}

// The sentence for a modify that failed: the error, then every path field
// connect() gave, so the one that is wrong can be seen.
status_code modify_failed(int rc, const char *to, const detail::qp_node &s, const endpoint &peer,
                          const connect_options &opts) {
  std::error_code ec = detail::rdma_error(rc);
  return detail::fail(
      ec, detail::format(
              "ibv_modify_qp to %s failed (%s); path MTU %u bytes (our port %u: %u, "
              "peer: %u, connect_options::transport.mtu: %u), peer QPN 0x%x PSN 0x%x LID %u GID "
              "%s, ours %s LID %u",
              to, ec.message().c_str(), path_mtu(s, peer, opts), static_cast<unsigned>(s.port),
              s.active_mtu, peer.mtu, opts.transport.mtu, peer.qpn, peer.psn,
              static_cast<unsigned>(peer.lid), show(peer.gid_value).c_str(), ours(s).c_str(),
              static_cast<unsigned>(s.lid)));
}

} // namespace

result<void> queue_pair::connect(const endpoint &peer, const connect_options &opts) {
  detail::clear_error_detail();
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  detail::qp_node &s = *n_;
  const transport_options &t = opts.transport;
  if (s.type != qp_type::ud)
    if (auto st = check_peer(s, peer); !st.ok())
      return st;
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
    return modify_failed(rc, "INIT", s, peer, opts);

  a = {};
  a.qp_state = IBV_QPS_RTR;
  mask = IBV_QP_STATE;
  if (s.type != qp_type::ud) {
    a.path_mtu = detail::mtu_enum(path_mtu(s, peer, opts));
    a.dest_qp_num = peer.qpn & 0xffffff;
    a.rq_psn = peer.psn & 0xffffff;
    fill_ah(a.ah_attr, s, peer, opts.sl, opts.hop_limit, opts.traffic_class);
    mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    if (s.type == qp_type::rc) {
      int rd = t.max_rd_atomic ? std::min<int>(t.max_rd_atomic, s.max_rd_atom) : s.max_rd_atom;
      a.max_dest_rd_atomic = static_cast<std::uint8_t>(std::min(rd, 255));
      a.min_rnr_timer = t.min_rnr_timer;
      mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    }
  }
  if (int rc = ibv_modify_qp(s.qp, &a, mask))
    return modify_failed(rc, "RTR", s, peer, opts);

  a = {};
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = s.psn & 0xffffff;
  mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
  if (s.type == qp_type::rc) {
    int rd =
        t.max_rd_atomic ? std::min<int>(t.max_rd_atomic, s.max_init_rd_atom) : s.max_init_rd_atom;
    a.max_rd_atomic = static_cast<std::uint8_t>(std::min(rd, 255));
    a.timeout = t.ack_timeout;
    a.retry_cnt = std::min<std::uint8_t>(t.retry_count, 7);
    a.rnr_retry = std::min<std::uint8_t>(t.rnr_retry, 7);
    mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  if (int rc = ibv_modify_qp(s.qp, &a, mask))
    return modify_failed(rc, "RTS", s, peer, opts);
  return {};
}

result<void> queue_pair::to_error() noexcept {
  if (!n_)
    return detail::rdma_error(errc::empty_object);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (int rc = ibv_modify_qp(n_->qp, &a, IBV_QP_STATE))
    return detail::rdma_error(rc);
  return {};
}

// ---- send_batch ----

send_batch queue_pair::batch() noexcept {
  return send_batch(n_);
}

send_batch::send_batch(const std::shared_ptr<detail::qp_node> &q) noexcept : q_(q) {
  if (!q_) {
    err_ = detail::rdma_error(errc::empty_object);
    return;
  }
  bool expected = false;
  owner_ = q_->batch_open.compare_exchange_strong(expected, true, std::memory_order_acquire);
  if (!owner_)
    err_ = errc::batch_busy;
}

send_batch::~send_batch() {
  if (started_)
    ibv_wr_abort(q_->qpx);
  if (owner_)
    q_->batch_open.store(false, std::memory_order_release);
}

namespace {
// Whether a QP of type t can carry op (the WR API QP is created with exactly
// these operations: detail::qp_ex_send_ops).
bool allowed(qp_type t, wr_opcode op) noexcept {
  switch (op) {
  case wr_opcode::send:
  case wr_opcode::send_imm:
    return t != qp_type::ud; // a UD send needs an address: post_send_ud()
  case wr_opcode::rdma_write:
  case wr_opcode::rdma_write_imm:
    return t != qp_type::ud;
  default:
    return t == qp_type::rc;
  }
}

// Adds w through the WR API (between ibv_wr_start and ibv_wr_complete).
void emit_wr(ibv_qp_ex *x, const send_request &w) noexcept {
  x->wr_id = w.wr_id;
  x->wr_flags = static_cast<unsigned>(w.flags) & ~static_cast<unsigned>(IBV_SEND_INLINE);
  switch (w.opcode) {
  case wr_opcode::send:
    ibv_wr_send(x);
    break;
  case wr_opcode::send_imm:
    ibv_wr_send_imm(x, w.imm_be);
    break;
  case wr_opcode::rdma_write:
    ibv_wr_rdma_write(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr);
    break;
  case wr_opcode::rdma_write_imm:
    ibv_wr_rdma_write_imm(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr, w.imm_be);
    break;
  case wr_opcode::rdma_read:
    ibv_wr_rdma_read(x, w.wr.rdma.rkey, w.wr.rdma.remote_addr);
    break;
  case wr_opcode::comp_swap:
    ibv_wr_atomic_cmp_swp(x, w.wr.atomic.rkey, w.wr.atomic.remote_addr, w.wr.atomic.compare_add,
                          w.wr.atomic.swap);
    break;
  case wr_opcode::fetch_add:
    ibv_wr_atomic_fetch_add(x, w.wr.atomic.rkey, w.wr.atomic.remote_addr, w.wr.atomic.compare_add);
    break;
  }
  const local_slice &s = *w.sg_list;
  if (static_cast<unsigned>(w.flags) & IBV_SEND_INLINE)
    ibv_wr_set_inline_data(x, s.data(), s.length);
  else
    ibv_wr_set_sge(x, s.lkey, s.addr, s.length);
}
} // namespace

void send_batch::add(const send_request &w) noexcept {
  if (err_)
    return;
  if (!allowed(q_->type, w.opcode)) {
    err_ = errc::wrong_qp_type;
    return;
  }
  if (n_ == max_size) {
    err_ = errc::batch_full;
    return;
  }
  detail::qp_node &q = *q_;
  if (q.qpx) {
    if (!started_) {
      ibv_wr_start(q.qpx);
      started_ = true;
    }
    emit_wr(q.qpx, w);
  } else {
    // Copy the request and its scatter element: the caller's slice may be a
    // temporary that dies before commit().
    if (!q.batch) {
      q.batch.reset(new (std::nothrow) detail::qp_node::batch_storage);
      if (!q.batch) {
        err_ = std::errc::not_enough_memory;
        return;
      }
    }
    auto &b = *q.batch;
    ibv_send_wr &d = b.wrs[n_];
    std::memcpy(&d, &w, sizeof d);
    b.sges[n_] = ibv_sge{w.sg_list->addr, w.sg_list->length, w.sg_list->lkey};
    d.sg_list = &b.sges[n_];
    d.num_sge = 1;
    d.next = nullptr;
    if (n_)
      b.wrs[n_ - 1].next = &d;
  }
  n_++;
}

send_batch &send_batch::send(const local_slice &buf, std::uint64_t wr_id,
                             send_flags flags) noexcept {
  add(send_request::send(buf, wr_id, flags));
  return *this;
}
send_batch &send_batch::send_imm(const local_slice &buf, std::uint32_t imm, std::uint64_t wr_id,
                                 send_flags flags) noexcept {
  add(send_request::send_imm(buf, imm, wr_id, flags));
  return *this;
}
send_batch &send_batch::write(const local_slice &buf, const remote_region &dst, std::uint64_t wr_id,
                              send_flags flags) noexcept {
  add(send_request::write(buf, dst, wr_id, flags));
  return *this;
}
send_batch &send_batch::write_imm(const local_slice &buf, const remote_region &dst,
                                  std::uint32_t imm, std::uint64_t wr_id,
                                  send_flags flags) noexcept {
  add(send_request::write_imm(buf, dst, imm, wr_id, flags));
  return *this;
}
send_batch &send_batch::read(const local_slice &buf, const remote_region &src, std::uint64_t wr_id,
                             send_flags flags) noexcept {
  add(send_request::read(buf, src, wr_id, flags));
  return *this;
}

result<void> send_batch::commit() noexcept {
  if (err_) {
    if (started_)
      ibv_wr_abort(q_->qpx);
    started_ = false;
    n_ = 0;
    status_code e = err_;
    if (owner_)
      err_ = {}; // the batch can be filled again
    return e;
  }
  if (!n_)
    return errc::empty_span;
  n_ = 0;
  if (started_) {
    started_ = false;
    if (int rc = ibv_wr_complete(q_->qpx))
      return detail::rdma_error(rc);
    return {};
  }
  ibv_send_wr *bad = nullptr;
  if (int rc = ibv_post_send(q_->qp, &q_->batch->wrs[0], &bad))
    return detail::rdma_error(rc);
  return {};
}

} // namespace rdmadl
