/* SPDX-License-Identifier: MIT */
/* Built with -mssse3: see dv_helpers_x86.h. */
#include <infiniband/mlx5dv.h>

#include "dv_helpers_x86.h"

void rdmadl_test_x86_set_ctrl_seg(void *seg, uint16_t pi, uint8_t opcode, uint8_t opmod,
                                  uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds, uint8_t signature,
                                  uint32_t imm) {
  mlx5dv_x86_set_ctrl_seg(seg, pi, opcode, opmod, qp_num, fm_ce_se, ds, signature, imm);
}

void rdmadl_test_x86_set_data_seg(void *seg, uint32_t length, uint32_t lkey, uintptr_t address) {
  mlx5dv_x86_set_data_seg(seg, length, lkey, address);
}
