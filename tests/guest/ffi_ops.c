/* SPDX-License-Identifier: MIT */
/*
 * ffi_ops - real RDMA through librdmadl-ffi.so.0 used the way another
 * language uses it: dlopen + dlsym only. rdmadl/ffi.h supplies the types and,
 * through __typeof__, the function-pointer types; no function is called by
 * name, so no verbs.h inline code is in this program and it links no rdma
 * library (the test ffi.guest.dlopen-only checks the binary). RC queue pairs
 * on one device, loopback through its RoCE v2 GID; the WR API gets a QP pair
 * and CQs of its own (on rxe of rdma-core 44.0 a WR-API batch after
 * ibv_post_send traffic on the same QP or CQs lost completions):
 *   ffi.rc.send_recv, ffi.rc.write, ffi.rc.read   ibv_post_send/_recv, ibv_poll_cq
 *   ffi.query_port     ibv_query_port with the macro's semantics (full struct)
 *   feature.ffi_wr_api ibv_qp_to_qp_ex + ibv_wr_start/_rdma_write/_send/
 *                      _set_sge/_complete, one batch
 *   feature.ffi_cq_ex  the receive CQ is an extended CQ, polled with
 *                      ibv_start_poll/ibv_next_poll/ibv_end_poll/ibv_wc_read_*
 * A provider that answers EOPNOTSUPP to ibv_create_qp_ex / ibv_create_cq_ex
 * (rxe of rdma-core 33.2) makes the feature UNSUPPORTED with layer "device";
 * ci/releases.txt says where that is expected.
 * "--absent": no RDMA stack; every call must fail cleanly (ffi.absent).
 * Environment: RDMADL_FFI_LIB (default librdmadl-ffi.so.0),
 * RDMADL_TEST_DEVICE, RDMADL_TEST_GID_INDEX, RDMADL_VM_BREAK (a check name:
 * its expected bytes get one byte flipped).
 */
#include <rdmadl/ffi.h>

#include "rc_attr.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Every function this program uses, bound with dlsym. One a line, kept out
 * of clang-format, whose layout of this list changed on every pass. */
/* clang-format off */
#define FFI_FUNCTIONS(X) \
  X(rdmadl_load) \
  X(rdmadl_reason) \
  X(rdmadl_symbol_status) \
  X(ibv_get_device_list) \
  X(ibv_free_device_list) \
  X(ibv_get_device_name) \
  X(ibv_open_device) \
  X(ibv_close_device) \
  X(ibv_query_port) \
  X(ibv_query_gid) \
  X(ibv_alloc_pd) \
  X(ibv_dealloc_pd) \
  X(ibv_reg_mr) \
  X(ibv_dereg_mr) \
  X(ibv_create_cq) \
  X(ibv_destroy_cq) \
  X(ibv_create_qp) \
  X(ibv_destroy_qp) \
  X(ibv_modify_qp) \
  X(ibv_post_send) \
  X(ibv_post_recv) \
  X(ibv_poll_cq) \
  X(ibv_create_cq_ex) \
  X(ibv_cq_ex_to_cq) \
  X(ibv_start_poll) \
  X(ibv_next_poll) \
  X(ibv_end_poll) \
  X(ibv_wc_read_opcode) \
  X(ibv_wc_read_byte_len) \
  X(ibv_wc_read_qp_num) \
  X(ibv_create_qp_ex) \
  X(ibv_qp_to_qp_ex) \
  X(ibv_wr_start) \
  X(ibv_wr_rdma_write) \
  X(ibv_wr_send) \
  X(ibv_wr_set_sge) \
  X(ibv_wr_complete) \
  X(ibv_wc_status_str)
/* clang-format on */

#define FFI_POINTER(name) static __typeof__(&name) f_##name;
FFI_FUNCTIONS(FFI_POINTER)

enum { BUF = 65536, MSG = 1500, TIMEOUT_MS = 5000, PORT = 1 };
static const int access_flags =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

static int failures, checks;

static bool check(const char *name, bool ok, const char *detail) {
  printf("RDMADL-CHECK %s %s\n", name, ok ? "PASS" : "FAIL");
  fflush(stdout);
  checks++;
  if (!ok) {
    failures++;
    fprintf(stderr, "ffi_ops: %s: %s\n", name, detail);
  }
  return ok;
}

