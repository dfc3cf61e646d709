/* SPDX-License-Identifier: MIT */
/*
 * dv_helpers_test LIB - the direct-verbs and umad helpers librdmadl-ffi
 * exports (ffi/inlines.def) compute what the bundled headers' static inline
 * definitions compute. Each exported function is resolved with dlsym from LIB
 * and called beside the header's inline (compiled into this program) on the
 * same arguments: the layout setters (mlx5dv_set_ctrl_seg, ...) must write the
 * same bytes into a buffer, and change it; the getters must return the same
 * values; the function-pointer wrappers (mlx5dv_wr_*, efadv_*) must reach the
 * object's op with the arguments unchanged; those that call into libmlx5 must
 * reach the loader's stub (run with RDMADL_DISABLE=1). The OMIT entries must
 * not be exported, and on x86 the SSE variants the library leaves out
 * (mlx5dv_x86_set_*_seg, compiled here with -mssse3 in dv_helpers_x86.c) must
 * fill what the exported generic ones fill.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/efadv.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/umad.h>
#include <infiniband/umad_sa.h>
#include <infiniband/umad_sa_mcm.h>
#include <infiniband/umad_types.h>

#include "dv_helpers_x86.h"
#include "ffi_check.h"

/* The exported function NAME, typed as the header declares the inline. */
#define FFI(name) ((__typeof__(&name))sym(#name))

static void dump(const char *label, const unsigned char *p, size_t n) {
  printf("  %s:", label);
  for (size_t i = 0; i < n; i++)
    printf(" %02x", p[i]);
  printf("\n");
}

/* A setter NAME(TYPE *seg, ...): the header's inline and the exported
 * function, each on a SIZE-byte buffer filled with 0xa5, must leave the same
 * bytes, and not the untouched ones. */
#define SETTER(name, type, size, ...)                                                              \
  do {                                                                                             \
    _Alignas(16) unsigned char want[size], got[size], before[size];                                \
    memset(want, 0xa5, size);                                                                      \
    memset(got, 0xa5, size);                                                                       \
    memset(before, 0xa5, size);                                                                    \
    __typeof__(&name) fn = FFI(name);                                                              \
    if (fn) {                                                                                      \
      name((type *)(void *)want, __VA_ARGS__);                                                     \
      fn((type *)(void *)got, __VA_ARGS__);                                                        \
      int ok_ = memcmp(want, got, size) == 0 && memcmp(want, before, size) != 0;                   \
      check(#name ": writes the header's bytes", ok_);                                             \
      if (!ok_) {                                                                                  \
        dump("header", want, size);                                                                \
        dump("ffi   ", got, size);                                                                 \
      }                                                                                            \
    }                                                                                              \
  } while (0)

static void test_mlx5_segments(void) {
  uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  uint8_t gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  uint8_t hdr[18] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x11, 0x22,
                     0x33, 0x44, 0x55, 0x08, 0x00, 0x45, 0x00, 0x00, 0x54};
  SETTER(mlx5dv_set_ctrl_seg, struct mlx5_wqe_ctrl_seg, sizeof(struct mlx5_wqe_ctrl_seg), 0x1234,
         0x0a, 0x01, 0xabcdef, 0x08, 3, 0x5a, 0xdeadbeef);
  SETTER(mlx5dv_set_data_seg, struct mlx5_wqe_data_seg, sizeof(struct mlx5_wqe_data_seg), 0x1000,
         0x42, (uintptr_t)0x1122334455667788ull);
  SETTER(mlx5dv_set_dgram_seg, struct mlx5_wqe_datagram_seg, sizeof(struct mlx5_wqe_datagram_seg),
         0x8000000011112222ull, 0x123456, 1, 0x35, 0x80, 0x1234, mac, 0x20, 64, 0x000abcde, gid);
  /* The inline header runs past the segment into the rest of the WQE. */
  SETTER(mlx5dv_set_eth_seg, struct mlx5_wqe_eth_seg, 64, 0xc0, 1448, sizeof hdr, hdr);

  /* A known answer: big-endian opmod|pi|opcode and qpn|ds. */
  _Alignas(16) unsigned char seg[sizeof(struct mlx5_wqe_ctrl_seg)] = {0};
  __typeof__(&mlx5dv_set_ctrl_seg) set_ctrl = FFI(mlx5dv_set_ctrl_seg);
  if (set_ctrl) {
    set_ctrl((struct mlx5_wqe_ctrl_seg *)(void *)seg, 0x1234, 0x0a, 0x01, 0xabcdef, 0x08, 3, 0x5a,
             0xdeadbeef);
    static const unsigned char head[8] = {0x01, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x03};
    check("mlx5dv_set_ctrl_seg: opmod_idx_opcode and qpn_ds big-endian", !memcmp(seg, head, 8));
  }
}

