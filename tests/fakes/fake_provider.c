/* SPDX-License-Identifier: MIT */
/*
 * A scripted fake provider: a fake libibverbs.so.1 with one working fake
 * device, so that the C++ layer's logic (the work requests it builds, the
 * completions it maps, its teardown order, its fallbacks) runs on every host
 * without RDMA hardware. It is a test double at the dlopen boundary only; the
 * real paths are proven by the Soft-RoCE VM tier.
 *
 * Every libibverbs name of symbols.def is exported at its version node (the
 * version script is generated from the symbol table, tests/fakes/CMakeLists.txt);
 * the ones written below answer like a small device, every other one fails as
 * its man page says with errno EOPNOTSUPP. fake_provider.h documents the
 * device, its knobs and the scripting API (FAKEPROV_1.0).
 *
 * Behaviour that the tests rely on:
 *  - ibv_open_device returns a real struct verbs_context; the data path
 *    (post_send, post_recv, post_srq_recv, poll_cq, req_notify_cq) is in
 *    ibv_context_ops, create_cq_ex / create_qp_ex / query_device_ex /
 *    query_port are verbs_context ops (create_*_ex per knob).
 *  - Teardown as rdma-core/the kernel define it: ibv_dealloc_pd is EBUSY while
 *    an MR/QP/SRQ/AH uses the PD, ibv_destroy_cq EBUSY while a QP uses it,
 *    ibv_destroy_comp_channel EBUSY while a CQ uses it, ibv_destroy_srq EBUSY
 *    while a QP uses it. ibv_close_device with live children succeeds and is
 *    counted as a violation.
 *  - Objects are never freed: a destroyed one is marked dead, and any later use
 *    of it (or of a pointer the fake never handed out) is a violation.
 *  - Every post is deep-copied into a log; signalled send WRs and matched
 *    receives produce completions. With the loopback knob on, a QP connected
 *    (dest_qp_num at RTR) to another live fake QP delivers sends to the peer's
 *    receives and performs RDMA write/read/atomics on the peer's registered
 *    memory when the rkey and range match (else IBV_WC_REM_ACCESS_ERR); local
 *    SGEs are checked against the QP's PD (else IBV_WC_LOC_PROT_ERR).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "extra_decls.h"
#include "fake_provider.h"
#include "str_tables.h"
#include "table_rows.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define FAKE_API __attribute__((visibility("default")))

/* ---- every symbol of symbols.def not written below: fails, EOPNOTSUPP ---- */
#define FAKE_BODY_VOID(ret, name, params)                                                          \
  FAKE_API ret name params {}
#define FAKE_BODY_NULLPTR(ret, name, params)                                                       \
  FAKE_API ret name params {                                                                       \
    errno = EOPNOTSUPP;                                                                            \
    return (ret)0;                                                                                 \
  }
#define FAKE_BODY_M1(ret, name, params)                                                            \
  FAKE_API ret name params {                                                                       \
    errno = EOPNOTSUPP;                                                                            \
    return (ret)-1;                                                                                \
  }
#define FAKE_BODY_ERRNO(ret, name, params)                                                         \
  FAKE_API ret name params {                                                                       \
    errno = EOPNOTSUPP;                                                                            \
    return (ret)EOPNOTSUPP;                                                                        \
  }
#define FAKE_BODY_NEGERRNO(ret, name, params)                                                      \
  FAKE_API ret name params {                                                                       \
    errno = EOPNOTSUPP;                                                                            \
    return (ret)-EOPNOTSUPP;                                                                       \
  }
#define FAKE_BODY_ZERO(ret, name, params)                                                          \
  FAKE_API ret name params {                                                                       \
    return (ret)0;                                                                                 \
  }
#define FAKE_BODY_STR(ret, name, params)                                                           \
  FAKE_API ret name params {                                                                       \
    return "fake";                                                                                 \
  }
#define FAKE_GEN(fail, ret, name, params) FAKE_BODY_##fail(ret, name, params)
/* The ones written by hand below are generated under another, local name. */
#define ibv_get_device_list fake_gen_ibv_get_device_list
#define ibv_free_device_list fake_gen_ibv_free_device_list
#define ibv_get_device_name fake_gen_ibv_get_device_name
#define ibv_get_device_guid fake_gen_ibv_get_device_guid
#define ibv_get_device_index fake_gen_ibv_get_device_index
#define ibv_open_device fake_gen_ibv_open_device
#define ibv_close_device fake_gen_ibv_close_device
#define ibv_query_device fake_gen_ibv_query_device
#define ibv_query_port fake_gen_ibv_query_port
#define ibv_query_gid fake_gen_ibv_query_gid
#define _ibv_query_gid_ex fake_gen__ibv_query_gid_ex
#define _ibv_query_gid_table fake_gen__ibv_query_gid_table
#define ibv_query_pkey fake_gen_ibv_query_pkey
#define ibv_alloc_pd fake_gen_ibv_alloc_pd
#define ibv_dealloc_pd fake_gen_ibv_dealloc_pd
#define ibv_reg_mr fake_gen_ibv_reg_mr
#define ibv_reg_mr_iova fake_gen_ibv_reg_mr_iova
#define ibv_reg_mr_iova2 fake_gen_ibv_reg_mr_iova2
#define ibv_dereg_mr fake_gen_ibv_dereg_mr
#define ibv_create_comp_channel fake_gen_ibv_create_comp_channel
#define ibv_destroy_comp_channel fake_gen_ibv_destroy_comp_channel
#define ibv_create_cq fake_gen_ibv_create_cq
#define ibv_destroy_cq fake_gen_ibv_destroy_cq
#define ibv_get_cq_event fake_gen_ibv_get_cq_event
#define ibv_ack_cq_events fake_gen_ibv_ack_cq_events
#define ibv_create_qp fake_gen_ibv_create_qp
#define ibv_destroy_qp fake_gen_ibv_destroy_qp
#define ibv_modify_qp fake_gen_ibv_modify_qp
#define ibv_query_qp fake_gen_ibv_query_qp
#define ibv_qp_to_qp_ex fake_gen_ibv_qp_to_qp_ex
#define ibv_create_srq fake_gen_ibv_create_srq
#define ibv_destroy_srq fake_gen_ibv_destroy_srq
#define ibv_create_ah fake_gen_ibv_create_ah
#define ibv_destroy_ah fake_gen_ibv_destroy_ah
#define ibv_wc_status_str fake_gen_ibv_wc_status_str
#undef FAKE_API
#define FAKE_API __attribute__((visibility("default"), unused))
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_OF(IBV, lib, FAKE_GEN)(fail, ret, name, params)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "symbols.def"
#pragma GCC diagnostic pop
#undef RDMADL_SYM
#undef FAKE_API
#define FAKE_API __attribute__((visibility("default")))
#undef ibv_get_device_list
#undef ibv_free_device_list
#undef ibv_get_device_name
#undef ibv_get_device_guid
#undef ibv_get_device_index
#undef ibv_open_device
#undef ibv_close_device
#undef ibv_query_device
#undef ibv_query_port
#undef ibv_query_gid
#undef _ibv_query_gid_ex
#undef _ibv_query_gid_table
#undef ibv_query_pkey
#undef ibv_alloc_pd
#undef ibv_dealloc_pd
#undef ibv_reg_mr
#undef ibv_reg_mr_iova
#undef ibv_reg_mr_iova2
#undef ibv_dereg_mr
#undef ibv_create_comp_channel
#undef ibv_destroy_comp_channel
#undef ibv_create_cq
#undef ibv_destroy_cq
#undef ibv_get_cq_event
#undef ibv_ack_cq_events
#undef ibv_create_qp
#undef ibv_destroy_qp
#undef ibv_modify_qp
#undef ibv_query_qp
#undef ibv_qp_to_qp_ex
#undef ibv_create_srq
#undef ibv_destroy_srq
#undef ibv_create_ah
#undef ibv_destroy_ah
#undef ibv_wc_status_str

/* ---- state ---- */

static pthread_mutex_t lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
#define LOCK() pthread_mutex_lock(&lock)
#define UNLOCK() pthread_mutex_unlock(&lock)

#define FP_MAGIC 0xfa4e0b1eu

/* Common head of every object the fake hands out. All objects stay on the
 * `all` list for the life of the process (never freed, reachable). */
struct fp_hdr {
  uint32_t magic;
  int type; /* enum fakeprov_type */
  int dead;
  struct fp_hdr *next;
};
static struct fp_hdr *all;
static int live[FAKEPROV_TYPE_COUNT];
static int violations, overruns;
static char last_violation[256];

static const long knob_default[FAKEPROV_KNOB_COUNT] = {
    [FAKEPROV_MAX_QP_WR] = 64,
    [FAKEPROV_MAX_SGE] = 4,
    [FAKEPROV_MAX_CQE] = 256,
    [FAKEPROV_MAX_QP_RD_ATOM] = 4,
    [FAKEPROV_MAX_QP_INIT_RD_ATOM] = 4,
    [FAKEPROV_MAX_SRQ] = 8,
    [FAKEPROV_MAX_SRQ_WR] = 64,
    [FAKEPROV_MAX_SRQ_SGE] = 4,
    [FAKEPROV_MAX_INLINE] = 64,
    [FAKEPROV_ATOMIC_CAP] = IBV_ATOMIC_HCA,
    [FAKEPROV_PORT_STATE] = IBV_PORT_ACTIVE,
    [FAKEPROV_PORT_LINK_LAYER] = IBV_LINK_LAYER_ETHERNET,
    [FAKEPROV_PORT_LID] = 0,
    [FAKEPROV_PORT_ACTIVE_MTU] = IBV_MTU_1024,
    [FAKEPROV_CQ_EX] = FAKEPROV_EX_WORKS,
    [FAKEPROV_QP_EX] = FAKEPROV_EX_WORKS,
    [FAKEPROV_LOOPBACK] = 1,
    [FAKEPROV_HOLD_SENDS] = 0,
};
static long knob[FAKEPROV_KNOB_COUNT];
static int knobs_set;

/* The names FAKEPROV_KNOBS uses: the enum's, without "FAKEPROV_". */
static const char *const knob_name[FAKEPROV_KNOB_COUNT] = {
    [FAKEPROV_MAX_QP_WR] = "MAX_QP_WR",
    [FAKEPROV_MAX_SGE] = "MAX_SGE",
    [FAKEPROV_MAX_CQE] = "MAX_CQE",
    [FAKEPROV_MAX_QP_RD_ATOM] = "MAX_QP_RD_ATOM",
    [FAKEPROV_MAX_QP_INIT_RD_ATOM] = "MAX_QP_INIT_RD_ATOM",
    [FAKEPROV_MAX_SRQ] = "MAX_SRQ",
    [FAKEPROV_MAX_SRQ_WR] = "MAX_SRQ_WR",
    [FAKEPROV_MAX_SRQ_SGE] = "MAX_SRQ_SGE",
    [FAKEPROV_MAX_INLINE] = "MAX_INLINE",
    [FAKEPROV_ATOMIC_CAP] = "ATOMIC_CAP",
    [FAKEPROV_PORT_STATE] = "PORT_STATE",
    [FAKEPROV_PORT_LINK_LAYER] = "PORT_LINK_LAYER",
    [FAKEPROV_PORT_LID] = "PORT_LID",
    [FAKEPROV_PORT_ACTIVE_MTU] = "PORT_ACTIVE_MTU",
    [FAKEPROV_CQ_EX] = "CQ_EX",
    [FAKEPROV_QP_EX] = "QP_EX",
    [FAKEPROV_LOOPBACK] = "LOOPBACK",
    [FAKEPROV_HOLD_SENDS] = "HOLD_SENDS",
};

/* FAKEPROV_KNOBS=NAME=VALUE[,NAME=VALUE...]: knobs for a process that cannot
 * call fakeprov_set() (a tool run by a test). An unknown name is ignored. */
static void knobs_from_env(void) {
  const char *e = getenv("FAKEPROV_KNOBS");
  while (e && *e) {
    const char *eq = strchr(e, '=');
    if (!eq)
      break;
    for (int i = 0; i < FAKEPROV_KNOB_COUNT; i++)
      if (knob_name[i] && strlen(knob_name[i]) == (size_t)(eq - e) &&
          !strncmp(knob_name[i], e, (size_t)(eq - e)))
        knob[i] = strtol(eq + 1, NULL, 0);
    e = strchr(eq, ',');
    if (e)
      e++;
  }
}

static void fails_from_env(void);

/* The first use: the defaults, then the environment's knobs and failures. */
static void first_use(void) {
  if (!knobs_set) {
    memcpy(knob, knob_default, sizeof(knob));
    knobs_from_env();
    fails_from_env();
    knobs_set = 1;
  }
}

static long k(enum fakeprov_knob which) {
  first_use();
  return knob[which];
}

static struct {
  int err;
  unsigned count;
} fail_script[FAKEPROV_OP_COUNT];
static unsigned status_count;
static int status_value;
static uint32_t status_vendor_err;

static uint32_t next_qpn = 0x11; /* QPs and SRQs share the number space */
static uint32_t next_key = 1;
static uint32_t last_qpn;
static uint64_t next_seq = 1;

static struct fakeprov_wr_record *wr_log;
static size_t wr_log_len, wr_log_cap;
static struct fakeprov_modify_record *mod_log;
static size_t mod_log_len, mod_log_cap;

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void violation(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_violation, sizeof(last_violation), fmt, ap);
  va_end(ap);
  violations++;
}

