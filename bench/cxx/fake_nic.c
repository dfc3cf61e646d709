/* SPDX-License-Identifier: MIT */
/*
 * A fake libibverbs.so.1 whose provider does the least work a provider can
 * do, so that callgrind counts only the caller's side of a post + poll
 * (bench/cxx/run-host.sh). Never a stand-in for RDMA: it moves no data.
 *
 * One device "fakenic0": port 1 active, Ethernet, MTU 1024, GID index 1 a
 * RoCE v2 IPv4-mapped entry. post_send queues one completion per signaled
 * request on the QP's send CQ, post_recv one per receive on its receive CQ
 * (as if the message were there already); poll_cq returns them. Every other symbol of
 * symbols.def is defined (answering 0/NULL) so the loader binds the library
 * as a complete one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "extra_decls.h"
#include "table_rows.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define NIC_API __attribute__((visibility("default")))
#define NIC_BODY_VOID(ret, name, params)                                                           \
  NIC_API ret name params {}
#define NIC_BODY_VALUE(ret, name, params)                                                          \
  NIC_API ret name params {                                                                        \
    return (ret)0;                                                                                 \
  }
#define NIC_BODY_NULLPTR NIC_BODY_VALUE
#define NIC_BODY_M1 NIC_BODY_VALUE
#define NIC_BODY_ERRNO NIC_BODY_VALUE
#define NIC_BODY_NEGERRNO NIC_BODY_VALUE
#define NIC_BODY_ZERO NIC_BODY_VALUE
#define NIC_BODY_STR(ret, name, params)                                                            \
  NIC_API ret name params {                                                                        \
    return "fake";                                                                                 \
  }
#define NIC_GEN(fail, ret, name, params) NIC_BODY_##fail(ret, name, params)
/* The ones written below are generated under other, unexported names. */
#define ibv_get_device_list nic_gen_get_device_list
#define ibv_free_device_list nic_gen_free_device_list
#define ibv_get_device_name nic_gen_get_device_name
#define ibv_open_device nic_gen_open_device
#define ibv_close_device nic_gen_close_device
#define ibv_query_device nic_gen_query_device
#define ibv_query_port nic_gen_query_port
#define ibv_query_gid nic_gen_query_gid
#define _ibv_query_gid_table nic_gen_query_gid_table
#define ibv_alloc_pd nic_gen_alloc_pd
#define ibv_dealloc_pd nic_gen_dealloc_pd
#define ibv_reg_mr nic_gen_reg_mr
#define ibv_dereg_mr nic_gen_dereg_mr
#define ibv_create_cq nic_gen_create_cq
#define ibv_destroy_cq nic_gen_destroy_cq
#define ibv_create_qp nic_gen_create_qp
#define ibv_modify_qp nic_gen_modify_qp
#define ibv_destroy_qp nic_gen_destroy_qp
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_OF(IBV, lib, NIC_GEN)(fail, ret, name, params)
#include "symbols.def"
#undef RDMADL_SYM
#undef ibv_get_device_list
#undef ibv_free_device_list
#undef ibv_get_device_name
#undef ibv_open_device
#undef ibv_close_device
#undef ibv_query_device
#undef ibv_query_port
#undef ibv_query_gid
#undef _ibv_query_gid_table
#undef ibv_alloc_pd
#undef ibv_dealloc_pd
#undef ibv_reg_mr
#undef ibv_dereg_mr
#undef ibv_create_cq
#undef ibv_destroy_cq
#undef ibv_create_qp
#undef ibv_modify_qp
#undef ibv_destroy_qp

enum { ring_size = 256 };

struct nic_cq {
  struct ibv_cq cq;
  unsigned head, tail;
  struct ibv_wc ring[ring_size];
};

static struct ibv_device nic_device = {.node_type = IBV_NODE_CA,
                                       .transport_type = IBV_TRANSPORT_IB,
                                       .name = "fakenic0",
                                       .dev_name = "uverbs0"};
static struct ibv_device *nic_list[2] = {&nic_device, NULL};
static uint32_t next_qpn = 17, next_key = 0x100;

static int nic_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct nic_cq *cq = (struct nic_cq *)qp->send_cq;
  for (; wr; wr = wr->next) {
    if (!(wr->send_flags & IBV_SEND_SIGNALED))
      continue;
    if (cq->tail - cq->head == ring_size) {
      *bad = wr;
      return ENOMEM;
    }
    struct ibv_wc *c = &cq->ring[cq->tail++ % ring_size];
    c->wr_id = wr->wr_id;
    c->status = IBV_WC_SUCCESS;
    c->opcode = wr->opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ
                : wr->opcode == IBV_WR_SEND    ? IBV_WC_SEND
                                               : IBV_WC_RDMA_WRITE;
    c->byte_len = wr->num_sge ? wr->sg_list[0].length : 0;
    c->qp_num = qp->qp_num;
    c->wc_flags = 0;
  }
  return 0;
}

/* A receive completes at once, as if a message of its first sge's length
 * had been waiting for it (the channel benchmark's receives). */
static int nic_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct nic_cq *cq = (struct nic_cq *)qp->recv_cq;
  for (; wr; wr = wr->next) {
    if (cq->tail - cq->head == ring_size) {
      *bad = wr;
      return ENOMEM;
    }
    struct ibv_wc *c = &cq->ring[cq->tail++ % ring_size];
    c->wr_id = wr->wr_id;
    c->status = IBV_WC_SUCCESS;
    c->opcode = IBV_WC_RECV;
    c->byte_len = wr->num_sge ? wr->sg_list[0].length : 0;
    c->qp_num = qp->qp_num;
    c->wc_flags = 0;
  }
  return 0;
}