static void test_mlx5_cqe(void) {
  __typeof__(&mlx5dv_get_cqe_owner) owner = FFI(mlx5dv_get_cqe_owner);
  __typeof__(&mlx5dv_get_cqe_se) se = FFI(mlx5dv_get_cqe_se);
  __typeof__(&mlx5dv_get_cqe_format) format = FFI(mlx5dv_get_cqe_format);
  __typeof__(&mlx5dv_get_cqe_opcode) opcode = FFI(mlx5dv_get_cqe_opcode);
  if (!owner || !se || !format || !opcode)
    return;
  struct mlx5_cqe64 cqe;
  memset(&cqe, 0, sizeof cqe);
  int same = 1;
  for (unsigned v = 0; v < 256; v++) {
    cqe.op_own = (uint8_t)v;
    same &= owner(&cqe) == mlx5dv_get_cqe_owner(&cqe) && se(&cqe) == mlx5dv_get_cqe_se(&cqe) &&
            format(&cqe) == mlx5dv_get_cqe_format(&cqe) &&
            opcode(&cqe) == mlx5dv_get_cqe_opcode(&cqe);
  }
  cqe.op_own = 0xd3;
  check("mlx5dv_get_cqe_*: the header's values for every op_own",
        same && opcode(&cqe) == 0xd && format(&cqe) == 0 && se(&cqe) == 1 && owner(&cqe) == 1);
  SETTER(mlx5dv_set_cqe_owner, struct mlx5_cqe64, sizeof(struct mlx5_cqe64), 0);
}

static void test_mlx4(void) {
  uint8_t mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};
  uint8_t gid[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
  SETTER(mlx4dv_set_ctrl_seg, struct mlx4_wqe_ctrl_seg, sizeof(struct mlx4_wqe_ctrl_seg),
         0x8000000a, 0x43, 0x0c000000, 0xdeadbeef);
  SETTER(mlx4dv_set_data_seg, struct mlx4_wqe_data_seg, sizeof(struct mlx4_wqe_data_seg), 0x1000,
         0x42, (uintptr_t)0x1122334455667788ull);
  SETTER(mlx4dv_set_dgram_seg, struct mlx4_wqe_datagram_seg, sizeof(struct mlx4_wqe_datagram_seg),
         0x01000123, 0x80, 0x1234, 3, 0x0a, 64, 0x30012345, gid, 0x123456, 0x80010000, 0x0064, mac);
  SETTER(mlx4dv_set_cqe_owner, struct mlx4_cqe, sizeof(struct mlx4_cqe), 1);
  __typeof__(&mlx4dv_get_cqe_owner) owner = FFI(mlx4dv_get_cqe_owner);
  __typeof__(&mlx4dv_get_cqe_opcode) opcode = FFI(mlx4dv_get_cqe_opcode);
  if (!owner || !opcode)
    return;
  struct mlx4_cqe cqe;
  memset(&cqe, 0, sizeof cqe);
  int same = 1;
  for (unsigned v = 0; v < 256; v++) {
    cqe.owner_sr_opcode = (uint8_t)v;
    same &=
        owner(&cqe) == mlx4dv_get_cqe_owner(&cqe) && opcode(&cqe) == mlx4dv_get_cqe_opcode(&cqe);
  }
  check("mlx4dv_get_cqe_*: the header's values for every owner_sr_opcode", same);
}

