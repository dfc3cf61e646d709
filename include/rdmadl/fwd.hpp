// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/fwd.hpp - forward declarations of rdma-core's types (for
/// native_handle() and the inline data path) and of rdmadl's classes, and the
/// one move-only handle helper every class uses. Includes no rdma-core header.
#ifndef RDMADL_FWD_HPP
#define RDMADL_FWD_HPP

#include <utility>

#include "rdmadl/export.hpp"

extern "C" {
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
struct ibv_cq;
struct ibv_cq_ex;
struct ibv_comp_channel;
struct ibv_qp;
struct ibv_qp_ex;
struct ibv_srq;
struct ibv_ah;
struct ibv_wc;
struct ibv_send_wr;
struct ibv_recv_wr;
struct rdma_event_channel;
struct rdma_cm_id;
}

namespace rdmadl {
class device;
class device_list;
class context;
class protection_domain;
class memory_region;
class completion_queue;
class completion_channel;
class queue_pair;
class shared_receive_queue;
class address_handle;
class send_batch;
class poll_session;

namespace detail {
/// The shared, reference-counted state behind each object (src/nodes.hpp).
/// A child's node holds its parent's node, so a parent's rdma-core object is
/// destroyed only after the last child's, whatever order the handles die in.
struct ctx_node;
struct pd_node;
struct mr_node;
struct channel_node;
struct cq_node;
struct srq_node;
struct ah_node;
struct qp_node;
struct access; ///< src/: reaches the private members of every class
/// rdmadl/multi_channel.hpp: a channel's inline data path, which polls its
/// completion queue without a result per poll.
struct channel_core;
/// rdmadl/multi_channel.hpp: a batch's work request, posted straight to the
/// provider.
template <int K> struct batch_request;

/// A value that a move takes and leaves as Empty (by default T{}: a null
/// pointer, 0): with it, every handle's move constructor and assignment are
/// `= default` and a moved-from handle is empty. A provider function pointer
/// takes a stub as Empty, so the data path calls it without a null check.
template <class T, T Empty = T{}> class take {
public:
  constexpr take() noexcept = default;
  constexpr take(T v) noexcept : v_(v) {}
  constexpr take(take &&o) noexcept : v_(std::exchange(o.v_, Empty)) {}
  constexpr take &operator=(take &&o) noexcept {
    v_ = std::exchange(o.v_, Empty);
    return *this;
  }
  take(const take &) = delete;
  take &operator=(const take &) = delete;
  constexpr operator T() const noexcept { return v_; }
  constexpr T get() const noexcept { return v_; }

private:
  T v_ = Empty;
};
} // namespace detail
} // namespace rdmadl

#endif // RDMADL_FWD_HPP
