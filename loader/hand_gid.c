/* SPDX-License-Identifier: MIT */
/*
 * The GID queries of IBVERBS_1.11 (EMU entries of symbols.def): forwarded
 * to the loaded library when it has them, otherwise answered from
 * ibv_query_gid, ibv_query_port and sysfs, as libibverbs < 1.11 users did.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "extra_decls.h"
#include "internal.h"

/* Reads one GID attribute the way libibverbs < 1.11 users did: from sysfs. */
static int gid_attr(struct ibv_context *ctx, uint32_t port, uint32_t index, const char *what,
                    char *buf, size_t size) {
  __typeof__(&ibv_get_device_name) name = RDMADL_FN(ibv_get_device_name);
  const char *dev = name ? name(ctx->device) : NULL;
  if (!dev)
    return -1;
  char path[256];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/%s/%u", dev, port, what,
           index);
  FILE *f = fopen(path, "re");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, size - 1, f);
  fclose(f);
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
    n--;
  buf[n] = '\0';
  return 0;
}

/* One GID entry from ibv_query_gid + sysfs. Returns 0 or an errno value. */
static int gid_entry_fallback(struct ibv_context *ctx, uint32_t port, uint32_t index,
                              struct ibv_gid_entry *entry) {
  __typeof__(&ibv_query_gid) query = RDMADL_FN(ibv_query_gid);
  __typeof__(&ibv_query_port) qport = RDMADL_FN(ibv_query_port);
  if (!query || !qport)
    return EOPNOTSUPP;
  struct ibv_port_attr pattr;
  memset(&pattr, 0, sizeof pattr);
  if (qport(ctx, (uint8_t)port, (struct _compat_ibv_port_attr *)&pattr))
    return errno ? errno : EINVAL;
  if (index >= (uint32_t)pattr.gid_tbl_len)
    return EINVAL;
  memset(entry, 0, sizeof *entry);
  if (query(ctx, (uint8_t)port, (int)index, &entry->gid))
    return errno ? errno : EINVAL;
  static const union ibv_gid zero;
  if (memcmp(&entry->gid, &zero, sizeof zero) == 0)
    return ENODATA;
  entry->gid_index = index;
  entry->port_num = port;
  char buf[64];
  if (pattr.link_layer != IBV_LINK_LAYER_ETHERNET) {
    entry->gid_type = IBV_GID_TYPE_IB;
  } else if (gid_attr(ctx, port, index, "types", buf, sizeof buf) == 0) {
    entry->gid_type = strcmp(buf, "RoCE v2") == 0 ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
#ifdef RDMADL_TEST_BREAK_EMULATION
    /* A deliberately wrong fallback, only for showing that the VM tier's
     * rc28 suite fails (ci/vm/README.md): no build option sets it. */
    entry->gid_type = IBV_GID_TYPE_ROCE_V1;
#endif
    if (gid_attr(ctx, port, index, "ndevs", buf, sizeof buf) == 0)
      entry->ndev_ifindex = if_nametoindex(buf);
  } else {
    entry->gid_type = IBV_GID_TYPE_ROCE_V1;
  }
  return 0;
}

/* Behind ibv_query_gid_ex() (IBVERBS_1.11); falls back to ibv_query_gid. */
RDMADL_STUB_API int RDMADL_NAME(_ibv_query_gid_ex)(struct ibv_context *context, uint32_t port_num,
                                                   uint32_t gid_index, struct ibv_gid_entry *entry,
                                                   uint32_t flags, size_t entry_size) {
  __typeof__(&_ibv_query_gid_ex) f = RDMADL_FN(_ibv_query_gid_ex);
  if (f)
    return f(context, port_num, gid_index, entry, flags, entry_size);
  if (!RDMADL_FN(ibv_query_gid)) {
    rdmadl_refuse(RDMADL_IDX__ibv_query_gid_ex);
    return EOPNOTSUPP;
  }
  if (flags || entry_size < sizeof *entry)
    return EINVAL;
  return gid_entry_fallback(context, port_num, gid_index, entry);
}

/* Behind ibv_query_gid_table() (IBVERBS_1.11); falls back to walking every
 * port's table with ibv_query_gid. Returns entries read or -errno. */
RDMADL_STUB_API ssize_t RDMADL_NAME(_ibv_query_gid_table)(struct ibv_context *context,
                                                          struct ibv_gid_entry *entries,
                                                          size_t max_entries, uint32_t flags,
                                                          size_t entry_size) {
  __typeof__(&_ibv_query_gid_table) f = RDMADL_FN(_ibv_query_gid_table);
  if (f)
    return f(context, entries, max_entries, flags, entry_size);
  __typeof__(&ibv_query_device) qdev = RDMADL_FN(ibv_query_device);
  if (!qdev || !RDMADL_FN(ibv_query_gid)) {
    rdmadl_refuse(RDMADL_IDX__ibv_query_gid_table);
    return -EOPNOTSUPP;
  }
  if (flags || entry_size < sizeof *entries)
    return -EINVAL;
  struct ibv_device_attr dattr;
  int ret = qdev(context, &dattr);
  if (ret)
    return -ret;
  size_t n = 0;
  for (uint32_t port = 1; port <= dattr.phys_port_cnt; port++) {
    for (uint32_t i = 0;; i++) {
      struct ibv_gid_entry e;
      ret = gid_entry_fallback(context, port, i, &e);
      if (ret == EINVAL)
        break; /* past the end of this port's table */
      if (ret == ENODATA)
        continue; /* an empty slot: ibv_query_gid_table skips them too */
      if (ret)
        return -ret;
      if (n == max_entries)
        return -EINVAL;
      memcpy((char *)entries + n * entry_size, &e, sizeof e);
      n++;
    }
  }
  return (ssize_t)n;
}

RDMADL_LINKED(_ibv_query_gid_ex)
RDMADL_LINKED(_ibv_query_gid_table)
