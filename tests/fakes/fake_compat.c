/* SPDX-License-Identifier: MIT */
/* A fake libibverbs.so.1 that exports only old IBVERBS_1.0 compat entries
 * (non-default versions), as a pre-1.1 ABI library would: rdmadl must bind
 * none of them. */
#include <stddef.h>

#define FAKE_API __attribute__((visibility("default")))

__asm__(".symver fake_get_device_list_v10, ibv_get_device_list@IBVERBS_1.0");
__asm__(".symver fake_open_device_v10, ibv_open_device@IBVERBS_1.0");
__asm__(".symver fake_close_device_v10, ibv_close_device@IBVERBS_1.0");

FAKE_API void **fake_get_device_list_v10(int *n) {
  static void *list[1];
  if (n)
    *n = 0;
  return list;
}
FAKE_API void *fake_open_device_v10(void *dev) {
  return dev;
}
FAKE_API int fake_close_device_v10(void *ctx) {
  return ctx ? 0 : -1;
}