/* Whether the next call of OP is scripted to fail; if so, its errno. */
/* The names FAKEPROV_FAIL uses: the enum's, without "FAKEPROV_OP_". */
static const char *const op_name[FAKEPROV_OP_COUNT] = {
    [FAKEPROV_OP_GET_DEVICE_LIST] = "GET_DEVICE_LIST",
    [FAKEPROV_OP_OPEN_DEVICE] = "OPEN_DEVICE",
    [FAKEPROV_OP_CLOSE_DEVICE] = "CLOSE_DEVICE",
    [FAKEPROV_OP_QUERY_DEVICE] = "QUERY_DEVICE",
    [FAKEPROV_OP_QUERY_PORT] = "QUERY_PORT",
    [FAKEPROV_OP_QUERY_GID] = "QUERY_GID",
    [FAKEPROV_OP_ALLOC_PD] = "ALLOC_PD",
    [FAKEPROV_OP_DEALLOC_PD] = "DEALLOC_PD",
    [FAKEPROV_OP_REG_MR] = "REG_MR",
    [FAKEPROV_OP_DEREG_MR] = "DEREG_MR",
    [FAKEPROV_OP_CREATE_COMP_CHANNEL] = "CREATE_COMP_CHANNEL",
    [FAKEPROV_OP_DESTROY_COMP_CHANNEL] = "DESTROY_COMP_CHANNEL",
    [FAKEPROV_OP_CREATE_CQ] = "CREATE_CQ",
    [FAKEPROV_OP_CREATE_CQ_EX] = "CREATE_CQ_EX",
    [FAKEPROV_OP_DESTROY_CQ] = "DESTROY_CQ",
    [FAKEPROV_OP_REQ_NOTIFY_CQ] = "REQ_NOTIFY_CQ",
    [FAKEPROV_OP_GET_CQ_EVENT] = "GET_CQ_EVENT",
    [FAKEPROV_OP_POLL_CQ] = "POLL_CQ",
    [FAKEPROV_OP_CREATE_QP] = "CREATE_QP",
    [FAKEPROV_OP_CREATE_QP_EX] = "CREATE_QP_EX",
    [FAKEPROV_OP_MODIFY_QP] = "MODIFY_QP",
    [FAKEPROV_OP_QUERY_QP] = "QUERY_QP",
    [FAKEPROV_OP_DESTROY_QP] = "DESTROY_QP",
    [FAKEPROV_OP_POST_SEND] = "POST_SEND",
    [FAKEPROV_OP_POST_RECV] = "POST_RECV",
    [FAKEPROV_OP_POST_SRQ_RECV] = "POST_SRQ_RECV",
    [FAKEPROV_OP_CREATE_SRQ] = "CREATE_SRQ",
    [FAKEPROV_OP_DESTROY_SRQ] = "DESTROY_SRQ",
    [FAKEPROV_OP_CREATE_AH] = "CREATE_AH",
    [FAKEPROV_OP_DESTROY_AH] = "DESTROY_AH",
};

/* FAKEPROV_FAIL=OP=ERRNO[,OP=ERRNO...]: every call of OP fails with ERRNO, as
 * fakeprov_fail_next(OP, ERRNO, UINT_MAX) would make it. */
static void fails_from_env(void) {
  const char *e = getenv("FAKEPROV_FAIL");
  while (e && *e) {
    const char *eq = strchr(e, '=');
    if (!eq)
      break;
    for (int i = 0; i < FAKEPROV_OP_COUNT; i++)
      if (op_name[i] && strlen(op_name[i]) == (size_t)(eq - e) &&
          !strncmp(op_name[i], e, (size_t)(eq - e))) {
        fail_script[i].err = (int)strtol(eq + 1, NULL, 0);
        fail_script[i].count = fail_script[i].err ? UINT_MAX : 0;
      }
    e = strchr(eq, ',');
    if (e)
      e++;
  }
}

static unsigned long op_calls[FAKEPROV_OP_COUNT]; /* fakeprov_calls() */

/* Every operation of enum fakeprov_op starts here: counted, and failed when
 * a test scripted it. */
static int scripted_failure(enum fakeprov_op op) {
  first_use();
  op_calls[op]++;
  if (!fail_script[op].count)
    return 0;
  fail_script[op].count--;
  return fail_script[op].err;
}

static void *new_object(size_t size, int type) {
  struct fp_hdr *h = calloc(1, size);
  if (!h)
    abort();
  h->magic = FP_MAGIC;
  h->type = type;
  h->next = all;
  all = h;
  live[type]++;
  return h;
}

static void kill_object(struct fp_hdr *h) {
  h->dead = 1;
  live[h->type]--;
}

/* Whether H is a live object of TYPE; counts a violation (naming WHAT) if not. */
static int alive(const struct fp_hdr *h, int type, const char *what) {
  if (!h) {
    violation("%s on a NULL object", what);
    return 0;
  }
  for (const struct fp_hdr *p = all; p; p = p->next)
    if (p == h) {
      if (p->type != type) {
        violation("%s on an object of another type", what);
        return 0;
      }
      if (p->dead) {
        violation("%s on a destroyed object", what);
        return 0;
      }
      return 1;
    }
  violation("%s on a pointer the fake never handed out", what);
  return 0;
}

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* ---- objects ---- */

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

static struct fp_ctx *ctx_of(struct ibv_context *c) {
  return c ? container_of(c, struct fp_ctx, vctx.context) : NULL;
}
static struct fp_pd *pd_of(struct ibv_pd *p) {
  return p ? container_of(p, struct fp_pd, pd) : NULL;
}
static struct fp_mr *mr_of(struct ibv_mr *m) {
  return m ? container_of(m, struct fp_mr, mr) : NULL;
}
static struct fp_channel *channel_of(struct ibv_comp_channel *c) {
  return c ? container_of(c, struct fp_channel, ch) : NULL;
}
static struct fp_cq *cq_of(struct ibv_cq *c) {
  return c ? container_of((struct ibv_cq_ex *)c, struct fp_cq, cq) : NULL;
}
static struct fp_cq *cqx_of(struct ibv_cq_ex *c) {
  return c ? container_of(c, struct fp_cq, cq) : NULL;
}
static struct fp_qp *qp_of(struct ibv_qp *q) {
  return q ? container_of((struct ibv_qp_ex *)q, struct fp_qp, qpx) : NULL;
}
static struct fp_qp *qpx_of(struct ibv_qp_ex *q) {
  return q ? container_of(q, struct fp_qp, qpx) : NULL;
}
static struct fp_srq *srq_of(struct ibv_srq *s) {
  return s ? container_of(s, struct fp_srq, srq) : NULL;
}
static struct fp_ah *ah_of(struct ibv_ah *a) {
  return a ? container_of(a, struct fp_ah, ah) : NULL;
}

/* Liveness by the public pointer; NULL stays NULL (then alive() reports it). */
#define ALIVE(hdrp, type, what) alive((hdrp) ? &(hdrp)->h : NULL, type, what)

static struct fp_qp *find_qp(uint32_t qpn) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_QP) {
      struct fp_qp *q = (struct fp_qp *)p;
      if (q->qpx.qp_base.qp_num == qpn)
        return q;
    }
  return NULL;
}

static struct fp_mr *find_mr_rkey(struct fp_pd *pd, uint32_t rkey) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_MR) {
      struct fp_mr *m = (struct fp_mr *)p;
      if (m->mr.rkey == rkey && (!pd || m->pd == pd))
        return m;
    }
  return NULL;
}

/* The local MR that covers [addr, addr+len) with LKEY in PD. */
static struct fp_mr *find_mr_lkey(struct fp_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_MR) {
      struct fp_mr *m = (struct fp_mr *)p;
      uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;
      if (m->mr.lkey == lkey && m->pd == pd && addr >= base && len <= m->mr.length &&
          addr - base <= m->mr.length - len)
        return m;
    }
  return NULL;
}

/* ---- the device ---- */

static struct ibv_device fake_device = {
    .node_type = IBV_NODE_CA,
    .transport_type = IBV_TRANSPORT_IB,
    .name = FAKEPROV_DEVICE_NAME,
    .dev_name = "uverbs0",
    .dev_path = "/nonexistent/fakeprov/uverbs0",
    .ibdev_path = "/nonexistent/fakeprov/fake0",
};

#define MAX_LISTS 64
static struct ibv_device **lists[MAX_LISTS];

FAKE_API struct ibv_device **ibv_get_device_list(int *num_devices) {
  LOCK();
  struct ibv_device **l = NULL;
  int err = scripted_failure(FAKEPROV_OP_GET_DEVICE_LIST);
  if (!err) {
    int slot = -1;
    for (int i = 0; i < MAX_LISTS && slot < 0; i++)
      if (!lists[i])
        slot = i;
    if (slot < 0) {
      err = ENOMEM;
    } else {
      l = calloc(2, sizeof(*l));
      if (!l)
        abort();
      l[0] = &fake_device;
      lists[slot] = l;
      live[FAKEPROV_DEVICE_LIST]++;
    }
  }
  UNLOCK();
  if (num_devices)
    *num_devices = l ? 1 : 0;
  if (!l)
    errno = err;
  return l;
}

FAKE_API void ibv_free_device_list(struct ibv_device **list) {
  LOCK();
  int found = 0;
  for (int i = 0; i < MAX_LISTS; i++)
    if (list && lists[i] == list) {
      lists[i] = NULL;
      found = 1;
      live[FAKEPROV_DEVICE_LIST]--;
      free(list);
    }
  if (!found)
    violation("ibv_free_device_list of a list not handed out (or freed twice)");
  UNLOCK();
}

static int is_fake_device(struct ibv_device *d, const char *what) {
  if (d == &fake_device)
    return 1;
  LOCK();
  violation("%s on a device the fake never handed out", what);
  UNLOCK();
  return 0;
}

FAKE_API const char *ibv_get_device_name(struct ibv_device *device) {
  return is_fake_device(device, "ibv_get_device_name") ? device->name : NULL;
}

FAKE_API __be64 ibv_get_device_guid(struct ibv_device *device) {
  return is_fake_device(device, "ibv_get_device_guid") ? htobe64(FAKEPROV_NODE_GUID) : 0;
}

FAKE_API int ibv_get_device_index(struct ibv_device *device) {
  return is_fake_device(device, "ibv_get_device_index") ? 0 : -1;
}

/* ---- context ---- */

static int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
static int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int op_req_notify_cq(struct ibv_cq *cq, int solicited_only);
static struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a);
static struct ibv_qp *op_create_qp_ex(struct ibv_context *c, struct ibv_qp_init_attr_ex *a);
static int op_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                              struct ibv_device_attr_ex *attr, size_t size);
static int op_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);

/* Sets the ex ops of every live context from the knobs. */
static void apply_ex_knobs(void) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_CONTEXT) {
      struct fp_ctx *c = (struct fp_ctx *)p;
      c->vctx.create_cq_ex = k(FAKEPROV_CQ_EX) == FAKEPROV_EX_ABSENT ? NULL : op_create_cq_ex;
      c->vctx.create_qp_ex = k(FAKEPROV_QP_EX) == FAKEPROV_EX_ABSENT ? NULL : op_create_qp_ex;
    }
}

FAKE_API struct ibv_context *ibv_open_device(struct ibv_device *device) {
  if (!is_fake_device(device, "ibv_open_device")) {
    errno = ENODEV;
    return NULL;
  }
  LOCK();
  int err = scripted_failure(FAKEPROV_OP_OPEN_DEVICE);
  if (err) {
    UNLOCK();
    errno = err;
    return NULL;
  }
  struct fp_ctx *c = new_object(sizeof(*c), FAKEPROV_CONTEXT);
  if (pipe2(c->async_pipe, O_CLOEXEC))
    abort();
  struct verbs_context *v = &c->vctx;
  v->sz = sizeof(*v);
  v->query_port = op_query_port;
  v->query_device_ex = op_query_device_ex;
  struct ibv_context *ctx = &v->context;
  ctx->device = device;
  ctx->cmd_fd = -1;
  ctx->async_fd = c->async_pipe[0];
  ctx->num_comp_vectors = 1;
  ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
  pthread_mutex_init(&ctx->mutex, NULL);
  ctx->ops.post_send = op_post_send;
  ctx->ops.post_recv = op_post_recv;
  ctx->ops.post_srq_recv = op_post_srq_recv;
  ctx->ops.poll_cq = op_poll_cq;
  ctx->ops.req_notify_cq = op_req_notify_cq;
  apply_ex_knobs();
  UNLOCK();
  return ctx;
}

FAKE_API int ibv_close_device(struct ibv_context *context) {
  LOCK();
  struct fp_ctx *c = ctx_of(context);
  int rc = -1, err = EINVAL;
  if (ALIVE(c, FAKEPROV_CONTEXT, "ibv_close_device")) {
    err = scripted_failure(FAKEPROV_OP_CLOSE_DEVICE);
    if (!err) {
      if (c->children)
        violation("ibv_close_device with %d live children", c->children);
      close(c->async_pipe[0]);
      close(c->async_pipe[1]);
      kill_object(&c->h);
      rc = 0;
    }
  }
  UNLOCK();
  if (rc)
    errno = err;
  return rc;
}

