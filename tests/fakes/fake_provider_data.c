/* SPDX-License-Identifier: MIT */
/*
 * The scripted fake provider's data path (fake_provider.c says what the
 * fake is): posting, delivery between fake queue pairs, completions and
 * polling, the WR API, and the FAKEPROV_1.0 functions tests script and
 * inspect it with.
 */
#define _GNU_SOURCE
#include "fake_provider_internal.h"
#include "str_tables.h"

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
void complete_flush(struct fp_qp *q) {
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
int run_held(struct fp_qp *q, int n) {
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
void poll_tick(struct fp_cq *cq) {
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

int op_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
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

int op_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
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

int op_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
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

/* ---- the minimal data path (FAKEPROV_MINIMAL_OPS) ---- */

/* cq_of() without its NULL test: this path's instructions are what
 * bench/cxx/run-host.sh counts. */
static struct fp_cq *min_cq(struct ibv_cq *cq) {
  return container_of((struct ibv_cq_ex *)cq, struct fp_cq, cq);
}

static int min_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  struct fp_cq *cq = min_cq(qp->send_cq);
  for (; wr; wr = wr->next) {
    if (!(wr->send_flags & IBV_SEND_SIGNALED))
      continue;
    if (cq->min_tail - cq->min_head == MINIMAL_RING) {
      *bad = wr;
      return ENOMEM;
    }
    struct ibv_wc *c = &cq->min_ring[cq->min_tail++ % MINIMAL_RING];
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
static int min_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  struct fp_cq *cq = min_cq(qp->recv_cq);
  for (; wr; wr = wr->next) {
    if (cq->min_tail - cq->min_head == MINIMAL_RING) {
      *bad = wr;
      return ENOMEM;
    }
    struct ibv_wc *c = &cq->min_ring[cq->min_tail++ % MINIMAL_RING];
    c->wr_id = wr->wr_id;
    c->status = IBV_WC_SUCCESS;
    c->opcode = IBV_WC_RECV;
    c->byte_len = wr->num_sge ? wr->sg_list[0].length : 0;
    c->qp_num = qp->qp_num;
    c->wc_flags = 0;
  }
  return 0;
}

static int min_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc) {
  struct fp_cq *cq = min_cq(ibcq);
  int got = 0;
  while (got < n && cq->min_head != cq->min_tail)
    wc[got++] = cq->min_ring[cq->min_head++ % MINIMAL_RING];
  return got;
}

static int min_req_notify_cq(struct ibv_cq *cq, int solicited) {
  (void)cq;
  (void)solicited;
  return 0;
}

void minimal_ops(struct ibv_context *ctx) {
  ctx->ops.post_send = min_post_send;
  ctx->ops.post_recv = min_post_recv;
  ctx->ops.poll_cq = min_poll_cq;
  ctx->ops.req_notify_cq = min_req_notify_cq;
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

void wr_start(struct ibv_qp_ex *qpx) {
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

void wr_send(struct ibv_qp_ex *qpx) {
  LOCK();
  wr_new(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND, "wr_send");
  UNLOCK();
}
void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, "wr_send_imm");
  if (r)
    r->imm_data = imm;
  UNLOCK();
}
void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, "wr_rdma_write");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
  }
  UNLOCK();
}
void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, __be32 imm) {
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
void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr) {
  LOCK();
  struct fakeprov_wr_record *r =
      wr_new(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, "wr_rdma_read");
  if (r) {
    r->rkey = rkey;
    r->remote_addr = addr;
  }
  UNLOCK();
}
void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t cmp,
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
void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr, uint64_t add) {
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
void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr, uint32_t length) {
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
void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_sge *sge) {
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
void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t n, const struct ibv_data_buf *buf) {
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
void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr, size_t length) {
  struct ibv_data_buf b = {addr, length};
  wr_set_inline_data_list(qpx, 1, &b);
}
void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah, uint32_t remote_qpn,
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

int wr_complete(struct ibv_qp_ex *qpx) {
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

void wr_abort(struct ibv_qp_ex *qpx) {
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
  const char *s = RDMADL_STR_AT(wc_status_strs, status);
  return s ? s : "unknown";
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