static void unsupported(const char *name, const char *layer, const char *why) {
  printf("RDMADL-CHECK %s UNSUPPORTED\nRDMADL-WHY %s %s\n", name, name, layer);
  fflush(stdout);
  checks++;
  fprintf(stderr, "ffi_ops: %s unsupported (%s): %s\n", name, layer, why);
}

/* Byte comparison for check NAME; RDMADL_VM_BREAK=NAME flips one expected byte. */
static bool same(const char *name, const uint8_t *got, const uint8_t *want, size_t len) {
  const char *brk = getenv("RDMADL_VM_BREAK");
  bool flip = brk && strcmp(brk, name) == 0;
  for (size_t i = 0; i < len; i++)
    if (got[i] != (uint8_t)(want[i] ^ (flip && i == 0 ? 1 : 0)))
      return false;
  return true;
}

static void fill(uint8_t *p, size_t len, unsigned seed) {
  for (size_t i = 0; i < len; i++)
    p[i] = (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Binds every function; false (with the names printed) when one is missing. */
static bool bind_all(void) {
  const char *path = getenv("RDMADL_FFI_LIB");
  if (!path)
    path = "librdmadl-ffi.so.0";
  void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "ffi_ops: dlopen %s: %s\n", path, dlerror());
    return false;
  }
  bool ok = true;
#define FFI_BIND(name)                                                                             \
  if (!(f_##name = (__typeof__(&name))dlsym(lib, #name))) {                                        \
    fprintf(stderr, "ffi_ops: dlsym %s: %s\n", #name, dlerror());                                  \
    ok = false;                                                                                    \
  }
  FFI_FUNCTIONS(FFI_BIND)
  return ok;
}

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static uint8_t *abuf, *bbuf;
static struct ibv_mr *amr, *bmr;
static struct ibv_cq *acq, *bcq;
static struct ibv_cq_ex *bcqx;     /* b's CQ when the provider has extended CQs */
static struct ibv_qp *aqp, *bqp;   /* classic pair: ibv_post_send / ibv_post_recv */
static struct ibv_qp *wqp, *wbqp;  /* WR API pair: wqp from ibv_create_qp_ex */
static struct ibv_cq *wacq, *wbcq; /* and its own CQs */
static bool qp_ex_refused;         /* ibv_create_qp_ex with send ops: EOPNOTSUPP */
static struct ibv_port_attr port_attr;
static union ibv_gid gid;
static int gid_index = 1;

static int to_rts(struct ibv_qp *qp, uint32_t remote_qpn) {
  struct ibv_qp_attr a;
  int ret = f_ibv_modify_qp(qp, &a, t_rc_init_attr(&a, PORT, access_flags));
  if (ret)
    return ret;
  ret = f_ibv_modify_qp(
      qp, &a, t_rc_rtr_attr(&a, port_attr.active_mtu, remote_qpn, 1, PORT, &gid, gid_index));
  if (ret)
    return ret;
  return f_ibv_modify_qp(qp, &a, t_rc_rts_attr(&a, 1));
}

/* N completions from a classic CQ within the timeout, all successful. */
static bool poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n) {
  int got = 0;
  long end = now_ms() + TIMEOUT_MS;
  while (got < n && now_ms() < end) {
    int r = f_ibv_poll_cq(cq, n - got, wc + got);
    if (r < 0)
      return false;
    got += r;
  }
  for (int i = 0; i < got; i++)
    if (wc[i].status != IBV_WC_SUCCESS)
      fprintf(stderr, "ffi_ops: completion %llu: %s\n", (unsigned long long)wc[i].wr_id,
              f_ibv_wc_status_str(wc[i].status));
  for (int i = 0; i < got; i++)
    if (wc[i].status != IBV_WC_SUCCESS)
      return false;
  return got == n;
}

static int post_recv_b(struct ibv_qp *qp, uint64_t id, size_t off, size_t len) {
  struct ibv_sge sge = {.addr = (uintptr_t)bbuf + off, .length = (uint32_t)len, .lkey = bmr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
  return f_ibv_post_recv(qp, &wr, &bad);
}

static int post_a(uint64_t id, enum ibv_wr_opcode op, size_t off, uint64_t remote, uint32_t rkey) {
  struct ibv_sge sge = {.addr = (uintptr_t)abuf + off, .length = MSG, .lkey = amr->lkey};
  struct ibv_send_wr wr = {.wr_id = id,
                           .sg_list = &sge,
                           .num_sge = 1,
                           .opcode = op,
                           .send_flags = IBV_SEND_SIGNALED},
                     *bad;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return f_ibv_post_send(aqp, &wr, &bad);
}

/* One receive completion of b's side (QP), through the extended poll API when
 * b's CQ is extended (exactly one completion: the next poll must say ENOENT). */
static bool recv_one(struct ibv_qp *qp, uint64_t *id, uint32_t *len) {
  if (!bcqx) {
    struct ibv_wc wc;
    if (!poll_n(bcq, &wc, 1) || wc.opcode != IBV_WC_RECV)
      return false;
    *id = wc.wr_id;
    *len = wc.byte_len;
    return true;
  }
  struct ibv_poll_cq_attr pa = {0};
  long end = now_ms() + TIMEOUT_MS;
  int ret;
  while ((ret = f_ibv_start_poll(bcqx, &pa)) == ENOENT && now_ms() < end)
    ;
  if (ret) {
    fprintf(stderr, "ffi_ops: ibv_start_poll: %d\n", ret);
    return false;
  }
  bool ok = bcqx->status == IBV_WC_SUCCESS && f_ibv_wc_read_opcode(bcqx) == IBV_WC_RECV &&
            f_ibv_wc_read_qp_num(bcqx) == qp->qp_num;
  *id = bcqx->wr_id;
  *len = f_ibv_wc_read_byte_len(bcqx);
  ret = f_ibv_next_poll(bcqx);
  f_ibv_end_poll(bcqx);
  return ok && ret == ENOENT;
}

static const char *setup(void) {
  int n = 0;
  struct ibv_device **list = f_ibv_get_device_list(&n);
  const char *want = getenv("RDMADL_TEST_DEVICE");
  for (int i = 0; list && i < n && !ctx; i++)
    if (!want || strcmp(f_ibv_get_device_name(list[i]), want) == 0)
      ctx = f_ibv_open_device(list[i]);
  if (list)
    f_ibv_free_device_list(list);
  if (!ctx)
    return "no device opened";
  const char *g = getenv("RDMADL_TEST_GID_INDEX");
  if (g)
    gid_index = atoi(g);
  if (f_ibv_query_port(ctx, PORT, &port_attr) || f_ibv_query_gid(ctx, PORT, gid_index, &gid))
    return "ibv_query_port / ibv_query_gid failed";
  pd = f_ibv_alloc_pd(ctx);
  abuf = aligned_alloc(4096, BUF);
  bbuf = aligned_alloc(4096, BUF);
  if (!pd || !abuf || !bbuf)
    return "ibv_alloc_pd / memory";
  memset(abuf, 0, BUF);
  memset(bbuf, 0, BUF);
  amr = f_ibv_reg_mr(pd, abuf, BUF, access_flags);
  bmr = f_ibv_reg_mr(pd, bbuf, BUF, access_flags);
  acq = f_ibv_create_cq(ctx, 16, NULL, NULL, 0);
  if (!amr || !bmr || !acq)
    return "ibv_reg_mr / ibv_create_cq failed";
  struct ibv_cq_init_attr_ex ca = {.cqe = 16,
                                   .wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM};
  errno = 0;
  bcqx = f_ibv_create_cq_ex(ctx, &ca);
  if (bcqx) {
    bcq = f_ibv_cq_ex_to_cq(bcqx);
  } else {
    if (errno == EOPNOTSUPP)
      unsupported("feature.ffi_cq_ex", "device", "ibv_create_cq_ex: EOPNOTSUPP");
    else
      check("feature.ffi_cq_ex", false, strerror(errno));
    bcq = f_ibv_create_cq(ctx, 16, NULL, NULL, 0);
    if (!bcq)
      return "ibv_create_cq failed";
  }
  /* The WR API on a QP of its own: rxe of rdma-core 44.0 fails a mix of
   * ibv_post_send and the WR API on one QP, in either order. */
  wacq = f_ibv_create_cq(ctx, 16, NULL, NULL, 0);
  wbcq = f_ibv_create_cq(ctx, 16, NULL, NULL, 0);
  if (!wacq || !wbcq)
    return "ibv_create_cq failed";
  struct ibv_qp_init_attr_ex qa = {
      .send_cq = wacq,
      .recv_cq = wacq,
      .qp_type = IBV_QPT_RC,
      .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
      .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
      .pd = pd,
      .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND};
  errno = 0;
  wqp = f_ibv_create_qp_ex(ctx, &qa);
  if (!wqp && errno != EOPNOTSUPP)
    return "ibv_create_qp_ex failed";
  qp_ex_refused = wqp == NULL;
  struct ibv_qp_init_attr qc = {
      .send_cq = acq, .recv_cq = acq, .qp_type = IBV_QPT_RC, .cap = qa.cap};
  aqp = f_ibv_create_qp(pd, &qc);
  struct ibv_qp_init_attr qb = {
      .send_cq = bcq, .recv_cq = bcq, .qp_type = IBV_QPT_RC, .cap = qa.cap};
  bqp = f_ibv_create_qp(pd, &qb);
  struct ibv_qp_init_attr qwb = {
      .send_cq = wbcq, .recv_cq = wbcq, .qp_type = IBV_QPT_RC, .cap = qa.cap};
  wbqp = wqp ? f_ibv_create_qp(pd, &qwb) : NULL;
  if (!aqp || !bqp || (wqp && !wbqp))
    return "ibv_create_qp failed";
  if (to_rts(aqp, bqp->qp_num) || to_rts(bqp, aqp->qp_num))
    return "ibv_modify_qp to RTS failed";
  if (wqp && (to_rts(wqp, wbqp->qp_num) || to_rts(wbqp, wqp->qp_num)))
    return "ibv_modify_qp to RTS failed (WR API pair)";
  return NULL;
}

static void test_send_recv(void) {
  size_t off = 0;
  fill(abuf + off, MSG, 1);
  struct ibv_wc wc;
  uint64_t id = 0;
  uint32_t len = 0;
  bool ok = post_recv_b(bqp, 11, off, MSG) == 0 && post_a(1, IBV_WR_SEND, off, 0, 0) == 0 &&
            poll_n(acq, &wc, 1) && wc.opcode == IBV_WC_SEND && recv_one(bqp, &id, &len) &&
            id == 11 && len == MSG;
  check("ffi.rc.send_recv", ok && same("ffi.rc.send_recv", bbuf + off, abuf + off, MSG),
        "send/receive did not complete or the bytes differ");
  if (bcqx)
    check("feature.ffi_cq_ex", ok, "extended CQ poll of the receive");
}

static void test_write_read(void) {
  size_t off = 8192;
  fill(abuf + off, MSG, 2);
  struct ibv_wc wc;
  bool ok = post_a(2, IBV_WR_RDMA_WRITE, off, (uintptr_t)bbuf + off, bmr->rkey) == 0 &&
            poll_n(acq, &wc, 1) && wc.opcode == IBV_WC_RDMA_WRITE && wc.wr_id == 2;
  check("ffi.rc.write", ok && same("ffi.rc.write", bbuf + off, abuf + off, MSG),
        "RDMA write did not complete or land");
  size_t roff = 16384;
  fill(bbuf + roff, MSG, 3);
  ok = post_a(3, IBV_WR_RDMA_READ, roff, (uintptr_t)bbuf + roff, bmr->rkey) == 0 &&
       poll_n(acq, &wc, 1) && wc.opcode == IBV_WC_RDMA_READ && wc.wr_id == 3;
  check("ffi.rc.read", ok && same("ffi.rc.read", abuf + roff, bbuf + roff, MSG),
        "RDMA read did not complete or the bytes differ");
}

static void test_wr_api(void) {
  if (qp_ex_refused) {
    if (f_rdmadl_symbol_status("ibv_qp_to_qp_ex", NULL) == 1)
      unsupported("feature.ffi_wr_api", "device",
                  "ibv_create_qp_ex with send_ops_flags: EOPNOTSUPP from the provider");
    else
      check("feature.ffi_wr_api", false, "ibv_create_qp_ex refused and ibv_qp_to_qp_ex unbound");
    return;
  }
  struct ibv_qp_ex *qpx = f_ibv_qp_to_qp_ex(wqp);
  if (!qpx) {
    check("feature.ffi_wr_api", false, "ibv_qp_to_qp_ex returned NULL");
    return;
  }
  size_t woff = 24576, soff = 32768;
  fill(abuf + woff, MSG, 4);
  fill(abuf + soff, MSG, 5);
  bool ok = post_recv_b(wbqp, 12, soff, MSG) == 0;
  f_ibv_wr_start(qpx);
  qpx->wr_id = 4;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  f_ibv_wr_rdma_write(qpx, bmr->rkey, (uintptr_t)bbuf + woff);
  f_ibv_wr_set_sge(qpx, amr->lkey, (uintptr_t)abuf + woff, MSG);
  qpx->wr_id = 5;
  qpx->wr_flags = IBV_SEND_SIGNALED;
  f_ibv_wr_send(qpx);
  f_ibv_wr_set_sge(qpx, amr->lkey, (uintptr_t)abuf + soff, MSG);
  int complete = f_ibv_wr_complete(qpx);
  struct ibv_wc wc[2];
  memset(wc, 0, sizeof wc);
  uint64_t id = 0;
  uint32_t len = 0;
  bool polled = poll_n(wacq, wc, 2);
  struct ibv_wc rwc;
  memset(&rwc, 0, sizeof rwc);
  bool received = poll_n(wbcq, &rwc, 1) && rwc.opcode == IBV_WC_RECV;
  id = rwc.wr_id;
  len = rwc.byte_len;
  ok = ok && complete == 0 && polled && wc[0].wr_id == 4 && wc[0].opcode == IBV_WC_RDMA_WRITE &&
       wc[1].wr_id == 5 && wc[1].opcode == IBV_WC_SEND && received && id == 12 && len == MSG;
  bool landed = same("feature.ffi_wr_api", bbuf + woff, abuf + woff, MSG) &&
                memcmp(bbuf + soff, abuf + soff, MSG) == 0;
  char why[256];
  snprintf(why, sizeof why,
           "ibv_wr_complete %d; send CQ %s: wr_id %llu/%llu opcode %d/%d; receive %s: wr_id %llu "
           "len %u; bytes %s",
           complete, polled ? "2 completions" : "timeout/error", (unsigned long long)wc[0].wr_id,
           (unsigned long long)wc[1].wr_id, wc[0].opcode, wc[1].opcode, received ? "ok" : "failed",
           (unsigned long long)id, len, landed ? "equal" : "differ");
  check("feature.ffi_wr_api", ok && landed, why);
}

static void test_query_port(void) {
  /* The macro's semantics: the whole struct, link_layer included. */
  check("ffi.query_port",
        port_attr.state == IBV_PORT_ACTIVE && port_attr.link_layer == IBV_LINK_LAYER_ETHERNET &&
            port_attr.gid_tbl_len > gid_index,
        "port not active, or link_layer / gid_tbl_len not filled in");
}

static int absent(void) {
  int n = 5;
  errno = 0;
  struct ibv_device **list = f_ibv_get_device_list(&n);
  int err = errno;
  const char *reason = f_rdmadl_reason();
  printf("ffi_ops: no RDMA stack: %s\n", reason);
  check("ffi.absent",
        list == NULL && n == 0 && err == EOPNOTSUPP && f_rdmadl_load() == EOPNOTSUPP &&
            reason[0] != '\0',
        "ibv_get_device_list did not fail cleanly");
  return failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (!bind_all()) {
    check("ffi.load", false, "librdmadl-ffi or one of its functions missing");
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], "--absent") == 0)
    return absent();
  check("ffi.load", true, "");
  const char *err = setup();
  if (!check("ffi.setup", err == NULL, err ? err : ""))
    return 1;
  test_query_port();
  test_send_recv();
  test_write_read();
  test_wr_api();
  if (wqp) {
    f_ibv_destroy_qp(wbqp);
    f_ibv_destroy_qp(wqp);
  }
  f_ibv_destroy_qp(bqp);
  f_ibv_destroy_qp(aqp);
  f_ibv_destroy_cq(wbcq);
  f_ibv_destroy_cq(wacq);
  f_ibv_destroy_cq(bcq);
  f_ibv_destroy_cq(acq);
  f_ibv_dereg_mr(bmr);
  f_ibv_dereg_mr(amr);
  f_ibv_dealloc_pd(pd);
  f_ibv_close_device(ctx);
  printf("ffi_ops: %d checks, %d failed\n", checks, failures);
  return failures ? 1 : 0;
}
