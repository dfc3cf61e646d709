/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "common.h"
#include "rc_attr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The shared drop-in library exports only the ibv_ / rdma_ names, so the
 * shared-linked variant is built without rdmadl's diagnostics. */
#ifndef RDMADL_GUEST_NO_DIAG
#include <rdmadl/loader.h>
#endif

static const char *prog_name = "test";
static bool absent_mode;
static int n_pass, n_fail, n_unsup;
static enum t_role role = T_LOCAL;
static const char *peer_ip;
static int peer_port = T_PORT, peer_fd = -1;

static long now_ms(void);

/* A bad command line: says what is wrong and exits 2. */
static void usage_error(const char *what) {
  fprintf(stderr, "%s: %s\nusage: %s [--absent | --listen | --connect IPV4] [--port N] [args]\n",
          prog_name, what, prog_name);
  exit(2);
}

void t_init(int argc, char **argv, const char *prog) {
  prog_name = prog;
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--absent") == 0) {
      absent_mode = true;
    } else if (strcmp(argv[i], "--listen") == 0) {
      role = T_LISTEN;
    } else if (strcmp(argv[i], "--connect") == 0) {
      struct in_addr a;
      if (i + 1 >= argc || inet_pton(AF_INET, argv[i + 1], &a) != 1)
        usage_error("--connect wants an IPv4 address");
      role = T_CONNECT;
      peer_ip = argv[++i];
    } else if (strcmp(argv[i], "--port") == 0) {
      char *end = NULL;
      long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : 0;
      if (i + 1 >= argc || *end || v < 1 || v > 65535)
        usage_error("--port wants a number from 1 to 65535");
      peer_port = (int)v;
      i++;
    }
  }
  if (absent_mode && role != T_LOCAL)
    usage_error("--absent excludes --listen and --connect");
}

bool t_absent(void) {
  return absent_mode;
}

enum t_role t_role(void) {
  return role;
}

const char *t_peer_ip(void) {
  return peer_ip;
}

int t_port(void) {
  return peer_port;
}

static int peer_fail(const char *what, int err) {
  char name[128];
  snprintf(name, sizeof name, "%s.peer", prog_name);
  t_check(name, false, "%s %s:%d: %s", what, peer_ip ? peer_ip : "*", peer_port, strerror(err));
  return -1;
}

int t_peer_open(int timeout_ms) {
  struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)peer_port)};
  struct timeval io = {.tv_sec = 60};
  int one = 1;
  long end = now_ms() + timeout_ms;
  if (role == T_LISTEN) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(l, (struct sockaddr *)&sin, sizeof sin) || listen(l, 1))
      return peer_fail("listen on", errno);
    struct pollfd p = {.fd = l, .events = POLLIN};
    int r = poll(&p, 1, timeout_ms);
    peer_fd = r == 1 ? accept(l, NULL, NULL) : -1;
    int err = r == 0 ? ETIMEDOUT : errno;
    close(l);
    if (peer_fd < 0)
      return peer_fail("accept on", err);
  } else if (role == T_CONNECT) {
    inet_pton(AF_INET, peer_ip, &sin.sin_addr);
    for (;;) {
      peer_fd = socket(AF_INET, SOCK_STREAM, 0);
      if (peer_fd >= 0 && connect(peer_fd, (struct sockaddr *)&sin, sizeof sin) == 0)
        break;
      int err = errno;
      if (peer_fd >= 0)
        close(peer_fd);
      peer_fd = -1;
      if (now_ms() > end)
        return peer_fail("connect to", err);
      usleep(200000); /* the listener is not up yet */
    }
  } else {
    return peer_fail("no --listen/--connect for", EINVAL);
  }
  setsockopt(peer_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(peer_fd, SOL_SOCKET, SO_RCVTIMEO, &io, sizeof io);
  setsockopt(peer_fd, SOL_SOCKET, SO_SNDTIMEO, &io, sizeof io);
  return 0;
}

void t_peer_close(void) {
  if (peer_fd >= 0)
    close(peer_fd);
  peer_fd = -1;
}

