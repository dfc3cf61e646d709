/* SPDX-License-Identifier: MIT */
/* libfakegone.so.1: a dependency of fake_missing_dep that is never installed
 * where the loader can find it. */
__attribute__((visibility("default"))) int fake_gone(void) {
  return 1;
}