static void test_devx(void) {
  __typeof__(&_devx_set) set = FFI(_devx_set);
  __typeof__(&_devx_get) get = FFI(_devx_get);
  __typeof__(&_devx_set64) set64 = FFI(_devx_set64);
  __typeof__(&_devx_get64) get64 = FFI(_devx_get64);
  if (!set || !get || !set64 || !get64)
    return;
  _Alignas(8) unsigned char want[64], got[64];
  memset(want, 0x5a, sizeof want);
  memset(got, 0x5a, sizeof got);
  int same = 1;
  /* Fields that stay inside one big-endian dword, as DEVX_SET's are. */
  static const struct {
    size_t off, sz;
    uint32_t v;
  } f[] = {{0, 1, 1}, {3, 5, 0x15}, {40, 24, 0xabcdef}, {96, 32, 0xdeadbeef}, {205, 3, 6}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    _devx_set(want, f[i].v, f[i].off, f[i].sz);
    set(got, f[i].v, f[i].off, f[i].sz);
    same &= get(got, f[i].off, f[i].sz) == _devx_get(want, f[i].off, f[i].sz) &&
            get(got, f[i].off, f[i].sz) == f[i].v;
  }
  _devx_set64(want, 0x0102030405060708ull, 256);
  set64(got, 0x0102030405060708ull, 256);
  same &= get64(got, 256) == 0x0102030405060708ull && get64(got, 256) == _devx_get64(want, 256);
  check("_devx_set/_devx_get/_devx_set64/_devx_get64: the header's bytes and values",
        same && !memcmp(want, got, sizeof want));
}

static void test_ts_to_ns(void) {
  __typeof__(&mlx5dv_ts_to_ns) ts_to_ns = FFI(mlx5dv_ts_to_ns);
  if (!ts_to_ns)
    return;
  struct mlx5dv_clock_info ci = {.nsec = 1700000000000000000ull,
                                 .last_cycles = 0x123456789aull,
                                 .frac = 0x1234,
                                 .mult = 0x9abcdef0u,
                                 .shift = 31,
                                 .mask = 0xffffffffffffull};
  int same = 1;
  static const uint64_t ts[] = {0x123456789aull, 0x1234567a00ull, 0x12345678ull, 0xffffffffffffull};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    same &= ts_to_ns(&ci, ts[i]) == mlx5dv_ts_to_ns(&ci, ts[i]);
  check("mlx5dv_ts_to_ns: the header's values, before and after last_cycles", same);
}

/* Function-pointer wrappers: an object whose ops record what they receive. */
static struct {
  const void *obj, *ptr;
  uint64_t a, b, c;
} seen;

static void rec_dc_addr(struct mlx5dv_qp_ex *mqp, struct ibv_ah *ah, uint32_t dctn, uint64_t key) {
  seen.obj = mqp, seen.ptr = ah, seen.a = dctn, seen.b = key;
}
static void rec_memcpy(struct mlx5dv_qp_ex *mqp, uint32_t dest_lkey, uint64_t dest_addr,
                       uint32_t src_lkey, uint64_t src_addr, size_t length) {
  seen.obj = mqp, seen.a = dest_lkey ^ src_lkey, seen.b = dest_addr ^ src_addr, seen.c = length;
}
static void rec_hints(struct efadv_qp *qp, uint32_t hints) {
  seen.obj = qp, seen.a = hints;
}
static int rec_sgid(struct efadv_cq *cq, union ibv_gid *sgid) {
  seen.obj = cq, seen.ptr = sgid;
  return -7;
}
static bool rec_unsolicited(struct efadv_cq *cq) {
  seen.obj = cq;
  return true;
}

