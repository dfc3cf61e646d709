/* SPDX-License-Identifier: MIT */
/*
 * The string functions of libibverbs (HAND entries of symbols.def): they
 * forward to the loaded library and keep working without one.
 */
#include <infiniband/verbs.h>

#include "internal.h"
#include "str_tables.h"

/* The string functions keep working without a library: the same strings
 * rdma-core returns, "unknown" (or "UNKNOWN EVENT") outside the enum. */
#define RDMADL_STR_STUB(name, type, table, unknown)                                                \
  RDMADL_STUB_API const char *RDMADL_NAME(name)(type value) {                                      \
    __typeof__(&name) f = RDMADL_FN(name);                                                         \
    if (f)                                                                                         \
      return f(value);                                                                             \
    const char *s = RDMADL_STR_AT(table, value);                                                   \
    return s ? s : unknown;                                                                        \
  }

RDMADL_STR_STUB(ibv_wc_status_str, enum ibv_wc_status, wc_status_strs, "unknown")
RDMADL_STR_STUB(ibv_event_type_str, enum ibv_event_type, event_type_strs, "unknown")
RDMADL_STR_STUB(ibv_node_type_str, enum ibv_node_type, node_type_strs, "unknown")
RDMADL_STR_STUB(ibv_port_state_str, enum ibv_port_state, port_state_strs, "unknown")

RDMADL_LINKED(ibv_wc_status_str)
RDMADL_LINKED(ibv_event_type_str)
RDMADL_LINKED(ibv_node_type_str)
RDMADL_LINKED(ibv_port_state_str)