int t_peer_xchg(const void *mine, void *theirs, size_t len) {
  const char *what = "send";
  size_t done = 0;
  while (done < len) {
    ssize_t r = send(peer_fd, (const char *)mine + done, len - done, MSG_NOSIGNAL);
    if (r <= 0)
      goto fail;
    done += (size_t)r;
  }
  what = "receive";
  for (done = 0; done < len;) {
    ssize_t r = recv(peer_fd, (char *)theirs + done, len - done, 0);
    if (r <= 0) {
      if (r == 0)
        errno = ECONNRESET;
      goto fail;
    }
    done += (size_t)r;
  }
  return 0;
fail:
  fprintf(stderr, "%s: side channel: %s: %s\n", prog_name, what, strerror(errno));
  return -1;
}

bool t_peer_sync(uint32_t step) {
  uint32_t mine = htonl(step), theirs = 0;
  if (t_peer_xchg(&mine, &theirs, sizeof mine))
    return false;
  if (theirs != mine) {
    fprintf(stderr, "%s: out of step with the peer: at %u, peer at %u\n", prog_name, step,
            ntohl(theirs));
    return false;
  }
  return true;
}

struct ibv_cq *t_create_cq(struct ibv_context *ctx, int depth) {
  struct ibv_comp_channel *ch = NULL;
  if (role != T_LOCAL && !(ch = ibv_create_comp_channel(ctx)))
    return NULL;
  struct ibv_cq *cq = ibv_create_cq(ctx, depth, NULL, ch, 0);
  if (!cq && ch) {
    int err = errno;
    ibv_destroy_comp_channel(ch);
    errno = err;
  }
  return cq;
}

struct ibv_qp_init_attr t_qp_attr(struct ibv_cq *scq, struct ibv_cq *rcq, enum ibv_qp_type type,
                                  uint32_t depth) {
  return (struct ibv_qp_init_attr){
      .send_cq = scq,
      .recv_cq = rcq,
      .qp_type = type,
      .cap = {.max_send_wr = depth, .max_recv_wr = depth, .max_send_sge = 1, .max_recv_sge = 1}};
}

void t_destroy_cq(struct ibv_cq *cq) {
  if (!cq)
    return;
  struct ibv_comp_channel *ch = cq->channel;
  ibv_destroy_cq(cq);
  if (ch)
    ibv_destroy_comp_channel(ch);
}

bool t_check(const char *name, bool ok, const char *detail, ...) {
  if (!ok && detail) {
    va_list ap;
    va_start(ap, detail);
    fprintf(stderr, "%s: %s: ", prog_name, name);
    vfprintf(stderr, detail, ap);
    fputc('\n', stderr);
    va_end(ap);
  }
  printf("RDMADL-CHECK %s %s\n", name, ok ? "PASS" : "FAIL");
  fflush(stdout);
  if (ok)
    n_pass++;
  else
    n_fail++;
  return ok;
}

void t_unsupported(const char *name, const char *layer, const char *why) {
  fprintf(stderr, "%s: %s: unsupported by the %s: %s\n", prog_name, name, layer, why);
  printf("RDMADL-CHECK %s UNSUPPORTED\nRDMADL-WHY %s %s\n", name, name, layer);
  fflush(stdout);
  n_unsup++;
}

int t_exit(void) {
  fprintf(stderr, "%s: %d passed, %d failed, %d unsupported\n", prog_name, n_pass, n_fail, n_unsup);
  return n_fail == 0 && n_pass + n_unsup > 0 ? 0 : 1;
}

/* The stack is absent: the device list must fail with EOPNOTSUPP and the
 * diagnostics must say why. */
static int check_absent(void) {
  char name[128];
  snprintf(name, sizeof name, "%s.absent", prog_name);
  int num = -1;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  int err = errno;
#ifdef RDMADL_GUEST_NO_DIAG
  bool ok = t_check(name, !list && err == EOPNOTSUPP && num == 0, "list=%p errno=%d (%s) num=%d",
                    (void *)list, err, strerror(err), num);
#else
  const char *reason = rdmadl_reason();
  bool ok =
      t_check(name,
              !list && err == EOPNOTSUPP && num == 0 &&
                  rdmadl_lib_state(RDMADL_LIB_IBVERBS) == RDMADL_STATE_NOT_FOUND &&
                  rdmadl_load() == EOPNOTSUPP &&
                  strcmp(rdmadl_lib_requested(RDMADL_LIB_IBVERBS), "libibverbs.so.1") == 0 &&
                  strstr(reason, "libibverbs.so.1 not") != NULL,
              "list=%p errno=%d (%s) num=%d state=%s reason=\"%s\"", (void *)list, err,
              strerror(err), num, rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS)), reason);
