// SPDX-License-Identifier: MIT
#include "rdmadl_verbs.h"
#include "refusal.h"

#include <cerrno>
#include <cstdio>
#include <dlfcn.h>
#include <endian.h>
#include <utility>

#include "detail.hpp"
#include "fd.hpp"
#include "nodes.hpp"
#include "rdmadl/device.hpp"

namespace rdmadl {

std::string_view name(node_type v) noexcept {
  static constexpr std::string_view n[] = {"unknown", "CA",    "switch",    "router",
                                           "RNIC",    "usNIC", "usNIC UDP", "unspecified"};
  return detail::pick(n, v);
}
std::string_view name(transport v) noexcept {
  static constexpr std::string_view n[] = {"unknown", "InfiniBand", "iWARP",
                                           "usNIC",   "usNIC UDP",  "unspecified"};
  return detail::pick(n, v);
}
std::string_view name(link_layer v) noexcept {
  static constexpr std::string_view n[] = {"unspecified", "InfiniBand", "Ethernet"};
  return detail::pick(n, v);
}
std::string_view name(port_state v) noexcept {
  static constexpr std::string_view n[] = {"NOP",   "DOWN",   "INIT",
                                           "ARMED", "ACTIVE", "ACTIVE_DEFER"};
  return detail::pick(n, v);
}
std::string_view name(atomic_cap v) noexcept {
  static constexpr std::string_view n[] = {"none", "HCA", "global"};
  return detail::pick(n, v);
}
std::string_view name(gid_type v) noexcept {
  static constexpr std::string_view n[] = {"IB", "RoCE v1", "RoCE v2"};
  return detail::pick(n, v);
}

std::string_view name(async_event_type v) noexcept {
  auto i = static_cast<int>(v);
  if (i < 0 || i > static_cast<int>(async_event_type::device_speed_change))
    return "unknown";
  const char *n = ibv_event_type_str(static_cast<ibv_event_type>(i));
  return n ? n : "unknown";
}

bool gid::is_zero() const noexcept {
  for (auto b : raw)
    if (b)
      return false;
  return true;
}
bool gid::is_ipv4_mapped() const noexcept {
  for (int i = 0; i < 10; i++)
    if (raw[i])
      return false;
  return raw[10] == 0xff && raw[11] == 0xff;
}
std::uint32_t gid::ipv4() const noexcept {
  std::uint32_t v;
  __builtin_memcpy(&v, raw.data() + 12, 4);
  return v;
}
std::string gid::to_string() const {
  char buf[40];
  std::snprintf(buf, sizeof buf,
                "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", raw[0],
                raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10],
                raw[11], raw[12], raw[13], raw[14], raw[15]);
  return buf;
}

std::string_view device::name() const noexcept {
  const char *n = dev_ ? ibv_get_device_name(dev_) : nullptr;
  return n ? n : "";
}
std::uint64_t device::guid() const noexcept {
  return dev_ ? be64toh(ibv_get_device_guid(dev_)) : 0;
}
node_type device::node() const noexcept {
  // node_type's enumerators carry IBV_NODE_CA .. IBV_NODE_UNSPECIFIED's values (src/abi.cpp).
  const int v = dev_ ? dev_->node_type : IBV_NODE_UNKNOWN;
  return v >= IBV_NODE_CA && v <= IBV_NODE_UNSPECIFIED ? static_cast<node_type>(v)
                                                       : node_type::unknown;
}
transport device::transport_type() const noexcept {
  // transport's enumerators are IBV_TRANSPORT_IB .. IBV_TRANSPORT_UNSPECIFIED's
  // values + 1, after unknown (src/abi.cpp).
  const int v = dev_ ? dev_->transport_type : IBV_TRANSPORT_UNKNOWN;
  return v >= IBV_TRANSPORT_IB && v <= IBV_TRANSPORT_UNSPECIFIED ? static_cast<transport>(v + 1)
                                                                 : transport::unknown;
}

