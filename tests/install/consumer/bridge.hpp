// SPDX-License-Identifier: MIT
// The C++17 side of the bridge: no rdmadl header, only what the product
// needs from RDMA, in C++17 types.
#ifndef CONSUMER_BRIDGE_HPP
#define CONSUMER_BRIDGE_HPP

#include <string>

namespace product {
struct rdma_status {
  bool usable;            // rdmadl::available()
  bool unsupported_error; // device_list::get() failed with operation_not_supported
  std::string reason;     // rdmadl::reason()
};
rdma_status probe_rdma();
} // namespace product

#endif
