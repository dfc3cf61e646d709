/* SPDX-License-Identifier: MIT */
/*
 * Opening one library: the file an override or the loaded libibverbs's
 * directory names, the checks before dlopen (a regular file, whole, of the
 * loaded release), dlopen, the object's identity (soname, not rdmadl itself)
 * and the binding of its symbols at their version nodes.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "libs.h"

/* Why dlopen failed, for the diagnostics; sets lib->state and lib->error. */
static void classify_failure(struct lib_info *lib, const char *override, const char *err) {
  if (!err)
    err = "dlopen failed";
  /* glibc names the object it could not open first: ours, or a dependency.
   * The common case (no rdma-core: not found) calls only strdup. */
  size_t n = rdmadl_prefix_len(err, lib->open_name);
  int ours = n && err[n] == ':';
  if (!override) {
    if (ours && rdmadl_contains(err + n, "No such file")) {
      lib->state = RDMADL_STATE_NOT_FOUND;
      lib->error = strdup(err);
    } else {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error =
          ours ? strdup(err)
               : rdmadl_dup_printf("%s was found but cannot be loaded: %s", lib->soname, err);
    }
    return;
  }
  lib->state = RDMADL_STATE_LOAD_FAILED;
  char *what = rdmadl_elf_mismatch(lib->open_name);
  if (what) {
    lib->error = rdmadl_dup_printf("%s=%s: %s (%s)", lib->env, override, what, err);
    free(what);
  } else if (!ours) {
    lib->error = rdmadl_dup_printf("%s=%s: a library it needs cannot be loaded: %s", lib->env,
                                   override, err);
  } else {
    lib->error = rdmadl_dup_printf("%s", err);
  }
}

/* A provider library's file in the loaded libibverbs's own directory, where
 * its release installs it, or NULL when there is none. */
static char *beside_ibverbs(const struct lib_info *lib) {
  const char *ibv = rdmadl_lib_file(&rdmadl_libs[RDMADL_LIB_IBVERBS]);
  const char *slash = ibv ? strrchr(ibv, '/') : NULL;
  if (!slash)
    return NULL;
  char *candidate = rdmadl_dup_printf("%.*s/%s", (int)(slash - ibv), ibv, lib->soname);
  struct stat st;
  if (candidate && (stat(candidate, &st) != 0 || !S_ISREG(st.st_mode))) {
    free(candidate);
    candidate = NULL;
  }
  return candidate;
}

/* Refuses (returns 1, state incompatible) a provider library file that needs
 * another IBVERBS_PRIVATE_* node than the loaded libibverbs defines: the two
 * are from different rdma-core releases and never work together. */
static int refuse_other_release(struct lib_info *lib) {
  const char *have = rdmadl_libs[RDMADL_LIB_IBVERBS].private_node;
  char need[64];
  if (rdmadl_file_needs_private(lib->open_name, need, sizeof need) != 1 ||
      (have && strcmp(need, have) == 0))
    return 0;
  lib->state = RDMADL_STATE_INCOMPATIBLE;
  lib->error =
      rdmadl_dup_printf("%s is from another rdma-core release than the loaded libibverbs: it "
                        "needs %s, %s has %s",
                        lib->open_name, need, rdmadl_lib_file(&rdmadl_libs[RDMADL_LIB_IBVERBS]),
                        have ? have : "no IBVERBS_PRIVATE node");
  DEBUGF("%s", lib->error);
  return 1;
}

