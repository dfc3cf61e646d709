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
 * device, its knobs and the scripting API (FAKEPROV_1.0). This file holds
 * its state, the device and the context; fake_provider_internal.h says where
 * the rest is.
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
#define FAKE_BODIES_FAIL
#include "fake_provider_internal.h"
#include "table_rows.h"

/* ---- every symbol of symbols.def not written below: fails, EOPNOTSUPP ---- */
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
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_OF(IBV, lib, FAKE_GEN)(fail, ret, name, params)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "symbols.def"
#pragma GCC diagnostic pop
#undef RDMADL_SYM
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

pthread_mutex_t fp_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

struct fp_hdr *all;
int live[FAKEPROV_TYPE_COUNT];
int violations, overruns;
char last_violation[256];

const long knob_default[FAKEPROV_KNOB_COUNT] = {
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
    [FAKEPROV_MINIMAL_OPS] = 0,
    [FAKEPROV_MAX_QP] = 64,
    [FAKEPROV_MAX_CQ] = 64,
    [FAKEPROV_MAX_MR] = 256,
    [FAKEPROV_MEMLOCK] = 0,
};
long knob[FAKEPROV_KNOB_COUNT];
int knobs_set;

/* The names FAKEPROV_KNOBS uses: the enum's, without "FAKEPROV_". */
static const char *const knob_name[FAKEPROV_KNOB_COUNT] = {
#define FAKEPROV_NAME_OF(name) [FAKEPROV_##name] = #name,
    FAKEPROV_KNOBS(FAKEPROV_NAME_OF)
#undef FAKEPROV_NAME_OF
};

/* VAR=NAME=VALUE[,NAME=VALUE...]: SET(i, VALUE) for each NAME that is
 * NAMES[i]; an unknown name is ignored. */
static void env_pairs(const char *var, const char *const *names, int n, void (*set)(int, long)) {
  const char *e = getenv(var);
  while (e && *e) {
    const char *eq = strchr(e, '=');
    if (!eq)
      break;
    for (int i = 0; i < n; i++)
      if (names[i] && strlen(names[i]) == (size_t)(eq - e) &&
          !strncmp(names[i], e, (size_t)(eq - e)))
        set(i, strtol(eq + 1, NULL, 0));
    e = strchr(eq, ',');
    if (e)
      e++;
  }
}

static void set_knob(int i, long value) {
  knob[i] = value;
}

/* FAKEPROV_KNOBS: knobs for a process that cannot call fakeprov_set() (a
 * tool run by a test). */
static void knobs_from_env(void) {
  env_pairs("FAKEPROV_KNOBS", knob_name, FAKEPROV_KNOB_COUNT, set_knob);
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

long k(enum fakeprov_knob which) {
  first_use();
  return knob[which];
}

struct fp_fail fail_script[FAKEPROV_OP_COUNT];
unsigned status_count;
int status_value;
uint32_t status_vendor_err;

uint32_t next_qpn = 0x11; /* QPs and SRQs share the number space */
uint32_t next_key = 1;
uint32_t last_qpn;
uint64_t next_seq = 1;

struct fakeprov_wr_record *wr_log;
size_t wr_log_len, wr_log_cap;
struct fakeprov_modify_record *mod_log;
size_t mod_log_len, mod_log_cap;

void violation(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_violation, sizeof(last_violation), fmt, ap);
  va_end(ap);
  violations++;
}

/* Whether the next call of OP is scripted to fail; if so, its errno. */
/* The names FAKEPROV_FAIL uses: the enum's, without "FAKEPROV_OP_". */
static const char *const op_name[FAKEPROV_OP_COUNT] = {
#define FAKEPROV_NAME_OF(name) [FAKEPROV_OP_##name] = #name,
    FAKEPROV_OPS(FAKEPROV_NAME_OF)
#undef FAKEPROV_NAME_OF
};

/* FAKEPROV_FAIL=OP=ERRNO[,OP=ERRNO...]: every call of OP fails with ERRNO, as
 * fakeprov_fail_next(OP, ERRNO, UINT_MAX) would make it. */
static void set_fail(int i, long err) {
  fail_script[i].err = (int)err;
  fail_script[i].count = err ? UINT_MAX : 0;
}

static void fails_from_env(void) {
  env_pairs("FAKEPROV_FAIL", op_name, FAKEPROV_OP_COUNT, set_fail);
}

unsigned long op_calls[FAKEPROV_OP_COUNT];

/* Every operation of enum fakeprov_op starts here: counted, and failed when
 * a test scripted it. */
int scripted_failure(enum fakeprov_op op) {
  first_use();
  op_calls[op]++;
  if (!fail_script[op].count)
    return 0;
  fail_script[op].count--;
  return fail_script[op].err;
}

void *new_object(size_t size, int type) {
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

void kill_object(struct fp_hdr *h) {
  h->dead = 1;
  live[h->type]--;
}

/* Whether H is a live object of TYPE; counts a violation (naming WHAT) if not. */
int alive(const struct fp_hdr *h, int type, const char *what) {
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

struct fp_qp *find_qp(uint32_t qpn) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_QP) {
      struct fp_qp *q = (struct fp_qp *)p;
      if (q->qpx.qp_base.qp_num == qpn)
        return q;
    }
  return NULL;
}

struct fp_mr *find_mr_rkey(struct fp_pd *pd, uint32_t rkey) {
  for (struct fp_hdr *p = all; p; p = p->next)
    if (!p->dead && p->type == FAKEPROV_MR) {
      struct fp_mr *m = (struct fp_mr *)p;
      if (m->mr.rkey == rkey && (!pd || m->pd == pd))
        return m;
    }
  return NULL;
}

/* The local MR that covers [addr, addr+len) with LKEY in PD. */
struct fp_mr *find_mr_lkey(struct fp_pd *pd, uint32_t lkey, uint64_t addr, uint64_t len) {
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

static int op_query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in,
                              struct ibv_device_attr_ex *attr, size_t size);
static int op_query_port(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);

/* Sets the ex ops of every live context from the knobs. */
void apply_ex_knobs(void) {
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
  if (k(FAKEPROV_MINIMAL_OPS))
    minimal_ops(ctx);
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
struct fp_ctx *live_ctx(struct ibv_context *context, const char *what) {
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
  a->max_qp = (int)k(FAKEPROV_MAX_QP);
  a->max_qp_wr = (int)k(FAKEPROV_MAX_QP_WR);
  a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                        IBV_DEVICE_SRQ_RESIZE | IBV_DEVICE_N_NOTIFY_CQ;
  a->max_sge = (int)k(FAKEPROV_MAX_SGE);
  a->max_sge_rd = (int)k(FAKEPROV_MAX_SGE);
  a->max_cq = (int)k(FAKEPROV_MAX_CQ);
  a->max_cqe = (int)k(FAKEPROV_MAX_CQE);
  a->max_mr = (int)k(FAKEPROV_MAX_MR);
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
