/* SPDX-License-Identifier: MIT */
/* Per-call cost of one exported libibverbs function: through rdmadl's
 * generated stub when linked with the drop-in (.so.0 or .a), direct when
 * linked with libibverbs. ibv_rate_to_mult is cheap, needs no device and its
 * stub is generated (the fast path: load, test, branch, tail jump). Prints ns
 * per call (best of 5 rounds of 20 M calls). */
#include <stdio.h>
#include <time.h>

#include <infiniband/verbs.h>

int main(void) {
  enum { calls = 20000000 };
  double best = 1e9;
  volatile int sink = 0;
  for (int round = 0; round < 5; round++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < calls; i++)
      sink = ibv_rate_to_mult((enum ibv_rate)(i & 7));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / calls;
    if (ns < best)
      best = ns;
  }
  (void)sink;
  printf("%.3f\n", best);
  return 0;
}
