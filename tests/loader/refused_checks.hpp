// SPDX-License-Identifier: MIT
// Checks of stubs that refuse for want of a usable library, shared by the
// loader suites. Include after the verbs declarations (and their #undefs)
// and doctest.
#pragma once
#include <cerrno>

// ibv_get_device_list refuses: NULL, *num_devices set to 0 from START, errno
// EOPNOTSUPP.
inline void check_device_list_refused(int start) {
  int n = start;
  errno = 0;
  CHECK(ibv_get_device_list(&n) == nullptr);
  CHECK(n == 0);
  CHECK(errno == EOPNOTSUPP);
}
