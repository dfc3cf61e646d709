/* SPDX-License-Identifier: MIT */
/*
 * The scripted fake provider's objects (fake_provider.c says what the fake
 * is): protection domains and memory regions, completion channels and
 * queues, shared receive queues, address handles and queue pairs, with the
 * teardown rules rdma-core and the kernel have.
 */
#define _GNU_SOURCE
#include "fake_provider_internal.h"

#include <sys/resource.h>

/* Bytes of the live memory regions (FAKEPROV_MEMLOCK). */
static uint64_t pinned;

/* ENOMEM when one more object of TYPE would pass the device's limit KNOB. */
static int over_limit(enum fakeprov_type type, enum fakeprov_knob knob) {
  return live[type] >= k(knob) ? ENOMEM : 0;
}

/* ENOMEM when LENGTH more pinned bytes would pass RLIMIT_MEMLOCK. */
static int over_memlock(size_t length) {
  struct rlimit rl;
  if (!k(FAKEPROV_MEMLOCK) || getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  return pinned + length > rl.rlim_cur ? ENOMEM : 0;
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
  if (!err)
    err = over_limit(FAKEPROV_MR, FAKEPROV_MAX_MR);
  if (!err)
    err = over_memlock(length);
  if (!err) {
    pinned += length;
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
      pinned -= m->mr.length;
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
  if ((*err = over_limit(FAKEPROV_CQ, FAKEPROV_MAX_CQ)))
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

struct ibv_cq_ex *op_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *a) {
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
void push_wc(struct fp_cq *q, const struct ibv_wc *wc) {
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

int op_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
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

int op_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
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

int rq_push(struct fp_rq *rq, const struct ibv_recv_wr *wr) {
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

int rq_pop(struct fp_rq *rq, struct fp_rwr *out) {
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
  if (!err)
    err = over_limit(FAKEPROV_QP, FAKEPROV_MAX_QP);
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

struct ibv_qp *op_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *a) {
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
  *m = (struct fakeprov_modify_record){
      .qpn = qp->qp_num,
      .attr_mask = mask,
      .from_state = cur,
      .to_state = next,
      .path_mtu = attr->path_mtu,
      .qkey = attr->qkey,
      .rq_psn = attr->rq_psn,
      .sq_psn = attr->sq_psn,
      .dest_qp_num = attr->dest_qp_num,
      .qp_access_flags = attr->qp_access_flags,
      .pkey_index = attr->pkey_index,
      .port_num = attr->port_num,
      .max_rd_atomic = attr->max_rd_atomic,
      .max_dest_rd_atomic = attr->max_dest_rd_atomic,
      .min_rnr_timer = attr->min_rnr_timer,
      .timeout = attr->timeout,
      .retry_cnt = attr->retry_cnt,
      .rnr_retry = attr->rnr_retry,
      .dlid = attr->ah_attr.dlid,
      .sl = attr->ah_attr.sl,
      .is_global = attr->ah_attr.is_global,
      .sgid_index = attr->ah_attr.grh.sgid_index,
      .hop_limit = attr->ah_attr.grh.hop_limit,
      .traffic_class = attr->ah_attr.grh.traffic_class,
      .flow_label = attr->ah_attr.grh.flow_label,
      .ah_port_num = attr->ah_attr.port_num,
  };
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

/* ---- reaping ---- */

FAKE_API int fakeprov_reap(void) {
  LOCK();
  int n = 0;
  for (struct fp_hdr **pp = &all; *pp;) {
    struct fp_hdr *h = *pp;
    if (!h->dead) {
      pp = &h->next;
      continue;
    }
    *pp = h->next;
    if (h->type == FAKEPROV_CQ) {
      free(((struct fp_cq *)h)->ring);
    } else if (h->type == FAKEPROV_SRQ) {
      free(((struct fp_srq *)h)->rq.q);
    } else if (h->type == FAKEPROV_QP) {
      struct fp_qp *q = (struct fp_qp *)h;
      free_inbound(q);
      free(q->rq.q);
      free(q->pending);
      free(q->held);
      free(q->held_polls);
    }
    free(h);
    n++;
  }
  wr_log_len = mod_log_len = 0; /* their records name QPs gone for good */
  UNLOCK();
  return n;
}