static void test_op_wrappers(void) {
  struct mlx5dv_qp_ex mqp;
  memset(&mqp, 0, sizeof mqp);
  mqp.wr_set_dc_addr = rec_dc_addr;
  mqp.wr_memcpy = rec_memcpy;
  __typeof__(&mlx5dv_wr_set_dc_addr) dc_addr = FFI(mlx5dv_wr_set_dc_addr);
  __typeof__(&mlx5dv_wr_memcpy) wr_memcpy = FFI(mlx5dv_wr_memcpy);
  if (dc_addr) {
    memset(&seen, 0, sizeof seen);
    dc_addr(&mqp, (struct ibv_ah *)&seen, 0x123456, 0xfedcba9876543210ull);
    check("mlx5dv_wr_set_dc_addr: the qp's op, arguments unchanged",
          seen.obj == &mqp && seen.ptr == &seen && seen.a == 0x123456 &&
              seen.b == 0xfedcba9876543210ull);
  }
  if (wr_memcpy) {
    memset(&seen, 0, sizeof seen);
    wr_memcpy(&mqp, 0x11, 0x1000, 0x22, 0x3000, 4096);
    check("mlx5dv_wr_memcpy: the qp's op, arguments unchanged",
          seen.obj == &mqp && seen.a == (0x11 ^ 0x22) && seen.b == (0x1000 ^ 0x3000) &&
              seen.c == 4096);
  }
  struct efadv_qp eqp = {.comp_mask = 0, .wr_set_processing_hints = rec_hints};
  struct efadv_cq ecq = {
      .comp_mask = 0, .wc_read_sgid = rec_sgid, .wc_is_unsolicited = rec_unsolicited};
  __typeof__(&efadv_wr_set_processing_hints) hints = FFI(efadv_wr_set_processing_hints);
  __typeof__(&efadv_wc_read_sgid) sgid = FFI(efadv_wc_read_sgid);
  __typeof__(&efadv_wc_is_unsolicited) unsolicited = FFI(efadv_wc_is_unsolicited);
  if (hints && sgid && unsolicited) {
    union ibv_gid gid;
    memset(&seen, 0, sizeof seen);
    hints(&eqp, 0x5);
    int ok = seen.obj == &eqp && seen.a == 0x5;
    ok &= sgid(&ecq, &gid) == -7 && seen.obj == &ecq && seen.ptr == &gid;
    seen.obj = NULL;
    ok &= unsolicited(&ecq) && seen.obj == &ecq;
    check("efadv_wr_set_processing_hints/efadv_wc_read_sgid/efadv_wc_is_unsolicited: the ops, "
          "arguments and results unchanged",
          ok);
  }
}

