/* SPDX-License-Identifier: MIT */
/*
 * A program linked -static (glibc's static dlopen) with the static drop-in:
 * prints the stack's state, whether RDMA is usable and the verdict, for the
 * loader.static-link.* tests. The library rdmadl loads there runs on a libc
 * of its own, whose errno is not this program's: the loader must read the
 * kernel's ENOSYS from the library's side to say "no kernel support" rather
 * than "no device".
 */
#include <stdio.h>

#include <rdmadl/loader.h>

int main(void) {
  rdmadl_stack stack;
  int usable;
  const char *verdict = rdmadl_verdict_state(&stack, &usable);
  printf("state=%s\n", rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS)));
  printf("stack=%s\nusable=%d\nverdict=%s\n", rdmadl_stack_name(stack), usable, verdict);
  printf("stack_state=%s\n", rdmadl_stack_name(rdmadl_stack_state()));
  return 0;
}
