/* SPDX-License-Identifier: MIT */
/*
 * The stubs' record of why they refused a call (refusal.h): one value per
 * thread, written on the failure path only, so the fast path is unchanged.
 */
#include <errno.h>

#include "libs.h"
#include "refusal.h"

static __thread enum rdmadl_refusal last_refusal RDMADL_TLS_IE;
static __thread unsigned last_idx RDMADL_TLS_IE;

void rdmadl_refuse(unsigned idx) {
  enum rdmadl_refusal why = RDMADL_REFUSED_ABSENT;
  if (__atomic_load_n(&rdmadl_load_state, __ATOMIC_ACQUIRE) == LOAD_DONE && idx < RDMADL_NSYMS) {
    rdmadl_bind_rest();
    rdmadl_state s = rdmadl_libs[rdmadl_sym_meta[idx].lib].state;
    if (s == RDMADL_STATE_DISABLED)
      why = RDMADL_REFUSED_DISABLED;
    else if (rdmadl_usable(s))
      why = RDMADL_REFUSED_LACKS;
  }
  last_refusal = why;
  last_idx = idx;
  errno = EOPNOTSUPP;
}

enum rdmadl_refusal rdmadl_refusal_take(unsigned *idx) {
  enum rdmadl_refusal why = last_refusal;
  if (idx)
    *idx = last_idx;
  last_refusal = RDMADL_REFUSED_NONE;
  return why;
}