/* Checks CONTEXT for OP; returns its fp_ctx or NULL (violation counted). */
static struct fp_ctx *live_ctx(struct ibv_context *context, const char *what) {
  struct fp_ctx *c = ctx_of(context);
  return ALIVE(c, FAKEPROV_CONTEXT, what) ? c : NULL;
}

static void fill_device_attr(struct ibv_device_attr *a) {
  memset(a, 0, sizeof(*a));
  snprintf(a->fw_ver, sizeof(a->fw_ver), "1.0.0");
  a->node_guid = htobe64(FAKEPROV_NODE_GUID);
  a->sys_image_guid = htobe64(FAKEPROV_NODE_GUID);
  a->max_mr_size = UINT64_MAX; /* no limit, as rxe reports it */
  a->page_size_cap = 0x1000;
  a->vendor_id = 0xfa4e;
  a->vendor_part_id = 1;
  a->hw_ver = 1;
  a->max_qp = 64;
  a->max_qp_wr = (int)k(FAKEPROV_MAX_QP_WR);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ;
  a->max_sge = (int)k(FAKEPROV_MAX_SGE);
  a->max_sge_rd = (int)k(FAKEPROV_MAX_SGE);
  a->max_cq = 64;
  a->max_cqe = (int)k(FAKEPROV_MAX_CQE);
  a->max_mr = 256;
  a->max_pd = 64;
  a->max_qp_rd_atom = (int)k(FAKEPROV_MAX_QP_RD_ATOM);
  a->max_res_rd_atom = 64 * (int)k(FAKEPROV_MAX_QP_RD_ATOM);
  a->max_qp_init_rd_atom = (int)k(FAKEPROV_MAX_QP_INIT_RD_ATOM);
  a->atomic_cap = (enum ibv_atomic_cap)k(FAKEPROV_ATOMIC_CAP);
  a->max_srq = (int)k(FAKEPROV_MAX_SRQ);
  a->max_srq_wr = (int)k(FAKEPROV_MAX_SRQ_WR);
  a->max_srq_sge = (int)k(FAKEPROV_MAX_SRQ_SGE);
  a->max_ah = 64;
  a->max_pkeys = 1;
  a->local_ca_ack_delay = 15;
  a->phys_port_cnt = 1;
}

FAKE_API int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr) {
  LOCK();
  int rc = EINVAL;
  if (live_ctx(context, "ibv_query_device")) {
    rc = scripted_failure(FAKEPROV_OP_QUERY_DEVICE);
    if (!rc)
      fill_device_attr(attr);
  }
  UNLOCK();
  return rc;
}

static int op_query_device_ex(struct ibv_context *context,
                              const struct ibv_query_device_ex_input *in,
                              struct ibv_device_attr_ex *attr, size_t size) {
  (void)in;
  LOCK();
  int rc = EINVAL;
  if (live_ctx(context, "query_device_ex") && size >= sizeof(attr->orig_attr)) {
    rc = scripted_failure(FAKEPROV_OP_QUERY_DEVICE);
    if (!rc) {
      memset(attr, 0, size);
      fill_device_attr(&attr->orig_attr);
    }
  }
  UNLOCK();
  return rc;
}

static int op_query_port(struct ibv_context *context, uint8_t port, struct ibv_port_attr *a,
                         size_t len) {
  LOCK();
  int rc = EINVAL;
  if (live_ctx(context, "ibv_query_port") && len >= offsetof(struct ibv_port_attr, flags)) {
    rc = scripted_failure(FAKEPROV_OP_QUERY_PORT);
    if (!rc && port != 1)
      rc = EINVAL;
    if (!rc) {
      memset(a, 0, len);
      a->state = (enum ibv_port_state)k(FAKEPROV_PORT_STATE);
      a->max_mtu = IBV_MTU_4096;
      a->active_mtu = (enum ibv_mtu)k(FAKEPROV_PORT_ACTIVE_MTU);
      a->gid_tbl_len = FAKEPROV_GID_TBL_LEN;
      a->port_cap_flags = 0x04010000;
      a->max_msg_sz = 1u << 31;
      a->pkey_tbl_len = 1;
      a->link_layer = (uint8_t)k(FAKEPROV_PORT_LINK_LAYER);
      a->lid = a->link_layer == IBV_LINK_LAYER_INFINIBAND ? (uint16_t)k(FAKEPROV_PORT_LID) : 0;
      a->max_vl_num = 1;
      a->active_width = 2;
      a->active_speed = 32;
      a->phys_state = a->state == IBV_PORT_ACTIVE ? 5 : 3;
    }
  }
  UNLOCK();
  return rc;
}

FAKE_API int ibv_query_port(struct ibv_context *context, uint8_t port,
                            struct _compat_ibv_port_attr *attr) {
  /* Callers (verbs.h's ___ibv_query_port) pass a full struct ibv_port_attr. */
  return op_query_port(context, port, (struct ibv_port_attr *)attr, sizeof(struct ibv_port_attr));
}

/* Entry I of port 1's GID table; 0 and a zero GID when the entry is empty. */
static int gid_entry(uint32_t i, struct ibv_gid_entry *e) {
  memset(e, 0, sizeof(*e));
  e->gid_index = i;
  e->port_num = 1;
  static const uint8_t link_local[16] = {0xfe, 0x80, 0,    0,    0,    0,    0,    0,
                                         0x02, 0x02, 0xc9, 0xff, 0xfe, 0x12, 0x34, 0x56};
  static const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
  if (k(FAKEPROV_PORT_LINK_LAYER) == IBV_LINK_LAYER_INFINIBAND) {
    if (i != 0)
      return 0;
    memcpy(e->gid.raw, link_local, 16);
    e->gid_type = IBV_GID_TYPE_IB;
    return 1;
  }
  e->ndev_ifindex = 2;
  switch (i) {
  case 0:
    memcpy(e->gid.raw, link_local, 16);
    e->gid_type = IBV_GID_TYPE_ROCE_V1;
    return 1;
  case 1:
    memcpy(e->gid.raw, v4, 16);
    e->gid_type = IBV_GID_TYPE_ROCE_V2;
    return 1;
  case 2:
    memcpy(e->gid.raw, link_local, 16);
    e->gid_type = IBV_GID_TYPE_ROCE_V2;
    return 1;
  default:
    e->ndev_ifindex = 0;
    return 0;
  }
}

FAKE_API int ibv_query_gid(struct ibv_context *context, uint8_t port, int index,
                           union ibv_gid *gid) {
  LOCK();
  int err = EINVAL;
  if (live_ctx(context, "ibv_query_gid")) {
    err = scripted_failure(FAKEPROV_OP_QUERY_GID);
    if (!err && (port != 1 || index < 0 || index >= FAKEPROV_GID_TBL_LEN))
      err = EINVAL;
    if (!err) {
      struct ibv_gid_entry e;
      gid_entry((uint32_t)index, &e);
      *gid = e.gid;
    }
  }
  UNLOCK();
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

FAKE_API int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port, uint32_t index,
                               struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size) {
  LOCK();
  int err = EINVAL;
  if (live_ctx(context, "ibv_query_gid_ex")) {
    err = scripted_failure(FAKEPROV_OP_QUERY_GID);
    if (!err && (port != 1 || index >= FAKEPROV_GID_TBL_LEN || flags ||
                 entry_size < sizeof(struct ibv_gid_entry)))
      err = EINVAL;
    if (!err) {
      struct ibv_gid_entry e;
      if (gid_entry(index, &e))
        *entry = e;
      else
        err = ENODATA;
    }
  }
  UNLOCK();
  return err;
}

FAKE_API ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                                      size_t max_entries, uint32_t flags, size_t entry_size) {
  LOCK();
  ssize_t rc = -EINVAL;
  if (live_ctx(context, "ibv_query_gid_table")) {
    int err = scripted_failure(FAKEPROV_OP_QUERY_GID);
    if (err || flags || entry_size < sizeof(struct ibv_gid_entry)) {
      rc = -(err ? err : EINVAL);
    } else {
      size_t n = 0;
      rc = 0;
      for (uint32_t i = 0; i < FAKEPROV_GID_TBL_LEN; i++) {
        struct ibv_gid_entry e;
        if (!gid_entry(i, &e))
          continue;
        if (n == max_entries) {
          rc = -EINVAL;
          break;
        }
        memcpy((char *)entries + n * entry_size, &e, sizeof(e));
        n++;
      }
      if (rc == 0)
        rc = (ssize_t)n;
    }
  }
  UNLOCK();
  return rc;
}

FAKE_API int ibv_query_pkey(struct ibv_context *context, uint8_t port, int index, __be16 *pkey) {
  LOCK();
  int ok = live_ctx(context, "ibv_query_pkey") && port == 1 && index == 0;
  UNLOCK();
  if (!ok) {
    errno = EINVAL;
    return -1;
  }
  *pkey = htobe16(0xffff);
  return 0;
}

/* ---- PD, MR ---- */

FAKE_API struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
  LOCK();
  struct ibv_pd *out = NULL;
  struct fp_ctx *c = live_ctx(context, "ibv_alloc_pd");
  int err = c ? scripted_failure(FAKEPROV_OP_ALLOC_PD) : EINVAL;
  if (!err) {
    struct fp_pd *p = new_object(sizeof(*p), FAKEPROV_PD);
    p->ctx = c;
    c->children++;
    p->pd.context = context;
    p->pd.handle = next_key++;
    out = &p->pd;
  }
  UNLOCK();
  if (!out)
    errno = err;
  return out;
}

FAKE_API int ibv_dealloc_pd(struct ibv_pd *pd) {
  LOCK();
  struct fp_pd *p = pd_of(pd);
  int rc = EINVAL;
  if (ALIVE(p, FAKEPROV_PD, "ibv_dealloc_pd")) {
    rc = scripted_failure(FAKEPROV_OP_DEALLOC_PD);
    if (!rc && p->users)
      rc = EBUSY;
    if (!rc) {
      p->ctx->children--;
      kill_object(&p->h);
    }
  }
  UNLOCK();
  return rc;
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                             unsigned access) {
  LOCK();
  struct ibv_mr *out = NULL;
  struct fp_pd *p = pd_of(pd);
  int err = ALIVE(p, FAKEPROV_PD, "ibv_reg_mr") ? scripted_failure(FAKEPROV_OP_REG_MR) : EINVAL;
  /* Remote write or atomic access needs local write (ibv_reg_mr(3)). */
  if (!err && (access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
      !(access & IBV_ACCESS_LOCAL_WRITE))
    err = EINVAL;
  if (!err && (!addr || !length))
    err = EINVAL;
  if (!err) {
    struct fp_mr *m = new_object(sizeof(*m), FAKEPROV_MR);
    uint32_t n = next_key++;
    m->pd = p;
    p->users++;
    p->ctx->children++;
    m->iova = iova;
    m->access = (int)access;
    m->mr.context = pd->context;
    m->mr.pd = pd;
    m->mr.addr = addr;
    m->mr.length = length;
    m->mr.handle = n;
    m->mr.lkey = n << 8 | 0x11;
    m->mr.rkey = n << 8 | 0x22;
    out = &m->mr;
  }
  UNLOCK();
  if (!out)
    errno = err;
  return out;
}

FAKE_API struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  return reg_mr(pd, addr, length, (uint64_t)(uintptr_t)addr, (unsigned)access);
}
FAKE_API struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                        int access) {
  return reg_mr(pd, addr, length, iova, (unsigned)access);
}
FAKE_API struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
                                         uint64_t iova, unsigned int access) {
  return reg_mr(pd, addr, length, iova, access);
}

FAKE_API int ibv_dereg_mr(struct ibv_mr *mr) {
  LOCK();
  struct fp_mr *m = mr_of(mr);
  int rc = EINVAL;
  if (ALIVE(m, FAKEPROV_MR, "ibv_dereg_mr")) {
    rc = scripted_failure(FAKEPROV_OP_DEREG_MR);
    if (!rc) {
      m->pd->users--;
      m->pd->ctx->children--;
      kill_object(&m->h);
    }
  }
  UNLOCK();
  return rc;
}

/* ---- completion channel, CQ ---- */

FAKE_API struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context) {
  LOCK();
  struct ibv_comp_channel *out = NULL;
  struct fp_ctx *c = live_ctx(context, "ibv_create_comp_channel");
  int err = c ? scripted_failure(FAKEPROV_OP_CREATE_COMP_CHANNEL) : EINVAL;
  if (!err) {
    struct fp_channel *ch = new_object(sizeof(*ch), FAKEPROV_COMP_CHANNEL);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC))
      abort();
    ch->ctx = c;
    c->children++;
    ch->wfd = fds[1];
    ch->ch.context = context;
    ch->ch.fd = fds[0];
    ch->ch.refcnt = 0;
    out = &ch->ch;
  }
  UNLOCK();
  if (!out)
    errno = err;
  return out;
}

