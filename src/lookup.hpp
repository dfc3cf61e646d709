// SPDX-License-Identifier: MIT
// Host name lookup (src/lookup.cpp), shared by oob.cpp (TCP) and
// cm_group.cpp (rdma_cm addresses).
#ifndef RDMADL_SRC_LOOKUP_HPP
#define RDMADL_SRC_LOOKUP_HPP

#include <cstdint>
#include <netdb.h>
#include <string_view>

#include "rdmadl/error.hpp"

namespace rdmadl::detail {

// getaddrinfo for a stream socket to host:port (numeric port; passive: an
// empty host is any address), every answer in order; the caller frees the
// list with freeaddrinfo. Errors: address_not_available.
result<addrinfo *> lookup_address(std::string_view host, std::uint16_t port, bool passive);

} // namespace rdmadl::detail

#endif // RDMADL_SRC_LOOKUP_HPP
