/* SPDX-License-Identifier: MIT */
/*
 * strs - the string functions (ibv_wc_status_str, ibv_event_type_str,
 * ibv_node_type_str, ibv_port_state_str, rdma_event_str) of the real library
 * must equal what rdmadl's built-in fallback returns. The fallback's strings
 * come from this program re-run with RDMADL_DISABLE=1; values the release
 * itself does not know ("unknown") are not compared.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "common.h"

enum { LO = -1, HI = 40, KINDS = 5 };

static const char *kind_names[KINDS] = {"wc_status", "event_type", "node_type", "port_state",
                                        "cm_event"};

static const char *str_of(int kind, int v) {
  switch (kind) {
  case 0:
    return ibv_wc_status_str((enum ibv_wc_status)v);
  case 1:
    return ibv_event_type_str((enum ibv_event_type)v);
  case 2:
    return ibv_node_type_str((enum ibv_node_type)v);
  case 3:
    return ibv_port_state_str((enum ibv_port_state)v);
  default:
    return rdma_event_str((enum rdma_cm_event_type)v);
  }
}

static bool unknown(const char *s) {
  return !s || strcmp(s, "unknown") == 0 || strcmp(s, "UNKNOWN EVENT") == 0;
}

static void dump(void) {
  for (int k = 0; k < KINDS; k++)
    for (int v = LO; v <= HI; v++)
      if (k == 2 || v >= 0) /* only node types start at -1 */
        printf("%d %d %s\n", k, v, str_of(k, v));
}

static char fallback[KINDS][HI - LO + 1][96];

/* Runs this program again with RDMADL_DISABLE=1 and reads its strings. */
static bool read_fallback(void) {
  int fd[2];
  if (pipe(fd))
    return false;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    setenv("RDMADL_DISABLE", "1", 1);
    execl("/proc/self/exe", "strs", "--dump", (char *)NULL);
    _exit(127);
  }
  close(fd[1]);
  FILE *f = fdopen(fd[0], "r");
  char line[160];
  int n = 0, k, v, off;
  while (f && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    if (sscanf(line, "%d %d %n", &k, &v, &off) == 2 && k >= 0 && k < KINDS && v >= LO && v <= HI) {
      snprintf(fallback[k][v - LO], sizeof fallback[k][v - LO], "%s", line + off);
      n++;
    }
  }
  if (f)
    fclose(f);
  int status;
  return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0 && n > 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--dump") == 0) {
    dump();
    return 0;
  }
  t_init(argc, argv, "strs");
  if (!t_check("strings.fallback_run", read_fallback(), "re-running with RDMADL_DISABLE=1 failed"))
    return t_exit();
  for (int k = 0; k < KINDS; k++) {
    int compared = 0, bad = 0;
    for (int v = LO; v <= HI; v++) {
      if (k != 2 && v < 0)
        continue;
      const char *real = str_of(k, v);
      if (t_absent() || unknown(real))
        continue; /* the release (or, absent, nobody) has no string for it */
      compared++;
      if (strcmp(real, fallback[k][v - LO]) != 0) {
        fprintf(stderr, "strs: %s(%d): library \"%s\", rdmadl fallback \"%s\"\n", kind_names[k], v,
                real, fallback[k][v - LO]);
        bad++;
      }
    }
    char name[64];
    snprintf(name, sizeof name, "strings.%s", kind_names[k]);
    if (t_absent()) /* no library: the fallback itself must know the basics */
      t_check(name,
              strcmp(str_of(k, k == 2 ? 1 : 0), fallback[k][(k == 2 ? 1 : 0) - LO]) == 0 &&
                  !unknown(str_of(k, k == 2 ? 1 : 0)),
              "fallback string missing");
    else
      t_check(name, compared > 0 && bad == 0, "%d of %d differ", bad, compared);
  }
  return t_exit();
}
