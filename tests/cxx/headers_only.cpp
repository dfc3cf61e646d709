// SPDX-License-Identifier: MIT
// Compiled with include/ as the only include directory: the public C++
// headers must not need any rdma-core header.
#include <rdmadl/rdmadl.hpp>

#if defined(INFINIBAND_VERBS_H) || defined(RDMA_CMA_H)
#error "a public rdmadl header included an rdma-core header"
#endif

int rdmadl_headers_only_probe() {
  rdmadl::result<int> r(rdmadl::errc::no_devices);
  ::ibv_context *ctx = rdmadl::context().native_handle();
  return r.has_value() + (ctx != nullptr);
}