static void test_umad(void) {
  __typeof__(&umad_sa_get_rate_mtu_or_life) get_rml = FFI(umad_sa_get_rate_mtu_or_life);
  __typeof__(&umad_sa_set_rate_mtu_or_life) set_rml = FFI(umad_sa_set_rate_mtu_or_life);
  __typeof__(&umad_sa_mcm_set_sl_flow_hop) set_sfh = FFI(umad_sa_mcm_set_sl_flow_hop);
  __typeof__(&umad_sa_mcm_get_sl_flow_hop) get_sfh = FFI(umad_sa_mcm_get_sl_flow_hop);
  __typeof__(&umad_sa_mcm_set_scope_state) set_ss = FFI(umad_sa_mcm_set_scope_state);
  __typeof__(&umad_sa_mcm_get_scope_state) get_ss = FFI(umad_sa_mcm_get_scope_state);
  __typeof__(&umad_sa_mcm_get_proxy_join) proxy_join = FFI(umad_sa_mcm_get_proxy_join);
  __typeof__(&umad_class_cap_mask2) cap_mask2 = FFI(umad_class_cap_mask2);
  __typeof__(&umad_class_resp_time) resp_time = FFI(umad_class_resp_time);
  __typeof__(&umad_alloc) alloc = FFI(umad_alloc);
  __typeof__(&umad_free) free_ = FFI(umad_free);
  if (!get_rml || !set_rml || !set_sfh || !get_sfh || !set_ss || !get_ss || !proxy_join ||
      !cap_mask2 || !resp_time || !alloc || !free_)
    return;
  int same = 1;
  for (unsigned v = 0; v < 256; v++) {
    same &= get_rml((uint8_t)v) == umad_sa_get_rate_mtu_or_life((uint8_t)v);
    same &= set_rml((uint8_t)(v >> 4), (uint8_t)v) ==
            umad_sa_set_rate_mtu_or_life((uint8_t)(v >> 4), (uint8_t)v);
    same &= set_ss((uint8_t)(v >> 4), (uint8_t)(v & 0xf)) ==
            umad_sa_mcm_set_scope_state((uint8_t)(v >> 4), (uint8_t)(v & 0xf));
    uint8_t s1 = 0, s2 = 0, t1 = 0, t2 = 0;
    get_ss((uint8_t)v, &s1, &t1);
    umad_sa_mcm_get_scope_state((uint8_t)v, &s2, &t2);
    same &= s1 == s2 && t1 == t2;
  }
  /* An SL below 8: the header shifts it as an int (sl << 28), which is
   * undefined for 8..15 (UBSan stops there). */
  __be32 sfh = set_sfh(0x5, 0xabcde, 64);
  same &= sfh == umad_sa_mcm_set_sl_flow_hop(0x5, 0xabcde, 64);
  uint8_t sl = 0, hop = 0;
  uint32_t flow = 0;
  get_sfh(sfh, &sl, &flow, &hop);
  same &= sl == 0x5 && flow == 0xabcde && hop == 64;
  check("umad_sa_*, umad_sa_mcm_*: the header's values", same);

  SETTER(umad_sa_mcm_set_join_state, struct umad_sa_mcmember_record,
         sizeof(struct umad_sa_mcmember_record), 0x2);
  struct umad_sa_mcmember_record rec;
  memset(&rec, 0, sizeof rec);
  rec.proxy_join = 0x80;
  struct umad_class_port_info cpi;
  memset(&cpi, 0, sizeof cpi);
  cpi.cap_mask2_resp_time = htobe32(0x12345u << 5 | 0x13);
  check("umad_sa_mcm_get_proxy_join, umad_class_cap_mask2, umad_class_resp_time: the header's "
        "values",
        proxy_join(&rec) == umad_sa_mcm_get_proxy_join(&rec) && proxy_join(&rec) == 1 &&
            cap_mask2(&cpi) == umad_class_cap_mask2(&cpi) && cap_mask2(&cpi) == 0x12345 &&
            resp_time(&cpi) == umad_class_resp_time(&cpi) && resp_time(&cpi) == 0x13);

  unsigned char *p = alloc(3, 100);
  int zero = p != NULL;
  for (size_t i = 0; p && i < 300; i++)
    zero &= p[i] == 0;
  free_(p);
  check("umad_alloc: 3 zeroed buffers of 100 bytes; umad_free releases them", zero);
}

/* The wrappers that call into libmlx5 (mlx5dv_query_port calls
 * _mlx5dv_query_port, ...) reach the loader's stub: run with RDMADL_DISABLE=1,
 * each fails as its man page says, errno EOPNOTSUPP, touching nothing. */
