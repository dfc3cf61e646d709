/* SPDX-License-Identifier: MIT */
/* The attributes of an RC queue pair's INIT, RTR and RTS transitions as the
 * guest programs set them (RoCE: a global route to the peer's GID, hop limit
 * 1; timeout 14, 7 retries, 7 RNR retries, PSNs 0). Each function fills *a
 * and returns the attribute mask for ibv_modify_qp; the call itself stays with
 * the caller (common.c links the drop-in, ffi_ops.c calls through dlsym). */
#ifndef RDMADL_GUEST_RC_ATTR_H
#define RDMADL_GUEST_RC_ATTR_H

#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>

static inline int t_rc_init_attr(struct ibv_qp_attr *a, uint8_t port, int access) {
  memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_INIT;
  a->port_num = port;
  a->qp_access_flags = (unsigned)access;
  return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

/* RTR towards remote_qpn at dgid, from the local GID at sgid_index of port. */
static inline int t_rc_rtr_attr(struct ibv_qp_attr *a, enum ibv_mtu mtu, uint32_t remote_qpn,
                                uint8_t rd_atomic, uint8_t port, const union ibv_gid *dgid,
                                int sgid_index) {
  memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_RTR;
  a->path_mtu = mtu;
  a->dest_qp_num = remote_qpn;
  a->rq_psn = 0;
  a->max_dest_rd_atomic = rd_atomic;
  a->min_rnr_timer = 12;
  a->ah_attr.is_global = 1;
  a->ah_attr.port_num = port;
  a->ah_attr.grh.dgid = *dgid;
  a->ah_attr.grh.sgid_index = (uint8_t)sgid_index;
  a->ah_attr.grh.hop_limit = 1;
  return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

static inline int t_rc_rts_attr(struct ibv_qp_attr *a, uint8_t rd_atomic) {
  memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_RTS;
  a->timeout = 14;
  a->retry_cnt = 7;
  a->rnr_retry = 7;
  a->sq_psn = 0;
  a->max_rd_atomic = rd_atomic;
  return IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
         IBV_QP_MAX_QP_RD_ATOMIC;
}

#endif
