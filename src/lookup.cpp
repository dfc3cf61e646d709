// SPDX-License-Identifier: MIT
#include "lookup.hpp"

#include <string>
#include <sys/socket.h>

namespace rdmadl::detail {

result<addrinfo *> lookup_address(std::string_view host, std::uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  std::string h(host), p = std::to_string(port);
  addrinfo *res = nullptr;
  if (getaddrinfo(h.empty() ? nullptr : h.c_str(), p.c_str(), &hints, &res) != 0 || !res)
    return std::errc::address_not_available;
  return res;
}

} // namespace rdmadl::detail
