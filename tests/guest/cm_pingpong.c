/* SPDX-License-Identifier: MIT */
/*
 * cm_pingpong - an rdma_cm client and server in one process (two threads, two
 * event channels) on RDMADL_TEST_IP: bind/listen, resolve address and route,
 * connect/accept with private data checked both ways, one message each way
 * checked byte for byte, disconnect. Every event is checked for its expected
 * type.
 *
 * A lost RTU: the server's ESTABLISHED then waits for rdma_cm to resend its
 * REP (seconds), unless the device raises a communication-established event
 * on the first message, which Soft-RoCE never does. So the server, once the
 * client's message is in, tells rdma_cm itself (rdma_notify, COMM_EST, as
 * rdma_notify(3) asks), and the client disconnects only after the server's
 * answer, which the server sends after its ESTABLISHED: a DREQ can no longer
 * overtake it (ci/vm/README.md, "Impaired frames").
 *
 * Across two nodes: "--listen" runs the server on RDMADL_TEST_IP, port
 * --port + 1, and "--connect IP" the client against the listener's node
 * address; the side channel (--port) only tells the client that the server
 * listens.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "common.h"

enum { MSG = 4000, TIMEOUT = 10000 };

static const char client_pd[] = "rdmadl client private data";
static const char server_pd[] = "rdmadl server private data";
static struct sockaddr_in server_addr;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int listening; /* 1 listening, -1 server failed */
static uint8_t payload[MSG];

/* Waits for the next event on CH; checks its type. The caller acks *EV. */
static bool want_event(const char *who, struct rdma_event_channel *ch, enum rdma_cm_event_type type,
                       struct rdma_cm_event **ev) {
  struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
  *ev = NULL;
  if (poll(&pfd, 1, TIMEOUT) != 1) {
    fprintf(stderr, "cm_pingpong: %s: no event within %d ms (waiting for %s)\n", who, TIMEOUT,
            rdma_event_str(type));
    return false;
  }
  if (rdma_get_cm_event(ch, ev)) {
    fprintf(stderr, "cm_pingpong: %s: rdma_get_cm_event: %s\n", who, strerror(errno));
    return false;
  }
  if ((*ev)->event != type) {
    fprintf(stderr, "cm_pingpong: %s: got %s (status %d), want %s\n", who,
            rdma_event_str((*ev)->event), (*ev)->status, rdma_event_str(type));
    rdma_ack_cm_event(*ev);
    *ev = NULL;
    return false;
  }
  return true;
}

static bool event_ok(const char *check, const char *who, struct rdma_event_channel *ch,
                     enum rdma_cm_event_type type) {
  struct rdma_cm_event *ev;
  bool ok = want_event(who, ch, type, &ev);
  if (ev)
    rdma_ack_cm_event(ev);
  return check ? t_check(check, ok, "no %s", rdma_event_str(type)) : ok;
}

/* Private data arrives padded to the transport's size: compare the prefix. */
static bool private_data_ok(const struct rdma_conn_param *p, const char *want) {
  size_t n = strlen(want) + 1;
  return p->private_data && p->private_data_len >= n && memcmp(p->private_data, want, n) == 0;
}

static void init_qp_attr(struct ibv_qp_init_attr *qa, struct ibv_cq *cq) {
  memset(qa, 0, sizeof *qa);
  qa->send_cq = cq;
  qa->recv_cq = cq;
  qa->qp_type = IBV_QPT_RC;
  qa->cap.max_send_wr = 4;
  qa->cap.max_recv_wr = 4;
  qa->cap.max_send_sge = 1;
  qa->cap.max_recv_sge = 1;
}

/* Tears down one side's connection, in reverse order of creation; any of
 * them may be NULL. */
static void release(struct rdma_cm_id *id, struct ibv_mr *mr, struct ibv_cq *cq,
                    struct ibv_pd *pd) {
  if (id && id->qp)
    rdma_destroy_qp(id);
  if (mr)
    ibv_dereg_mr(mr);
  t_destroy_cq(cq);
  if (pd)
    ibv_dealloc_pd(pd);
  if (id)
    rdma_destroy_id(id);
}

static void set_listening(int v) {
  pthread_mutex_lock(&lock);
  listening = v;
  pthread_cond_broadcast(&cond);
  pthread_mutex_unlock(&lock);
}

