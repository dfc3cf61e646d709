/* SPDX-License-Identifier: MIT */
/*
 * dv_umad - the provider direct-verbs libraries (libmlx5, libefa, libhns,
 * libionic, libmlx4, libmana) and libibumad through rdmadl's drop-in, against
 * the same functions of the real libraries called directly: each is bound with
 * dlopen(soname) + dlvsym(name, node), the node being the one
 * rdmadl_symbol_status() names. Both are called with the same arguments on
 * the Soft-RoCE device and their results compared: return value, errno where
 * the man page documents it, and the output structure (umad_ca_t and
 * umad_port_t field by field, their port and P_Key tables included).
 *
 * Where the release has no such library or function (dlvsym finds nothing),
 * rdmadl_symbol_status() must say MISSING and the drop-in must fail the way
 * loader/symbols.def documents (false, NULL, -1, EOPNOTSUPP or -EOPNOTSUPP)
 * with errno EOPNOTSUPP. With --absent (no rdma-core at all) every function
 * takes that path. One line "RDMADL-CHECK dv.NAME|umad.NAME ..." per function.
 *
 * Only functions that are safe on a device of another provider are called:
 * rdma-core checks the device before it looks at provider-private state
 * (mlx5dv_*: is_mlx5_dev, or the dv ops that are NULL for other devices;
 * efadv_*: is_efa_dev; hnsdv_query_device: is_hns_dev; ionic_dv_*:
 * is_ionic_ctx/pd), or the call touches no object at all (mlx4dv_init_obj and
 * manadv_init_obj with no object type). mlx4dv_query_device,
 * mlx5dv_get_clock_info and manadv_set_context_attr read the context as their
 * own provider's without checking, so they are not called.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/efadv.h>
#include <infiniband/hnsdv.h>
#include <infiniband/ionic_dv.h>
#include <infiniband/manadv.h>
#include <infiniband/mlx4dv.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/umad.h>
#include <infiniband/umad_str.h>
#include <infiniband/umad_types.h>
#include <infiniband/verbs.h>
#include <rdmadl/loader.h>

#include "common.h"

typedef void (*any_fn)(void);

/* What each call gets: the Soft-RoCE device and objects on it (all NULL with
 * --absent: only the drop-in's stubs are called then, and they touch nothing). */
struct env {
  struct ibv_device *dev;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_ah *ah;
  const char *ca;
  int port;
};

/* How a function fails (loader/symbols.def's fail column). */
enum conv { ZERO, NULLPTR, M1, ERRNO, NEGERRNO };

/* One outcome, serialised for a byte-for-byte comparison (t_same, which
 * honours RDMADL_VM_BREAK). */
struct rec {
  unsigned char b[16384];
  size_t n;
};

static void put(struct rec *r, const void *p, size_t len) {
  if (r->n + len > sizeof r->b)
    len = sizeof r->b - r->n;
  memcpy(r->b + r->n, p, len);
  r->n += len;
}

static void put_long(struct rec *r, long v) {
  put(r, &v, sizeof v);
}

static void put_str(struct rec *r, const char *s) {
  put(r, s ? s : "(null)", strlen(s ? s : "(null)") + 1);
}

/* --- binding the real function -------------------------------------------- */

enum path { P_COMPARE, P_MISSING, P_BROKEN };

static void *lib_handle(const char *soname) {
  static struct {
    const char *soname;
    void *h;
  } open_libs[16];
  for (size_t i = 0; i < sizeof open_libs / sizeof open_libs[0]; i++) {
    if (open_libs[i].soname && strcmp(open_libs[i].soname, soname) == 0)
      return open_libs[i].h;
    if (!open_libs[i].soname) {
      open_libs[i].soname = soname;
      open_libs[i].h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
      if (!open_libs[i].h)
        fprintf(stderr, "dv_umad: %s: %s\n", soname, dlerror());
      return open_libs[i].h;
    }
  }
  return NULL;
}

/* Binds NAME in SONAME at the node rdmadl names and checks that rdmadl agrees:
 * RESOLVED when the library has it there, MISSING when it has not (with
 * --absent there must be no library at all). */