result<device_list> device_list::get() {
  int n = 0;
  errno = 0;
  ibv_device **l = ibv_get_device_list(&n);
  // What the list says is the stack's state the error paths read
  // (detail::rdma_error), so that they never list the devices again.
  if (!l) {
    if (errno == ENOSYS) {
      rdmadl_stack_seen_note(RDMADL_STACK_NO_KERNEL_SUPPORT);
      return errc::no_kernel_support;
    }
    return detail::rdma_error();
  }
  if (n <= 0) {
    rdmadl_stack_seen_note(RDMADL_STACK_NO_DEVICES);
    ibv_free_device_list(l);
    return errc::no_devices;
  }
  rdmadl_stack_seen_note(RDMADL_STACK_READY);
  device_list d;
  d.list_ = l;
  d.n_ = static_cast<std::size_t>(n);
  return d;
}
device_list &device_list::operator=(device_list &&o) noexcept {
  if (this != &o) {
    if (list_)
      ibv_free_device_list(list_);
    list_ = std::move(o.list_);
    n_ = std::move(o.n_);
  }
  return *this;
}
device_list::~device_list() {
  if (list_)
    ibv_free_device_list(list_);
}
result<device> device_list::find(std::string_view want) const {
  for (auto d : *this)
    if (d.name() == want)
      return d;
  return errc::no_devices;
}

result<context> context::open(std::string_view name) {
  auto list = device_list::get();
  if (!list)
    return list.error();
  if (name.empty())
    return open((*list)[0]);
  auto d = list->find(name);
  if (!d)
    return d.error();
  return open(*d);
}
result<context> context::open(const device &d) {
  if (!d.native_handle())
    return detail::rdma_error(errc::empty_object);
  return detail::access::adopt<context>(ibv_open_device(d.native_handle()), &detail::ctx_node::ctx,
                                        [](detail::ctx_node &n) { n.owned = true; });
}
context context::borrow(ibv_context *c) noexcept {
  return detail::borrow_context(c, nullptr);
}

namespace detail {
context borrow_context(ibv_context *c, keepalive owner) noexcept {
  context ctx;
  if (!c)
    return ctx;
  auto n = std::make_shared<ctx_node>();
  n->ctx = c;
  n->owner = std::move(owner);
  access::set(ctx, std::move(n));
  return ctx;
}
} // namespace detail

std::string_view context::device_name() const noexcept {
  if (!ctx_)
    return {};
  const char *n = ibv_get_device_name(ctx_.get()->device);
  return n ? n : "";
}

int context::async_fd() const noexcept {
  return ctx_ ? ctx_.get()->async_fd : -1;
}

result<async_event> context::next_event(std::chrono::milliseconds timeout) const {
  if (!ctx_)
    return detail::rdma_error(errc::empty_object);
  int fd = ctx_.get()->async_fd;
  if (auto ec = detail::set_nonblocking(fd))
    return ec;
  ibv_async_event ev;
  if (auto ec = detail::take_when_readable(fd, detail::deadline(timeout),
                                           [&] { return ibv_get_async_event(ctx_, &ev) == 0; }))
    return ec;
  async_event out;
  out.type = static_cast<async_event_type>(ev.event_type);
  switch (ev.event_type) {
  case IBV_EVENT_CQ_ERR:
    out.cq = ev.element.cq;
    break;
  case IBV_EVENT_SRQ_ERR:
  case IBV_EVENT_SRQ_LIMIT_REACHED:
    out.srq = ev.element.srq;
    break;
  case IBV_EVENT_PORT_ACTIVE:
  case IBV_EVENT_PORT_ERR:
  case IBV_EVENT_LID_CHANGE:
  case IBV_EVENT_PKEY_CHANGE:
  case IBV_EVENT_SM_CHANGE:
  case IBV_EVENT_CLIENT_REREGISTER:
  case IBV_EVENT_GID_CHANGE:
  case IBV_EVENT_DEVICE_SPEED_CHANGE:
    out.port = static_cast<std::uint32_t>(ev.element.port_num);
    break;
  case IBV_EVENT_DEVICE_FATAL:
  case IBV_EVENT_WQ_FATAL:
    break;
  default: // the QP events
    out.qp_num = ev.element.qp ? ev.element.qp->qp_num : 0;
    break;
  }
  ibv_ack_async_event(&ev);
  return out;
}

