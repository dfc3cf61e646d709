/* SPDX-License-Identifier: MIT */
/*
 * header_test - rdmadl/ffi.h declares every function librdmadl-ffi exports
 * (the address of each name in rdmadl-ffi.symbols is taken: an undeclared one
 * does not compile), consistently with the static archive it links against,
 * and a call through the plain names works: run with RDMADL_DISABLE=1,
 * ibv_get_device_list fails with EOPNOTSUPP.
 */
#include <rdmadl/ffi.h>

#include <errno.h>
#include <stdio.h>

typedef void (*any_fn)(void);
#define RDMADL_FFI_ADDR(name) (any_fn) & name,
static const any_fn fns[] = {
#include "ffi_addrs.inc"
};

int main(void) {
  size_t n = sizeof fns / sizeof fns[0], nonnull = 0;
  for (size_t i = 0; i < n; i++)
    nonnull += fns[i] != NULL;
  int num = 1;
  errno = 0;
  struct ibv_device **list = ibv_get_device_list(&num);
  int ok = nonnull == n && list == NULL && num == 0 && errno == EOPNOTSUPP &&
           rdmadl_load() == EOPNOTSUPP;
  printf("header_test: %zu functions declared and linked%s\n", n, ok ? "" : " - FAILED");
  return ok ? 0 : 1;
}