static int nic_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc) {
  struct nic_cq *cq = (struct nic_cq *)ibcq;
  int got = 0;
  while (got < n && cq->head != cq->tail)
    wc[got++] = cq->ring[cq->head++ % ring_size];
  return got;
}

static int nic_req_notify_cq(struct ibv_cq *cq, int solicited) {
  (void)cq;
  (void)solicited;
  return 0;
}

NIC_API struct ibv_device **ibv_get_device_list(int *num) {
  if (num)
    *num = 1;
  return nic_list;
}
NIC_API void ibv_free_device_list(struct ibv_device **list) {
  (void)list;
}
NIC_API const char *ibv_get_device_name(struct ibv_device *d) {
  return d->name;
}
NIC_API struct ibv_context *ibv_open_device(struct ibv_device *d) {
  struct ibv_context *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  c->device = d;
  c->cmd_fd = -1;
  c->async_fd = -1;
  c->ops.post_send = nic_post_send;
  c->ops.post_recv = nic_post_recv;
  c->ops.poll_cq = nic_poll_cq;
  c->ops.req_notify_cq = nic_req_notify_cq;
  return c;
}
NIC_API int ibv_close_device(struct ibv_context *c) {
  free(c);
  return 0;
}
NIC_API int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
  (void)c;
  memset(a, 0, sizeof *a);
  strcpy(a->fw_ver, "0.0.0");
  a->max_qp = 64;
  a->max_qp_wr = 1024;
  a->max_sge = 4;
  a->max_cq = 64;
  a->max_cqe = ring_size;
  a->max_mr = 64;
  a->max_pd = 64;
  a->max_qp_rd_atom = 1;
  a->max_qp_init_rd_atom = 1;
  a->phys_port_cnt = 1;
  return 0;
}
NIC_API int ibv_query_port(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *ca) {
  (void)c;
  if (port != 1)
    return EINVAL;
  struct ibv_port_attr *a = (struct ibv_port_attr *)ca;
  a->state = IBV_PORT_ACTIVE;
  a->max_mtu = IBV_MTU_4096;
  a->active_mtu = IBV_MTU_1024;
  a->gid_tbl_len = 2;
  a->link_layer = IBV_LINK_LAYER_ETHERNET;
  return 0;
}
static void nic_gid(int index, union ibv_gid *g) {
  memset(g, 0, sizeof *g);
  if (index == 0) {
    g->raw[0] = 0xfe;
    g->raw[1] = 0x80;
    g->raw[15] = 1;
  } else {
    g->raw[10] = g->raw[11] = 0xff;
    g->raw[12] = 192;
    g->raw[13] = 0;
    g->raw[14] = 2;
    g->raw[15] = 1;
  }
}
NIC_API int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *g) {
  (void)c;
  if (port != 1 || index < 0 || index > 1)
    return -1;
  nic_gid(index, g);
  return 0;
}
NIC_API ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t max,
                                     uint32_t flags, size_t entry_size) {
  (void)c;
  (void)flags;
  if (entry_size != sizeof *e || max < 2)
    return -EINVAL;
  for (int i = 0; i < 2; i++) {
    memset(&e[i], 0, sizeof e[i]);
    nic_gid(i, &e[i].gid);
    e[i].gid_index = (uint32_t)i;
    e[i].port_num = 1;
    e[i].gid_type = i ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
  }
  return 2;
}
NIC_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
  struct ibv_pd *pd = calloc(1, sizeof *pd);
  if (pd)
    pd->context = c;
  return pd;
}
NIC_API int ibv_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}
NIC_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  (void)access;
  struct ibv_mr *mr = calloc(1, sizeof *mr);
  if (!mr)
    return NULL;
  mr->context = pd->context;
  mr->pd = pd;
  mr->addr = addr;
  mr->length = len;
  mr->lkey = mr->rkey = next_key++;
  return mr;
}
NIC_API int ibv_dereg_mr(struct ibv_mr *mr) {
  free(mr);
  return 0;
}
NIC_API struct ibv_cq *ibv_create_cq(struct ibv_context *c, int cqe, void *ctx,
                                     struct ibv_comp_channel *ch, int vec) {
  (void)ch;
  (void)vec;
  struct nic_cq *cq = calloc(1, sizeof *cq);
  if (!cq)
    return NULL;
  cq->cq.context = c;
  cq->cq.cq_context = ctx;
  cq->cq.cqe = cqe < ring_size ? cqe : ring_size;
  return &cq->cq;
}
NIC_API int ibv_destroy_cq(struct ibv_cq *cq) {
  free(cq);
  return 0;
}
NIC_API struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
  struct ibv_qp *qp = calloc(1, sizeof *qp);
  if (!qp)
    return NULL;
  qp->context = pd->context;
  qp->pd = pd;
  qp->send_cq = a->send_cq;
  qp->recv_cq = a->recv_cq;
  qp->qp_type = a->qp_type;
  qp->qp_num = next_qpn++;
  qp->state = IBV_QPS_RESET;
  return qp;
}
NIC_API int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask) {
  if (mask & IBV_QP_STATE)
    qp->state = a->qp_state;
  return 0;
}
NIC_API int ibv_destroy_qp(struct ibv_qp *qp) {
  free(qp);
  return 0;
}