result<device_attr> context::query_device() const {
  if (!ctx_)
    return detail::rdma_error(errc::empty_object);
  ibv_device_attr a{};
  if (int rc = ibv_query_device(ctx_, &a))
    return detail::rdma_error(rc);
  device_attr d;
  d.fw_ver = a.fw_ver;
  d.node_guid = be64toh(a.node_guid);
  d.sys_image_guid = be64toh(a.sys_image_guid);
  d.max_mr_size = a.max_mr_size;
  d.page_size_cap = a.page_size_cap;
  d.vendor_id = a.vendor_id;
  d.vendor_part_id = a.vendor_part_id;
  d.hw_ver = a.hw_ver;
  d.max_qp = a.max_qp;
  d.max_qp_wr = a.max_qp_wr;
  d.max_sge = a.max_sge;
  d.max_sge_rd = a.max_sge_rd;
  d.max_cq = a.max_cq;
  d.max_cqe = a.max_cqe;
  d.max_mr = a.max_mr;
  d.max_pd = a.max_pd;
  d.max_qp_rd_atom = a.max_qp_rd_atom;
  d.max_qp_init_rd_atom = a.max_qp_init_rd_atom;
  d.max_srq = a.max_srq;
  d.max_srq_wr = a.max_srq_wr;
  d.max_srq_sge = a.max_srq_sge;
  d.max_ah = a.max_ah;
  d.max_mcast_grp = a.max_mcast_grp;
  d.device_cap_flags = a.device_cap_flags;
  d.atomic = a.atomic_cap == IBV_ATOMIC_HCA    ? atomic_cap::hca
             : a.atomic_cap == IBV_ATOMIC_GLOB ? atomic_cap::glob
                                               : atomic_cap::none;
  d.phys_port_cnt = a.phys_port_cnt;
  return d;
}

result<port_attr> context::query_port(std::uint8_t port) const {
  if (!ctx_)
    return detail::rdma_error(errc::empty_object);
  ibv_port_attr a{};
  if (int rc = ibv_query_port(ctx_, port, &a))
    return detail::rdma_error(rc);
  port_attr p;
  p.state = a.state <= IBV_PORT_ACTIVE_DEFER ? static_cast<port_state>(a.state) : port_state::nop;
  p.max_mtu = detail::mtu_bytes(a.max_mtu);
  p.active_mtu = detail::mtu_bytes(a.active_mtu);
  p.gid_tbl_len = static_cast<std::uint32_t>(a.gid_tbl_len);
  p.port_cap_flags = a.port_cap_flags;
  p.max_msg_sz = a.max_msg_sz;
  p.lid = a.lid;
  p.sm_lid = a.sm_lid;
  p.lmc = a.lmc;
  p.active_width = a.active_width;
  p.active_speed = a.active_speed;
  p.link = a.link_layer == IBV_LINK_LAYER_INFINIBAND ? link_layer::infiniband
           : a.link_layer == IBV_LINK_LAYER_ETHERNET ? link_layer::ethernet
                                                     : link_layer::unspecified;
  return p;
}

result<std::uint8_t> context::first_active_port() const {
  auto d = query_device();
  if (!d)
    return d.error();
  for (int p = 1; p <= d->phys_port_cnt; p++) {
    auto a = query_port(static_cast<std::uint8_t>(p));
    if (a && a->state == port_state::active)
      return static_cast<std::uint8_t>(p);
  }
  return errc::no_active_port;
}

result<std::vector<gid_entry>> context::gid_table(std::uint8_t port) const {
  auto pa = query_port(port);
  if (!pa)
    return pa.error();
  // ibv_query_gid_table covers every port; ask for all of them and filter.
  auto d = query_device();
  if (!d)
    return d.error();
  std::size_t max = static_cast<std::size_t>(pa->gid_tbl_len) * d->phys_port_cnt;
  std::vector<ibv_gid_entry> raw(max ? max : 1);
  ssize_t n = ibv_query_gid_table(ctx_, raw.data(), raw.size(), 0);
  if (n < 0)
    return detail::rdma_error(static_cast<int>(n));
  std::vector<gid_entry> out;
  for (ssize_t i = 0; i < n; i++) {
    const ibv_gid_entry &e = raw[static_cast<std::size_t>(i)];
    if (e.port_num != port)
      continue;
    gid_entry g;
    __builtin_memcpy(g.value.raw.data(), e.gid.raw, 16);
    g.index = e.gid_index;
    g.port = e.port_num;
    g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? gid_type::roce_v2
             : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? gid_type::roce_v1
                                                  : gid_type::ib;
    g.ndev_ifindex = e.ndev_ifindex;
    out.push_back(g);
  }
  return out;
}

result<gid_entry> context::select_gid(std::uint8_t port, const gid_selector &sel) const {
  auto pa = query_port(port);
  if (!pa)
    return pa.error();
  auto table = gid_table(port);
  if (!table)
    return table.error();
  if (pa->link == link_layer::infiniband) {
    for (const auto &e : *table)
      if (e.index == 0)
        return e;
    return errc::no_such_gid;
  }
  const gid_entry *first = nullptr, *first_v4 = nullptr;
  for (const auto &e : *table) {
    if (e.type != sel.type || e.value.is_zero())
      continue;
    if (sel.ipv4 && e.value.is_ipv4_mapped() && e.value.ipv4() == sel.ipv4)
      return e;
    if (!first)
      first = &e;
    if (!first_v4 && e.value.is_ipv4_mapped())
      first_v4 = &e;
  }
  if (first_v4)
    return *first_v4;
  if (first)
    return *first;
  return errc::no_such_gid;
}

