// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/native.hpp - opt-in: rdma-core's own types beside rdmadl's objects.
///
/// The only rdmadl header that includes <infiniband/verbs.h> and
/// <rdma/rdma_cma.h>: include it when you need a native field or call that
/// rdmadl does not wrap. Use the bundled headers (rdmadl installs rdma-core
/// 65.0's under include/rdmadl/rdma). Calls made through native handles
/// bypass rdmadl's dispatch table: in a program that does not link libibverbs,
/// use them only for data-path inline functions (ibv_post_send, ibv_poll_cq,
/// ibv_wr_*), which go straight to the provider.
#ifndef RDMADL_NATIVE_HPP
#define RDMADL_NATIVE_HPP

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdmadl/rdmadl.hpp"

/// rdma-core's own types and inline calls on rdmadl's objects (opt-in).
namespace rdmadl::native {

/// The scatter/gather element of a slice.
inline ibv_sge sge(const local_slice &s) noexcept {
  return ibv_sge{s.addr, s.length, s.lkey};
}

/// Posts a prepared work-request list straight to the provider (ibv_post_send
/// inline). Returns 0 or an errno value; *bad gets the first failed request.
inline int post_send(const queue_pair &qp, ibv_send_wr *wr, ibv_send_wr **bad) noexcept {
  return ibv_post_send(qp.native_handle(), wr, bad);
}

/// Polls up to n native completions (ibv_poll_cq inline). Returns the count
/// or a negative value on error.
inline int poll(const completion_queue &cq, int n, ibv_wc *wc) noexcept {
  return ibv_poll_cq(cq.native_handle(), n, wc);
}

} // namespace rdmadl::native

#endif // RDMADL_NATIVE_HPP
