/* SPDX-License-Identifier: MIT */
/*
 * The rate conversions of libibverbs (HAND entries of symbols.def): they
 * forward to the loaded library and answer from the same table without one.
 */
#include <stddef.h>

#include <infiniband/verbs.h>

#include "internal.h"

/* The rate conversions are pure table lookups in libibverbs (verbs.c); they
 * answer from the same table without a library, errno untouched: rdma-core
 * 65.0's rates (44.0 has the same), -1 (a rate with no whole multiple of
 * 2.5 Gbit/s, or none at all) and IBV_RATE_MAX where it answers so. */
static const struct {
  enum ibv_rate rate;
  int mult, mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},       {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},       {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},      {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},      {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},    {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},      {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},    {IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},    {IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},    {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},      {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},   {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
enum { NRATES = sizeof rates / sizeof rates[0] };

/* A rate's multiple of 2.5 Gbit/s (BY_MBPS 0) or its Mbit/s (1); -1 for none. */
static int rate_measure(enum ibv_rate rate, int by_mbps) {
  for (size_t i = 0; i < NRATES; i++)
    if (rates[i].rate == rate)
      return by_mbps ? rates[i].mbps : rates[i].mult;
  return -1;
}

/* The rate whose measure (as rate_measure) is the positive VALUE; else
 * IBV_RATE_MAX. */
static enum ibv_rate rate_of_measure(int value, int by_mbps) {
  for (size_t i = 0; i < NRATES; i++)
    if (value > 0 && (by_mbps ? rates[i].mbps : rates[i].mult) == value)
      return rates[i].rate;
  return IBV_RATE_MAX;
}

/* A conversion that asks the library when loaded and the table otherwise. */
#define RDMADL_RATE_STUB(name, ret, type, fallback)                                                \
  RDMADL_STUB_API ret RDMADL_NAME(name)(type value) {                                              \
    __typeof__(&name) f = RDMADL_FN(name);                                                         \
    return f ? f(value) : fallback;                                                                \
  }

RDMADL_RATE_STUB(ibv_rate_to_mult, int, enum ibv_rate, rate_measure(value, 0))
RDMADL_RATE_STUB(mult_to_ibv_rate, enum ibv_rate, int, rate_of_measure(value, 0))
RDMADL_RATE_STUB(ibv_rate_to_mbps, int, enum ibv_rate, rate_measure(value, 1))
RDMADL_RATE_STUB(mbps_to_ibv_rate, enum ibv_rate, int, rate_of_measure(value, 1))

RDMADL_LINKED(ibv_rate_to_mult)
RDMADL_LINKED(mult_to_ibv_rate)
RDMADL_LINKED(ibv_rate_to_mbps)
RDMADL_LINKED(mbps_to_ibv_rate)
