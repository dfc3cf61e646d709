/* SPDX-License-Identifier: MIT */
/*
 * dv_helpers_x86.h - mlx5dv.h's SSE variants, compiled with -mssse3 in
 * dv_helpers_x86.c (x86 only), for dv_helpers_test to compare with the
 * generic setters librdmadl-ffi exports. RDMADL_TEST_X86 is 1 when built.
 */
#ifndef RDMADL_TEST_DV_HELPERS_X86_H
#define RDMADL_TEST_DV_HELPERS_X86_H

#include <stdint.h>

#ifndef RDMADL_TEST_X86
#define RDMADL_TEST_X86 0
#endif

void rdmadl_test_x86_set_ctrl_seg(void *seg, uint16_t pi, uint8_t opcode, uint8_t opmod,
                                  uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds, uint8_t signature,
                                  uint32_t imm);
void rdmadl_test_x86_set_data_seg(void *seg, uint32_t length, uint32_t lkey, uintptr_t address);

#endif /* RDMADL_TEST_DV_HELPERS_X86_H */
