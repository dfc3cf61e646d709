/* SPDX-License-Identifier: MIT */
/*
 * A drop-in program that prints what the loader decided, one "key=value"
 * line each, for hostile_test.cpp to run in a chosen environment. With
 * PROBE_READ_STDIN it then copies its stdin to "stdin=..." (to show the loader
 * left it alone); with PROBE_CALL_FORK_INIT it calls ibv_fork_init().
 */
#include <stdio.h>
#include <stdlib.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

static const char *or_dash(const char *s) {
  return s && *s ? s : "-";
}

int main(void) {
  const rdmadl_lib v = RDMADL_LIB_IBVERBS;
  printf("state=%s\n", rdmadl_state_name(rdmadl_lib_state(v)));
  printf("error=%s\n", or_dash(rdmadl_lib_error(v)));
  printf("path=%s\n", or_dash(rdmadl_lib_path(v)));
  printf("count=%zu\nmissing=%zu\n", rdmadl_lib_symbol_count(v), rdmadl_lib_missing_count(v));
  printf("rdmacm=%s\n", rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_RDMACM)));
  printf("reason=%s\n", rdmadl_reason());
  if (getenv("PROBE_READ_STDIN")) {
    char buf[256];
    size_t n = fread(buf, 1, sizeof buf - 1, stdin);
    buf[n] = '\0';
    printf("stdin=%s\n", buf);
  }
  if (getenv("PROBE_CALL_FORK_INIT")) {
    fflush(stdout);
    int r = ibv_fork_init();
    printf("fork_init=%d\n", r);
  }
  return 0;
}
