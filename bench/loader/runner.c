/* SPDX-License-Identifier: MIT */
/*
 * bench_runner RUNS SPEC...: runs each SPEC's program RUNS times, round-robin
 * (so drift on a shared machine hits all alike), and prints per SPEC the
 * median, 25th and 75th percentile of the whole-process wall time (fork to
 * reaped exit) in microseconds: "label median p25 p75".
 * SPEC is LABEL=BINARY or LABEL=BINARY,VAR=VALUE,... (extra environment).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct spec {
  char *label, *binary;
  char **envp;
  double *us;
};

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_runner RUNS LABEL=BINARY[,VAR=VALUE...]...\n");
    return 64;
  }
  int runs = atoi(argv[1]), n = argc - 2;
  size_t nenv = 0;
  while (environ[nenv])
    nenv++;
  struct spec *s = calloc((size_t)n, sizeof *s);
  for (int i = 0; i < n; i++) {
    char *arg = strdup(argv[i + 2]);
    char *eq = strchr(arg, '=');
    if (!eq) {
      fprintf(stderr, "bench_runner: bad spec %s\n", argv[i + 2]);
      return 64;
    }
    *eq = '\0';
    s[i].label = arg;
    s[i].binary = strtok(eq + 1, ",");
    s[i].envp = calloc(nenv + (size_t)argc + 1, sizeof(char *));
    size_t k = 0;
    for (char *e; (e = strtok(NULL, ","));)
      s[i].envp[k++] = e;
    for (size_t j = 0; j < nenv; j++)
      s[i].envp[k++] = environ[j];
    s[i].us = calloc((size_t)runs, sizeof(double));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  for (int r = -1; r < runs; r++) { /* r == -1: warm-up */
    for (int i = 0; i < n; i++) {
      struct timespec a, b;
      char *av[] = {s[i].binary, NULL};
      pid_t pid;
      int st;
      clock_gettime(CLOCK_MONOTONIC, &a);
      if (posix_spawn(&pid, s[i].binary, &fa, NULL, av, s[i].envp) != 0 ||
          waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "bench_runner: %s failed\n", s[i].binary);
        return 1;
      }
      clock_gettime(CLOCK_MONOTONIC, &b);
      if (r >= 0)
        s[i].us[r] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
    }
  }
  for (int i = 0; i < n; i++) {
    qsort(s[i].us, (size_t)runs, sizeof(double), cmp);
    printf("%s %.1f %.1f %.1f\n", s[i].label, s[i].us[runs / 2], s[i].us[runs / 4],
           s[i].us[runs * 3 / 4]);
  }
  return 0;
}