#endif
  if (list)
    ibv_free_device_list(list);
  return ok ? 1 : -1;
}

/* Prints the FAIL line of a device that could not be set up; returns -1. */
static int open_fail(const char *what, int err) {
  char name[128];
  snprintf(name, sizeof name, "%s.open", prog_name);
  t_check(name, false, "%s: %s", what, err ? strerror(err) : "failed");
  return -1;
}

/* The RoCE v2 GID of an IPv4 address (::ffff:a.b.c.d), found by asking the
 * library for the GID table (rdmadl falls back to ibv_query_gid on old ones). */
static int find_gid_index(struct t_dev *d) {
  const char *env = getenv("RDMADL_TEST_GID_INDEX");
  if (env && *env)
    return atoi(env);
  struct ibv_gid_entry ent[256];
  ssize_t n = ibv_query_gid_table(d->ctx, ent, 256, 0);
  for (ssize_t i = 0; i < n; i++) {
    const uint8_t *g = ent[i].gid.raw;
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (ent[i].port_num == d->port && ent[i].gid_type == IBV_GID_TYPE_ROCE_V2 &&
        memcmp(g, v4, sizeof v4) == 0)
      return (int)ent[i].gid_index;
  }
  return -1;
}

int t_open(struct t_dev *d) {
  memset(d, 0, sizeof *d);
  if (absent_mode)
    return check_absent();
  int num = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  if (!list || num == 0) {
    open_fail("no RDMA device", list ? ENODEV : errno);
#ifndef RDMADL_GUEST_NO_DIAG
    fprintf(stderr, "%s: rdmadl: %s\n", prog_name, rdmadl_reason());
#endif
    if (list)
      ibv_free_device_list(list);
    return -1;
  }
  const char *want = getenv("RDMADL_TEST_DEVICE");
  struct ibv_device *dev = NULL;
  for (int i = 0; i < num && !dev; i++)
    if (!want || !*want || strcmp(ibv_get_device_name(list[i]), want) == 0)
      dev = list[i];
  if (!dev) {
    ibv_free_device_list(list);
    return open_fail(want, ENODEV);
  }
  d->ctx = ibv_open_device(dev);
  ibv_free_device_list(list);
  if (!d->ctx)
    return open_fail("ibv_open_device", errno);
  if (ibv_query_device(d->ctx, &d->attr))
    return open_fail("ibv_query_device", errno);
  for (uint8_t p = 1; p <= d->attr.phys_port_cnt; p++) {
    if (ibv_query_port(d->ctx, p, &d->port_attr) == 0 && d->port_attr.state == IBV_PORT_ACTIVE) {
      d->port = p;
      break;
    }
  }
  if (!d->port)
    return open_fail("no active port", 0);
  d->gid_index = find_gid_index(d);
  if (d->gid_index < 0 || ibv_query_gid(d->ctx, d->port, d->gid_index, &d->gid))
    return open_fail("no RoCE v2 IPv4 GID", errno);
  d->pd = ibv_alloc_pd(d->ctx);
  if (!d->pd)
    return open_fail("ibv_alloc_pd", errno);
  fprintf(stderr, "%s: %s port %u gid %d mtu %d atomic_cap %d\n", prog_name,
          ibv_get_device_name(d->ctx->device), d->port, d->gid_index,
          128 << d->port_attr.active_mtu, d->attr.atomic_cap);
  return 0;
}

void t_close(struct t_dev *d) {
  if (d->pd)
    ibv_dealloc_pd(d->pd);
  if (d->ctx)
    ibv_close_device(d->ctx);
  memset(d, 0, sizeof *d);
}

void t_ah_attr(struct t_dev *d, struct ibv_ah_attr *ah) {
  memset(ah, 0, sizeof *ah);
  ah->is_global = 1;
  ah->grh.dgid = d->gid;
  ah->grh.sgid_index = (uint8_t)d->gid_index;
  ah->grh.hop_limit = 1;
  ah->port_num = d->port;
}