FAKE_API int ibv_destroy_comp_channel(struct ibv_comp_channel *channel) {
  LOCK();
  struct fp_channel *ch = channel_of(channel);
  int err = EINVAL;
  if (ALIVE(ch, FAKEPROV_COMP_CHANNEL, "ibv_destroy_comp_channel")) {
    err = scripted_failure(FAKEPROV_OP_DESTROY_COMP_CHANNEL);
    if (!err && ch->users)
      err = EBUSY;
    if (!err) {
      close(ch->ch.fd);
      close(ch->wfd);
      ch->ctx->children--;
      kill_object(&ch->h);
    }
  }
  UNLOCK();
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

static int ex_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr);
static int ex_next_poll(struct ibv_cq_ex *cq);
static void ex_end_poll(struct ibv_cq_ex *cq);
static enum ibv_wc_opcode ex_read_opcode(struct ibv_cq_ex *cq);
static uint32_t ex_read_vendor_err(struct ibv_cq_ex *cq);
static uint32_t ex_read_byte_len(struct ibv_cq_ex *cq);
static __be32 ex_read_imm_data(struct ibv_cq_ex *cq);
static uint32_t ex_read_qp_num(struct ibv_cq_ex *cq);
static uint32_t ex_read_src_qp(struct ibv_cq_ex *cq);
static unsigned int ex_read_wc_flags(struct ibv_cq_ex *cq);
static uint32_t ex_read_slid(struct ibv_cq_ex *cq);
static uint8_t ex_read_sl(struct ibv_cq_ex *cq);
static uint8_t ex_read_dlid_path_bits(struct ibv_cq_ex *cq);

static struct fp_cq *create_cq(struct ibv_context *context, int cqe, void *cq_context,
                               struct ibv_comp_channel *channel, int *err, const char *what,
                               enum fakeprov_op op) {
  struct fp_ctx *c = live_ctx(context, what);
  struct fp_channel *ch = channel_of(channel);
  if (!c) {
    *err = EINVAL;
    return NULL;
  }
  if (ch && !ALIVE(ch, FAKEPROV_COMP_CHANNEL, what)) {
    *err = EINVAL;
    return NULL;
  }
  if ((*err = scripted_failure(op)))
    return NULL;
  if (cqe < 1 || (k(FAKEPROV_MAX_CQE) > 0 && cqe > k(FAKEPROV_MAX_CQE))) {
    *err = EINVAL;
    return NULL;
  }
  struct fp_cq *q = new_object(sizeof(*q), FAKEPROV_CQ);
  q->ctx = c;
  c->children++;
  q->channel = ch;
  if (ch)
    ch->users++;
  q->cap = cqe;
  q->ring = calloc((size_t)cqe, sizeof(*q->ring));
  if (!q->ring)
    abort();
  q->cq.context = context;
  q->cq.channel = channel;
  q->cq.cq_context = cq_context;
  q->cq.handle = next_key++;
  q->cq.cqe = cqe;
  pthread_mutex_init(&q->cq.mutex, NULL);
  pthread_cond_init(&q->cq.cond, NULL);
  return q;
}

FAKE_API struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                      struct ibv_comp_channel *channel, int comp_vector) {
  LOCK();
  int err = 0;
  struct fp_cq *q = NULL;
  if (comp_vector != 0)
    err = EINVAL;
  else
    q = create_cq(context, cqe, cq_context, channel, &err, "ibv_create_cq", FAKEPROV_OP_CREATE_CQ);
  UNLOCK();
  if (!q) {
    errno = err;
    return NULL;
  }
  return ibv_cq_ex_to_cq(&q->cq);
}

static struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *context,
                                         struct ibv_cq_init_attr_ex *a) {
  LOCK();
  int err = 0;
  struct fp_cq *q = NULL;
  const uint64_t known = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
                         IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
                         IBV_WC_EX_WITH_DLID_PATH_BITS;
  if (k(FAKEPROV_CQ_EX) == FAKEPROV_EX_EOPNOTSUPP)
    err = EOPNOTSUPP;
  else if (a->wc_flags & ~known)
    err = EOPNOTSUPP;
  else if (a->comp_vector != 0 || a->comp_mask)
    err = EINVAL;
  else
    q = create_cq(context, (int)a->cqe, a->cq_context, a->channel, &err, "create_cq_ex",
                  FAKEPROV_OP_CREATE_CQ_EX);
  if (q) {
    q->extended = 1;
    q->wc_flags = a->wc_flags;
    q->cq.start_poll = ex_start_poll;
    q->cq.next_poll = ex_next_poll;
    q->cq.end_poll = ex_end_poll;
    q->cq.read_opcode = ex_read_opcode;
    q->cq.read_vendor_err = ex_read_vendor_err;
    q->cq.read_byte_len = ex_read_byte_len;
    q->cq.read_imm_data = ex_read_imm_data;
    q->cq.read_qp_num = ex_read_qp_num;
    q->cq.read_src_qp = ex_read_src_qp;
    q->cq.read_wc_flags = ex_read_wc_flags;
    q->cq.read_slid = ex_read_slid;
    q->cq.read_sl = ex_read_sl;
    q->cq.read_dlid_path_bits = ex_read_dlid_path_bits;
  }
  UNLOCK();
  if (!q) {
    errno = err;
    return NULL;
  }
  return &q->cq;
}

FAKE_API int ibv_destroy_cq(struct ibv_cq *cq) {
  LOCK();
  struct fp_cq *q = cq_of(cq);
  int rc = EINVAL;
  if (ALIVE(q, FAKEPROV_CQ, "ibv_destroy_cq")) {
    rc = scripted_failure(FAKEPROV_OP_DESTROY_CQ);
    if (!rc && q->users)
      rc = EBUSY;
    if (!rc) {
      /* rdma-core's ibv_destroy_cq waits for every event to be acknowledged:
       * it would hang here. */
      if (q->acked != q->events)
        violation("ibv_destroy_cq with %u unacknowledged events", q->events - q->acked);
      if (q->in_poll)
        violation("ibv_destroy_cq inside a start_poll..end_poll session");
      if (q->channel) {
        q->channel->users--;
        /* Drop queued events of this CQ. */
        for (unsigned i = 0; i < q->channel->ev_len; i++) {
          unsigned at = (q->channel->ev_head + i) % CHANNEL_RING;
          if (q->channel->events[at] == q)
            q->channel->events[at] = NULL;
        }
      }
      q->ctx->children--;
      kill_object(&q->h);
    }
  }
  UNLOCK();
  return rc;
}

/* Queues a completion on Q; raises the channel event if armed. */
static void push_wc(struct fp_cq *q, const struct ibv_wc *wc) {
  if (q->h.dead) {
    violation("a completion for a destroyed CQ");
    return;
  }
  if (q->len == q->cap) {
    overruns++;
    return;
  }
  q->ring[(q->head + q->len) % q->cap] = *wc;
  q->len++;
  if (q->armed && q->channel && !q->channel->h.dead) {
    q->armed = 0;
    struct fp_channel *ch = q->channel;
    if (ch->ev_len < CHANNEL_RING) {
      ch->events[(ch->ev_head + ch->ev_len) % CHANNEL_RING] = q;
      ch->ev_len++;
      char b = 1;
      if (write(ch->wfd, &b, 1) != 1)
        abort();
    }
  }
}

static int pop_wc(struct fp_cq *q, struct ibv_wc *wc) {
  if (!q->len)
    return 0;
  *wc = q->ring[q->head];
  q->head = (q->head + 1) % q->cap;
  q->len--;
  return 1;
}

static void poll_tick(struct fp_cq *cq);

static int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
  LOCK();
  struct fp_cq *q = cq_of(cq);
  int rc = -1;
  if (ALIVE(q, FAKEPROV_CQ, "poll_cq")) {
    poll_tick(q);
    if (scripted_failure(FAKEPROV_OP_POLL_CQ))
      rc = -1;
    else if (n < 0)
      rc = -1;
    else
      for (rc = 0; rc < n && pop_wc(q, &wc[rc]); rc++)
        ;
  }
  UNLOCK();
  return rc;
}

static int op_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
  (void)solicited_only;
  LOCK();
  struct fp_cq *q = cq_of(cq);
  int rc = EINVAL;
  if (ALIVE(q, FAKEPROV_CQ, "req_notify_cq")) {
    rc = scripted_failure(FAKEPROV_OP_REQ_NOTIFY_CQ);
    if (!rc && !q->channel)
      rc = EINVAL;
    if (!rc)
      q->armed = 1;
  }
  UNLOCK();
  return rc;
}

FAKE_API int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
                              void **cq_context) {
  LOCK();
  struct fp_channel *ch = channel_of(channel);
  int ok = ALIVE(ch, FAKEPROV_COMP_CHANNEL, "ibv_get_cq_event");
  int err = ok ? scripted_failure(FAKEPROV_OP_GET_CQ_EVENT) : EINVAL;
  int fd = ok ? ch->ch.fd : -1;
  UNLOCK();
  if (err) {
    errno = err;
    return -1;
  }
  /* Blocks (unless the caller made the fd non-blocking) like the real one. */
  for (;;) {
    char b;
    if (read(fd, &b, 1) != 1)
      return -1;
    LOCK();
    struct fp_cq *q = NULL;
    while (ch->ev_len && !q) {
      q = ch->events[ch->ev_head];
      ch->ev_head = (ch->ev_head + 1) % CHANNEL_RING;
      ch->ev_len--;
    }
    if (q) {
      q->events++;
      *cq = ibv_cq_ex_to_cq(&q->cq);
      *cq_context = q->cq.cq_context;
    }
    UNLOCK();
    if (q)
      return 0;
    /* The event's CQ was destroyed meanwhile: wait for the next one. */
  }
}

FAKE_API void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents) {
  LOCK();
  struct fp_cq *q = cq_of(cq);
  if (ALIVE(q, FAKEPROV_CQ, "ibv_ack_cq_events")) {
    if (q->acked + nevents > q->events)
      violation("ibv_ack_cq_events acknowledges %u events more than were delivered",
                q->acked + nevents - q->events);
    else
      q->acked += nevents;
  }
  UNLOCK();
}

/* The extended CQ: a poll session holds one current completion. */
static struct fp_cq *live_ex(struct ibv_cq_ex *cq, const char *what, int need_session) {
  struct fp_cq *q = cqx_of(cq);
  if (!ALIVE(q, FAKEPROV_CQ, what))
    return NULL;
  if (need_session && !q->in_poll) {
    violation("%s outside a start_poll..end_poll session", what);
    return NULL;
  }
  return q;
}

static void set_current(struct fp_cq *q) {
  q->cq.status = q->cur.status;
  q->cq.wr_id = q->cur.wr_id;
}

static int ex_start_poll(struct ibv_cq_ex *cq, struct ibv_poll_cq_attr *attr) {
  LOCK();
  int rc = EINVAL;
  struct fp_cq *q = live_ex(cq, "start_poll", 0);
  if (q) {
    poll_tick(q);
    if (attr->comp_mask)
      rc = EINVAL;
    else if (q->in_poll) {
      violation("start_poll inside a poll session");
      rc = EINVAL;
    } else if ((rc = scripted_failure(FAKEPROV_OP_POLL_CQ))) {
    } else if (pop_wc(q, &q->cur)) {
      q->in_poll = 1;
      set_current(q);
      rc = 0;
    } else {
      rc = ENOENT;
    }
  }
  UNLOCK();
  return rc;
}

static int ex_next_poll(struct ibv_cq_ex *cq) {
  LOCK();
  int rc = EINVAL;
  struct fp_cq *q = live_ex(cq, "next_poll", 1);
  if (q) {
    rc = ENOENT;
    if (pop_wc(q, &q->cur)) {
      set_current(q);
      rc = 0;
    }
  }
  UNLOCK();
  return rc;
}

static void ex_end_poll(struct ibv_cq_ex *cq) {
  LOCK();
  struct fp_cq *q = live_ex(cq, "end_poll", 1);
  if (q)
    q->in_poll = 0;
  UNLOCK();
}

