// SPDX-License-Identifier: MIT
// Built against an installed rdmadl (find_package). With no usable stack the
// API must say operation_not_supported; with one, list the devices. Exit 0
// when what it saw is consistent.
#include <cstdio>
#include <string>
#include <system_error>

#include <rdmadl/rdmadl.hpp>

int main() {
  auto list = rdmadl::device_list::get();
  if (!rdmadl::available()) {
    bool ok = !list && list.error() == std::errc::operation_not_supported;
    std::printf("consumer: no stack (%s): %s\n", std::string(rdmadl::reason()).c_str(),
                ok ? "consistent" : "INCONSISTENT");
    return ok ? 0 : 1;
  }
  std::printf("consumer: stack available, device list: %s\n",
              list ? "ok" : list.error().message().c_str());
  return 0;
}
