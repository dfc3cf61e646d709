/* SPDX-License-Identifier: MIT */
/*
 * plugin_host PLUGIN [DROPIN]: dlopens PLUGIN (the only thing that links the
 * drop-in: librdmadl-verbs.so, or the static drop-in embedded in PLUGIN),
 * keeps the strings rdmadl returned through it, dlcloses it, and reads the
 * strings again, 50 times. They are documented to live as long as the
 * process, so the object holding the loader (DROPIN, default
 * librdmadl-verbs.so.0) must stay mapped and must not load again (or leak)
 * per cycle. Exit 0 when all holds.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *const names[] = {"plugin_reason", "plugin_state", "plugin_requested",
                                    "plugin_error", "plugin_wc_status"};
enum { N = sizeof names / sizeof names[0] };

int main(int argc, char **argv) {
  if (argc != 2 && argc != 3) {
    fprintf(stderr, "usage: plugin_host PLUGIN [DROPIN]\n");
    return 2;
  }
  const char *dropin = argc == 3 ? argv[2] : "librdmadl-verbs.so.0";
  const char *first[N] = {0};
  char copy[N][4096];
  for (int i = 0; i < 50; i++) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      fprintf(stderr, "plugin_host: %s\n", dlerror());
      return 1;
    }
    for (int k = 0; k < N; k++) {
      const char *(*f)(void) = (const char *(*)(void))dlsym(h, names[k]);
      if (!f) {
        fprintf(stderr, "plugin_host: plugin lacks %s\n", names[k]);
        return 1;
      }
      const char *s = f();
      if (!s) {
        fprintf(stderr, "plugin_host: %s returned NULL\n", names[k]);
        return 1;
      }
      if (i == 0) {
        first[k] = s;
        snprintf(copy[k], sizeof copy[k], "%s", s);
      } else if (s != first[k]) {
        fprintf(stderr, "plugin_host: cycle %d: %s: rdmadl was loaded again\n", i, names[k]);
        return 1;
      }
    }
    dlclose(h);
    /* Would fault if the object holding them had been unmapped. */
    for (int k = 0; k < N; k++)
      if (strcmp(first[k], copy[k]) != 0) {
        fprintf(stderr, "plugin_host: %s changed after dlclose\n", names[k]);
        return 1;
      }
  }
  void *still = dlopen(dropin, RTLD_LAZY | RTLD_NOLOAD);
  printf("plugin_host: reason \"%s\", state %s, error \"%s\", drop-in still mapped: %s\n", first[0],
         first[1], first[3], still ? "yes" : "no");
  if (still)
    dlclose(still);
  return still ? 0 : 1;
}