/* Reads field F of the current completion; FLAG: the wc_flags bit it needs. */
#define EX_READ(name, type, field, flag)                                                           \
  static type ex_read_##name(struct ibv_cq_ex *cq) {                                               \
    LOCK();                                                                                        \
    type v = 0;                                                                                    \
    struct fp_cq *q = live_ex(cq, "read_" #name, 1);                                               \
    if (q) {                                                                                       \
      if ((flag) && !(q->wc_flags & (flag)))                                                       \
        violation("read_" #name " without its IBV_WC_EX_WITH_* flag at create_cq_ex");             \
      v = (type)q->cur.field;                                                                      \
    }                                                                                              \
    UNLOCK();                                                                                      \
    return v;                                                                                      \
  }
EX_READ(opcode, enum ibv_wc_opcode, opcode, 0)
EX_READ(vendor_err, uint32_t, vendor_err, 0)
EX_READ(byte_len, uint32_t, byte_len, IBV_WC_EX_WITH_BYTE_LEN)
EX_READ(imm_data, __be32, imm_data, IBV_WC_EX_WITH_IMM)
EX_READ(qp_num, uint32_t, qp_num, IBV_WC_EX_WITH_QP_NUM)
EX_READ(src_qp, uint32_t, src_qp, IBV_WC_EX_WITH_SRC_QP)
EX_READ(wc_flags, unsigned int, wc_flags, 0)
EX_READ(slid, uint32_t, slid, IBV_WC_EX_WITH_SLID)
EX_READ(sl, uint8_t, sl, IBV_WC_EX_WITH_SL)
EX_READ(dlid_path_bits, uint8_t, dlid_path_bits, IBV_WC_EX_WITH_DLID_PATH_BITS)

/* ---- SRQ, AH ---- */

static int rq_push(struct fp_rq *rq, const struct ibv_recv_wr *wr) {
  if (rq->len == rq->cap)
    return ENOMEM;
  struct fp_rwr *r = &rq->q[(rq->head + rq->len) % rq->cap];
  memset(r, 0, sizeof(*r));
  r->wr_id = wr->wr_id;
  r->num_sge = wr->num_sge;
  if (wr->num_sge > 0)
    memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
  rq->len++;
  return 0;
}

static int rq_pop(struct fp_rq *rq, struct fp_rwr *out) {
  if (!rq->len)
    return 0;
  *out = rq->q[rq->head];
  rq->head = (rq->head + 1) % rq->cap;
  rq->len--;
  return 1;
}

static void rq_init(struct fp_rq *rq, int cap) {
  rq->cap = cap > 0 ? cap : 1;
  rq->q = calloc((size_t)rq->cap, sizeof(*rq->q));
  if (!rq->q)
    abort();
}

FAKE_API struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a) {
  LOCK();
  struct ibv_srq *out = NULL;
  struct fp_pd *p = pd_of(pd);
  int err =
      ALIVE(p, FAKEPROV_PD, "ibv_create_srq") ? scripted_failure(FAKEPROV_OP_CREATE_SRQ) : EINVAL;
  if (!err && k(FAKEPROV_MAX_SRQ) <= 0)
    err = EOPNOTSUPP;
  if (!err && (a->attr.max_wr < 1 || a->attr.max_wr > (uint32_t)k(FAKEPROV_MAX_SRQ_WR) ||
               a->attr.max_sge < 1 || a->attr.max_sge > (uint32_t)k(FAKEPROV_MAX_SRQ_SGE)))
    err = EINVAL;
  if (!err) {
    struct fp_srq *s = new_object(sizeof(*s), FAKEPROV_SRQ);
    s->pd = p;
    s->ctx = p->ctx;
    p->users++;
    p->ctx->children++;
    s->srqn = next_qpn++;
    s->max_sge = a->attr.max_sge;
    rq_init(&s->rq, (int)a->attr.max_wr);
    s->srq.context = pd->context;
    s->srq.srq_context = a->srq_context;
    s->srq.pd = pd;
    s->srq.handle = s->srqn;
    pthread_mutex_init(&s->srq.mutex, NULL);
    pthread_cond_init(&s->srq.cond, NULL);
    out = &s->srq;
  }
  UNLOCK();
  if (!out)
    errno = err;
  return out;
}

FAKE_API int ibv_destroy_srq(struct ibv_srq *srq) {
  LOCK();
  struct fp_srq *s = srq_of(srq);
  int rc = EINVAL;
  if (ALIVE(s, FAKEPROV_SRQ, "ibv_destroy_srq")) {
    rc = scripted_failure(FAKEPROV_OP_DESTROY_SRQ);
    if (!rc && s->users)
      rc = EBUSY;
    if (!rc) {
      s->pd->users--;
      s->ctx->children--;
      kill_object(&s->h);
    }
  }
  UNLOCK();
  return rc;
}

FAKE_API struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) {
  LOCK();
  struct ibv_ah *out = NULL;
  struct fp_pd *p = pd_of(pd);
  int err =
      ALIVE(p, FAKEPROV_PD, "ibv_create_ah") ? scripted_failure(FAKEPROV_OP_CREATE_AH) : EINVAL;
  if (!err && attr->port_num != 1)
    err = EINVAL;
  /* RoCE needs the GRH (the GID is the address). */
  if (!err && k(FAKEPROV_PORT_LINK_LAYER) == IBV_LINK_LAYER_ETHERNET && !attr->is_global)
    err = EINVAL;
  if (!err && attr->is_global && attr->grh.sgid_index >= FAKEPROV_GID_TBL_LEN)
    err = EINVAL;
  if (!err) {
    struct fp_ah *h = new_object(sizeof(*h), FAKEPROV_AH);
    h->pd = p;
    p->users++;
    p->ctx->children++;
    h->attr = *attr;
    h->ah.context = pd->context;
    h->ah.pd = pd;
    h->ah.handle = next_key++;
    out = &h->ah;
  }
  UNLOCK();
  if (!out)
    errno = err;
  return out;
}

FAKE_API int ibv_destroy_ah(struct ibv_ah *ah) {
  LOCK();
  struct fp_ah *h = ah_of(ah);
  int rc = EINVAL;
  if (ALIVE(h, FAKEPROV_AH, "ibv_destroy_ah")) {
    rc = scripted_failure(FAKEPROV_OP_DESTROY_AH);
    if (!rc) {
      h->pd->users--;
      h->pd->ctx->children--;
      kill_object(&h->h);
    }
  }
  UNLOCK();
  return rc;
}

/* ---- QP ---- */

static void wr_start(struct ibv_qp_ex *qpx);
static int wr_complete(struct ibv_qp_ex *qpx);
static void wr_abort(struct ibv_qp_ex *qpx);
static void wr_send(struct ibv_qp_ex *qpx);
static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm);
static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr);
static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm);
static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr);
static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
                              uint64_t swap);
static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add);
static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length);
static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sge);
static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length);
static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n,
                                    const struct ibv_data_buf *buf);
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
                           uint32_t remote_qkey);

static uint64_t supported_send_ops(enum ibv_qp_type t) {
  uint64_t f = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
  if (t != IBV_QPT_UD)
    f |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
  if (t == IBV_QPT_RC)
    f |= IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
         IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  return f;
}

static struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr_ex *a, int ex,
                                enum fakeprov_op op, const char *what) {
  struct fp_pd *p = pd_of(pd);
  int err = ALIVE(p, FAKEPROV_PD, what) ? scripted_failure(op) : EINVAL;
  struct fp_cq *scq = cq_of(a->send_cq), *rcq = cq_of(a->recv_cq);
  struct fp_srq *s = srq_of(a->srq);
  if (!err && (!ALIVE(scq, FAKEPROV_CQ, what) || !ALIVE(rcq, FAKEPROV_CQ, what)))
    err = EINVAL;
  if (!err && s && !ALIVE(s, FAKEPROV_SRQ, what))
    err = EINVAL;
  if (!err && a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD)
    err = EOPNOTSUPP;
  struct ibv_qp_cap *cap = &a->cap;
  if (!err && (cap->max_send_wr > (uint32_t)k(FAKEPROV_MAX_QP_WR) ||
               cap->max_send_sge > (uint32_t)k(FAKEPROV_MAX_SGE) ||
               cap->max_inline_data > (uint32_t)k(FAKEPROV_MAX_INLINE) ||
               (!s && (cap->max_recv_wr > (uint32_t)k(FAKEPROV_MAX_QP_WR) ||
                       cap->max_recv_sge > (uint32_t)k(FAKEPROV_MAX_SGE)))))
    err = EINVAL;
  if (!err && ex && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
      (a->send_ops_flags & ~supported_send_ops(a->qp_type)))
    err = EOPNOTSUPP;
  if (err) {
    errno = err;
    return NULL;
  }
  struct fp_qp *q = new_object(sizeof(*q), FAKEPROV_QP);
  q->ctx = p->ctx;
  q->pd = p;
  p->users++;
  p->ctx->children++;
  q->send_cq = scq;
  q->recv_cq = rcq;
  scq->users++;
  rcq->users++;
  q->srq = s;
  if (s)
    s->users++;
  q->sq_sig_all = a->sq_sig_all;
  if (s)
    cap->max_recv_wr = cap->max_recv_sge = 0;
  q->cap = *cap;
  rq_init(&q->rq, (int)cap->max_recv_wr);
  q->attr.qp_state = IBV_QPS_RESET;
  struct ibv_qp *qp = &q->qpx.qp_base;
  qp->context = pd->context;
  qp->qp_context = a->qp_context;
  qp->pd = pd;
  qp->send_cq = a->send_cq;
  qp->recv_cq = a->recv_cq;
  qp->srq = a->srq;
  qp->handle = next_key++;
  qp->qp_num = next_qpn++;
  last_qpn = qp->qp_num;
  qp->state = IBV_QPS_RESET;
  qp->qp_type = a->qp_type;
  pthread_mutex_init(&qp->mutex, NULL);
  pthread_cond_init(&qp->cond, NULL);
  if (ex && (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
    q->ex = 1;
    q->send_ops_flags = a->send_ops_flags;
    struct ibv_qp_ex *x = &q->qpx;
    x->wr_start = wr_start;
    x->wr_complete = wr_complete;
    x->wr_abort = wr_abort;
    x->wr_send = wr_send;
    x->wr_send_imm = wr_send_imm;
    x->wr_rdma_write = wr_rdma_write;
    x->wr_rdma_write_imm = wr_rdma_write_imm;
    x->wr_rdma_read = wr_rdma_read;
    x->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x->wr_atomic_fetch_add = wr_atomic_fetch_add;
    x->wr_set_sge = wr_set_sge;
    x->wr_set_sge_list = wr_set_sge_list;
    x->wr_set_inline_data = wr_set_inline_data;
    x->wr_set_inline_data_list = wr_set_inline_data_list;
    x->wr_set_ud_addr = wr_set_ud_addr;
  }
  return qp;
}

FAKE_API struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  LOCK();
  struct ibv_qp_init_attr_ex a;
  memset(&a, 0, sizeof(a));
  memcpy(&a, attr, sizeof(*attr));
  a.comp_mask = IBV_QP_INIT_ATTR_PD;
  a.pd = pd;
  struct ibv_qp *qp = create_qp(pd, &a, 0, FAKEPROV_OP_CREATE_QP, "ibv_create_qp");
  if (qp)
    attr->cap = a.cap;
  UNLOCK();
  return qp;
}

static struct ibv_qp *op_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *a) {
  LOCK();
  struct ibv_qp *qp = NULL;
  if (k(FAKEPROV_QP_EX) == FAKEPROV_EX_EOPNOTSUPP)
    errno = EOPNOTSUPP;
  else if (!live_ctx(context, "create_qp_ex") || !(a->comp_mask & IBV_QP_INIT_ATTR_PD) ||
           (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)))
    errno = EINVAL;
  else
    qp = create_qp(a->pd, a, 1, FAKEPROV_OP_CREATE_QP_EX, "create_qp_ex");
  UNLOCK();
  return qp;
}

FAKE_API struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
  LOCK();
  struct fp_qp *q = qp_of(qp);
  struct ibv_qp_ex *x = ALIVE(q, FAKEPROV_QP, "ibv_qp_to_qp_ex") && q->ex ? &q->qpx : NULL;
  UNLOCK();
  return x;
}

static void free_inbound(struct fp_qp *q) {
  while (q->in_head) {
    struct fp_inbound *m = q->in_head;
    q->in_head = m->next;
    free(m->data);
    free(m);
  }
  q->in_tail = NULL;
}

FAKE_API int ibv_destroy_qp(struct ibv_qp *qp) {
  LOCK();
  struct fp_qp *q = qp_of(qp);
  int rc = EINVAL;
  if (ALIVE(q, FAKEPROV_QP, "ibv_destroy_qp")) {
    rc = scripted_failure(FAKEPROV_OP_DESTROY_QP);
    if (!rc) {
      if (q->in_wr)
        violation("ibv_destroy_qp between wr_start and wr_complete/wr_abort");
      q->pd->users--;
      q->send_cq->users--;
      q->recv_cq->users--;
      if (q->srq)
        q->srq->users--;
      q->ctx->children--;
      free_inbound(q);
      q->nheld = 0; /* never executed: the QP is gone */
      kill_object(&q->h);
    }
  }
  UNLOCK();
  return rc;
}

/* Attributes required for CUR -> NEXT on a QP of type T (the IB spec's table,
 * as the kernel checks it); -1 when the transition is invalid. */
static int required_mask(enum ibv_qp_type t, int cur, int next) {
  if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
    return IBV_QP_STATE;
  switch (cur * 8 + next) {
  case IBV_QPS_RESET * 8 + IBV_QPS_INIT:
    return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
           (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
  case IBV_QPS_INIT * 8 + IBV_QPS_INIT:
    return IBV_QP_STATE;
  case IBV_QPS_INIT * 8 + IBV_QPS_RTR:
    if (t == IBV_QPT_UD)
      return IBV_QP_STATE;
    return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
           (t == IBV_QPT_RC ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
  case IBV_QPS_RTR * 8 + IBV_QPS_RTS:
    return IBV_QP_STATE | IBV_QP_SQ_PSN |
           (t == IBV_QPT_RC
                ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC
                : 0);
  case IBV_QPS_RTS * 8 + IBV_QPS_RTS:
  case IBV_QPS_RTS * 8 + IBV_QPS_SQD:
  case IBV_QPS_SQD * 8 + IBV_QPS_SQD:
  case IBV_QPS_SQD * 8 + IBV_QPS_RTS:
  case IBV_QPS_SQE * 8 + IBV_QPS_RTS:
    return IBV_QP_STATE;
  default:
    return -1;
  }
}

static void complete_flush(struct fp_qp *q);
static int run_held(struct fp_qp *q, int n);

FAKE_API int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
  LOCK();
  struct fp_qp *q = qp_of(qp);
  int rc = EINVAL;
  if (!ALIVE(q, FAKEPROV_QP, "ibv_modify_qp"))
    goto out;
  if ((rc = scripted_failure(FAKEPROV_OP_MODIFY_QP)))
    goto out;
  rc = EINVAL;
  int cur = q->attr.qp_state;
  int next = mask & IBV_QP_STATE ? (int)attr->qp_state : cur;
  if (next < IBV_QPS_RESET || next > IBV_QPS_ERR)
    goto out;
  if (mask & IBV_QP_STATE) {
    int need = required_mask(qp->qp_type, cur, next);
    if (need < 0 || (mask & need) != need)
      goto out;
  }
  if ((mask & IBV_QP_PORT) && attr->port_num != 1)
    goto out;
  if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0)
    goto out;
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > k(FAKEPROV_MAX_QP_INIT_RD_ATOM))
    goto out;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > k(FAKEPROV_MAX_QP_RD_ATOM))
    goto out;
  if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096))
    goto out;
  if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xffffff)
    goto out;
  if ((mask & IBV_QP_AV) &&
      (attr->ah_attr.port_num != 1 ||
       (attr->ah_attr.is_global && attr->ah_attr.grh.sgid_index >= FAKEPROV_GID_TBL_LEN) ||
       (k(FAKEPROV_PORT_LINK_LAYER) == IBV_LINK_LAYER_ETHERNET && !attr->ah_attr.is_global)))
    goto out;
  rc = 0;
  struct ibv_qp_attr *s = &q->attr;
