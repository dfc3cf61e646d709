/* SPDX-License-Identifier: MIT */
/*
 * Why a call failed, for the C++ API's one error translator
 * (src/error.cpp, detail::rdma_error): what the stubs record when they
 * refuse a call, and the stack's state as last seen. Reading either costs
 * no device enumeration. Hidden: nothing here is exported from any rdmadl
 * library, and the drop-in's errno and return values do not depend on it.
 */
#ifndef RDMADL_LOADER_REFUSAL_H
#define RDMADL_LOADER_REFUSAL_H

#include "rdmadl/loader.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why a stub refused a call (and set errno to EOPNOTSUPP). */
enum rdmadl_refusal {
  RDMADL_REFUSED_NONE,     /* no refusal recorded */
  RDMADL_REFUSED_ABSENT,   /* its library is not loaded (absent, unusable, or not yet decided) */
  RDMADL_REFUSED_DISABLED, /* RDMADL_DISABLE */
  RDMADL_REFUSED_LACKS     /* its library is loaded but lacks the symbol (an older release) */
};

/* Records, for the calling thread, why the stub of symbol IDX (a row of
 * symbols.def) refuses: its library's state decides. Sets errno to
 * EOPNOTSUPP, so a stub's failure path is this call and its return. */
__attribute__((visibility("hidden"), cold)) void rdmadl_refuse(unsigned idx);
/* The calling thread's last recorded refusal, cleared by reading it; *IDX
 * (when not NULL) is the refused symbol's row. */
__attribute__((visibility("hidden"))) enum rdmadl_refusal rdmadl_refusal_take(unsigned *idx);

/* The stack's state as last seen by rdmadl_stack_state() or by the C++
 * device list (rdmadl_stack_seen_note); asks libibverbs once if nobody has
 * yet. */
__attribute__((visibility("hidden"))) rdmadl_stack rdmadl_stack_seen(void);
/* What a device list just found (the C++ device_list::get). */
__attribute__((visibility("hidden"))) void rdmadl_stack_seen_note(rdmadl_stack state);

#ifdef __cplusplus
}
#endif

#endif /* RDMADL_LOADER_REFUSAL_H */
