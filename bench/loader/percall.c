/* SPDX-License-Identifier: MIT */
/* Per-call cost of one exported libibverbs function: through rdmadl's stub
 * when linked with the drop-in library, direct when linked with libibverbs.
 * ibv_wc_status_str is cheap and needs no device, so the call itself
 * dominates. Prints ns per call (best of 5 rounds). */
#include <stdio.h>
#include <time.h>

#include <infiniband/verbs.h>

int main(void) {
  enum { calls = 20000000 };
  double best = 1e9;
  volatile const char *sink = NULL;
  for (int round = 0; round < 5; round++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < calls; i++)
      sink = ibv_wc_status_str((enum ibv_wc_status)(i & 7));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / calls;
    if (ns < best)
      best = ns;
  }
  (void)sink;
  printf("%.3f\n", best);
  return 0;
}