#define TAKE(bit, field)                                                                           \
  if (mask & (bit))                                                                                \
  s->field = attr->field
  TAKE(IBV_QP_PKEY_INDEX, pkey_index);
  TAKE(IBV_QP_PORT, port_num);
  TAKE(IBV_QP_ACCESS_FLAGS, qp_access_flags);
  TAKE(IBV_QP_QKEY, qkey);
  TAKE(IBV_QP_AV, ah_attr);
  TAKE(IBV_QP_PATH_MTU, path_mtu);
  TAKE(IBV_QP_DEST_QPN, dest_qp_num);
  TAKE(IBV_QP_RQ_PSN, rq_psn);
  TAKE(IBV_QP_SQ_PSN, sq_psn);
  TAKE(IBV_QP_MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
  TAKE(IBV_QP_MIN_RNR_TIMER, min_rnr_timer);
  TAKE(IBV_QP_TIMEOUT, timeout);
  TAKE(IBV_QP_RETRY_CNT, retry_cnt);
  TAKE(IBV_QP_RNR_RETRY, rnr_retry);
  TAKE(IBV_QP_MAX_QP_RD_ATOMIC, max_rd_atomic);
#undef TAKE
  s->qp_state = (enum ibv_qp_state)next;
  qp->state = (enum ibv_qp_state)next;
  if (next == IBV_QPS_RESET) {
    q->rq.head = q->rq.len = 0;
    free_inbound(q);
  } else if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
    complete_flush(q);
    run_held(q, q->nheld); /* in the error state: flushed, no effect */
  }
  if (mod_log_len == mod_log_cap) {
    mod_log_cap = mod_log_cap ? 2 * mod_log_cap : 64;
    mod_log = realloc(mod_log, mod_log_cap * sizeof(*mod_log));
    if (!mod_log)
      abort();
  }
  struct fakeprov_modify_record *m = &mod_log[mod_log_len++];
  memset(m, 0, sizeof(*m));
  m->qpn = qp->qp_num;
  m->attr_mask = mask;
  m->from_state = cur;
  m->to_state = next;
  m->path_mtu = attr->path_mtu;
  m->qkey = attr->qkey;
  m->rq_psn = attr->rq_psn;
  m->sq_psn = attr->sq_psn;
  m->dest_qp_num = attr->dest_qp_num;
  m->qp_access_flags = attr->qp_access_flags;
  m->pkey_index = attr->pkey_index;
  m->port_num = attr->port_num;
  m->max_rd_atomic = attr->max_rd_atomic;
  m->max_dest_rd_atomic = attr->max_dest_rd_atomic;
  m->min_rnr_timer = attr->min_rnr_timer;
  m->timeout = attr->timeout;
  m->retry_cnt = attr->retry_cnt;
  m->rnr_retry = attr->rnr_retry;
  m->dlid = attr->ah_attr.dlid;
  m->sl = attr->ah_attr.sl;
  m->is_global = attr->ah_attr.is_global;
  m->sgid_index = attr->ah_attr.grh.sgid_index;
  m->hop_limit = attr->ah_attr.grh.hop_limit;
  m->traffic_class = attr->ah_attr.grh.traffic_class;
  m->flow_label = attr->ah_attr.grh.flow_label;
  m->ah_port_num = attr->ah_attr.port_num;
  memcpy(m->dgid, attr->ah_attr.grh.dgid.raw, 16);
out:
  UNLOCK();
  return rc;
}

FAKE_API int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
                          struct ibv_qp_init_attr *init) {
  (void)mask;
  LOCK();
  struct fp_qp *q = qp_of(qp);
  int rc = EINVAL;
  if (ALIVE(q, FAKEPROV_QP, "ibv_query_qp")) {
    rc = scripted_failure(FAKEPROV_OP_QUERY_QP);
    if (!rc) {
      *attr = q->attr;
      attr->cap = q->cap;
      attr->cur_qp_state = q->attr.qp_state;
      memset(init, 0, sizeof(*init));
      init->qp_context = qp->qp_context;
      init->send_cq = qp->send_cq;
      init->recv_cq = qp->recv_cq;
      init->srq = qp->srq;
      init->cap = q->cap;
      init->qp_type = qp->qp_type;
      init->sq_sig_all = q->sq_sig_all;
    }
  }
  UNLOCK();
  return rc;
}

/* ---- data path ---- */

static void log_record(const struct fakeprov_wr_record *r) {
  if (wr_log_len == wr_log_cap) {
    wr_log_cap = wr_log_cap ? 2 * wr_log_cap : 256;
    wr_log = realloc(wr_log, wr_log_cap * sizeof(*wr_log));
    if (!wr_log)
      abort();
  }
  wr_log[wr_log_len] = *r;
  wr_log[wr_log_len].seq = next_seq++;
  wr_log_len++;
}

/* The status the next completion carries (scripted or success). */
static void next_status(struct ibv_wc *wc, enum ibv_wc_status natural) {
  if (status_count) {
    status_count--;
    wc->status = (enum ibv_wc_status)status_value;
    wc->vendor_err = status_vendor_err;
  } else {
    wc->status = natural;
  }
}

static uint32_t sge_total(const struct fakeprov_wr_record *r) {
  if (r->inline_length || (r->send_flags & IBV_SEND_INLINE))
    return r->inline_length;
  uint64_t n = 0;
  for (int i = 0; i < r->num_sge && i < FAKEPROV_MAX_RECORD_SGE; i++)
    n += r->sge[i].length;
  return (uint32_t)n;
}

/* Gathers the WR's payload (inline bytes or SGEs) into a new buffer. */
static uint8_t *gather(const struct fakeprov_wr_record *r, uint32_t len) {
  uint8_t *b = malloc(len ? len : 1);
  if (!b)
    abort();
  if (r->inline_length || (r->send_flags & IBV_SEND_INLINE)) {
    memcpy(b, r->inline_data, len);
    return b;
  }
  uint32_t at = 0;
  for (int i = 0; i < r->num_sge && i < FAKEPROV_MAX_RECORD_SGE; i++) {
    if (r->sge[i].length)
      memcpy(b + at, (const void *)(uintptr_t)r->sge[i].addr, r->sge[i].length);
    at += r->sge[i].length;
  }
  return b;
}

/* Scatters LEN bytes of DATA over SGE[0..N). Returns 0 when they fit. */
static int scatter(const struct ibv_sge *sge, int n, const uint8_t *data, uint32_t len) {
  uint32_t at = 0;
  for (int i = 0; i < n && at < len; i++) {
    uint32_t c = len - at < sge[i].length ? len - at : sge[i].length;
    if (data)
      memcpy((void *)(uintptr_t)sge[i].addr, data + at, c);
    at += c;
  }
  return at == len ? 0 : -1;
}

static int local_sges_ok(struct fp_qp *q, const struct ibv_sge *sge, int n) {
  for (int i = 0; i < n; i++)
    if (sge[i].length && !find_mr_lkey(q->pd, sge[i].lkey, sge[i].addr, sge[i].length))
      return 0;
  return 1;
}

/* Matches inbound messages of Q with its posted receives (or its SRQ's). */
static void deliver(struct fp_qp *q) {
  while (q->in_head && !q->h.dead) {
    struct fp_rq *rq = q->srq ? &q->srq->rq : &q->rq;
    struct fp_rwr r;
    if (!rq_pop(rq, &r))
      return;
    struct fp_inbound *m = q->in_head;
    q->in_head = m->next;
    if (!q->in_head)
      q->in_tail = NULL;
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r.wr_id;
    wc.qp_num = q->qpx.qp_base.qp_num;
    wc.src_qp = m->src_qp;
    wc.byte_len = m->byte_len;
    wc.opcode = m->write_imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    if (m->with_imm) {
      wc.wc_flags |= IBV_WC_WITH_IMM;
      wc.imm_data = m->imm;
    }
    wc.slid = k(FAKEPROV_PORT_LINK_LAYER) == IBV_LINK_LAYER_INFINIBAND
                  ? (uint16_t)k(FAKEPROV_PORT_LID)
                  : 0;
    enum ibv_wc_status st = IBV_WC_SUCCESS;
    if (!m->write_imm) {
      uint32_t off = 0;
      if (q->qpx.qp_base.qp_type == IBV_QPT_UD) {
        wc.wc_flags |= IBV_WC_GRH;
        off = 40; /* the first 40 bytes receive the GRH */
        wc.byte_len += 40;
      }
      uint8_t *buf = NULL;
      if (!m->no_data) {
        buf = malloc(off + m->byte_len + 1);
        if (!buf)
          abort();
        memset(buf, 0, off);
        memcpy(buf + off, m->data, m->byte_len);
      }
      if (!local_sges_ok(q, r.sge, r.num_sge))
        st = IBV_WC_LOC_PROT_ERR;
      else if (scatter(r.sge, r.num_sge, buf, off + m->byte_len))
        st = IBV_WC_LOC_LEN_ERR;
      free(buf);
    }
    next_status(&wc, st);
    push_wc(q->recv_cq, &wc);
    free(m->data);
    free(m);
  }
}

static void send_inbound(struct fp_qp *peer, struct fp_inbound *m) {
  m->next = NULL;
  if (peer->in_tail)
    peer->in_tail->next = m;
  else
    peer->in_head = m;
  peer->in_tail = m;
  deliver(peer);
}

/* Flushes Q's posted receives (Q went to the error state). */
static void complete_flush(struct fp_qp *q) {
  struct fp_rwr r;
  while (rq_pop(&q->rq, &r)) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof(wc));
    wc.wr_id = r.wr_id;
    wc.status = IBV_WC_WR_FLUSH_ERR;
    wc.opcode = IBV_WC_RECV;
    wc.qp_num = q->qpx.qp_base.qp_num;
    push_wc(q->recv_cq, &wc);
  }
}

static enum ibv_wc_opcode wc_opcode(int op) {
  switch (op) {
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM:
    return IBV_WC_RDMA_WRITE;
  case IBV_WR_RDMA_READ:
    return IBV_WC_RDMA_READ;
  case IBV_WR_ATOMIC_CMP_AND_SWP:
    return IBV_WC_COMP_SWAP;
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
    return IBV_WC_FETCH_ADD;
  default:
    return IBV_WC_SEND;
  }
}

/* The peer's MR for [addr, addr+len) with ACCESS, or NULL. */
static struct fp_mr *remote_mr(struct fp_qp *peer, uint32_t rkey, uint64_t addr, uint64_t len,
                               int access) {
  struct fp_mr *m = find_mr_rkey(peer->pd, rkey);
  if (!m || !(m->access & access) || addr < m->iova || len > m->mr.length ||
      addr - m->iova > m->mr.length - len)
    return NULL;
  return m;
}

static uint8_t *remote_ptr(struct fp_mr *m, uint64_t addr) {
  return (uint8_t *)m->mr.addr + (addr - m->iova);
}