static enum path resolve(const char *check, const char *soname, const char *name, any_fn *real) {
  const char *node = NULL;
  int st = rdmadl_symbol_status(name, &node);
  void *h = lib_handle(soname);
  void *p = h && node ? dlvsym(h, name, node) : NULL;
  *real = NULL;
  if (p)
    memcpy(real, &p, sizeof p);
  if (t_absent() && h) {
    t_check(check, false, "--absent, but %s loads", soname);
    return P_BROKEN;
  }
  if (p && st == RDMADL_SYMBOL_RESOLVED)
    return P_COMPARE;
  if (!p && st == RDMADL_SYMBOL_MISSING) {
    printf("dv_umad: %s@%s not in %s: checking the drop-in's documented failure\n", name,
           node ? node : "?", h ? soname : "(no library)");
    return P_MISSING;
  }
  t_check(check, false, "%s@%s: %s has it: %s, rdmadl_symbol_status %d", name, node ? node : "?",
          soname, p ? "yes" : "no", st);
  return P_BROKEN;
}

/* --- the generic comparison ----------------------------------------------- */

/* Calls F (the real function or the drop-in's) with E's arguments and OUT (an
 * output buffer of the case's size, prefilled with the same pattern each
 * time); returns its result as a long (pointers: 1 non-NULL, 0 NULL). It may
 * append more of the outcome to R. */
typedef long (*run_fn)(any_fn f, void *out, const struct env *e, struct rec *r);

struct dv_case {
  const char *check;
  const char *soname;
  const char *name;
  enum conv conv;
  any_fn dropin;
  run_fn run;
  size_t out_size; /* compared byte for byte after the call */
};

static long fail_value(enum conv c) {
  switch (c) {
  case ZERO:
  case NULLPTR:
    return 0;
  case M1:
    return -1;
  case ERRNO:
    return EOPNOTSUPP;
  default:
    return -EOPNOTSUPP;
  }
}

/* One call and its outcome: the result, errno where the man page documents it
 * (a failure returned as NULL or -1), the output buffer, anything RUN added. */
static void outcome(const struct dv_case *c, any_fn f, const struct env *e, struct rec *r) {
  static unsigned char out[8192];
  memset(out, 0xa5, sizeof out);
  errno = 0;
  long v = c->run(f, out, e, r);
  int err = errno;
  put_long(r, v);
  if ((c->conv == NULLPTR || c->conv == M1) && v == fail_value(c->conv))
    put_long(r, err);
  put(r, out, c->out_size);
}

static void run_case(const struct dv_case *c, const struct env *e) {
  static struct rec want, got;
  any_fn real;
  want.n = got.n = 0;
  switch (resolve(c->check, c->soname, c->name, &real)) {
  case P_COMPARE:
    outcome(c, real, e, &want);
    outcome(c, c->dropin, e, &got);
    if (got.n != want.n)
      t_check(c->check, false, "%zu bytes of outcome through the drop-in, %zu from %s", got.n,
              want.n, c->soname);
    else
      t_check(c->check, t_same(c->check, got.b, want.b, got.n), "%s: the drop-in differs from %s",
              c->name, c->soname);
    return;
  case P_MISSING: {
    static unsigned char out[8192];
    static struct rec scratch;
    memset(out, 0xa5, sizeof out);
    scratch.n = 0;
    errno = 0;
    long v = c->run(c->dropin, out, e, &scratch);
    long err = errno;
    put_long(&got, v);
    put_long(&got, err);
    put_long(&want, fail_value(c->conv));
    put_long(&want, EOPNOTSUPP);
    t_check(c->check, t_same(c->check, got.b, want.b, got.n),
            "%s without %s: returned %ld, errno %ld; want %ld, errno EOPNOTSUPP", c->name,
            c->soname, v, err, fail_value(c->conv));
    return;
  }
  default:
    return;
  }
}

/* --- the calls ------------------------------------------------------------- */

/* run_<ID>: calls FN (the function NAME's type) with EXPR. */
#define RUN(id, name, expr)                                                                        \
  static long run_##id(any_fn f_, void *out, const struct env *e, struct rec *r) {                 \
    __typeof__(&name) fn = (__typeof__(&name))f_;                                                  \
    (void)out;                                                                                     \
    (void)e;                                                                                       \
    (void)r;                                                                                       \
    return (long)(expr);                                                                           \
  }

