// SPDX-License-Identifier: MIT
// The C++20 side of the bridge: the only file that includes rdmadl.
#include "bridge.hpp"

#include <system_error>

#include <rdmadl/rdmadl.hpp>

#if __cplusplus < 201709L
#error "the bridge must be compiled as C++20"
#endif

namespace product {
rdma_status probe_rdma() {
  auto list = rdmadl::device_list::get();
  return {rdmadl::available(), !list && list.error() == std::errc::operation_not_supported,
          std::string(rdmadl::reason())};
}
} // namespace product
