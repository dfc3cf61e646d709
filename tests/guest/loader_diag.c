/* SPDX-License-Identifier: MIT */
/*
 * loader_diag LIST - compares what rdmadl resolved with the running release's
 * real exports. LIST (generated on the host with readelf from the suite's
 * libibverbs.so.1, librdmacm.so.1 and, where the release ships them, the
 * providers' direct-verbs libraries and libibumad.so.3) holds "name node" per
 * exported symbol that rdmadl knows, and "@node LIB NODE" for each of those
 * libraries' highest node; a library without one must be not found.
 * With --absent (no LIST): every symbol must be unresolved and the
 * diagnostics must say libibverbs.so.1 was not found.
 * Either way the verdict (rdmadl_verdict_state) is checked: usable on
 * Soft-RoCE, naming the rxe device; no library in the image without
 * rdma-core. loader_diag --usable-line prints only the line rdmadl-info
 * prints ("usable: yes|no: VERDICT"), for tests/guest/cxx.sh to
 * compare.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdmadl/loader.h>

#include "common.h"

enum { MAX_SYMS = 512 };

struct expect {
  char name[64];
  char node[64];
  int seen;
};

static struct expect exp_syms[MAX_SYMS];
static int n_exp;
enum { NLIBS = RDMADL_LIB_COUNT };
static char exp_node[NLIBS][64];
static const char *const lib_names[NLIBS] = {"libibverbs", "librdmacm", "libmlx5",
                                             "libefa",     "libmlx4",   "libhns",
                                             "libmana",    "libionic",  "libibumad"};

static int read_list(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return -1;
  }
  char line[256], a[64], b[64], c[64];
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "@node %63s %63s", a, b) == 2) {
      for (int lib = 0; lib < NLIBS; lib++)
        if (strcmp(a, lib_names[lib]) == 0)
          snprintf(exp_node[lib], sizeof exp_node[lib], "%s", b);
    } else if (sscanf(line, "%63s %63s %63s", a, b, c) == 2 && a[0] != '#' && n_exp < MAX_SYMS) {
      snprintf(exp_syms[n_exp].name, sizeof exp_syms[n_exp].name, "%s", a);
      snprintf(exp_syms[n_exp].node, sizeof exp_syms[n_exp].node, "%s", b);
      n_exp++;
    }
  }
  fclose(f);
  return n_exp > 0 ? 0 : -1;
}

static struct expect *find(const char *name) {
  for (int i = 0; i < n_exp; i++)
    if (strcmp(exp_syms[i].name, name) == 0)
      return &exp_syms[i];
  return NULL;
}

static void print_libs(void) {
  for (int l = 0; l < NLIBS; l++) {
    const char *p = rdmadl_lib_path((rdmadl_lib)l), *n = rdmadl_lib_version_node((rdmadl_lib)l);
    printf("loader_diag: %s: %s, %s, highest node %s, %zu of %zu symbols missing\n", lib_names[l],
           rdmadl_state_name(rdmadl_lib_state((rdmadl_lib)l)), p ? p : "(nothing loaded)",
           n ? n : "(none)", rdmadl_lib_missing_count((rdmadl_lib)l),
           rdmadl_lib_symbol_count((rdmadl_lib)l));
  }
  printf("loader_diag: reason: %s\n", rdmadl_reason());
}

/* The verdict where Soft-RoCE runs, or where no rdma-core is installed. */
static void check_verdict(void) {
  static const char none[] = "no usable libibverbs: libibverbs.so.1 not-found: ",
                    usable_ok[] = "RDMA is usable: ";
  rdmadl_stack st;
  int usable = -1;
  const char *v = rdmadl_verdict_state(&st, &usable);
  printf("loader_diag: verdict: %s\n", v);
  if (t_absent())
    t_check("diag.absent.verdict",
            st == RDMADL_STACK_NO_LIBRARY && usable == 0 &&
                strncmp(v, none, sizeof none - 1) == 0 &&
                strstr(v, "install rdma-core's libibverbs") != NULL,
            "stack %s, usable %d: %s", rdmadl_stack_name(st), usable, v);
  else
    t_check("diag.verdict",
            st == RDMADL_STACK_READY && usable == 1 &&
                strncmp(v, usable_ok, sizeof usable_ok - 1) == 0 && strstr(v, "rxe") != NULL &&
                strstr(v, " port ") != NULL,
            "stack %s, usable %d: %s", rdmadl_stack_name(st), usable, v);
}

