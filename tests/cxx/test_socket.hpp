// SPDX-License-Identifier: MIT
// test_socket: what the TCP tests' raw peers share to read a socket.
#ifndef RDMADL_TESTS_TEST_SOCKET_HPP
#define RDMADL_TESTS_TEST_SOCKET_HPP

#include <cstddef>
#include <cstdint>
#include <sys/socket.h>
#include <vector>

namespace {

// Reads n bytes from fd (or fewer at EOF, an error or its receive timeout).
inline std::vector<std::uint8_t> read_n(int fd, std::size_t n) {
  std::vector<std::uint8_t> b(n);
  std::size_t got = 0;
  while (got < n) {
    auto r = ::recv(fd, b.data() + got, n - got, 0);
    if (r <= 0)
      break;
    got += static_cast<std::size_t>(r);
  }
  b.resize(got);
  return b;
}

} // namespace

#endif // RDMADL_TESTS_TEST_SOCKET_HPP
