/* SPDX-License-Identifier: MIT */
/*
 * Coexistence: this program uses rdmadl and also loads the real libibverbs
 * through another shared library (libcoexist_other.so). There must be one
 * libibverbs in the process, the one rdmadl reports, and both paths must see
 * the same devices (identical pointers) when there are any.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

struct ibv_device **other_get_device_list(int *n);
void other_free_device_list(struct ibv_device **l);

static int count;
static char found[PATH_MAX];

static int visit(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size;
  (void)data;
  const char *base = strrchr(info->dlpi_name, '/');
  base = base ? base + 1 : info->dlpi_name;
  if (strncmp(base, "libibverbs.so", 13) == 0) {
    count++;
    if (!realpath(info->dlpi_name, found))
      snprintf(found, sizeof found, "%s", info->dlpi_name);
  }
  return 0;
}

int main(void) {
  int ok = 1;
  if (rdmadl_load() != 0) {
    printf("coexist: FAIL: rdmadl did not load libibverbs: %s\n", rdmadl_reason());
    return 1;
  }
  dl_iterate_phdr(visit, NULL);
  const char *mine = rdmadl_lib_path(RDMADL_LIB_IBVERBS);
  printf("coexist: %d libibverbs in the process (%s); rdmadl uses %s\n", count, found,
         mine ? mine : "(none)");
  ok &= count == 1 && mine && strcmp(found, mine) == 0;

  int n1 = -1, n2 = -1;
  errno = 0;
  struct ibv_device **a = ibv_get_device_list(&n1);
  int e1 = errno;
  errno = 0;
  struct ibv_device **b = other_get_device_list(&n2);
  int e2 = errno;
  if (a && b) {
    ok &= n1 == n2;
    for (int i = 0; ok && i < n1; i++)
      ok &= a[i] == b[i];
    printf("coexist: %d device(s) seen by both, pointers %s\n", n1, ok ? "identical" : "DIFFERENT");
  } else {
    ok &= !a && !b && e1 == e2;
    printf("coexist: both paths fail alike: %s / %s\n", strerror(e1), strerror(e2));
  }
  if (a)
    ibv_free_device_list(a);
  if (b)
    other_free_device_list(b);
  printf("coexist: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
