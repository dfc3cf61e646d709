/* SPDX-License-Identifier: MIT */
/*
 * The one symbol of a libibverbs.so.1 whose node (IBVERBS_PRIVATE_<n>, from
 * the version script) a fake provider library needs: linked into the fake
 * provider's link-time stub, and into fake libibverbs builds that define the
 * node at run time.
 */
__attribute__((visibility("default"))) void verbs_private_anchor(void);
void verbs_private_anchor(void) {}
