// SPDX-License-Identifier: MIT
#ifndef RDMADL_BENCH_TCP_SOCKETS_HPP
#define RDMADL_BENCH_TCP_SOCKETS_HPP
// Prints the kernel's state of each connected TCP socket of this process,
// one "tcp-sock: LABEL ..." line each (tcp_sockets.cpp).
void print_tcp_sockets(const char *label);
#endif
