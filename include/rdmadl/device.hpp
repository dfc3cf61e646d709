// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/device.hpp - devices, opened device contexts, their attributes and
/// GID tables.
#ifndef RDMADL_DEVICE_HPP
#define RDMADL_DEVICE_HPP

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rdmadl/error.hpp"
#include "rdmadl/fwd.hpp"
#include "rdmadl/runtime.hpp"

namespace rdmadl {

/// A device's node type (enum ibv_node_type, from device::node()).
enum class node_type {
  unknown,    ///< IBV_NODE_UNKNOWN, a value rdmadl does not know, or a null device
  ca,         ///< IBV_NODE_CA: a channel adapter (InfiniBand HCA, RoCE NIC)
  sw,         ///< IBV_NODE_SWITCH
  router,     ///< IBV_NODE_ROUTER
  rnic,       ///< IBV_NODE_RNIC: an iWARP NIC
  usnic,      ///< IBV_NODE_USNIC
  usnic_udp,  ///< IBV_NODE_USNIC_UDP
  unspecified ///< IBV_NODE_UNSPECIFIED
};
/// A device's transport (enum ibv_transport_type, from device::transport_type()).
enum class transport {
  unknown,    ///< IBV_TRANSPORT_UNKNOWN, a value rdmadl does not know, or a null device
  ib,         ///< IBV_TRANSPORT_IB: InfiniBand and RoCE
  iwarp,      ///< IBV_TRANSPORT_IWARP
  usnic,      ///< IBV_TRANSPORT_USNIC
  usnic_udp,  ///< IBV_TRANSPORT_USNIC_UDP
  unspecified ///< IBV_TRANSPORT_UNSPECIFIED
};
/// A port's link layer (port_attr::link).
enum class link_layer {
  unspecified, ///< IBV_LINK_LAYER_UNSPECIFIED, or a value rdmadl does not know
  infiniband,  ///< IBV_LINK_LAYER_INFINIBAND: LIDs route, the GID is optional
  ethernet     ///< IBV_LINK_LAYER_ETHERNET: RoCE or iWARP, a GID is needed
};
/// A port's logical state (enum ibv_port_state, port_attr::state).
enum class port_state {
  nop,         ///< IBV_PORT_NOP, or a value rdmadl does not know
  down,        ///< IBV_PORT_DOWN: no link
  init,        ///< IBV_PORT_INIT: link up, not configured by the subnet manager
  armed,       ///< IBV_PORT_ARMED
  active,      ///< IBV_PORT_ACTIVE: usable
  active_defer ///< IBV_PORT_ACTIVE_DEFER
};
/// Atomic operation guarantees of a device (enum ibv_atomic_cap, device_attr::atomic).
enum class atomic_cap {
  none, ///< IBV_ATOMIC_NONE: no atomic operations
  hca,  ///< IBV_ATOMIC_HCA: atomic among operations of this device
  glob  ///< IBV_ATOMIC_GLOB: atomic also against other memory accesses
};
/// The type of a GID table entry (enum ibv_gid_type).
enum class gid_type {
  ib,      ///< an InfiniBand GID (a port whose link layer is InfiniBand)
  roce_v1, ///< RoCE v1: Ethernet frames, no IP header
  roce_v2  ///< RoCE v2: UDP/IP, routable
};

/**@{*/
/// Display names ("CA", "InfiniBand", "Ethernet", "ACTIVE", "HCA", ...); a
/// value outside the enumeration gives "unknown".
RDMADL_CXX_API std::string_view name(node_type v) noexcept;
RDMADL_CXX_API std::string_view name(transport v) noexcept;
RDMADL_CXX_API std::string_view name(link_layer v) noexcept;
RDMADL_CXX_API std::string_view name(port_state v) noexcept;
RDMADL_CXX_API std::string_view name(atomic_cap v) noexcept;
RDMADL_CXX_API std::string_view name(gid_type v) noexcept; ///< "IB", "RoCE v1", "RoCE v2"
/**@}*/

/// Asynchronous events: enum ibv_event_type values.
enum class async_event_type : int {
  cq_err,              ///< IBV_EVENT_CQ_ERR: the queue is in error (e.g. overrun); cq is set
  qp_fatal,            ///< IBV_EVENT_QP_FATAL: a catastrophic error of the QP's work queues
  qp_req_err,          ///< IBV_EVENT_QP_REQ_ERR: an invalid request error on the QP
  qp_access_err,       ///< IBV_EVENT_QP_ACCESS_ERR: an access violation error on the QP
  comm_est,            ///< IBV_EVENT_COMM_EST: a first message arrived while the QP was in RTR
  sq_drained,          ///< IBV_EVENT_SQ_DRAINED: the send queue is drained (SQD state)
  path_mig,            ///< IBV_EVENT_PATH_MIG: the QP migrated to its alternate path
  path_mig_err,        ///< IBV_EVENT_PATH_MIG_ERR: the path migration failed
  device_fatal,        ///< IBV_EVENT_DEVICE_FATAL: the device is unusable; close it
  port_active,         ///< IBV_EVENT_PORT_ACTIVE: the port became active
  port_err,            ///< IBV_EVENT_PORT_ERR: the port left the active state
  lid_change,          ///< IBV_EVENT_LID_CHANGE: the port's LID changed
  pkey_change,         ///< IBV_EVENT_PKEY_CHANGE: the port's P_Key table changed
  sm_change,           ///< IBV_EVENT_SM_CHANGE: the port's subnet manager changed
  srq_err,             ///< IBV_EVENT_SRQ_ERR: the SRQ is in error; srq is set
  srq_limit_reached,   ///< IBV_EVENT_SRQ_LIMIT_REACHED: the SRQ fell below its armed limit
  qp_last_wqe_reached, ///< IBV_EVENT_QP_LAST_WQE_REACHED: an SRQ's QP in error gets no more
  client_reregister,   ///< IBV_EVENT_CLIENT_REREGISTER: the SM asks clients to register again
  gid_change,          ///< IBV_EVENT_GID_CHANGE: the port's GID table changed
  wq_fatal,            ///< IBV_EVENT_WQ_FATAL: a work queue (ibv_wq) failed
  device_speed_change, ///< IBV_EVENT_DEVICE_SPEED_CHANGE: a port's speed changed
};
/// rdma-core's name (ibv_event_type_str), "unknown" outside the enumeration.
RDMADL_CXX_API std::string_view name(async_event_type v) noexcept;

/// One asynchronous event, already acknowledged. Which element is set
/// depends on the type: port events carry the port, QP events the QP's
/// number, CQ and SRQ events the native object.
struct async_event {
  async_event_type type = async_event_type::device_fatal; ///< what happened
  /// The port number, for port events (port_active, port_err, lid_change,
  /// pkey_change, sm_change, client_reregister, gid_change,
  /// device_speed_change); else 0.
  std::uint32_t port = 0;
  /// The QP's number, for QP events (qp_fatal, qp_req_err, qp_access_err,
  /// comm_est, sq_drained, path_mig, path_mig_err, qp_last_wqe_reached);
  /// else 0.
  std::uint32_t qp_num = 0;
  ::ibv_cq *cq = nullptr;   ///< the queue, for cq_err (not owned); else null
  ::ibv_srq *srq = nullptr; ///< the SRQ, for srq_err and srq_limit_reached; else null
};

/// A 128-bit GID, in network byte order.
struct RDMADL_CXX_API gid {
  std::array<std::uint8_t, 16> raw{}; ///< the 16 bytes, network byte order
  /// True when every byte is 0 (an unset GID).
  bool is_zero() const noexcept;
  /// True for an IPv4-mapped IPv6 address (\::ffff:a.b.c.d, what RoCE v2
  /// uses for an interface's IPv4 address); then ipv4() is a.b.c.d.
  bool is_ipv4_mapped() const noexcept;
  /// The last 4 bytes as an IPv4 address in network byte order (meaningful
  /// when is_ipv4_mapped()).
  std::uint32_t ipv4() const noexcept;
  /// "fe80:0000:..." (8 groups, as ibv_devinfo prints).
  std::string to_string() const;
  /// Byte-wise equality.
  friend bool operator==(const gid &, const gid &) = default;
};

/// One valid entry of a port's GID table (context::gid_table()).
struct gid_entry {
  gid value;                      ///< the GID
  std::uint32_t index = 0;        ///< its index in the port's table (the source GID index)
  std::uint32_t port = 0;         ///< the port number (from 1)
  gid_type type = gid_type::ib;   ///< what the entry is for
  std::uint32_t ndev_ifindex = 0; ///< network interface of a RoCE entry (if_nametoindex); 0: none
};

/// Which GID select_gid() picks. Defaults: a RoCE v2 GID (IPv4-mapped when
/// ipv4 is set and matches), on Ethernet; on InfiniBand the port's GID 0,
/// which is always the port GID there (the LID does the routing).
struct gid_selector {
  gid_type type = gid_type::roce_v2; ///< the entry type wanted (RoCE); unused on InfiniBand
  std::uint32_t ipv4 = 0;            ///< network byte order; 0 = any address
};

/// A device's attributes and limits (context::query_device()).
struct device_attr {
  /// @name Fields of struct ibv_device_attr
  /**@{*/
  /// As in struct ibv_device_attr (ibv_query_device(3)), same names; the
  /// GUIDs are in host byte order, atomic_cap is the enum atomic.
  std::string fw_ver;
  std::uint64_t node_guid = 0, sys_image_guid = 0, max_mr_size = 0, page_size_cap = 0;
  std::uint32_t vendor_id = 0, vendor_part_id = 0, hw_ver = 0;
  int max_qp = 0, max_qp_wr = 0, max_sge = 0, max_sge_rd = 0, max_cq = 0, max_cqe = 0, max_mr = 0,
      max_pd = 0, max_qp_rd_atom = 0, max_qp_init_rd_atom = 0, max_srq = 0, max_srq_wr = 0,
      max_srq_sge = 0, max_ah = 0, max_mcast_grp = 0;
  unsigned device_cap_flags = 0;
  atomic_cap atomic = atomic_cap::none;
  std::uint8_t phys_port_cnt = 0;
  /**@}*/
};

/// A port's attributes (context::query_port()).
struct port_attr {
  /// @name Fields of struct ibv_port_attr
  /**@{*/
  /// As in struct ibv_port_attr (ibv_query_port(3)), same names; state and
  /// link (link_layer) are enums, the MTUs are in bytes.
  port_state state = port_state::nop;
  std::uint32_t max_mtu = 0, active_mtu = 0; ///< bytes: 256 ... 4096
  std::uint32_t gid_tbl_len = 0, port_cap_flags = 0, max_msg_sz = 0;
  std::uint16_t lid = 0, sm_lid = 0;
  std::uint8_t lmc = 0, active_width = 0, active_speed = 0;
  link_layer link = link_layer::unspecified;
  /**@}*/
};

/// One entry of the device list. Valid while its device_list lives. A null
/// device answers "" / 0 / unknown.
class RDMADL_CXX_API device {
public:
  /// Wraps d (not owned; null gives a null device).
  explicit device(::ibv_device *d = nullptr) noexcept : dev_(d) {}
  /// Kernel name, e.g. "rxe0".
  std::string_view name() const noexcept;
  /// Node GUID in host byte order.
  std::uint64_t guid() const noexcept;
  /// The node type (ibv_device's node_type).
  node_type node() const noexcept;
  /// The transport (ibv_device's transport_type).
  transport transport_type() const noexcept;
  /// The rdma-core device; null for a null device.
  ::ibv_device *native_handle() const noexcept { return dev_; }

private:
  ::ibv_device *dev_;
};

/// The devices present (ibv_get_device_list). Move-only.
class RDMADL_CXX_API device_list {
public:
  /// The current list. Errors: operation_not_supported (no stack, including a
  /// kernel without RDMA: errc::no_kernel_support), errc::no_devices (equal to
  /// std::errc::no_such_device) when the list is empty, or the errno.
  static result<device_list> get();

