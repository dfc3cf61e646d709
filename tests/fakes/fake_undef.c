/* SPDX-License-Identifier: MIT */
/*
 * fake_ibverbs.c whose ibv_fork_init calls fake_nowhere(), a function no
 * library defines: shows what RTLD_LAZY and RTLD_NOW do with an unresolvable
 * symbol (tests/loader/hostile_test.cpp, "lazy binding").
 */
#define ibv_fork_init fake_gen_ibv_fork_init
#include "fake_ibverbs.c"
#undef ibv_fork_init

int fake_nowhere(void);
int ibv_fork_init(void);

FAKE_API int ibv_fork_init(void) {
  return fake_nowhere();
}