// Creates and destroys the smallest object that needs f. Any failure counts
// as no: "not offered" (detail::not_offered), or out of resources, in which
// case the create path would fail or fall back just the same.
namespace {
bool probe(ibv_context *ctx_, feature f) noexcept {
  if (f == feature::extended_cq) {
    if (!verbs_get_ctx_op(ctx_, create_cq_ex))
      return false;
    ibv_cq_init_attr_ex a{};
    a.cqe = 1;
    a.wc_flags = detail::cq_ex_wc_flags;
    ibv_cq_ex *cq = ibv_create_cq_ex(ctx_, &a);
    if (!cq)
      return false;
    ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
    return true;
  }
  // wr_api: an RC queue pair created with the send operations rdmadl uses.
  if (!verbs_get_ctx_op(ctx_, create_qp_ex))
    return false;
  bool yes = false;
  ibv_pd *pd = ibv_alloc_pd(ctx_);
  ibv_cq *cq = pd ? ibv_create_cq(ctx_, 1, nullptr, nullptr, 0) : nullptr;
  if (cq) {
    ibv_qp_init_attr_ex ax{};
    ax.qp_type = IBV_QPT_RC;
    ax.send_cq = cq;
    ax.recv_cq = cq;
    ax.cap.max_send_wr = 1;
    ax.cap.max_recv_wr = 1;
    ax.cap.max_send_sge = 1;
    ax.cap.max_recv_sge = 1;
    ax.pd = pd;
    ax.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ax.send_ops_flags = detail::qp_ex_send_ops(IBV_QPT_RC);
    if (ibv_qp *qp = ibv_create_qp_ex(ctx_, &ax)) {
      yes = ibv_qp_to_qp_ex(qp) != nullptr;
      ibv_destroy_qp(qp);
    }
    ibv_destroy_cq(cq);
  }
  if (pd)
    ibv_dealloc_pd(pd);
  return yes;
}
} // namespace

provider_info context::provider() const {
  provider_info p;
  Dl_info info{};
  ::ibv_context *ctx = native_handle();
  void *fn = ctx ? reinterpret_cast<void *>(ctx->ops.poll_cq) : nullptr;
  if (!fn || !dladdr(fn, &info) || !info.dli_fname)
    return p;
  p.file = info.dli_fname;
  // .../libibverbs/libmlx5-rdmav34.so, .../libmlx5.so.1, librxe-rdmav34.so
  std::string_view base = p.file;
  base.remove_prefix(base.rfind('/') + 1);
  if (base.substr(0, 3) == "lib")
    base.remove_prefix(3);
  std::size_t end = base.find("-rdmav");
  p.name = std::string(base.substr(0, end != base.npos ? end : base.find(".so")));
  static constexpr std::pair<std::string_view, library> dv[] = {
      {"mlx5", library::mlx5}, {"efa", library::efa},   {"mlx4", library::mlx4},
      {"hns", library::hns},   {"mana", library::mana}, {"ionic", library::ionic}};
  for (const auto &[name, lib] : dv)
    if (p.name == name) {
      p.direct_verbs = lib;
      p.direct_verbs_usable = load(lib);
    }
  return p;
}

bool context::supports(feature f) const noexcept {
  if (!ctx_ || !rdmadl::supports(f))
    return false;
  switch (f) {
  case feature::extended_cq:
  case feature::wr_api: {
    const unsigned shift = f == feature::extended_cq ? 0 : 2;
    auto &probes = n_->probes;
    std::uint8_t bits = probes.load(std::memory_order_acquire);
    if (!(bits & (1u << shift))) {
      // Two threads may both probe; they get the same answer.
      const int saved = errno;
      bool yes = probe(ctx_, f);
      errno = saved;
      bits = probes.fetch_or(static_cast<std::uint8_t>((1u << shift) | (yes << (shift + 1))),
                             std::memory_order_acq_rel) |
             static_cast<std::uint8_t>((1u << shift) | (yes << (shift + 1)));
    }
    return bits & (2u << shift);
  }
  case feature::srq: {
    auto d = query_device();
    return d && d->max_srq > 0;
  }
  default:
    return true;
  }
}

} // namespace rdmadl