/* Provider direct verbs: each checks the device type first. */
RUN(mlx5dv_is_supported, mlx5dv_is_supported, fn(e->dev))
RUN(mlx5dv_open_device, mlx5dv_open_device, ({
      struct mlx5dv_context_attr a = {0};
      struct ibv_context *c = fn(e->dev, &a);
      if (c)
        ibv_close_device(c);
      c != NULL;
    }))
RUN(mlx5dv_query_device, mlx5dv_query_device, ({
      ((struct mlx5dv_context *)out)->comp_mask = 0;
      fn(e->ctx, out);
    }))
RUN(mlx5dv_set_context_attr, mlx5dv_set_context_attr, ({
      struct mlx5dv_ctx_allocators al = {0};
      fn(e->ctx, MLX5DV_CTX_ATTR_BUF_ALLOCATORS, &al);
    }))
RUN(efadv_query_device, efadv_query_device, fn(e->ctx, out, sizeof(struct efadv_device_attr)))
RUN(efadv_create_qp_ex, efadv_create_qp_ex, ({
      struct ibv_qp_init_attr_ex a = {
          .qp_type = IBV_QPT_DRIVER, .pd = e->pd, .comp_mask = IBV_QP_INIT_ATTR_PD};
      struct efadv_qp_init_attr ea = {.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD};
      struct ibv_qp *q = fn(e->ctx, &a, &ea, sizeof ea);
      if (q)
        ibv_destroy_qp(q);
      q != NULL;
    }))
RUN(efadv_create_driver_qp, efadv_create_driver_qp, ({
      struct ibv_qp_init_attr a = {.qp_type = IBV_QPT_DRIVER};
      struct ibv_qp *q = fn(e->pd, &a, EFADV_QP_DRIVER_TYPE_SRD);
      if (q)
        ibv_destroy_qp(q);
      q != NULL;
    }))
RUN(efadv_query_ah, efadv_query_ah, fn(e->ah, out, sizeof(struct efadv_ah_attr)))
RUN(hnsdv_is_supported, hnsdv_is_supported, fn(e->dev))
RUN(hnsdv_query_device, hnsdv_query_device, fn(e->ctx, out))
RUN(ionic_dv_ctx_get_udma_count, ionic_dv_ctx_get_udma_count, fn(e->ctx))
RUN(ionic_dv_ctx_get_udma_mask, ionic_dv_ctx_get_udma_mask, fn(e->ctx))
RUN(ionic_dv_pd_get_udma_mask, ionic_dv_pd_get_udma_mask, fn(e->pd))
RUN(ionic_dv_pd_set_udma_mask, ionic_dv_pd_set_udma_mask, fn(e->pd, 1))
RUN(ionic_dv_pd_set_sqcmb, ionic_dv_pd_set_sqcmb, fn(e->pd, false, false, false))
RUN(ionic_dv_pd_set_rqcmb, ionic_dv_pd_set_rqcmb, fn(e->pd, false, false, false))
/* No object type: nothing is looked at. */
RUN(mlx4dv_init_obj, mlx4dv_init_obj, fn(out, 0))
RUN(manadv_init_obj, manadv_init_obj, fn(out, 0))

/* libibumad: device-independent, from sysfs and /dev/infiniband. */
RUN(umad_init, umad_init, fn())
RUN(umad_get_cas_names, umad_get_cas_names, fn((char (*)[UMAD_CA_NAME_LEN])out, 32))
RUN(umad_get_ca_unknown, umad_get_ca, fn("rdmadl_no_such_ca0", out))
RUN(umad_get_ca_portguids, umad_get_ca_portguids, fn(e->ca, out, 16))
RUN(umad_get_issm_path, umad_get_issm_path, fn(e->ca, e->port, out, 256))
RUN(umad_open_port, umad_open_port, ({
      int id = fn(e->ca, e->port);
      if (id >= 0)
        umad_close_port(id); /* the same library either way */
      id < 0 ? id : 0;
    }))
RUN(umad_size, umad_size, fn())
RUN(umad_set_addr, umad_set_addr, fn(out, 0x1234, 7, 3, 0x80010000))
RUN(umad_set_addr_net, umad_set_addr_net,
    fn(out, htobe16(0x1234), htobe32(7), 3, htobe32(0x80010000)))
RUN(umad_set_grh, umad_set_grh, ({
      ib_mad_addr_t a;
      memset(&a, 0x5a, sizeof a);
      fn(out, &a);
    }))