int t_post1(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, const void *addr,
            uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t imm) {
  struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
  struct ibv_send_wr wr = {.wr_id = wr_id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &wr, &bad);
}

int t_rc_connect(struct t_dev *d, struct ibv_qp *qp, uint32_t remote_qpn, int access) {
  return t_rc_connect_gid(d, qp, remote_qpn, &d->gid, access);
}

int t_rc_connect_gid(struct t_dev *d, struct ibv_qp *qp, uint32_t remote_qpn,
                     const union ibv_gid *dgid, int access) {
  struct ibv_qp_attr a;
  int ret = ibv_modify_qp(qp, &a, t_rc_init_attr(&a, d->port, access));
  if (ret)
    return ret;
  uint8_t rd_atomic = d->attr.max_qp_rd_atom < 4 ? (uint8_t)d->attr.max_qp_rd_atom : 4;
  ret = ibv_modify_qp(qp, &a,
                      t_rc_rtr_attr(&a, d->port_attr.active_mtu, remote_qpn, rd_atomic, d->port,
                                    dgid, d->gid_index));
  if (ret)
    return ret;
  return ibv_modify_qp(qp, &a, t_rc_rts_attr(&a, rd_atomic));
}

int t_ud_ready(struct t_dev *d, struct ibv_qp *qp, uint32_t qkey) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = d->port;
  a.qkey = qkey;
  int ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY);
  if (ret)
    return ret;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
  if (ret)
    return ret;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int t_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n, int batch, int timeout_ms) {
  long end = now_ms() + timeout_ms;
  int got = 0;
  while (got < n) {
    int want = n - got < batch ? n - got : batch;
    int r = ibv_poll_cq(cq, want, wc + got);
    if (r < 0) {
      fprintf(stderr, "%s: ibv_poll_cq: %d\n", prog_name, r);
      return -1;
    }
    got += r;
    if (r > 0)
      continue;
    long left = end - now_ms();
    if (left < 0)
      break;
    if (role != T_LOCAL && cq->channel) {
      /* Arm, poll once more (a completion may have slipped in), then sleep. */
      if (ibv_req_notify_cq(cq, 0))
        return -1;
      r = ibv_poll_cq(cq, want, wc + got);
      if (r < 0)
        return -1;
      got += r;
      struct pollfd p = {.fd = cq->channel->fd, .events = POLLIN};
      struct ibv_cq *ev_cq;
      void *ev_ctx;
      if (r == 0 && poll(&p, 1, (int)left) == 1 &&
          ibv_get_cq_event(cq->channel, &ev_cq, &ev_ctx) == 0)
        ibv_ack_cq_events(ev_cq, 1);
    }
  }
  return got;
}

bool t_wc_ok(const struct ibv_wc *wc, int n) {
  bool ok = true;
  for (int i = 0; i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      fprintf(stderr, "%s: wr_id %llu: %s (vendor_err %u)\n", prog_name,
              (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status), wc[i].vendor_err);
      ok = false;
    }
  }
  return ok;
}

void t_fill(void *buf, size_t len, unsigned seed) {
  uint8_t *p = buf;
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < len; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = (uint8_t)(x >> 16);
  }
}

bool t_same(const char *name, const void *got, const void *want, size_t len) {
  const char *brk = getenv("RDMADL_VM_BREAK");
  bool flip =
      brk && *brk &&
      (strcmp(brk, name) == 0 || (strcmp(brk, "1") == 0 && strcmp(name, "rc.send_recv") == 0));
  const uint8_t *g = got, *w = want;
  for (size_t i = 0; i < len; i++) {
    uint8_t expect = w[i];
    if (flip && i == len / 2)
      expect ^= 0x01; /* RDMADL_VM_BREAK: a deliberately wrong expectation */
    if (g[i] != expect) {
      fprintf(stderr, "%s: %s: byte %zu of %zu: got 0x%02x, want 0x%02x\n", prog_name, name, i, len,
              g[i], expect);
      return false;
    }
  }
  return len > 0;
}