  /// An empty list.
  device_list() noexcept = default;
  /// Moves; the source becomes empty.
  device_list(device_list &&o) noexcept = default;
  /// Frees the list this held (its devices become invalid), then takes o's;
  /// o becomes empty.
  device_list &operator=(device_list &&o) noexcept;
  /// Frees the list (ibv_free_device_list); its devices become invalid.
  ~device_list();

  /// The number of devices; 0 for an empty list.
  std::size_t size() const noexcept { return n_; }
  /// The i-th device; a null device when i >= size().
  device operator[](std::size_t i) const noexcept {
    return device(i < n_ ? list_.get()[i] : nullptr);
  }
  /// The device named name. Errors: errc::no_devices.
  result<device> find(std::string_view name) const;

  /// A forward iterator over the list, yielding device values.
  struct iterator {
    ::ibv_device *const *p; ///< the position in the ibv_device array
    /// The device at this position.
    device operator*() const noexcept { return device(*p); }
    /// Steps to the next device.
    iterator &operator++() noexcept {
      ++p;
      return *this;
    }
    /// Same position.
    bool operator==(const iterator &) const = default;
  };
  /// The first device (equal to end() for an empty list).
  iterator begin() const noexcept { return {list_.get()}; }
  /// Past the last device.
  iterator end() const noexcept { return {list_.get() + n_}; }

private:
  detail::take<::ibv_device **> list_;
  detail::take<std::size_t> n_;
};

/// The rdma-core provider (driver library) behind a context.
struct provider_info {
  std::string name; ///< "rxe", "mlx5", "efa", "siw", ...: the driver file's name
  std::string file; ///< the object that runs the context's data path, as loaded
  /// The provider's direct-verbs library (mlx5 -> library::mlx5, efa, mlx4, hns,
  /// mana, ionic), when rdma-core ships one for it.
  std::optional<library> direct_verbs;
  /// That library loaded and is usable (from the same rdma-core release as
  /// libibverbs). Its functions are then called on native_handle() with the
  /// provider's own header (e.g. <infiniband/mlx5dv.h>, bundled).
  bool direct_verbs_usable = false;
};

/// An opened device (ibv_open_device). Move-only. The device is closed when
/// the context and every object made from it (PD, CQ, channel, ...) are gone,
/// in whatever order they are destroyed; a borrowed context never closes it.
///
/// Threading (every class of rdmadl): distinct objects may be used from
/// different threads freely, even objects made from one another. One object
/// may be used from several threads at once through its const members and its
/// data-path calls (post_*, poll, request_notify), which the provider
/// serialises as rdma-core documents; moving, assigning or destroying an
/// object must not race with any other use of that same object. A send_batch
/// is exclusive: one at a time per queue pair.
class RDMADL_CXX_API context {
public:
  /// Opens the device called name, or the first device when name is empty.
  /// Errors: as device_list::get(), errc::no_devices when no such device.
  /// When RDMA cannot work here, diagnose() (runtime.hpp) gives the sentence to
  /// show a user: why (no library, disabled, no kernel support, no device, no
  /// active port) and what to do; without a listed device its error is the
  /// one this call returns.
  static result<context> open(std::string_view name = {});
  /// Opens d. Errors: operation_not_supported, or the errno.
  static result<context> open(const device &d);
  /// Wraps ctx without owning it.
  static context borrow(::ibv_context *ctx) noexcept;

