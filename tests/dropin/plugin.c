/* SPDX-License-Identifier: MIT */
/* A plugin that links the shared drop-in; plugin_host.c dlopens and dlcloses
 * it repeatedly. */
#include <rdmadl/loader.h>

__attribute__((visibility("default"))) const char *plugin_reason(void);
__attribute__((visibility("default"))) const char *plugin_state(void);

const char *plugin_reason(void) {
  return rdmadl_reason();
}

const char *plugin_state(void) {
  return rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS));
}
