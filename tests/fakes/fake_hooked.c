/* SPDX-License-Identifier: MIT */
/*
 * fake_ibverbs.c plus a constructor that calls the program's
 * fake_ctor_hook(), if it exports one, while the loader is inside dlopen: the
 * test programs use it to block the loading thread (fork test) or to start
 * and join a thread that calls verbs (deadlock test).
 */
#include "fake_ibverbs.c"

#include <dlfcn.h>

__attribute__((constructor)) static void fake_call_hook(void) {
  void (*hook)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "fake_ctor_hook");
  if (hook)
    hook();
}
