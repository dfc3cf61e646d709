/* SPDX-License-Identifier: MIT */
/*
 * The first use of a stub comes from .preinit_array, before libc has set
 * environ: RDMADL_DISABLE and the overrides must still be honoured. Prints
 * what the loader decided, as probe.c does, plus what the early call saw.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

#undef ibv_get_device_list

extern char **environ;
static int early_environ_set, early_err, early_n = -1;
static struct ibv_device **early_list;

static void first_use(void) {
  early_environ_set = environ != NULL;
  errno = 0;
  early_list = ibv_get_device_list(&early_n);
  early_err = errno;
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(void) = first_use;

int main(void) {
  printf("early_environ=%d\nearly_list=%s\nearly_n=%d\nearly_errno=%d\n", early_environ_set,
         early_list ? "yes" : "no", early_n, early_err);
  printf("state=%s\n", rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS)));
  const char *path = rdmadl_lib_path(RDMADL_LIB_IBVERBS);
  printf("path=%s\n", path ? path : "-");
  printf("reason=%s\n", rdmadl_reason());
  if (early_list)
    ibv_free_device_list(early_list);
  return 0;
}