  /// An empty context.
  context() noexcept = default;
  /// Moves; the source becomes empty.
  context(context &&o) noexcept = default;
  /// Moves; the source becomes empty and this context's former device is
  /// closed if nothing else holds it.
  context &operator=(context &&o) noexcept = default;
  /// Releases this handle; the device closes with its last object.
  ~context() = default;

  /// The device's kernel name ("rxe0"); empty for an empty context.
  std::string_view device_name() const noexcept;
  /// ibv_query_device. Errors: the errno.
  result<device_attr> query_device() const;
  /// ibv_query_port. Errors: the errno (EINVAL for a bad port).
  result<port_attr> query_port(std::uint8_t port) const;
  /// The first port whose state is ACTIVE. Errors: errc::no_active_port.
  result<std::uint8_t> first_active_port() const;
  /// Every valid entry of port's GID table, with its type (_ibv_query_gid_ex,
  /// or sysfs on releases before it).
  result<std::vector<gid_entry>> gid_table(std::uint8_t port) const;
  /// The GID to use on port: by default the RoCE v2 entry whose IPv4-mapped
  /// address matches sel.ipv4 (any when 0), else the first RoCE v2 entry; on
  /// InfiniBand the port GID (index 0). Never a blind index 0 on RoCE.
  /// Errors: errc::no_such_gid.
  result<gid_entry> select_gid(std::uint8_t port, const gid_selector &sel = {}) const;
  /// Whether this device (with the loaded release, provider and kernel)
  /// supports f. For extended_cq and wr_api the first call creates and destroys
  /// a small object of that kind on the device (the provider op can be present
  /// while the kernel refuses it), so the answer matches what
  /// completion_queue::extended() and queue_pair::uses_wr_api() will report;
  /// the answer is cached in the context.
  bool supports(feature f) const noexcept;
  /// Which provider drives this context (the object whose code its poll_cq
  /// runs) and whether its direct-verbs library is usable; loads that library
  /// the first time. Empty name on an empty context or an unnamed object.
  provider_info provider() const;

  /// The device's asynchronous event file descriptor (readable when an event
  /// is pending; non-blocking once next_event() has run), -1 when empty.
  int async_fd() const noexcept;
  /// Waits up to timeout (milliseconds::max(): no limit) for the next
  /// asynchronous event (port up or down, QP/CQ/SRQ errors, device fatal),
  /// takes and acknowledges it. Errors: errc::timed_out, errc::empty_object,
  /// or the errno.
  result<async_event> next_event(std::chrono::milliseconds timeout) const;

  /// The rdma-core context; null when empty.
  ::ibv_context *native_handle() const noexcept { return ctx_; }
  /// False for an empty (default-constructed or moved-from) context.
  explicit operator bool() const noexcept { return ctx_ != nullptr; }

private:
  friend struct detail::access;
  detail::take<::ibv_context *> ctx_;
  std::shared_ptr<detail::ctx_node> n_;
};

} // namespace rdmadl

#endif // RDMADL_DEVICE_HPP
