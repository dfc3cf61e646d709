// SPDX-License-Identifier: MIT
// test_socket: what the TCP tests share: reading a socket, and a port to
// listen on.
#ifndef RDMADL_TESTS_TEST_SOCKET_HPP
#define RDMADL_TESTS_TEST_SOCKET_HPP

#include <cstddef>
#include <cstdint>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
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

// A TCP port that no socket of this host holds on any IPv4 address just now
// (the kernel's choice for a bind to port 0), or 0 if none could be had. A
// test that listens on a port of its own choosing (one derived from its pid)
// races every connection the host makes: ephemeral ports come from the same
// range (32768-60999), and a listener another test bound to port 0 holds its
// port for the test's length.
inline std::uint16_t free_ipv4_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0)
    return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  socklen_t len = sizeof a;
  const bool ok = ::bind(s, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0 &&
                  ::getsockname(s, reinterpret_cast<sockaddr *>(&a), &len) == 0;
  ::close(s);
  return ok ? ntohs(a.sin_port) : 0;
}

} // namespace

#endif // RDMADL_TESTS_TEST_SOCKET_HPP