RUN(umad_set_pkey, umad_set_pkey, fn(out, 3))
RUN(umad_get_pkey, umad_get_pkey, ({
      memset(out, 0, 256);
      umad_set_pkey(out, 5);
      fn(out);
    }))
RUN(umad_get_mad, umad_get_mad, ({
      char *m = fn(out);
      m ? m - (char *)out + 1 : 0;
    }))
RUN(umad_get_mad_addr, umad_get_mad_addr, ({
      char *m = (char *)fn(out);
      m ? m - (char *)out + 1 : 0;
    }))
RUN(umad_status, umad_status, fn(out))
RUN(umad_get_smi_gsi_pairs, umad_get_smi_gsi_pairs, fn(out, 8))
RUN(umad_get_smi_gsi_pair_by_ca_name, umad_get_smi_gsi_pair_by_ca_name,
    fn(e->ca, (uint8_t)e->port, out, 0))
RUN(umad_done, umad_done, fn())

#define CASE(check, soname, name, conv, size)                                                      \
  { check, soname, #name, conv, (any_fn)name, run_##name, size }
#define CASE_ID(check, soname, id, name, conv, size)                                               \
  { check, soname, #name, conv, (any_fn)name, run_##id, size }

static const struct dv_case dv_cases[] = {
    CASE("dv.mlx5dv_is_supported", "libmlx5.so.1", mlx5dv_is_supported, ZERO, 0),
    CASE("dv.mlx5dv_open_device", "libmlx5.so.1", mlx5dv_open_device, NULLPTR, 0),
    CASE("dv.mlx5dv_query_device", "libmlx5.so.1", mlx5dv_query_device, ERRNO,
         sizeof(struct mlx5dv_context)),
    CASE("dv.mlx5dv_set_context_attr", "libmlx5.so.1", mlx5dv_set_context_attr, ERRNO, 0),
    CASE("dv.efadv_query_device", "libefa.so.1", efadv_query_device, ERRNO,
         sizeof(struct efadv_device_attr)),
    CASE("dv.efadv_create_qp_ex", "libefa.so.1", efadv_create_qp_ex, NULLPTR, 0),
    CASE("dv.efadv_create_driver_qp", "libefa.so.1", efadv_create_driver_qp, NULLPTR, 0),
    CASE("dv.efadv_query_ah", "libefa.so.1", efadv_query_ah, ERRNO, sizeof(struct efadv_ah_attr)),
    CASE("dv.hnsdv_is_supported", "libhns.so.1", hnsdv_is_supported, ZERO, 0),
    CASE("dv.hnsdv_query_device", "libhns.so.1", hnsdv_query_device, ERRNO,
         sizeof(struct hnsdv_context)),
    CASE("dv.ionic_dv_ctx_get_udma_count", "libionic.so.1", ionic_dv_ctx_get_udma_count, ZERO, 0),
    CASE("dv.ionic_dv_ctx_get_udma_mask", "libionic.so.1", ionic_dv_ctx_get_udma_mask, ZERO, 0),
    CASE("dv.ionic_dv_pd_get_udma_mask", "libionic.so.1", ionic_dv_pd_get_udma_mask, ZERO, 0),
    CASE("dv.ionic_dv_pd_set_udma_mask", "libionic.so.1", ionic_dv_pd_set_udma_mask, ERRNO, 0),
    CASE("dv.ionic_dv_pd_set_sqcmb", "libionic.so.1", ionic_dv_pd_set_sqcmb, ERRNO, 0),
    CASE("dv.ionic_dv_pd_set_rqcmb", "libionic.so.1", ionic_dv_pd_set_rqcmb, ERRNO, 0),
    CASE("dv.mlx4dv_init_obj", "libmlx4.so.1", mlx4dv_init_obj, ERRNO, sizeof(struct mlx4dv_obj)),
    CASE("dv.manadv_init_obj", "libmana.so.1", manadv_init_obj, ERRNO, sizeof(struct manadv_obj)),
    CASE("umad.umad_init", "libibumad.so.3", umad_init, M1, 0),
    CASE("umad.umad_get_cas_names", "libibumad.so.3", umad_get_cas_names, M1,
         32 * UMAD_CA_NAME_LEN),
    CASE_ID("umad.umad_get_ca.unknown", "libibumad.so.3", umad_get_ca_unknown, umad_get_ca,
            NEGERRNO, sizeof(umad_ca_t)),
    CASE("umad.umad_get_ca_portguids", "libibumad.so.3", umad_get_ca_portguids, NEGERRNO,
         16 * sizeof(__be64)),
    CASE("umad.umad_get_issm_path", "libibumad.so.3", umad_get_issm_path, NEGERRNO, 256),
    CASE("umad.umad_open_port", "libibumad.so.3", umad_open_port, NEGERRNO, 0),
    CASE("umad.umad_size", "libibumad.so.3", umad_size, ZERO, 0),
    CASE("umad.umad_set_addr", "libibumad.so.3", umad_set_addr, NEGERRNO, 1024),
    CASE("umad.umad_set_addr_net", "libibumad.so.3", umad_set_addr_net, NEGERRNO, 1024),
    CASE("umad.umad_set_grh", "libibumad.so.3", umad_set_grh, NEGERRNO, 1024),
    CASE("umad.umad_set_pkey", "libibumad.so.3", umad_set_pkey, NEGERRNO, 1024),
    CASE("umad.umad_get_pkey", "libibumad.so.3", umad_get_pkey, ZERO, 0),
    CASE("umad.umad_get_mad", "libibumad.so.3", umad_get_mad, NULLPTR, 0),
    CASE("umad.umad_get_mad_addr", "libibumad.so.3", umad_get_mad_addr, NULLPTR, 0),
    CASE("umad.umad_status", "libibumad.so.3", umad_status, ERRNO, 0),
    CASE("umad.umad_get_smi_gsi_pairs", "libibumad.so.3", umad_get_smi_gsi_pairs, M1,
         8 * sizeof(struct umad_ca_pair)),
    CASE("umad.umad_get_smi_gsi_pair_by_ca_name", "libibumad.so.3",
         umad_get_smi_gsi_pair_by_ca_name, NEGERRNO, sizeof(struct umad_ca_pair)),
};

/* --- libibumad's CA, port and device list: objects to compare and release -- */

static void put_port(struct rec *r, const umad_port_t *p) {
  put_str(r, p->ca_name);
  const long f[] = {
      p->portnum,         p->base_lid,   p->lmc,  p->sm_lid,        p->sm_sl,
      p->state,           p->phys_state, p->rate, (long)p->capmask, (long)p->gid_prefix,
      (long)p->port_guid, p->pkeys_size};
  put(r, f, sizeof f);
  if (p->pkeys)
    put(r, p->pkeys, p->pkeys_size * sizeof p->pkeys[0]);
  put_str(r, p->link_layer);
}

static void put_ca(struct rec *r, const umad_ca_t *ca) {
  put_str(r, ca->ca_name);
  const long f[] = {ca->node_type, ca->numports, (long)ca->node_guid, (long)ca->system_guid};
  put(r, f, sizeof f);
  put_str(r, ca->fw_ver);
  put_str(r, ca->ca_type);
  put_str(r, ca->hw_ver);
  for (int i = 0; i < UMAD_CA_MAX_PORTS; i++) {
    put_long(r, ca->ports[i] != NULL);
    if (ca->ports[i])
      put_port(r, ca->ports[i]);
  }
}

/* Compares one call's outcome: PASS when GOT == WANT byte for byte (or, with
 * no real function, when the drop-in returned FAILV with errno EOPNOTSUPP). */
static void verdict(const char *check, const char *name, struct rec *got, struct rec *want) {
  t_check(check, got->n == want->n && t_same(check, got->b, want->b, got->n),
          "%s: the drop-in's outcome (%zu bytes) differs from the real library's (%zu)", name,
          got->n, want->n);
}

static void missing_outcome(struct rec *got, struct rec *want, long v, long failv) {
  long err = errno;
  put_long(got, v);
  put_long(got, err);
  put_long(want, failv);
  put_long(want, EOPNOTSUPP);
}

/* With no real function: CHECK passes when CALL (the drop-in's NAME, errno
 * cleared first) returns FAILV with errno EOPNOTSUPP. */
#define MISSING_VERDICT(check, name, call, failv)                                                  \
  do {                                                                                             \
    want.n = got.n = 0;                                                                            \
    errno = 0;                                                                                     \
    long v_ = (long)(call);                                                                        \
    missing_outcome(&got, &want, v_, failv);                                                       \
    verdict(check, name, &got, &want);                                                             \
  } while (0)

/* umad_get_ca and umad_release_ca; umad_get_port and umad_release_port. */
static void check_ca_port(const struct env *e) {
  static struct rec want, got;
  static umad_ca_t ca_a, ca_b;
  static umad_port_t port_a, port_b;
  const char *so = "libibumad.so.3";
  any_fn get_f, rel_f;
  enum path pg = resolve("umad.umad_get_ca", so, "umad_get_ca", &get_f);
  enum path pr = resolve("umad.umad_release_ca", so, "umad_release_ca", &rel_f);
  int ga = -1, gb = -1;
  want.n = got.n = 0;
  memset(&ca_a, 0, sizeof ca_a);
  memset(&ca_b, 0, sizeof ca_b);
  if (pg == P_COMPARE) {
    errno = 0;
    ga = ((__typeof__(&umad_get_ca))get_f)(e->ca, &ca_a);
    put_long(&want, ga);
    put_ca(&want, &ca_a);
    errno = 0;
    gb = umad_get_ca(e->ca, &ca_b);
    put_long(&got, gb);
    put_ca(&got, &ca_b);
    printf("dv_umad: umad_get_ca(%s): %d, node_type %u, %d ports, port 1 %s\n", e->ca, gb,
           ca_b.node_type, ca_b.numports, ca_b.ports[1] ? ca_b.ports[1]->link_layer : "(none)");
    verdict("umad.umad_get_ca", "umad_get_ca", &got, &want);
  } else if (pg == P_MISSING) {
    MISSING_VERDICT("umad.umad_get_ca", "umad_get_ca", gb = umad_get_ca(e->ca, &ca_b), -EOPNOTSUPP);
  }
  want.n = got.n = 0;
  if (pr == P_COMPARE && pg == P_COMPARE) {
    /* Each releases what it filled; rxe's CA always fills (sysfs). */
    if (ga != 0 || gb != 0) {
      t_check("umad.umad_release_ca", false, "umad_get_ca failed (%d, %d): nothing to release", ga,
              gb);
    } else {
      put_long(&want, ((__typeof__(&umad_release_ca))rel_f)(&ca_a));
      put_long(&got, umad_release_ca(&ca_b));
      verdict("umad.umad_release_ca", "umad_release_ca", &got, &want);
    }
  } else if (pr == P_MISSING) {
    MISSING_VERDICT("umad.umad_release_ca", "umad_release_ca", umad_release_ca(&ca_b), -EOPNOTSUPP);
  }

  pg = resolve("umad.umad_get_port", so, "umad_get_port", &get_f);
  pr = resolve("umad.umad_release_port", so, "umad_release_port", &rel_f);
  want.n = got.n = 0;
  memset(&port_a, 0, sizeof port_a);
  memset(&port_b, 0, sizeof port_b);
  if (pg == P_COMPARE) {
    errno = 0;
    ga = ((__typeof__(&umad_get_port))get_f)(e->ca, e->port, &port_a);
    put_long(&want, ga);
    put_port(&want, &port_a);
    errno = 0;
    gb = umad_get_port(e->ca, e->port, &port_b);
    put_long(&got, gb);
    put_port(&got, &port_b);
    printf("dv_umad: umad_get_port(%s, %d): %d, state %u, link layer %s, %u P_Keys\n", e->ca,
           e->port, gb, port_b.state, port_b.link_layer, port_b.pkeys_size);
    verdict("umad.umad_get_port", "umad_get_port", &got, &want);
  } else if (pg == P_MISSING) {
    MISSING_VERDICT("umad.umad_get_port", "umad_get_port",
                    gb = umad_get_port(e->ca, e->port, &port_b), -EOPNOTSUPP);
  }
  want.n = got.n = 0;
  if (pr == P_COMPARE && pg == P_COMPARE) {
    if (ga != 0 || gb != 0) {
      t_check("umad.umad_release_port", false, "umad_get_port failed (%d, %d): nothing to release",
              ga, gb);
    } else {
      put_long(&want, ((__typeof__(&umad_release_port))rel_f)(&port_a));
      put_long(&got, umad_release_port(&port_b));
      verdict("umad.umad_release_port", "umad_release_port", &got, &want);
    }
  } else if (pr == P_MISSING) {
    MISSING_VERDICT("umad.umad_release_port", "umad_release_port", umad_release_port(&port_b),
                    -EOPNOTSUPP);
  }
}

static void put_list(struct rec *r, const struct umad_device_node *n) {
  put_long(r, n != NULL);
  for (; n; n = n->next)
    put_str(r, n->ca_name);
}

/* umad_get_ca_device_list and umad_free_ca_device_list (IBUMAD_1.1). */
static void check_device_list(void) {
  static struct rec want, got;
  const char *so = "libibumad.so.3";
  any_fn get_f, free_f;
  enum path pg = resolve("umad.umad_get_ca_device_list", so, "umad_get_ca_device_list", &get_f);
  enum path pf = resolve("umad.umad_free_ca_device_list", so, "umad_free_ca_device_list", &free_f);
  struct umad_device_node *la = NULL, *lb = NULL;
  want.n = got.n = 0;
  if (pg == P_COMPARE) {
    errno = 0;
    la = ((__typeof__(&umad_get_ca_device_list))get_f)();
    long ea = errno;
    put_list(&want, la);
    if (!la)
      put_long(&want, ea);
    errno = 0;
    lb = umad_get_ca_device_list();
    long eb = errno;
    put_list(&got, lb);
    if (!lb)
      put_long(&got, eb);
    verdict("umad.umad_get_ca_device_list", "umad_get_ca_device_list", &got, &want);
  } else if (pg == P_MISSING) {
    MISSING_VERDICT("umad.umad_get_ca_device_list", "umad_get_ca_device_list",
                    (lb = umad_get_ca_device_list()) != NULL, 0);
  }
  want.n = got.n = 0;
  if (pf == P_COMPARE && pg == P_COMPARE) {
    /* void: each frees its own list; the check is that both return. */
    ((__typeof__(&umad_free_ca_device_list))free_f)(la);
    umad_free_ca_device_list(lb);
    put_long(&want, 0);
    put_long(&got, 0);
    verdict("umad.umad_free_ca_device_list", "umad_free_ca_device_list", &got, &want);
  } else if (pf == P_MISSING) {
    MISSING_VERDICT("umad.umad_free_ca_device_list", "umad_free_ca_device_list",
                    (umad_free_ca_device_list(lb), 0), 0);
  }
}

/* --- the string functions: the library's answers, or rdmadl's own --------- */

static void put_strs(struct rec *r, int which, any_fn f) {
  for (unsigned v = 0; v < 256; v++) {
    switch (which) {
    case 0:
      put_str(r, ((__typeof__(&umad_class_str))f)((uint8_t)v));
      break;
    case 1:
      put_str(r, ((__typeof__(&umad_method_str))f)(UMAD_CLASS_SUBN_ADM, (uint8_t)v));
      put_str(r, ((__typeof__(&umad_method_str))f)(UMAD_CLASS_PERF_MGMT, (uint8_t)v));
      break;
    case 2:
      put_str(r, ((__typeof__(&umad_attribute_str))f)(UMAD_CLASS_SUBN_ADM, htobe16((uint16_t)v)));
      put_str(r, ((__typeof__(&umad_attribute_str))f)(UMAD_CLASS_SUBN_LID_ROUTED,
                                                      htobe16((uint16_t)v)));
      put_str(r, ((__typeof__(&umad_attribute_str))f)(UMAD_CLASS_CM, htobe16((uint16_t)v)));
      break;
    case 3:
      put_str(r, ((__typeof__(&umad_common_mad_status_str))f)(htobe16((uint16_t)(v << 8 | v))));
      break;
    default:
      put_str(r, ((__typeof__(&umad_sa_mad_status_str))f)(htobe16((uint16_t)(v << 8 | v))));
      break;
    }
  }
}

static void check_strings(void) {
  static const struct {
    const char *check, *name;
    any_fn dropin;
  } strs[] = {
      {"umad.umad_class_str", "umad_class_str", (any_fn)umad_class_str},
      {"umad.umad_method_str", "umad_method_str", (any_fn)umad_method_str},
      {"umad.umad_attribute_str", "umad_attribute_str", (any_fn)umad_attribute_str},
      {"umad.umad_common_mad_status_str", "umad_common_mad_status_str",
       (any_fn)umad_common_mad_status_str},
      {"umad.umad_sa_mad_status_str", "umad_sa_mad_status_str", (any_fn)umad_sa_mad_status_str},
  };
  static struct rec want, got;
  for (int i = 0; i < 5; i++) {
    any_fn real;
    want.n = got.n = 0;
    enum path p = resolve(strs[i].check, "libibumad.so.3", strs[i].name, &real);
    if (p == P_COMPARE) {
      put_strs(&want, i, real);
      put_strs(&got, i, strs[i].dropin);
      verdict(strs[i].check, strs[i].name, &got, &want);
    } else if (p == P_MISSING) {
      /* STR: rdmadl answers with libibumad's strings; spot-check a few. */
      put_strs(&got, i, strs[i].dropin);
      static const char *const known[] = {"SubnAdm", "Get", "PortInfo", "Success", "Success"};
      const char *s = i == 0   ? umad_class_str(UMAD_CLASS_SUBN_ADM)
                      : i == 1 ? umad_method_str(UMAD_CLASS_SUBN_ADM, 0x01)
                      : i == 2 ? umad_attribute_str(UMAD_CLASS_SUBN_LID_ROUTED, htobe16(0x0015))
                      : i == 3 ? umad_common_mad_status_str(0)
                               : umad_sa_mad_status_str(0);
      put_str(&want, known[i]);
      struct rec one = {.n = 0};
      put_str(&one, s);
      t_check(strs[i].check, t_same(strs[i].check, one.b, want.b, one.n == want.n ? one.n : 0),
              "%s: \"%s\" without libibumad, want \"%s\"", strs[i].name, s, known[i]);
    }
  }
}

/* --- main ------------------------------------------------------------------ */

/* The context's provider, from the library its poll_cq lives in. */
static void check_provider(const struct env *e) {
  Dl_info info;
  const char *file = "(unknown)";
  if (dladdr((void *)(uintptr_t)e->ctx->ops.poll_cq, &info) && info.dli_fname)
    file = info.dli_fname;
  const char *base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  printf("dv_umad: %s is driven by %s\n", e->ca, file);
  t_check("dv.provider", strncmp(base, "librxe-rdmav", 12) == 0, "poll_cq is in %s, not librxe",
          file);
}

static void print_libs(void) {
  for (int l = RDMADL_LIB_MLX5; l < RDMADL_LIB_COUNT; l++) {
    const char *p = rdmadl_lib_path((rdmadl_lib)l), *n = rdmadl_lib_version_node((rdmadl_lib)l);
    printf("dv_umad: %s: %s, %s, highest node %s, %zu of %zu missing\n",
           rdmadl_lib_name((rdmadl_lib)l), rdmadl_state_name(rdmadl_lib_state((rdmadl_lib)l)),
           p ? p : "(nothing loaded)", n ? n : "(none)", rdmadl_lib_missing_count((rdmadl_lib)l),
           rdmadl_lib_symbol_count((rdmadl_lib)l));
  }
}

int main(int argc, char **argv) {
  t_init(argc, argv, "dv_umad");
  struct t_dev d;
  struct env e = {.ca = "rxe0", .port = 1};
  int rc = t_open(&d);
  if (rc < 0)
    return t_exit();
  if (rc == 0) {
    e.ctx = d.ctx;
    e.dev = d.ctx->device;
    e.pd = d.pd;
    e.ca = ibv_get_device_name(e.dev);
    e.port = d.port;
    struct ibv_ah_attr aa;
    t_ah_attr(&d, &aa);
    e.ah = ibv_create_ah(d.pd, &aa);
    if (!e.ah)
      t_check("dv_umad.ah", false, "ibv_create_ah: %s", strerror(errno));
    check_provider(&e);
  }
  for (size_t i = 0; i < sizeof dv_cases / sizeof dv_cases[0]; i++)
    if (e.ah || strcmp(dv_cases[i].name, "efadv_query_ah") != 0 || t_absent())
      run_case(&dv_cases[i], &e);
  check_ca_port(&e);
  check_device_list();
  check_strings();
  static const struct dv_case done = CASE("umad.umad_done", "libibumad.so.3", umad_done, M1, 0);
  run_case(&done, &e);
  print_libs();
  if (e.ah)
    ibv_destroy_ah(e.ah);
  if (rc == 0)
    t_close(&d);
  return t_exit();
}
