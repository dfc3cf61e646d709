/* SPDX-License-Identifier: MIT */
/*
 * A drop-in program whose .preinit_array sets a log handler, before rdmadl's
 * constructor runs, at the level argv[1] names (0 error ... 3 debug). Prints
 * each line the handler received ("log=LEVEL LINE", with the context it got
 * checked), then the verdict and the reason. With argv[2] "default" it then
 * restores the default handler and calls a function missing from the loaded
 * library, whose debug line goes to stderr when RDMADL_DEBUG asks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include <rdmadl/loader.h>

enum { MAX_LINES = 1024 };
static struct {
  int level;
  char *text;
} lines[MAX_LINES];
static int nlines, wrong_ctx, raw_newlines, early_set = -1;
static int marker;

static void sink(int level, const char *line, void *ctx) {
  if (ctx != &marker)
    wrong_ctx++;
  if (strchr(line, '\n'))
    raw_newlines++;
  if (nlines < MAX_LINES) {
    lines[nlines].level = level;
    lines[nlines].text = strdup(line);
    nlines++;
  }
}

/* glibc passes argc and argv to .preinit_array functions. */
static void early(int argc, char **argv) {
  int level = argc > 1 ? atoi(argv[1]) : RDMADL_LOG_INFO;
  early_set = rdmadl_set_log_handler(level, sink, &marker);
}

__attribute__((section(".preinit_array"), used)) static void (*const preinit)(int, char **) = early;

int main(int argc, char **argv) {
  printf("early_set=%d\n", early_set);
  for (int i = 0; i < nlines; i++)
    printf("log=%d %s\n", lines[i].level, lines[i].text ? lines[i].text : "(null)");
  printf("lines=%d\nwrong_ctx=%d\nraw_newlines=%d\n", nlines, wrong_ctx, raw_newlines);
  printf("verdict=%s\n", rdmadl_verdict());
  printf("reason=%s\n", rdmadl_reason());
  if (argc > 2 && strcmp(argv[2], "default") == 0) {
    printf("restore=%d\n", rdmadl_set_log_handler(RDMADL_LOG_DEBUG, NULL, NULL));
    int before = nlines;
    fflush(stdout);
    ibv_fork_init();
    printf("after_restore=%d\n", nlines - before);
  }
  return 0;
}
