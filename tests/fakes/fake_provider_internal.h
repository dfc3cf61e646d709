/* SPDX-License-Identifier: MIT */
/*
 * Internal to the scripted fake provider, which is three files:
 * fake_provider.c (its state, the device and the context),
 * fake_provider_objects.c (PD, MR, completion channel, CQ, SRQ, AH, QP) and
 * fake_provider_data.c (the data path, the WR API and the FAKEPROV_1.0
 * scripting functions). What one file defines for the others is declared
 * here; the library's visibility is hidden, so none of it is exported.
 */
#ifndef RDMADL_TESTS_FAKE_PROVIDER_INTERNAL_H
#define RDMADL_TESTS_FAKE_PROVIDER_INTERNAL_H

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "extra_decls.h"
#include "fake_bodies.h"
#include "fake_provider.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* One lock for the whole fake (recursive: a callback may call back in). */
extern pthread_mutex_t fp_lock;
#define LOCK() pthread_mutex_lock(&fp_lock)
#define UNLOCK() pthread_mutex_unlock(&fp_lock)

#define FP_MAGIC 0xfa4e0b1eu
#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Common head of every object the fake hands out. All objects stay on the
 * `all` list for the life of the process (never freed, reachable). */
struct fp_hdr {
  uint32_t magic;
  int type; /* enum fakeprov_type */
  int dead;
  struct fp_hdr *next;
};

struct fp_ctx {
  struct fp_hdr h;
  int children; /* live objects created under this context */
  int async_pipe[2];
  struct verbs_context vctx; /* context is its last member */
};

struct fp_pd {
  struct fp_hdr h;
  struct fp_ctx *ctx;
  int users;
  struct ibv_pd pd;
};

struct fp_mr {
  struct fp_hdr h;
  struct fp_pd *pd;
  uint64_t iova;
  int access;
  struct ibv_mr mr;
};

#define CHANNEL_RING 1024
#define MINIMAL_RING 1024 /* FAKEPROV_MINIMAL_OPS: completions a CQ holds */
struct fp_channel {
  struct fp_hdr h;
  struct fp_ctx *ctx;
  int users;
  int wfd;
  struct fp_cq *events[CHANNEL_RING];
  unsigned ev_head, ev_len;
  struct ibv_comp_channel ch;
};

struct fp_cq {
  struct fp_hdr h;
  struct fp_ctx *ctx;
  struct fp_channel *channel;
  int users;
  int extended;
  uint64_t wc_flags;
  int armed;
  unsigned events, acked;
  struct ibv_wc *ring;
  int cap, head, len;
  int in_poll;
  struct ibv_wc cur;
  /* FAKEPROV_MINIMAL_OPS: its completions, nothing else of the CQ is used */
  unsigned min_head, min_tail;
  struct ibv_wc min_ring[MINIMAL_RING];
  struct ibv_cq_ex cq; /* also the struct ibv_cq of a plain CQ */
};

struct fp_rwr {
  uint64_t wr_id;
  int num_sge;
  struct ibv_sge sge[FAKEPROV_MAX_RECORD_SGE];
};

struct fp_rq {
  struct fp_rwr *q;
  int cap, head, len;
};

struct fp_srq {
  struct fp_hdr h;
  struct fp_pd *pd;
  struct fp_ctx *ctx;
  int users;
  uint32_t srqn;
  struct fp_rq rq;
  uint32_t max_sge;
  struct ibv_srq srq;
};

struct fp_ah {
  struct fp_hdr h;
  struct fp_pd *pd;
  struct ibv_ah_attr attr;
  struct ibv_ah ah;
};

/* A message on its way to a receive queue. */
struct fp_inbound {
  struct fp_inbound *next;
  uint32_t src_qp;
  uint32_t byte_len;
  int write_imm; /* RDMA write with immediate: consumes a receive, no data */
  int with_imm;
  uint32_t imm;
  int no_data; /* scripted by fakeprov_complete_recv */
  uint8_t *data;
};

struct fp_qp {
  struct fp_hdr h;
  struct fp_ctx *ctx;
  struct fp_pd *pd;
  struct fp_cq *send_cq, *recv_cq;
  struct fp_srq *srq;
  int sq_sig_all;
  struct ibv_qp_cap cap;
  int ex;                  /* created with send_ops_flags: ibv_qp_to_qp_ex answers */
  uint64_t send_ops_flags; /* what the WR API may use */
  struct ibv_qp_attr attr; /* accumulated by modify_qp */
  struct fp_rq rq;
  struct fp_inbound *in_head, *in_tail;
  /* WR API */
  int in_wr;
  int wr_err;
  struct fakeprov_wr_record *pending;
  int npending, pending_cap;
  /* Send WRs posted but not executed yet (FAKEPROV_HOLD_SENDS), oldest first;
   * held_polls[i]: polls of the send CQ left before held[i] runs (-1: never). */
  struct fakeprov_wr_record *held;
  long *held_polls;
  int nheld, held_cap;
  struct ibv_qp_ex qpx; /* qp_base is the struct ibv_qp */
};

