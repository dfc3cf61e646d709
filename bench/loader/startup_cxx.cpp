// SPDX-License-Identifier: MIT
// Whole-process start-up of a small C++ program on rdmadl's C++ API: test 1
// (main() lists the devices once, device_list::get()), linked to librdmadl
// as the build made it (librdmadl.so.0 with BUILD_SHARED_LIBS=ON, else
// librdmadl.a). It makes no cm object, so librdmacm must not be loaded.
#include "rdmadl/device.hpp"

int main() {
  auto list = rdmadl::device_list::get();
  return list ? 0 : 0;
}