/* Executes one validated send WR of Q: effects, then its completion. */
static void execute(struct fp_qp *q, const struct fakeprov_wr_record *r) {
  enum ibv_wc_status st = IBV_WC_SUCCESS;
  uint32_t len = sge_total(r);
  int is_inline = r->inline_length || (r->send_flags & IBV_SEND_INLINE);
  struct ibv_sge sges[FAKEPROV_MAX_RECORD_SGE];
  int nsge = r->num_sge < FAKEPROV_MAX_RECORD_SGE ? r->num_sge : FAKEPROV_MAX_RECORD_SGE;
  for (int i = 0; i < nsge; i++) {
    sges[i].addr = r->sge[i].addr;
    sges[i].length = r->sge[i].length;
    sges[i].lkey = r->sge[i].lkey;
  }
  struct ibv_qp *qp = &q->qpx.qp_base;
  struct fp_qp *peer = NULL;
  if (q->attr.qp_state == IBV_QPS_ERR)
    st = IBV_WC_WR_FLUSH_ERR;
  else if (!is_inline && !local_sges_ok(q, sges, nsge))
    st = IBV_WC_LOC_PROT_ERR;
  if (st == IBV_WC_SUCCESS && k(FAKEPROV_LOOPBACK)) {
    if (qp->qp_type == IBV_QPT_UD) {
      peer = find_qp(r->ud_remote_qpn);
      if (peer && (peer->qpx.qp_base.qp_type != IBV_QPT_UD || peer->attr.qkey != r->ud_remote_qkey))
        peer = NULL; /* dropped, as UD does */
    } else {
      peer = find_qp(q->attr.dest_qp_num);
      if (peer && peer->attr.dest_qp_num != qp->qp_num)
        peer = NULL;
    }
    if (peer && (peer->attr.qp_state < IBV_QPS_RTR || peer->attr.qp_state > IBV_QPS_SQE))
      peer = NULL;
  }
  /* A scripted status replaces the effects. */
  struct ibv_wc wc;
  memset(&wc, 0, sizeof(wc));
  next_status(&wc, st);
  if (wc.status == IBV_WC_SUCCESS && peer) {
    struct fp_mr *m;
    struct fp_inbound *in;
    switch (r->opcode) {
    case IBV_WR_SEND:
    case IBV_WR_SEND_WITH_IMM:
      in = calloc(1, sizeof(*in));
      if (!in)
        abort();
      in->src_qp = qp->qp_num;
      in->byte_len = len;
      in->with_imm = r->opcode == IBV_WR_SEND_WITH_IMM;
      in->imm = r->imm_data;
      in->data = gather(r, len);
      send_inbound(peer, in);
      break;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      m = remote_mr(peer, r->rkey, r->remote_addr, len, IBV_ACCESS_REMOTE_WRITE);
      if (!m && len) {
        wc.status = IBV_WC_REM_ACCESS_ERR;
        break;
      }
      if (len) {
        uint8_t *b = gather(r, len);
        memcpy(remote_ptr(m, r->remote_addr), b, len);
        free(b);
      }
      if (r->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
        in = calloc(1, sizeof(*in));
        if (!in)
          abort();
        in->src_qp = qp->qp_num;
        in->byte_len = len;
        in->write_imm = 1;
        in->with_imm = 1;
        in->imm = r->imm_data;
        send_inbound(peer, in);
      }
      break;
    case IBV_WR_RDMA_READ:
      m = remote_mr(peer, r->rkey, r->remote_addr, len, IBV_ACCESS_REMOTE_READ);
      if (!m && len)
        wc.status = IBV_WC_REM_ACCESS_ERR;
      else if (len)
        scatter(sges, nsge, remote_ptr(m, r->remote_addr), len);
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      m = remote_mr(peer, r->rkey, r->remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC);
      if (!m || (r->remote_addr & 7) || len < 8) {
        wc.status = IBV_WC_REM_ACCESS_ERR;
      } else {
        uint64_t old;
        memcpy(&old, remote_ptr(m, r->remote_addr), 8);
        uint64_t v = r->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? old + r->compare_add
                     : old == r->compare_add                  ? r->swap
                                                              : old;
        memcpy(remote_ptr(m, r->remote_addr), &v, 8);
        scatter(sges, nsge, (const uint8_t *)&old, 8);
      }
      break;
    default:
      break;
    }
  }
  if (wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR &&
      q->attr.qp_state != IBV_QPS_ERR) {
    /* An error completion moves the QP to the error state. */
    q->attr.qp_state = IBV_QPS_ERR;
    qp->state = IBV_QPS_ERR;
    complete_flush(q);
  }
  if (wc.status == IBV_WC_SUCCESS && !(r->send_flags & IBV_SEND_SIGNALED) && !q->sq_sig_all)
    return;
  wc.wr_id = r->wr_id;
  wc.opcode = wc_opcode(r->opcode);
  wc.qp_num = qp->qp_num;
  wc.byte_len =
      r->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || r->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 8 : len;
  push_wc(q->send_cq, &wc);
}

/* Executes the oldest N held WRs of Q, in order. */
static int run_held(struct fp_qp *q, int n) {
  if (n > q->nheld)
    n = q->nheld;
  if (n <= 0)
    return 0; /* held may still be NULL */
  for (int i = 0; i < n; i++)
    execute(q, &q->held[i]);
  memmove(q->held, q->held + n, (size_t)(q->nheld - n) * sizeof(*q->held));
  memmove(q->held_polls, q->held_polls + n, (size_t)(q->nheld - n) * sizeof(*q->held_polls));
  q->nheld -= n;
  return n;
}

/* A poll of CQ: held WRs of the QPs sending to it count down; those at 0 run. */
static void poll_tick(struct fp_cq *cq) {
  for (struct fp_hdr *p = all; p; p = p->next) {
    struct fp_qp *q = (struct fp_qp *)p;
    if (p->dead || p->type != FAKEPROV_QP || q->send_cq != cq || !q->nheld)
      continue;
    int ready = 0;
    for (int i = 0; i < q->nheld; i++)
      if (q->held_polls[i] > 0)
        q->held_polls[i]--;
    while (ready < q->nheld && q->held_polls[ready] == 0)
      ready++;
    run_held(q, ready);
  }
}

/* Executes a logged send WR now, or holds it (FAKEPROV_HOLD_SENDS). */
static void send_or_hold(struct fp_qp *q, const struct fakeprov_wr_record *r) {
  long hold = k(FAKEPROV_HOLD_SENDS);
  if (!hold && !q->nheld) {
    execute(q, r);
    return;
  }
  if (q->nheld == q->held_cap) {
    q->held_cap = q->held_cap ? 2 * q->held_cap : 16;
    q->held = realloc(q->held, (size_t)q->held_cap * sizeof(*q->held));
    q->held_polls = realloc(q->held_polls, (size_t)q->held_cap * sizeof(*q->held_polls));
    if (!q->held || !q->held_polls)
      abort();
  }
  q->held[q->nheld] = *r;
  q->held_polls[q->nheld++] = hold > 0 ? hold : hold == 0 ? 1 : -1; /* 0: behind held ones */
}

static int opcode_ok(enum ibv_qp_type t, int op) {
  switch (op) {
  case IBV_WR_SEND:
  case IBV_WR_SEND_WITH_IMM:
    return 1;
  case IBV_WR_RDMA_WRITE:
  case IBV_WR_RDMA_WRITE_WITH_IMM:
    return t != IBV_QPT_UD;
  case IBV_WR_RDMA_READ:
  case IBV_WR_ATOMIC_CMP_AND_SWP:
  case IBV_WR_ATOMIC_FETCH_AND_ADD:
    return t == IBV_QPT_RC;
  default:
    return 0;
  }
}

/* Checks one send WR against Q's limits; 0 or the errno post_send returns. */
static int check_send(struct fp_qp *q, const struct fakeprov_wr_record *r) {
  struct ibv_qp *qp = &q->qpx.qp_base;
  if (!opcode_ok(qp->qp_type, r->opcode))
    return EINVAL;
  if (r->num_sge < 0 || (uint32_t)r->num_sge > q->cap.max_send_sge)
    return EINVAL;
  if ((r->send_flags & IBV_SEND_INLINE) &&
      (r->inline_length > q->cap.max_inline_data || r->inline_length > FAKEPROV_MAX_RECORD_INLINE))
    return EINVAL;
  if (qp->qp_type == IBV_QPT_UD) {
    struct fp_ah *h = ah_of((struct ibv_ah *)(uintptr_t)r->ud_ah);
    if (!ALIVE(h, FAKEPROV_AH, "a UD send's address handle"))
      return EINVAL;
  }
  return 0;
}

/* post_send and post_recv need these states (EINVAL otherwise, as rxe). */
static int send_state_ok(struct fp_qp *q) {
  return q->attr.qp_state == IBV_QPS_RTS || q->attr.qp_state == IBV_QPS_SQD ||
         q->attr.qp_state == IBV_QPS_ERR;
}

static int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  LOCK();
  struct fp_qp *q = qp_of(qp);
  int rc = EINVAL;
  struct ibv_send_wr *badw = wr;
  if (!ALIVE(q, FAKEPROV_QP, "post_send"))
    goto out;
  if (q->in_wr) {
    violation("post_send between wr_start and wr_complete");
    goto out;
  }
  if ((rc = scripted_failure(FAKEPROV_OP_POST_SEND)))
    goto out;
  rc = EINVAL;
  if (!send_state_ok(q))
    goto out;
  int n = 0;
  for (struct ibv_send_wr *w = wr; w; w = w->next)
    n++;
  struct fakeprov_wr_record *recs = calloc((size_t)n, sizeof(*recs));
  if (!recs)
    abort();
  int i = 0;
  rc = 0;
  for (struct ibv_send_wr *w = wr; w; w = w->next, i++) {
    struct fakeprov_wr_record *r = &recs[i];
    r->qpn = qp->qp_num;
    r->kind = FAKEPROV_WR_SEND;
    r->chain_index = i;
    r->chain_length = n;
    r->wr_id = w->wr_id;
    r->opcode = w->opcode;
    r->send_flags = w->send_flags;
    r->imm_data = w->imm_data;
    r->num_sge = w->num_sge;
    for (int s = 0; s < w->num_sge && s < FAKEPROV_MAX_RECORD_SGE; s++) {
      r->sge[s].addr = w->sg_list[s].addr;
      r->sge[s].length = w->sg_list[s].length;
      r->sge[s].lkey = w->sg_list[s].lkey;
    }
    if (w->send_flags & IBV_SEND_INLINE) {
      uint64_t total = 0;
      for (int s = 0; s < w->num_sge; s++)
        total += w->sg_list[s].length;
      r->inline_length = (uint32_t)total;
      if (total <= FAKEPROV_MAX_RECORD_INLINE && total <= q->cap.max_inline_data) {
        uint32_t at = 0;
        for (int s = 0; s < w->num_sge; s++) {
          if (w->sg_list[s].length)
            memcpy(r->inline_data + at, (const void *)(uintptr_t)w->sg_list[s].addr,
                   w->sg_list[s].length);
          at += w->sg_list[s].length;
        }
      }
    }
    switch (w->opcode) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_RDMA_READ:
      r->remote_addr = w->wr.rdma.remote_addr;
      r->rkey = w->wr.rdma.rkey;
      break;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      r->remote_addr = w->wr.atomic.remote_addr;
      r->rkey = w->wr.atomic.rkey;
      r->compare_add = w->wr.atomic.compare_add;
      r->swap = w->wr.atomic.swap;
      break;
    default:
      break;
    }
    if (qp->qp_type == IBV_QPT_UD) {
      r->ud_ah = w->wr.ud.ah;
      r->ud_remote_qpn = w->wr.ud.remote_qpn;
      r->ud_remote_qkey = w->wr.ud.remote_qkey;
    }
    if (i >= (int)q->cap.max_send_wr)
      rc = ENOMEM; /* more than the send queue holds */
    else
      rc = check_send(q, r);
    if (rc) {
      badw = w;
      break;
    }
  }
  /* The WRs before the bad one are posted; the rest are not. */
  for (int j = 0; j < i; j++) {
    log_record(&recs[j]);
    send_or_hold(q, &recs[j]);
  }
  free(recs);
out:
  if (rc)
    *bad = badw;
  UNLOCK();
  return rc;
}

/* Queues and logs the chain WR; on failure sets *BAD and returns the errno. */
static int post_recv_common(struct fp_rq *rq, uint32_t max_sge, uint32_t num, int kind,
                            struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  int n = 0, i = 0, rc = 0;
  for (struct ibv_recv_wr *w = wr; w; w = w->next)
    n++;
  for (struct ibv_recv_wr *w = wr; w; w = w->next, i++) {
    if (w->num_sge < 0 || (uint32_t)w->num_sge > max_sge || w->num_sge > FAKEPROV_MAX_RECORD_SGE)
      rc = EINVAL;
    else
      rc = rq_push(rq, w);
    if (rc) {
      *bad = w;
      break;
    }
    struct fakeprov_wr_record r;
    memset(&r, 0, sizeof(r));
    r.qpn = num;
    r.kind = kind;
    r.chain_index = i;
    r.chain_length = n;
    r.wr_id = w->wr_id;
    r.num_sge = w->num_sge;
    for (int s = 0; s < w->num_sge; s++) {
      r.sge[s].addr = w->sg_list[s].addr;
      r.sge[s].length = w->sg_list[s].length;
      r.sge[s].lkey = w->sg_list[s].lkey;
    }
    log_record(&r);
  }
  return rc;
}

static int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  LOCK();
  struct fp_qp *q = qp_of(qp);
  int rc = EINVAL;
  if (ALIVE(q, FAKEPROV_QP, "post_recv")) {
    rc = scripted_failure(FAKEPROV_OP_POST_RECV);
    if (!rc && (q->srq || q->attr.qp_state == IBV_QPS_RESET))
      rc = EINVAL;
    if (rc)
      *bad = wr;
    else {
      rc = post_recv_common(&q->rq, q->cap.max_recv_sge, qp->qp_num, FAKEPROV_WR_RECV, wr, bad);
      if (q->attr.qp_state == IBV_QPS_ERR)
        complete_flush(q);
      else
        deliver(q);
    }
  }
  UNLOCK();
  return rc;
}

