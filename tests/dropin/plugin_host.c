/* SPDX-License-Identifier: MIT */
/*
 * plugin_host PLUGIN: dlopens PLUGIN (which links librdmadl-verbs.so and is
 * the only thing that does), keeps the strings rdmadl returned through it,
 * dlcloses it, and reads the strings again, 50 times. They are documented to
 * live as long as the process, so the drop-in must stay mapped (-z nodelete)
 * and must not load again (or leak) per cycle. Exit 0 when all holds.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: plugin_host PLUGIN\n");
    return 2;
  }
  const char *first_reason = NULL, *first_state = NULL;
  char copy[4096] = "";
  for (int i = 0; i < 50; i++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "plugin_host: %s\n", dlerror());
      return 1;
    }
    const char *(*reason)(void) = (const char *(*)(void))dlsym(h, "plugin_reason");
    const char *(*state)(void) = (const char *(*)(void))dlsym(h, "plugin_state");
    if (!reason || !state) {
      fprintf(stderr, "plugin_host: plugin lacks its functions\n");
      return 1;
    }
    const char *r = reason(), *s = state();
    if (!first_reason) {
      first_reason = r;
      first_state = s;
      snprintf(copy, sizeof copy, "%s", r);
    } else if (r != first_reason || s != first_state) {
      fprintf(stderr, "plugin_host: cycle %d: rdmadl was loaded again\n", i);
      return 1;
    }
    dlclose(h);
    /* Would fault if the library had been unmapped. */
    if (strcmp(first_reason, copy) != 0 || strlen(first_state) == 0) {
      fprintf(stderr, "plugin_host: strings changed after dlclose\n");
      return 1;
    }
  }
  void *still = dlopen("librdmadl-verbs.so.0", RTLD_LAZY | RTLD_NOLOAD);
  printf("plugin_host: reason \"%s\", state %s, drop-in still mapped: %s\n", first_reason,
         first_state, still ? "yes" : "no");
  if (still)
    dlclose(still);
  return still ? 0 : 1;
}
