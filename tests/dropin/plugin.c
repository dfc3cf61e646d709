/* SPDX-License-Identifier: MIT */
/* A plugin that links the drop-in (the shared library, or the static one
 * embedded in it); plugin_host.c dlopens and dlcloses it repeatedly. */
#include <infiniband/verbs.h>
#include <rdmadl/loader.h>

__attribute__((visibility("default"))) const char *plugin_reason(void);
__attribute__((visibility("default"))) const char *plugin_state(void);
__attribute__((visibility("default"))) const char *plugin_requested(void);
__attribute__((visibility("default"))) const char *plugin_error(void);
__attribute__((visibility("default"))) const char *plugin_wc_status(void);

const char *plugin_reason(void) {
  return rdmadl_reason();
}

const char *plugin_state(void) {
  return rdmadl_state_name(rdmadl_lib_state(RDMADL_LIB_IBVERBS));
}

const char *plugin_requested(void) {
  return rdmadl_lib_requested(RDMADL_LIB_IBVERBS);
}

const char *plugin_error(void) {
  return rdmadl_lib_error(RDMADL_LIB_IBVERBS);
}

const char *plugin_wc_status(void) {
  return ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR);
}
