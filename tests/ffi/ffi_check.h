/* SPDX-License-Identifier: MIT */
/*
 * What the dlopen-only librdmadl-ffi tests share: one PASS/FAIL line per
 * check, the library opened with dlopen and its functions found with dlsym,
 * as another language would. Static: include from the test's one file.
 */
#ifndef RDMADL_TESTS_FFI_CHECK_H
#define RDMADL_TESTS_FFI_CHECK_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static int failures, checks;

static void check(const char *what, int ok) {
  printf("%s %s\n", ok ? "PASS" : "FAIL", what);
  failures += !ok;
  checks++;
}

/* The library, and NAME in it (a failed check when it is not there). */
static void *h;
static void *sym(const char *name) {
  void *p = dlsym(h, name);
  if (!p)
    check(name, 0);
  return p;
}

/* Opens argv[1] for program PROG, whose command line is USAGE (NARGS
 * arguments); exits 2 on a wrong command line, 1 when dlopen fails. */
static void open_library(int argc, char **argv, int nargs, const char *prog, const char *usage) {
  if (argc != nargs + 1) {
    fprintf(stderr, "usage: %s %s\n", prog, usage);
    exit(2);
  }
  h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "%s: dlopen %s: %s\n", prog, argv[1], dlerror());
    exit(1);
  }
}

#endif /* RDMADL_TESTS_FFI_CHECK_H */
