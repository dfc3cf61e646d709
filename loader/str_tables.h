/* SPDX-License-Identifier: MIT */
/*
 * The strings rdma-core's string functions return (ibv_wc_status_str,
 * ibv_event_type_str, ibv_node_type_str, ibv_port_state_str,
 * rdma_event_str), indexed by the enum, as rdma-core 65.0 has them. hand_str.c
 * and stubs_cm.c (rdma_event_str) answer with them when no library is
 * loaded; the fake libibverbs of tests/fakes answers with them as the real
 * one does. A static table per includer (the compiler drops the ones it
 * does not use): include only from the .c files that answer with them.
 */
#ifndef RDMADL_LOADER_STR_TABLES_H
#define RDMADL_LOADER_STR_TABLES_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Each table is a two-dimensional char array, not an array of pointers: a
 * position-independent program relocates every pointer of its tables at
 * start-up (~13 instructions each, bench/README.md). LIST(X) names the
 * entries; each is checked to fit with its terminator. */
#define RDMADL_STR_WIDTH 40
#define RDMADL_STR_ENTRY(e, s) [e] = s,
#define RDMADL_STR_FITS(e, s) _Static_assert(sizeof s <= RDMADL_STR_WIDTH, "too long: " s);
#define RDMADL_STR_TABLE(var, list)                                                                \
  list(RDMADL_STR_FITS) static const char var[][RDMADL_STR_WIDTH]                                  \
      __attribute__((unused)) = {list(RDMADL_STR_ENTRY)};
/* The string TABLE has for VALUE, or NULL for a value outside it or a hole. */
#define RDMADL_STR_AT(table, value)                                                                \
  ((unsigned)(value) < sizeof(table) / sizeof(table)[0] && (table)[value][0]                       \
       ? (const char *)(table)[value]                                                              \
       : (const char *)0)

#define RDMADL_WC_STATUS_STRS(X)                                                                   \
  X(IBV_WC_SUCCESS, "success")                                                                     \
  X(IBV_WC_LOC_LEN_ERR, "local length error")                                                      \
  X(IBV_WC_LOC_QP_OP_ERR, "local QP operation error")                                              \
  X(IBV_WC_LOC_EEC_OP_ERR, "local EE context operation error")                                     \
  X(IBV_WC_LOC_PROT_ERR, "local protection error")                                                 \
  X(IBV_WC_WR_FLUSH_ERR, "Work Request Flushed Error")                                             \
  X(IBV_WC_MW_BIND_ERR, "memory management operation error")                                       \
  X(IBV_WC_BAD_RESP_ERR, "bad response error")                                                     \
  X(IBV_WC_LOC_ACCESS_ERR, "local access error")                                                   \
  X(IBV_WC_REM_INV_REQ_ERR, "remote invalid request error")                                        \
  X(IBV_WC_REM_ACCESS_ERR, "remote access error")                                                  \
  X(IBV_WC_REM_OP_ERR, "remote operation error")                                                   \
  X(IBV_WC_RETRY_EXC_ERR, "transport retry counter exceeded")                                      \
  X(IBV_WC_RNR_RETRY_EXC_ERR, "RNR retry counter exceeded")                                        \
  X(IBV_WC_LOC_RDD_VIOL_ERR, "local RDD violation error")                                          \
  X(IBV_WC_REM_INV_RD_REQ_ERR, "remote invalid RD request")                                        \
  X(IBV_WC_REM_ABORT_ERR, "aborted error")                                                         \
  X(IBV_WC_INV_EECN_ERR, "invalid EE context number")                                              \
  X(IBV_WC_INV_EEC_STATE_ERR, "invalid EE context state")                                          \
  X(IBV_WC_FATAL_ERR, "fatal error")                                                               \
  X(IBV_WC_RESP_TIMEOUT_ERR, "response timeout error")                                             \
  X(IBV_WC_GENERAL_ERR, "general error")                                                           \
  X(IBV_WC_TM_ERR, "TM error")                                                                     \
  X(IBV_WC_TM_RNDV_INCOMPLETE, "TM software rendezvous")
RDMADL_STR_TABLE(wc_status_strs, RDMADL_WC_STATUS_STRS)