static int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  LOCK();
  struct fp_srq *s = srq_of(srq);
  int rc = EINVAL;
  if (ALIVE(s, FAKEPROV_SRQ, "post_srq_recv")) {
    rc = scripted_failure(FAKEPROV_OP_POST_SRQ_RECV);
    if (rc)
      *bad = wr;
    else {
      rc = post_recv_common(&s->rq, s->max_sge, s->srqn, FAKEPROV_WR_SRQ_RECV, wr, bad);
      for (struct fp_hdr *p = all; p; p = p->next)
        if (!p->dead && p->type == FAKEPROV_QP && ((struct fp_qp *)p)->srq == s)
          deliver((struct fp_qp *)p);
    }
  }
  UNLOCK();
  return rc;
}

/* ---- the WR API ---- */

static struct fp_qp *wr_qp(struct ibv_qp_ex *qpx, const char *what, int need_open) {
  struct fp_qp *q = qpx_of(qpx);
  if (!ALIVE(q, FAKEPROV_QP, what))
    return NULL;
  if (!q->ex) {
    violation("%s on a QP created without send_ops_flags", what);
    return NULL;
  }
  if (need_open && !q->in_wr) {
    violation("%s outside wr_start..wr_complete", what);
    return NULL;
  }
  return q;
}

static void wr_start(struct ibv_qp_ex *qpx) {
  LOCK();
  struct fp_qp *q = wr_qp(qpx, "wr_start", 0);
  if (q) {
    if (q->in_wr)
      violation("wr_start twice without wr_complete/wr_abort");
    q->in_wr = 1;
    q->npending = 0;
    q->wr_err = 0;
  }
  UNLOCK();
}

/* A new WR of OP in the open batch; NULL (after a violation) if misused. */
static struct fakeprov_wr_record *wr_new(struct ibv_qp_ex *qpx, int op, uint64_t flag,
                                         const char *what) {
  struct fp_qp *q = wr_qp(qpx, what, 1);
  if (!q)
    return NULL;
  if (!(q->send_ops_flags & flag))
    violation("%s without its IBV_QP_EX_WITH_* flag at create_qp_ex", what);
  if (q->npending >= (int)q->cap.max_send_wr) {
    q->wr_err = ENOMEM;
    return NULL;
  }
  if (q->npending == q->pending_cap) {
    q->pending_cap = q->pending_cap ? 2 * q->pending_cap : 16;
    q->pending = realloc(q->pending, (size_t)q->pending_cap * sizeof(*q->pending));
    if (!q->pending)
      abort();
  }
  struct fakeprov_wr_record *r = &q->pending[q->npending++];
  memset(r, 0, sizeof(*r));
  r->qpn = qpx->qp_base.qp_num;
  r->kind = FAKEPROV_WR_SEND;
  r->via_wr_api = 1;
  r->wr_id = qpx->wr_id;
  r->send_flags = qpx->wr_flags;
  r->opcode = op;
  return r;
}

/* The WR the wr_set_* calls apply to: the last one built. */
static struct fakeprov_wr_record *wr_last(struct ibv_qp_ex *qpx, const char *what) {
  struct fp_qp *q = wr_qp(qpx, what, 1);
  if (!q)
    return NULL;
  if (!q->npending) {
    if (!q->wr_err)
      violation("%s before any wr_* operation", what);
    return NULL;
  }
  return &q->pending[q->npending - 1];
}

static void wr_send(struct ibv_qp_ex *qpx) {
  LOCK();
  wr_new(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND, "wr_send");
  UNLOCK();
}
static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, "wr_send_imm");
  if (r)
    r->imm_data = imm;
  UNLOCK();
}
static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, "wr_rdma_write");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
  }
  UNLOCK();
}
static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm) {
  LOCK();
  struct fakeprov_wr_record *r = wr_new(qpx, IBV_WR_RDMA_WRITE_WITH_IMM,
                                        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, "wr_rdma_write_imm");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
    r->imm_data = imm;
  }
  UNLOCK();
}
static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, "wr_rdma_read");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
  }
  UNLOCK();
}
static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
                              uint64_t swap) {
  LOCK();
  struct fakeprov_wr_record *r = wr_new(qpx, IBV_WR_ATOMIC_CMP_AND_SWP,
                                        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, "wr_atomic_cmp_swp");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
    r->compare_add = cmp;
    r->swap = swap;
  }
  UNLOCK();
}
static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add) {
  LOCK();
  struct fakeprov_wr_record *r = wr_new(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD,
                                        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, "wr_atomic_fetch_add");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
    r->compare_add = add;
  }
  UNLOCK();
}
static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
  LOCK();
  struct fakeprov_wr_record *r = wr_last(qpx, "wr_set_sge");
  if (r) {
    r->num_sge = 1;
    r->sge[0].addr = addr;
    r->sge[0].length = length;
    r->sge[0].lkey = lkey;
  }
  UNLOCK();
}
static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sge) {
  LOCK();
  struct fakeprov_wr_record *r = wr_last(qpx, "wr_set_sge_list");
  if (r) {
    r->num_sge = (int)n;
    for (size_t i = 0; i < n && i < FAKEPROV_MAX_RECORD_SGE; i++) {
      r->sge[i].addr = sge[i].addr;
      r->sge[i].length = sge[i].length;
      r->sge[i].lkey = sge[i].lkey;
    }
  }
  UNLOCK();
}
static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n,
                                    const struct ibv_data_buf *buf) {
  LOCK();
  struct fakeprov_wr_record *r = wr_last(qpx, "wr_set_inline_data");
  if (r) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
      total += buf[i].length;
    r->send_flags |= IBV_SEND_INLINE;
    r->num_sge = 0;
    r->inline_length = (uint32_t)total;
    if (total <= FAKEPROV_MAX_RECORD_INLINE) {
      uint32_t at = 0;
      for (size_t i = 0; i < n; i++) {
        if (buf[i].length)
          memcpy(r->inline_data + at, buf[i].addr, buf[i].length);
        at += (uint32_t)buf[i].length;
      }
    }
  }
  UNLOCK();
}
static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length) {
  struct ibv_data_buf b = {addr, length};
  wr_set_inline_data_list(qpx, 1, &b);
}
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
                           uint32_t remote_qkey) {
  LOCK();
  struct fakeprov_wr_record *r = wr_last(qpx, "wr_set_ud_addr");
  if (r) {
    r->ud_ah = ah;
    r->ud_remote_qpn = remote_qpn;
    r->ud_remote_qkey = remote_qkey;
  }
  UNLOCK();
}

static int wr_complete(struct ibv_qp_ex *qpx) {
  LOCK();
  int rc = EINVAL;
  struct fp_qp *q = wr_qp(qpx, "wr_complete", 1);
  if (q) {
    q->in_wr = 0;
    rc = q->wr_err;
    if (!rc)
      rc = scripted_failure(FAKEPROV_OP_POST_SEND);
    if (!rc && !send_state_ok(q))
      rc = EINVAL;
    for (int i = 0; !rc && i < q->npending; i++)
      rc = check_send(q, &q->pending[i]);
    if (!rc)
      for (int i = 0; i < q->npending; i++) {
        q->pending[i].chain_index = i;
        q->pending[i].chain_length = q->npending;
        log_record(&q->pending[i]);
        send_or_hold(q, &q->pending[i]);
      }
    q->npending = 0;
  }
  UNLOCK();
  return rc;
}

static void wr_abort(struct ibv_qp_ex *qpx) {
  LOCK();
  struct fp_qp *q = wr_qp(qpx, "wr_abort", 1);
  if (q) {
    q->in_wr = 0;
    q->npending = 0;
  }
  UNLOCK();
}

/* The same strings as rdma-core's (and rdmadl's own fallback's). */
FAKE_API const char *ibv_wc_status_str(enum ibv_wc_status status) {
  unsigned i = (unsigned)status;
  return i < sizeof(wc_status_strs) / sizeof(wc_status_strs[0]) && wc_status_strs[i]
             ? wc_status_strs[i]
             : "unknown";
}

/* ---- FAKEPROV_1.0: scripting and inspection ---- */

FAKE_API void fakeprov_reset(void) {
  LOCK();
  memset(fail_script, 0, sizeof(fail_script));
  memset(op_calls, 0, sizeof(op_calls));
  status_count = 0;
  violations = overruns = 0;
  last_violation[0] = 0;
  wr_log_len = mod_log_len = 0;
  memcpy(knob, knob_default, sizeof(knob));
  knobs_set = 1;
  apply_ex_knobs();
  UNLOCK();
}

FAKE_API void fakeprov_set(enum fakeprov_knob which, long value) {
  LOCK();
  if ((unsigned)which < FAKEPROV_KNOB_COUNT) {
    k(which);
    knob[which] = value;
    apply_ex_knobs();
  }
  UNLOCK();
}

FAKE_API long fakeprov_get(enum fakeprov_knob which) {
  LOCK();
  long v = (unsigned)which < FAKEPROV_KNOB_COUNT ? k(which) : 0;
  UNLOCK();
  return v;
}

FAKE_API unsigned long fakeprov_calls(enum fakeprov_op op) {
  LOCK();
  unsigned long n = (unsigned)op < FAKEPROV_OP_COUNT ? op_calls[op] : 0;
  UNLOCK();
  return n;
}

FAKE_API void fakeprov_fail_next(enum fakeprov_op op, int err, unsigned count) {
  LOCK();
  if ((unsigned)op < FAKEPROV_OP_COUNT) {
    fail_script[op].err = err;
    fail_script[op].count = err ? count : 0;
  }
  UNLOCK();
}

FAKE_API void fakeprov_complete_with(unsigned count, int status, uint32_t vendor_err) {
  LOCK();
  status_count = count;
  status_value = status;
  status_vendor_err = vendor_err;
  UNLOCK();
}

FAKE_API int fakeprov_complete_recv(uint32_t qpn, uint32_t byte_len, int with_imm,
                                    uint32_t imm_data, uint32_t src_qp) {
  LOCK();
  int rc = ENOENT;
  struct fp_qp *q = find_qp(qpn);
  if (q && (q->srq ? q->srq->rq.len : q->rq.len)) {
    struct fp_inbound *in = calloc(1, sizeof(*in));
    if (!in)
      abort();
    in->src_qp = src_qp;
    in->byte_len = byte_len;
    in->with_imm = with_imm;
    in->imm = imm_data;
    in->no_data = 1;
    send_inbound(q, in);
    rc = 0;
  }
  UNLOCK();
  return rc;
}

FAKE_API int fakeprov_live(enum fakeprov_type type) {
  LOCK();
  int n = (unsigned)type < FAKEPROV_TYPE_COUNT ? live[type] : -1;
  UNLOCK();
  return n;
}

FAKE_API int fakeprov_live_total(void) {
  LOCK();
  int n = 0;
  for (int i = 0; i < FAKEPROV_TYPE_COUNT; i++)
    n += live[i];
  UNLOCK();
  return n;
}

FAKE_API int fakeprov_violations(void) {
  LOCK();
  int n = violations;
  UNLOCK();
  return n;
}

FAKE_API const char *fakeprov_last_violation(void) {
  static __thread char copy[sizeof(last_violation)];
  LOCK();
  memcpy(copy, last_violation, sizeof(copy));
  UNLOCK();
  return copy;
}

FAKE_API int fakeprov_cq_overruns(void) {
  LOCK();
  int n = overruns;
  UNLOCK();
  return n;
}

FAKE_API size_t fakeprov_wr_log(uint32_t qpn, struct fakeprov_wr_record *out, size_t max) {
  LOCK();
  size_t n = 0;
  for (size_t i = 0; i < wr_log_len; i++)
    if (wr_log[i].qpn == qpn) {
      if (out && n < max)
        out[n] = wr_log[i];
      n++;
    }
  UNLOCK();
  return n;
}

FAKE_API void fakeprov_wr_log_clear(void) {
  LOCK();
  wr_log_len = 0;
  UNLOCK();
}

FAKE_API size_t fakeprov_modify_log(uint32_t qpn, struct fakeprov_modify_record *out, size_t max) {
  LOCK();
  size_t n = 0;
  for (size_t i = 0; i < mod_log_len; i++)
    if (mod_log[i].qpn == qpn) {
      if (out && n < max)
        out[n] = mod_log[i];
      n++;
    }
  UNLOCK();
  return n;
}

FAKE_API int fakeprov_qp_state(uint32_t qpn) {
  LOCK();
  struct fp_qp *q = find_qp(qpn);
  int s = q ? (int)q->attr.qp_state : -1;
  UNLOCK();
  return s;
}

FAKE_API int fakeprov_cq_pending(const void *cq) {
  LOCK();
  int n = -1;
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_CQ && (const void *)&((struct fp_cq *)p)->cq == cq)
      n = ((struct fp_cq *)p)->len;
  UNLOCK();
  return n;
}

FAKE_API int fakeprov_held(uint32_t qpn) {
  LOCK();
  int n = 0;
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_QP &&
        (!qpn || ((struct fp_qp *)p)->qpx.qp_base.qp_num == qpn))
      n += ((struct fp_qp *)p)->nheld;
  UNLOCK();
  return n;
}

FAKE_API int fakeprov_release(uint32_t qpn) {
  LOCK();
  int n = 0;
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_QP &&
        (!qpn || ((struct fp_qp *)p)->qpx.qp_base.qp_num == qpn))
      n += run_held((struct fp_qp *)p, ((struct fp_qp *)p)->nheld);
  UNLOCK();
  return n;
}

FAKE_API uint32_t fakeprov_last_qpn(void) {
  LOCK();
  uint32_t n = last_qpn;
  UNLOCK();
  return n;
}