void rdmadl_load_one(rdmadl_lib which, const char *override) {
  struct lib_info *lib = &rdmadl_libs[which];
  if (override && !*override)
    override = NULL;
  if (lib->kind == KIND_EAGER)
    lib->requested = override ? override : lib->soname;

  if (override) {
    /* An override is always a file, relative to the current directory when
     * not absolute, never a name to search the library path for. */
    lib->open_name =
        rdmadl_has_slash(override) ? (char *) override : rdmadl_dup_printf("./%s", override);
    if (!lib->open_name) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      return;
    }
    struct stat st;
    if (stat(lib->open_name, &st) != 0) {
      lib->state = RDMADL_STATE_NOT_FOUND;
      lib->stat_errno = errno;
      DEBUGF("%s", rdmadl_lib_why(lib));
      return;
    }
    /* dlopen would block on a FIFO and read whatever a device gives. */
    if (!S_ISREG(st.st_mode)) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error = rdmadl_dup_printf("%s=%s: %s, not a regular file; only a regular file is loaded",
                                     lib->env, override, rdmadl_file_kind(st.st_mode));
      DEBUGF("%s", lib->error);
      return;
    }
  } else {
    lib->open_name = lib->kind == KIND_PROVIDER ? beside_ibverbs(lib) : NULL;
    if (!lib->open_name)
      lib->open_name = (char *)lib->soname;
  }
  if (rdmadl_has_slash(lib->open_name)) {
    char *why = rdmadl_file_truncated(lib->open_name);
    if (why) {
      lib->state = RDMADL_STATE_LOAD_FAILED;
      lib->error = override ? rdmadl_dup_printf("%s=%s: %s", lib->env, override, why) : why;
      if (override)
        free(why);
      DEBUGF("%s", lib->error);
      return;
    }
  }
  if (lib->kind == KIND_PROVIDER && rdmadl_has_slash(lib->open_name) && refuse_other_release(lib))
    return;
  DEBUGF("dlopen(\"%s\")", lib->open_name);
  /* The constructor's own load (librdmacm's too, when the program uses it)
   * keeps the books the threads waiting for it rely on. */
  int in_main_load = lib->kind == KIND_EAGER ||
                     (lib->kind == KIND_WHEN_USED &&
                      __atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE) == LOAD_RUNNING);
  void *h = in_main_load ? rdmadl_loader_dlopen(lib->open_name, RTLD_LAZY | RTLD_LOCAL)
                         : dlopen(lib->open_name, RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char *err = dlerror();
    /* A provider found on the search path whose IBVERBS_PRIVATE_* node the
     * loaded libibverbs lacks: glibc refuses it. */
    if (lib->kind == KIND_PROVIDER && err && strstr(err, "IBVERBS_PRIVATE_") &&
        strstr(err, "not found")) {
      lib->state = RDMADL_STATE_INCOMPATIBLE;
      lib->error =
          rdmadl_dup_printf("%s is from another rdma-core release than the loaded libibverbs "
                            "(%s, %s): %s",
                            lib->open_name, rdmadl_lib_file(&rdmadl_libs[RDMADL_LIB_IBVERBS]),
                            rdmadl_libs[RDMADL_LIB_IBVERBS].private_node
                                ? rdmadl_libs[RDMADL_LIB_IBVERBS].private_node
                                : "no IBVERBS_PRIVATE node",
                            err);
    } else {
      classify_failure(lib, override, err);
    }
    DEBUGF("dlopen failed: %s", lib->error);
    return;
  }
  struct link_map *map = NULL;
  if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map) {
    lib->state = RDMADL_STATE_LOAD_FAILED;
    lib->error = rdmadl_dup_printf("%s: no link map", lib->open_name);
    return;
  }
  lib->map = map;
  lib->handle = h;
  /* A relative name means nothing once the current directory changes. */
  if (map->l_name[0] != '/')
    rdmadl_lib_file(lib);
  struct elf_view v;
  rdmadl_elf_view_init(&v, map, lib->prefix);
  lib->node = v.highest;
  lib->private_node = v.private_node;
  DEBUGF("loaded %s (soname %s, highest node %s)", map->l_name, v.soname ? v.soname : "none",
         lib->node ? lib->node : "none");
  if (v.rdmadl) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = rdmadl_dup_printf("%s is rdmadl itself, not rdma-core's library", lib->requested);
    DEBUGF("%s", lib->error);
    return;
  }
  if (!v.soname || !rdmadl_streq(v.soname, lib->soname)) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = rdmadl_dup_printf("%s has soname %s, expected %s", map->l_name,
                                   v.soname ? v.soname : "(none)", lib->soname);
    DEBUGF("%s", lib->error);
    return;
  }
  rdmadl_bind_lib(lib, &v, h);
  if (lib->nmissing == lib->nsyms) {
    lib->state = RDMADL_STATE_INCOMPATIBLE;
    lib->error = rdmadl_dup_printf("%s exports none of its %zu symbols at their %s* version nodes",
                                   map->l_name, lib->nsyms, lib->prefix);
  } else {
    lib->state = lib->nmissing ? RDMADL_STATE_PARTIAL : RDMADL_STATE_LOADED;
  }
}