#define RDMADL_EVENT_TYPE_STRS(X)                                                                  \
  X(IBV_EVENT_CQ_ERR, "CQ error")                                                                  \
  X(IBV_EVENT_QP_FATAL, "local work queue catastrophic error")                                     \
  X(IBV_EVENT_QP_REQ_ERR, "invalid request local work queue error")                                \
  X(IBV_EVENT_QP_ACCESS_ERR, "local access violation work queue error")                            \
  X(IBV_EVENT_COMM_EST, "communication established")                                               \
  X(IBV_EVENT_SQ_DRAINED, "send queue drained")                                                    \
  X(IBV_EVENT_PATH_MIG, "path migrated")                                                           \
  X(IBV_EVENT_PATH_MIG_ERR, "path migration request error")                                        \
  X(IBV_EVENT_DEVICE_FATAL, "local catastrophic error")                                            \
  X(IBV_EVENT_PORT_ACTIVE, "port active")                                                          \
  X(IBV_EVENT_PORT_ERR, "port error")                                                              \
  X(IBV_EVENT_LID_CHANGE, "LID change")                                                            \
  X(IBV_EVENT_PKEY_CHANGE, "P_Key change")                                                         \
  X(IBV_EVENT_SM_CHANGE, "SM change")                                                              \
  X(IBV_EVENT_SRQ_ERR, "SRQ catastrophic error")                                                   \
  X(IBV_EVENT_SRQ_LIMIT_REACHED, "SRQ limit reached")                                              \
  X(IBV_EVENT_QP_LAST_WQE_REACHED, "last WQE reached")                                             \
  X(IBV_EVENT_CLIENT_REREGISTER, "client reregistration")                                          \
  X(IBV_EVENT_GID_CHANGE, "GID table change")                                                      \
  X(IBV_EVENT_WQ_FATAL, "WQ fatal")                                                                \
  X(IBV_EVENT_DEVICE_SPEED_CHANGE, "Device link speed change")
RDMADL_STR_TABLE(event_type_strs, RDMADL_EVENT_TYPE_STRS)

#define RDMADL_NODE_TYPE_STRS(X)                                                                   \
  X(IBV_NODE_CA, "InfiniBand channel adapter")                                                     \
  X(IBV_NODE_SWITCH, "InfiniBand switch")                                                          \
  X(IBV_NODE_ROUTER, "InfiniBand router")                                                          \
  X(IBV_NODE_RNIC, "iWARP NIC")                                                                    \
  X(IBV_NODE_USNIC, "usNIC")                                                                       \
  X(IBV_NODE_USNIC_UDP, "usNIC UDP")                                                               \
  X(IBV_NODE_UNSPECIFIED, "unspecified")
RDMADL_STR_TABLE(node_type_strs, RDMADL_NODE_TYPE_STRS)

#define RDMADL_PORT_STATE_STRS(X)                                                                  \
  X(IBV_PORT_NOP, "no state change (NOP)")                                                         \
  X(IBV_PORT_DOWN, "down")                                                                         \
  X(IBV_PORT_INIT, "init")                                                                         \
  X(IBV_PORT_ARMED, "armed")                                                                       \
  X(IBV_PORT_ACTIVE, "active")                                                                     \
  X(IBV_PORT_ACTIVE_DEFER, "active defer")
RDMADL_STR_TABLE(port_state_strs, RDMADL_PORT_STATE_STRS)

#define RDMADL_CM_EVENT_STRS(X)                                                                    \
  X(RDMA_CM_EVENT_ADDR_RESOLVED, "RDMA_CM_EVENT_ADDR_RESOLVED")                                    \
  X(RDMA_CM_EVENT_ADDR_ERROR, "RDMA_CM_EVENT_ADDR_ERROR")                                          \
  X(RDMA_CM_EVENT_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED")                                  \
  X(RDMA_CM_EVENT_ROUTE_ERROR, "RDMA_CM_EVENT_ROUTE_ERROR")                                        \
  X(RDMA_CM_EVENT_CONNECT_REQUEST, "RDMA_CM_EVENT_CONNECT_REQUEST")                                \
  X(RDMA_CM_EVENT_CONNECT_RESPONSE, "RDMA_CM_EVENT_CONNECT_RESPONSE")                              \
  X(RDMA_CM_EVENT_CONNECT_ERROR, "RDMA_CM_EVENT_CONNECT_ERROR")                                    \
  X(RDMA_CM_EVENT_UNREACHABLE, "RDMA_CM_EVENT_UNREACHABLE")                                        \
  X(RDMA_CM_EVENT_REJECTED, "RDMA_CM_EVENT_REJECTED")                                              \
  X(RDMA_CM_EVENT_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED")                                        \
  X(RDMA_CM_EVENT_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED")                                      \
  X(RDMA_CM_EVENT_DEVICE_REMOVAL, "RDMA_CM_EVENT_DEVICE_REMOVAL")                                  \
  X(RDMA_CM_EVENT_MULTICAST_JOIN, "RDMA_CM_EVENT_MULTICAST_JOIN")                                  \
  X(RDMA_CM_EVENT_MULTICAST_ERROR, "RDMA_CM_EVENT_MULTICAST_ERROR")                                \
  X(RDMA_CM_EVENT_ADDR_CHANGE, "RDMA_CM_EVENT_ADDR_CHANGE")                                        \
  X(RDMA_CM_EVENT_TIMEWAIT_EXIT, "RDMA_CM_EVENT_TIMEWAIT_EXIT")                                    \
  X(RDMA_CM_EVENT_ADDRINFO_RESOLVED, "RDMA_CM_EVENT_ADDRINFO_RESOLVED")                            \
  X(RDMA_CM_EVENT_ADDRINFO_ERROR, "RDMA_CM_EVENT_ADDRINFO_ERROR")
RDMADL_STR_TABLE(cm_event_strs, RDMADL_CM_EVENT_STRS)

#endif /* RDMADL_LOADER_STR_TABLES_H */
