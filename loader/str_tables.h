/* SPDX-License-Identifier: MIT */
/*
 * The strings rdma-core's string functions return (ibv_wc_status_str,
 * ibv_event_type_str, ibv_node_type_str, ibv_port_state_str,
 * rdma_event_str), indexed by the enum, as rdma-core 65.0 has them. hand.c
 * and stubs_cm.c (rdma_event_str) answer with them when no library is
 * loaded; the fake libibverbs of tests/fakes answers with them as the real
 * one does. A static table per includer (the compiler drops the ones it
 * does not use): include only from the .c files that answer with them.
 */
#ifndef RDMADL_LOADER_STR_TABLES_H
#define RDMADL_LOADER_STR_TABLES_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

static const char *const wc_status_strs[] __attribute__((unused)) = {
    [IBV_WC_SUCCESS] = "success",
    [IBV_WC_LOC_LEN_ERR] = "local length error",
    [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
    [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
    [IBV_WC_LOC_PROT_ERR] = "local protection error",
    [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
    [IBV_WC_MW_BIND_ERR] = "memory management operation error",
    [IBV_WC_BAD_RESP_ERR] = "bad response error",
    [IBV_WC_LOC_ACCESS_ERR] = "local access error",
    [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
    [IBV_WC_REM_ACCESS_ERR] = "remote access error",
    [IBV_WC_REM_OP_ERR] = "remote operation error",
    [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
    [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
    [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
    [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
    [IBV_WC_REM_ABORT_ERR] = "aborted error",
    [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
    [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
    [IBV_WC_FATAL_ERR] = "fatal error",
    [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
    [IBV_WC_GENERAL_ERR] = "general error",
    [IBV_WC_TM_ERR] = "TM error",
    [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
};

static const char *const event_type_strs[] __attribute__((unused)) = {
    [IBV_EVENT_CQ_ERR] = "CQ error",
    [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
    [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
    [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
    [IBV_EVENT_COMM_EST] = "communication established",
    [IBV_EVENT_SQ_DRAINED] = "send queue drained",
    [IBV_EVENT_PATH_MIG] = "path migrated",
    [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
    [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
    [IBV_EVENT_PORT_ACTIVE] = "port active",
    [IBV_EVENT_PORT_ERR] = "port error",
    [IBV_EVENT_LID_CHANGE] = "LID change",
    [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
    [IBV_EVENT_SM_CHANGE] = "SM change",
    [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
    [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
    [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
    [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
    [IBV_EVENT_GID_CHANGE] = "GID table change",
    [IBV_EVENT_WQ_FATAL] = "WQ fatal",
    [IBV_EVENT_DEVICE_SPEED_CHANGE] = "Device link speed change",
};

static const char *const node_type_strs[] __attribute__((unused)) = {
    [IBV_NODE_CA] = "InfiniBand channel adapter",
    [IBV_NODE_SWITCH] = "InfiniBand switch",
    [IBV_NODE_ROUTER] = "InfiniBand router",
    [IBV_NODE_RNIC] = "iWARP NIC",
    [IBV_NODE_USNIC] = "usNIC",
    [IBV_NODE_USNIC_UDP] = "usNIC UDP",
    [IBV_NODE_UNSPECIFIED] = "unspecified",
};

static const char *const port_state_strs[] __attribute__((unused)) = {
    [IBV_PORT_NOP] = "no state change (NOP)",
    [IBV_PORT_DOWN] = "down",
    [IBV_PORT_INIT] = "init",
    [IBV_PORT_ARMED] = "armed",
    [IBV_PORT_ACTIVE] = "active",
    [IBV_PORT_ACTIVE_DEFER] = "active defer",
};

#define RDMADL_CM_EVENT(e) [e] = #e
static const char *const cm_event_strs[] __attribute__((unused)) = {
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ADDR_RESOLVED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ADDR_ERROR),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ROUTE_RESOLVED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ROUTE_ERROR),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_CONNECT_REQUEST),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_CONNECT_RESPONSE),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_CONNECT_ERROR),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_UNREACHABLE),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_REJECTED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ESTABLISHED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_DISCONNECTED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_DEVICE_REMOVAL),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_MULTICAST_JOIN),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_MULTICAST_ERROR),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ADDR_CHANGE),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_TIMEWAIT_EXIT),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ADDRINFO_RESOLVED),
    RDMADL_CM_EVENT(RDMA_CM_EVENT_ADDRINFO_ERROR),
};

#endif /* RDMADL_LOADER_STR_TABLES_H */