/* NAME(p): the fake object of type FP whose member MEMBER is the public
 * object p (of type PUB, seen as AS), or NULL for NULL. */
#define FP_OF(name, fp, pub, as, member)                                                           \
  static inline struct fp *name(pub *p) {                                                          \
    return p ? container_of((as *)p, struct fp, member) : NULL;                                    \
  }
FP_OF(ctx_of, fp_ctx, struct ibv_context, struct ibv_context, vctx.context)
FP_OF(pd_of, fp_pd, struct ibv_pd, struct ibv_pd, pd)
FP_OF(mr_of, fp_mr, struct ibv_mr, struct ibv_mr, mr)
FP_OF(channel_of, fp_channel, struct ibv_comp_channel, struct ibv_comp_channel, ch)
FP_OF(cq_of, fp_cq, struct ibv_cq, struct ibv_cq_ex, cq)
FP_OF(cqx_of, fp_cq, struct ibv_cq_ex, struct ibv_cq_ex, cq)
FP_OF(qp_of, fp_qp, struct ibv_qp, struct ibv_qp_ex, qpx)
FP_OF(qpx_of, fp_qp, struct ibv_qp_ex, struct ibv_qp_ex, qpx)
FP_OF(srq_of, fp_srq, struct ibv_srq, struct ibv_srq, srq)
FP_OF(ah_of, fp_ah, struct ibv_ah, struct ibv_ah, ah)
#undef FP_OF

/* Liveness by the public pointer; NULL stays NULL (then alive() reports it). */
#define ALIVE(hdrp, type, what) alive((hdrp) ? &(hdrp)->h : NULL, type, what)

/* ---- state (fake_provider.c) ---- */

extern struct fp_hdr *all;
extern int live[FAKEPROV_TYPE_COUNT];
extern int violations, overruns;
extern char last_violation[256];
extern const long knob_default[FAKEPROV_KNOB_COUNT];
extern long knob[FAKEPROV_KNOB_COUNT];
extern int knobs_set;
struct fp_fail {
  int err;
  unsigned count;
};
extern struct fp_fail fail_script[FAKEPROV_OP_COUNT]; /* fakeprov_fail_next() */
extern unsigned long op_calls[FAKEPROV_OP_COUNT];     /* fakeprov_calls() */
extern unsigned status_count;                         /* fakeprov_complete_with() */
extern int status_value;
extern uint32_t status_vendor_err;
extern uint32_t next_qpn; /* QPs and SRQs share the number space */
extern uint32_t next_key;
extern uint32_t last_qpn;
extern uint64_t next_seq;
extern struct fakeprov_wr_record *wr_log;
extern size_t wr_log_len, wr_log_cap;
extern struct fakeprov_modify_record *mod_log;
extern size_t mod_log_len, mod_log_cap;

/* ---- functions one file gives the others ---- */

/* Makes CTX's data path the one of FAKEPROV_MINIMAL_OPS. */
void minimal_ops(struct ibv_context *ctx);
/* Whether H is a live object of TYPE; counts a violation (naming WHAT) if not. */
int alive(const struct fp_hdr *h, int type, const char *what);

void apply_ex_knobs(void);
void complete_flush(struct fp_qp *q);
struct fp_mr *find_mr_lkey(struct fp_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len);
struct fp_mr *find_mr_rkey(struct fp_pd *pd, uint32_t rkey);
struct fp_qp *find_qp(uint32_t qpn);
long k(enum fakeprov_knob which);
void kill_object(struct fp_hdr *h);
struct fp_ctx *live_ctx(struct ibv_context *context, const char *what);
void *new_object(size_t size, int type);
struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a);
struct ibv_qp *op_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *a);
int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int op_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void poll_tick(struct fp_cq *cq);
void push_wc(struct fp_cq *q, const struct ibv_wc *wc);
int rq_pop(struct fp_rq *rq, struct fp_rwr *out);
int rq_push(struct fp_rq *rq, const struct ibv_recv_wr *wr);
int run_held(struct fp_qp *q, int n);
int scripted_failure(enum fakeprov_op op);
void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void wr_abort(struct ibv_qp_ex *qpx);
void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
                       uint64_t swap);
void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add);
int wr_complete(struct ibv_qp_ex *qpx);
void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr);
void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr);
void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm);
void wr_send(struct ibv_qp_ex *qpx);
void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm);
void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length);
void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *buf);
void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length);
void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sge);
void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
                    uint32_t remote_qkey);
void wr_start(struct ibv_qp_ex *qpx);

#endif /* RDMADL_TESTS_FAKE_PROVIDER_INTERNAL_H */
