// SPDX-License-Identifier: MIT
// C++17 code that uses RDMA through the C++20 bridge. Exit 0 when what the
// bridge saw is consistent (no stack: the device list fails with
// operation_not_supported).
#include <cstdio>

#include "bridge.hpp"

static_assert(__cplusplus == 201703L, "this target must stay C++17");

int main() {
  product::rdma_status s = product::probe_rdma();
  if (!s.usable) {
    std::printf("consumer17: no stack (%s): %s\n", s.reason.c_str(),
                s.unsupported_error ? "consistent" : "INCONSISTENT");
    return s.unsupported_error ? 0 : 1;
  }
  std::printf("consumer17: stack available\n");
  return 0;
}