static void *server(void *arg) {
  (void)arg;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *lid = NULL, *cid = NULL;
  struct ibv_pd *pd = NULL;
  struct ibv_cq *cq = NULL;
  struct ibv_mr *mr = NULL;
  uint8_t *buf = calloc(1, MSG + 64);
  struct rdma_cm_event *ev = NULL;
  struct sockaddr_in sin = server_addr;
  sin.sin_port = t_role() == T_LISTEN ? htons((uint16_t)(t_port() + 1)) : 0;
  bool ok = ch && buf && rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) == 0 &&
            rdma_bind_addr(lid, (struct sockaddr *)&sin) == 0 && rdma_listen(lid, 1) == 0;
  if (!t_check("cm.listen", ok, "server: %s", strerror(errno))) {
    set_listening(-1);
    goto out;
  }
  server_addr.sin_port = rdma_get_src_port(lid);
  set_listening(1);
  if (t_role() == T_LISTEN && t_peer_open(120000))
    goto out;

  ok = want_event("server", ch, RDMA_CM_EVENT_CONNECT_REQUEST, &ev);
  if (ok) {
    cid = ev->id;
    t_check("cm.private_data.client_to_server", private_data_ok(&ev->param.conn, client_pd),
            "connect request carried %u bytes", ev->param.conn.private_data_len);
    rdma_ack_cm_event(ev);
  } else {
    t_check("cm.connect_request", false, "no connect request");
    goto out;
  }
  pd = ibv_alloc_pd(cid->verbs);
  cq = pd ? t_create_cq(cid->verbs, 8) : NULL;
  mr = cq ? ibv_reg_mr(pd, buf, MSG + 64, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_qp_init_attr qa;
  init_qp_attr(&qa, cq);
  ok = mr && rdma_create_qp(cid, pd, &qa) == 0;
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = MSG + 64, .lkey = mr ? mr->lkey : 0};
  struct ibv_recv_wr rwr = {.wr_id = 77, .sg_list = &sge, .num_sge = 1}, *bad;
  ok = ok && ibv_post_recv(cid->qp, &rwr, &bad) == 0;
  struct rdma_conn_param cp = {.private_data = server_pd,
                               .private_data_len = sizeof server_pd,
                               .responder_resources = 1,
                               .initiator_depth = 1};
  ok = ok && rdma_accept(cid, &cp) == 0;
  if (!t_check("cm.accept", ok, "server: %s", strerror(errno))) {
    if (cid)
      rdma_reject(cid, NULL, 0);
    goto out;
  }
  struct ibv_wc wc;
  int n = t_poll(cq, &wc, 1, 1, TIMEOUT);
  ok = n == 1 && t_wc_ok(&wc, 1) && wc.wr_id == 77 && wc.byte_len == MSG;
  t_check("cm.send_recv", ok && t_same("cm.send_recv", buf, payload, MSG),
          "%d receive completions, byte_len %u", n, n == 1 ? wc.byte_len : 0);
  /* The message proves the client connected: stand in for a lost RTU. 0, or
   * EISCONN when the RTU came first. */
  if (n == 1) {
    errno = 0;
    int r = rdma_notify(cid, IBV_EVENT_COMM_EST);
    t_check("cm.notify", r == 0 || errno == EISCONN, "rdma_notify: %d, %s", r, strerror(errno));
    if (r == 0)
      printf("cm_pingpong: server: the message came before the RTU; rdma_notify established\n");
  }
  event_ok("cm.established.server", "server", ch, RDMA_CM_EVENT_ESTABLISHED);
  ok = n == 1 && t_post1(cid->qp, IBV_WR_SEND, 78, buf, MSG, mr->lkey, 0, 0, 0) == 0 &&
       t_poll(cq, &wc, 1, 1, TIMEOUT) == 1 && t_wc_ok(&wc, 1) && wc.wr_id == 78;
  t_check("cm.reply.server", ok, "server: the answer did not complete");
  /* The client disconnects; the server sees it and disconnects too. */
  if (event_ok("cm.disconnected.server", "server", ch, RDMA_CM_EVENT_DISCONNECTED))
    rdma_disconnect(cid);
out:
  release(cid, mr, cq, pd);
  if (lid)
    rdma_destroy_id(lid);
  if (ch)
    rdma_destroy_event_channel(ch);
  free(buf);
  return NULL;
}