static void test_provider_calls(void) {
  __typeof__(&mlx5dv_query_port) query_port = FFI(mlx5dv_query_port);
  __typeof__(&mlx5dv_mkey_check) mkey_check = FFI(mlx5dv_mkey_check);
  __typeof__(&mlx5dv_get_export_sizes) export_sizes = FFI(mlx5dv_get_export_sizes);
  /* mlx5dv_create_flow is a macro in mlx5dv.h; the exported function has
   * the prototype of the inline it expands to. */
  __typeof__(&_mlx5dv_create_flow) create_flow =
      (__typeof__(&_mlx5dv_create_flow))sym("mlx5dv_create_flow");
  if (!query_port || !mkey_check || !export_sizes || !create_flow)
    return;
  struct mlx5dv_port port, port_before;
  memset(&port, 0xa5, sizeof port);
  port_before = port;
  errno = 0;
  int ret = query_port(NULL, 1, &port);
  check("mlx5dv_query_port without libmlx5: EOPNOTSUPP, the port untouched",
        ret == EOPNOTSUPP && errno == EOPNOTSUPP && !memcmp(&port, &port_before, sizeof port));
  struct mlx5dv_mkey_err err;
  errno = 0;
  ret = mkey_check(NULL, &err);
  check("mlx5dv_mkey_check without libmlx5: EOPNOTSUPP", ret == EOPNOTSUPP && errno == EOPNOTSUPP);
  struct mlx5dv_export_sizes sizes;
  memset(&sizes, 0xa5, sizeof sizes);
  struct mlx5dv_export_sizes untouched = sizes;
  errno = 0;
  export_sizes(&sizes);
  check("mlx5dv_get_export_sizes without libmlx5: does nothing, errno EOPNOTSUPP",
        !memcmp(&sizes, &untouched, sizeof sizes) && errno == EOPNOTSUPP);
  errno = 0;
  struct ibv_flow *flow = create_flow(NULL, NULL, 0, NULL);
  check("mlx5dv_create_flow without libmlx5: NULL, errno EOPNOTSUPP",
        flow == NULL && errno == EOPNOTSUPP);
}

static void test_not_exported(void) {
  static const char *const omitted[] = {"mlx5dv_x86_set_ctrl_seg", "mlx5dv_x86_set_data_seg",
                                        "htonll", "ntohll", "_mlx5dv_create_flow"};
  int none = 1;
  for (size_t i = 0; i < sizeof omitted / sizeof omitted[0]; i++)
    if (dlsym(h, omitted[i])) {
      printf("  exported: %s\n", omitted[i]);
      none = 0;
    }
  check("the OMIT and IMPL entries are not exported", none);
}

static void test_x86_variants(void) {
#if RDMADL_TEST_X86
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("ssse3")) {
    printf("SKIP mlx5dv_x86_set_*_seg: this CPU has no SSSE3\n");
    return;
  }
  __typeof__(&mlx5dv_set_ctrl_seg) set_ctrl = FFI(mlx5dv_set_ctrl_seg);
  __typeof__(&mlx5dv_set_data_seg) set_data = FFI(mlx5dv_set_data_seg);
  if (!set_ctrl || !set_data)
    return;
  /* The SIMD variant also zeroes the reserved bytes: start from zeroes. */
  _Alignas(16) unsigned char a[16] = {0}, b[16] = {0};
  set_ctrl((struct mlx5_wqe_ctrl_seg *)(void *)a, 0x1234, 0x0a, 0x01, 0xabcdef, 0x08, 3, 0x5a,
           0xdeadbeef);
  rdmadl_test_x86_set_ctrl_seg(b, 0x1234, 0x0a, 0x01, 0xabcdef, 0x08, 3, 0x5a, 0xdeadbeef);
  int same = !memcmp(a, b, 16);
  memset(a, 0xa5, 16);
  memset(b, 0x5a, 16);
  set_data((struct mlx5_wqe_data_seg *)(void *)a, 0x1000, 0x42, (uintptr_t)0x1122334455667788ull);
  rdmadl_test_x86_set_data_seg(b, 0x1000, 0x42, (uintptr_t)0x1122334455667788ull);
  same &= !memcmp(a, b, 16);
  check("mlx5dv_x86_set_ctrl_seg/_data_seg (left out) fill what the exported generic ones fill",
        same);
#endif
}

int main(int argc, char **argv) {
  open_library(argc, argv, 1, "dv_helpers_test", "LIBRARY");
  test_mlx5_segments();
  test_mlx5_cqe();
  test_mlx4();
  test_devx();
  test_ts_to_ns();
  test_op_wrappers();
  test_umad();
  test_provider_calls();
  test_not_exported();
  test_x86_variants();
  printf("dv_helpers_test: %d checks, %d failed: %s\n", checks, failures,
         failures ? "DIFFERENT" : "consistent");
  return failures != 0;
}