static int absent(void) {
  struct t_dev d;
  t_open(&d); /* prints loader_diag.absent */
  size_t unresolved = 0, total = 0;
  const char *name;
  for (size_t i = 0; (name = rdmadl_symbol_name(i, NULL)) != NULL; i++, total++)
    unresolved += rdmadl_symbol_status(name, NULL) == 0;
  rdmadl_state cm = rdmadl_lib_state(RDMADL_LIB_RDMACM);
  t_check("diag.absent.symbols",
          total > 0 && unresolved == total &&
              rdmadl_lib_missing_count(RDMADL_LIB_IBVERBS) ==
                  rdmadl_lib_symbol_count(RDMADL_LIB_IBVERBS) &&
              !rdmadl_lib_path(RDMADL_LIB_IBVERBS) &&
              (cm == RDMADL_STATE_SKIPPED || cm == RDMADL_STATE_NOT_FOUND),
          "%zu of %zu unresolved, librdmacm %s", unresolved, total, rdmadl_state_name(cm));
  return t_exit();
}

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--usable-line") == 0) {
    int usable = 0;
    const char *v = rdmadl_verdict_state(NULL, &usable);
    printf("usable: %s: %s\n", usable ? "yes" : "no", v);
    return 0;
  }
  t_init(argc, argv, "loader_diag");
  print_libs();
  check_verdict();
  if (t_absent())
    return absent();
  if (argc < 2 || read_list(argv[1]) != 0) {
    t_check("diag.list", false, "usage: loader_diag EXPECTED-LIST (readable, non-empty)");
    return t_exit();
  }
  for (int l = 0; l < NLIBS; l++) {
    char name[64];
    /* The lazily loaded ones: as a program's first call would. */
    rdmadl_lib_load((rdmadl_lib)l);
    rdmadl_state st = rdmadl_lib_state((rdmadl_lib)l);
    const char *node = rdmadl_lib_version_node((rdmadl_lib)l);
    const int shipped = exp_node[l][0] != '\0';
    snprintf(name, sizeof name, "diag.%s.loaded", lib_names[l]);
    t_check(name,
            shipped ? st == RDMADL_STATE_LOADED || st == RDMADL_STATE_PARTIAL
                    : st == RDMADL_STATE_NOT_FOUND,
            "state %s: %s (the release %s it)", rdmadl_state_name(st),
            rdmadl_lib_error((rdmadl_lib)l), shipped ? "ships" : "does not ship");
    snprintf(name, sizeof name, "diag.%s.node", lib_names[l]);
    t_check(name, shipped ? node && strcmp(node, exp_node[l]) == 0 : node == NULL,
            "highest node %s, readelf says %s", node ? node : "(null)",
            shipped ? exp_node[l] : "(no such library)");
  }
  /* Resolved set == exported set, each at the node readelf names. */
  int bad = 0, resolved = 0;
  size_t missing[NLIBS] = {0};
  const char *name;
  rdmadl_lib lib;
  for (size_t i = 0; (name = rdmadl_symbol_name(i, &lib)) != NULL; i++) {
    const char *node = NULL;
    int st = rdmadl_symbol_status(name, &node);
    struct expect *e = find(name);
    if (st == 1)
      resolved++;
    else
      missing[lib]++;
    if (e)
      e->seen = 1;
    if (st == 1 && !e) {
      fprintf(stderr, "loader_diag: %s resolved but the release does not export it\n", name);
      bad++;
    } else if (st != 1 && e) {
      fprintf(stderr, "loader_diag: %s@%s exported but not resolved\n", name, e->node);
      bad++;
    } else if (e && (!node || strcmp(node, e->node) != 0)) {
      fprintf(stderr, "loader_diag: %s bound at %s, exported at %s\n", name, node, e->node);
      bad++;
    }
  }
  for (int i = 0; i < n_exp; i++) {
    if (!exp_syms[i].seen) {
      fprintf(stderr, "loader_diag: %s is in the list but unknown to rdmadl\n", exp_syms[i].name);
      bad++;
    }
  }
  printf("loader_diag: %d symbols resolved, %d exported by the release\n", resolved, n_exp);
  t_check("diag.symbols", bad == 0 && resolved == n_exp, "%d mismatches", bad);
  for (int l = 0; l < NLIBS; l++) {
    char cname[64];
    size_t mc = rdmadl_lib_missing_count((rdmadl_lib)l);
    rdmadl_state st = rdmadl_lib_state((rdmadl_lib)l);
    snprintf(cname, sizeof cname, "diag.%s.missing", lib_names[l]);
    t_check(cname,
            mc == missing[l] && (st == RDMADL_STATE_LOADED) == (mc == 0) &&
                (mc == 0 || rdmadl_lib_missing_symbol((rdmadl_lib)l, mc - 1) != NULL),
            "missing_count %zu, counted %zu, state %s", mc, missing[l], rdmadl_state_name(st));
  }
  return t_exit();
}