static void client(void) {
  struct rdma_event_channel *ch = rdma_create_event_channel();
  struct rdma_cm_id *id = NULL;
  struct ibv_pd *pd = NULL;
  struct ibv_cq *cq = NULL;
  struct ibv_mr *mr = NULL, *rmr = NULL;
  uint8_t *reply = calloc(1, MSG + 64);
  struct rdma_cm_event *ev = NULL;
  bool ok = ch && reply && rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0 &&
            rdma_resolve_addr(id, NULL, (struct sockaddr *)&server_addr, 2000) == 0;
  ok = ok && event_ok(NULL, "client", ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  t_check("cm.resolve_addr", ok, "client: %s", strerror(errno));
  ok = ok && rdma_resolve_route(id, 2000) == 0 &&
       event_ok(NULL, "client", ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  if (!t_check("cm.resolve_route", ok, "client: %s", strerror(errno)))
    goto out;
  pd = ibv_alloc_pd(id->verbs);
  cq = pd ? t_create_cq(id->verbs, 8) : NULL;
  mr = cq ? ibv_reg_mr(pd, payload, MSG, IBV_ACCESS_LOCAL_WRITE) : NULL;
  rmr = mr ? ibv_reg_mr(pd, reply, MSG + 64, IBV_ACCESS_LOCAL_WRITE) : NULL;
  struct ibv_qp_init_attr qa;
  init_qp_attr(&qa, cq);
  struct rdma_conn_param cp = {.private_data = client_pd,
                               .private_data_len = sizeof client_pd,
                               .responder_resources = 1,
                               .initiator_depth = 1,
                               .retry_count = 7,
                               .rnr_retry_count = 7};
  ok = rmr && rdma_create_qp(id, pd, &qa) == 0 && rdma_connect(id, &cp) == 0 &&
       want_event("client", ch, RDMA_CM_EVENT_ESTABLISHED, &ev);
  if (ev) {
    t_check("cm.private_data.server_to_client", private_data_ok(&ev->param.conn, server_pd),
            "established event carried %u bytes", ev->param.conn.private_data_len);
    rdma_ack_cm_event(ev);
  }
  if (!t_check("cm.connect", ok, "client: %s", strerror(errno)))
    goto out;
  /* The answer's receive goes first; the two completions come in either order. */
  struct ibv_sge sge = {.addr = (uintptr_t)reply, .length = MSG + 64, .lkey = rmr->lkey};
  struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1}, *bad;
  struct ibv_wc wc[2];
  int n = 0;
  ok = ibv_post_recv(id->qp, &rwr, &bad) == 0 &&
       t_post1(id->qp, IBV_WR_SEND, 1, payload, MSG, mr->lkey, 0, 0, 0) == 0;
  if (ok)
    n = t_poll(cq, wc, 2, 2, TIMEOUT);
  int sent = -1, got = -1;
  for (int i = 0; i < n; i++)
    *(wc[i].wr_id == 1 ? &sent : &got) = i;
  t_check("cm.send", sent >= 0 && t_wc_ok(&wc[sent], 1) && wc[sent].opcode == IBV_WC_SEND,
          "client send did not complete");
  ok = got >= 0 && t_wc_ok(&wc[got], 1) && wc[got].byte_len == MSG;
  t_check("cm.reply.client", ok && t_same("cm.reply.client", reply, payload, MSG),
          "%d completions, the answer's byte_len %u", n, got >= 0 ? wc[got].byte_len : 0);
  ok = rdma_disconnect(id) == 0;
  t_check("cm.disconnect", ok && event_ok(NULL, "client", ch, RDMA_CM_EVENT_DISCONNECTED),
          "client: %s", strerror(errno));
out:
  if (rmr)
    ibv_dereg_mr(rmr);
  release(id, mr, cq, pd);
  if (ch)
    rdma_destroy_event_channel(ch);
  free(reply);
}

/* No stack: rdma_cm must fail the documented way with EOPNOTSUPP. */
static int absent(void) {
  struct t_dev d;
  t_open(&d); /* cm_pingpong.absent: the verbs side */
  errno = 0;
  struct rdma_event_channel *ch = rdma_create_event_channel();
  int e1 = errno;
  struct rdma_cm_id *id = NULL;
  errno = 0;
  int r = rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP);
  int e2 = errno;
  t_check("cm.absent", !ch && e1 == EOPNOTSUPP && r == -1 && e2 == EOPNOTSUPP && !id,
          "rdma_create_event_channel %p errno %d; rdma_create_id %d errno %d", (void *)ch, e1, r,
          e2);
  return t_exit();
}

int main(int argc, char **argv) {
  t_init(argc, argv, "cm_pingpong");
  if (t_absent())
    return absent();
  const char *ip = getenv("RDMADL_TEST_IP");
  server_addr.sin_family = AF_INET;
  if (!ip || inet_pton(AF_INET, ip, &server_addr.sin_addr) != 1) {
    t_check("cm.setup", false, "RDMADL_TEST_IP (an IPv4 address on an RDMA netdev) not set");
    return t_exit();
  }
  t_fill(payload, MSG, 99);
  if (t_role() == T_LISTEN) {
    server(NULL);
    t_peer_close();
    return t_exit();
  }
  if (t_role() == T_CONNECT) {
    /* The peer's server: its address, and word over the side channel that it listens. */
    inet_pton(AF_INET, t_peer_ip(), &server_addr.sin_addr);
    server_addr.sin_port = htons((uint16_t)(t_port() + 1));
    if (t_peer_open(120000) == 0)
      client();
    t_peer_close();
    return t_exit();
  }
  pthread_t th;
  if (pthread_create(&th, NULL, server, NULL) != 0)
    return 1;
  pthread_mutex_lock(&lock);
  while (listening == 0)
    pthread_cond_wait(&cond, &lock);
  pthread_mutex_unlock(&lock);
  if (listening > 0)
    client();
  pthread_join(th, NULL);
  return t_exit();
}
