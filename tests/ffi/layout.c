/* SPDX-License-Identifier: MIT */
/*
 * layout - the C layout of the verbs.h structs that tests/guest/ffi_pingpong.py
 * declares with ctypes, in the lines its --layout option prints
 * ("struct field offset size"; "struct - 0 size" for the whole struct). The
 * test ffi.python.layout compares the two, so a ctypes declaration that
 * drifts from the bundled header fails on the host, not as corrupt data in
 * the VM.
 */
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdio.h>

#define S(type, name) printf("%s - 0 %zu\n", #name, sizeof(type))
#define F(type, name, py, c)                                                                       \
  printf("%s %s %zu %zu\n", #name, #py, offsetof(type, c), sizeof(((type *)0)->c))
/* A field ctypes names as C does, in struct TAG. */
#define SF(tag, f) F(struct tag, tag, f, f)

int main(void) {
  S(union ibv_gid, ibv_gid);
  F(union ibv_gid, ibv_gid, raw, raw);
  F(union ibv_gid, ibv_gid, global_, global);
  S(struct ibv_global_route, ibv_global_route);
  SF(ibv_global_route, dgid);
  SF(ibv_global_route, flow_label);
  SF(ibv_global_route, sgid_index);
  SF(ibv_global_route, hop_limit);
  SF(ibv_global_route, traffic_class);
  S(struct ibv_ah_attr, ibv_ah_attr);
#define AH(f) F(struct ibv_ah_attr, ibv_ah_attr, f, f)
  AH(grh);
  AH(dlid);
  AH(sl);
  AH(src_path_bits);
  AH(static_rate);
  AH(is_global);
  AH(port_num);
  S(struct ibv_qp_cap, ibv_qp_cap);
#define CAP(f) F(struct ibv_qp_cap, ibv_qp_cap, f, f)
  CAP(max_send_wr);
  CAP(max_recv_wr);
  CAP(max_send_sge);
  CAP(max_recv_sge);
  CAP(max_inline_data);
  S(struct ibv_qp_attr, ibv_qp_attr);
#define QA(f) F(struct ibv_qp_attr, ibv_qp_attr, f, f)
  QA(qp_state);
  QA(cur_qp_state);
  QA(path_mtu);
  QA(path_mig_state);
  QA(qkey);
  QA(rq_psn);
  QA(sq_psn);
  QA(dest_qp_num);
  QA(qp_access_flags);
  QA(cap);
  QA(ah_attr);
  QA(alt_ah_attr);
  QA(pkey_index);
  QA(alt_pkey_index);
  QA(en_sqd_async_notify);
  QA(sq_draining);
  QA(max_rd_atomic);
  QA(max_dest_rd_atomic);
  QA(min_rnr_timer);
  QA(port_num);
  QA(timeout);
  QA(retry_cnt);
  QA(rnr_retry);
  QA(alt_port_num);
  QA(alt_timeout);
  QA(rate_limit);
  S(struct ibv_qp_init_attr, ibv_qp_init_attr);
#define QI(f) F(struct ibv_qp_init_attr, ibv_qp_init_attr, f, f)
  QI(qp_context);
  QI(send_cq);
  QI(recv_cq);
  QI(srq);
  QI(cap);
  QI(qp_type);
  QI(sq_sig_all);
#define QP(f) F(struct ibv_qp, ibv_qp, f, f)
  QP(context);
  QP(qp_context);
  QP(pd);
  QP(send_cq);
  QP(recv_cq);
  QP(srq);
  QP(handle);
  QP(qp_num);
  S(struct ibv_mr, ibv_mr);
#define MR(f) F(struct ibv_mr, ibv_mr, f, f)
  MR(context);
  MR(pd);
  MR(addr);
  MR(length);
  MR(handle);
  MR(lkey);
  MR(rkey);
  S(struct ibv_port_attr, ibv_port_attr);
#define PA(f) F(struct ibv_port_attr, ibv_port_attr, f, f)
  PA(state);
  PA(max_mtu);
  PA(active_mtu);
  PA(gid_tbl_len);
  PA(port_cap_flags);
  PA(max_msg_sz);
  PA(bad_pkey_cntr);
  PA(qkey_viol_cntr);
  PA(pkey_tbl_len);
  PA(lid);
  PA(sm_lid);
  PA(lmc);
  PA(max_vl_num);
  PA(sm_sl);
  PA(subnet_timeout);
  PA(init_type_reply);
  PA(active_width);
  PA(active_speed);
  PA(phys_state);
  PA(link_layer);
  PA(flags);
  PA(port_cap_flags2);
  PA(active_speed_ex);
  S(struct ibv_sge, ibv_sge);
  SF(ibv_sge, addr);
  SF(ibv_sge, length);
  SF(ibv_sge, lkey);
  S(struct ibv_recv_wr, ibv_recv_wr);
  SF(ibv_recv_wr, wr_id);
  SF(ibv_recv_wr, next);
  SF(ibv_recv_wr, sg_list);
  SF(ibv_recv_wr, num_sge);
  S(struct ibv_send_wr, ibv_send_wr);
#define SW(f) F(struct ibv_send_wr, ibv_send_wr, f, f)
  SW(wr_id);
  SW(next);
  SW(sg_list);
  SW(num_sge);
  SW(opcode);
  SW(send_flags);
  SW(imm_data);
  SW(wr);
  F(struct ibv_send_wr, ibv_send_wr, remote_srqn, qp_type.xrc.remote_srqn);
  SW(bind_mw);
  S(struct ibv_wc, ibv_wc);
#define WC(f) F(struct ibv_wc, ibv_wc, f, f)
  WC(wr_id);
  WC(status);
  WC(opcode);
  WC(vendor_err);
  WC(byte_len);
  WC(imm_data);
  WC(qp_num);
  WC(src_qp);
  WC(wc_flags);
  WC(pkey_index);
  WC(slid);
  WC(sl);
  WC(dlid_path_bits);
  return 0;
}
