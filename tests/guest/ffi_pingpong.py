#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""RC ping-pong over RDMA from Python's ctypes through librdmadl-ffi.

No C compiler is involved: ibv_post_send, ibv_post_recv and ibv_poll_cq, which
rdma-core has only as static inline functions in verbs.h, are ordinary symbols
of librdmadl-ffi.so.0. Two RC queue pairs on one device (loopback through its
RoCE v2 GID) exchange ITERS ping/pong messages; every byte is checked.

Usage: ffi_pingpong.py [--absent] [--iters N] [--layout]
  --absent  no RDMA stack is expected: every call must fail cleanly
            (EOPNOTSUPP), and the program says why, without a traceback
  --layout  print the ctypes layout of the structs used ("struct field
            offset size" lines) for the host test that compares it with C's
Environment: RDMADL_FFI_LIB (default librdmadl-ffi.so.0), RDMADL_TEST_DEVICE,
RDMADL_TEST_GID_INDEX (as set in the Soft-RoCE guest), RDMADL_VM_BREAK.
Result lines: "RDMADL-CHECK <name> PASS|FAIL"; exit status 0 when all passed.
"""
import ctypes
import errno
import os
import sys
import time
from ctypes import (POINTER, Structure, Union, byref, c_char_p, c_int, c_size_t,
                    c_uint, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p, sizeof)

# --- the structs of rdma-core 65.0's verbs.h this program touches -------------


class _gid_global(Structure):
    _fields_ = [("subnet_prefix", c_uint64), ("interface_id", c_uint64)]


class ibv_gid(Union):
    _fields_ = [("raw", c_uint8 * 16), ("global_", _gid_global)]


class ibv_global_route(Structure):
    _fields_ = [("dgid", ibv_gid), ("flow_label", c_uint32), ("sgid_index", c_uint8),
                ("hop_limit", c_uint8), ("traffic_class", c_uint8)]


class ibv_ah_attr(Structure):
    _fields_ = [("grh", ibv_global_route), ("dlid", c_uint16), ("sl", c_uint8),
                ("src_path_bits", c_uint8), ("static_rate", c_uint8), ("is_global", c_uint8),
                ("port_num", c_uint8)]


class ibv_qp_cap(Structure):
    _fields_ = [("max_send_wr", c_uint32), ("max_recv_wr", c_uint32), ("max_send_sge", c_uint32),
                ("max_recv_sge", c_uint32), ("max_inline_data", c_uint32)]


class ibv_qp_attr(Structure):
    _fields_ = [("qp_state", c_int), ("cur_qp_state", c_int), ("path_mtu", c_int),
                ("path_mig_state", c_int), ("qkey", c_uint32), ("rq_psn", c_uint32),
                ("sq_psn", c_uint32), ("dest_qp_num", c_uint32), ("qp_access_flags", c_uint),
                ("cap", ibv_qp_cap), ("ah_attr", ibv_ah_attr), ("alt_ah_attr", ibv_ah_attr),
                ("pkey_index", c_uint16), ("alt_pkey_index", c_uint16),
                ("en_sqd_async_notify", c_uint8), ("sq_draining", c_uint8),
                ("max_rd_atomic", c_uint8), ("max_dest_rd_atomic", c_uint8),
                ("min_rnr_timer", c_uint8), ("port_num", c_uint8), ("timeout", c_uint8),
                ("retry_cnt", c_uint8), ("rnr_retry", c_uint8), ("alt_port_num", c_uint8),
                ("alt_timeout", c_uint8), ("rate_limit", c_uint32)]


class ibv_qp_init_attr(Structure):
    _fields_ = [("qp_context", c_void_p), ("send_cq", c_void_p), ("recv_cq", c_void_p),
                ("srq", c_void_p), ("cap", ibv_qp_cap), ("qp_type", c_int), ("sq_sig_all", c_int)]


class ibv_qp(Structure):  # the leading, stable part
    _fields_ = [("context", c_void_p), ("qp_context", c_void_p), ("pd", c_void_p),
                ("send_cq", c_void_p), ("recv_cq", c_void_p), ("srq", c_void_p),
                ("handle", c_uint32), ("qp_num", c_uint32)]


class ibv_mr(Structure):
    _fields_ = [("context", c_void_p), ("pd", c_void_p), ("addr", c_void_p),
                ("length", c_size_t), ("handle", c_uint32), ("lkey", c_uint32),
                ("rkey", c_uint32)]


class ibv_port_attr(Structure):
    _fields_ = [("state", c_int), ("max_mtu", c_int), ("active_mtu", c_int),
                ("gid_tbl_len", c_int), ("port_cap_flags", c_uint32), ("max_msg_sz", c_uint32),
                ("bad_pkey_cntr", c_uint32), ("qkey_viol_cntr", c_uint32),
                ("pkey_tbl_len", c_uint16), ("lid", c_uint16), ("sm_lid", c_uint16),
                ("lmc", c_uint8), ("max_vl_num", c_uint8), ("sm_sl", c_uint8),
                ("subnet_timeout", c_uint8), ("init_type_reply", c_uint8),
                ("active_width", c_uint8), ("active_speed", c_uint8), ("phys_state", c_uint8),
                ("link_layer", c_uint8), ("flags", c_uint8), ("port_cap_flags2", c_uint16),
                ("active_speed_ex", c_uint32)]


class ibv_sge(Structure):
    _fields_ = [("addr", c_uint64), ("length", c_uint32), ("lkey", c_uint32)]


class ibv_recv_wr(Structure):
    pass


ibv_recv_wr._fields_ = [("wr_id", c_uint64), ("next", POINTER(ibv_recv_wr)),
                        ("sg_list", POINTER(ibv_sge)), ("num_sge", c_int)]


class _rdma(Structure):
    _fields_ = [("remote_addr", c_uint64), ("rkey", c_uint32)]


class _atomic(Structure):
    _fields_ = [("remote_addr", c_uint64), ("compare_add", c_uint64), ("swap", c_uint64),
                ("rkey", c_uint32)]


class _ud(Structure):
    _fields_ = [("ah", c_void_p), ("remote_qpn", c_uint32), ("remote_qkey", c_uint32)]


class _wr(Union):
    _fields_ = [("rdma", _rdma), ("atomic", _atomic), ("ud", _ud)]


class _bind_mw(Structure):  # struct ibv_mw *mw; uint32_t rkey; struct ibv_mw_bind_info
    _fields_ = [("mw", c_void_p), ("rkey", c_uint32), ("mr", c_void_p), ("addr", c_uint64),
                ("length", c_uint64), ("mw_access_flags", c_uint)]


class ibv_send_wr(Structure):
    pass


ibv_send_wr._fields_ = [("wr_id", c_uint64), ("next", POINTER(ibv_send_wr)),
                        ("sg_list", POINTER(ibv_sge)), ("num_sge", c_int), ("opcode", c_int),
                        ("send_flags", c_uint), ("imm_data", c_uint32), ("wr", _wr),
                        ("remote_srqn", c_uint32), ("bind_mw", _bind_mw)]


class ibv_wc(Structure):
    _fields_ = [("wr_id", c_uint64), ("status", c_int), ("opcode", c_int),
                ("vendor_err", c_uint32), ("byte_len", c_uint32), ("imm_data", c_uint32),
                ("qp_num", c_uint32), ("src_qp", c_uint32), ("wc_flags", c_uint),
                ("pkey_index", c_uint16), ("slid", c_uint16), ("sl", c_uint8),
                ("dlid_path_bits", c_uint8)]


STRUCTS = [ibv_gid, ibv_global_route, ibv_ah_attr, ibv_qp_cap, ibv_qp_attr, ibv_qp_init_attr,
           ibv_qp, ibv_mr, ibv_port_attr, ibv_sge, ibv_recv_wr, ibv_send_wr, ibv_wc]
PREFIX_ONLY = {ibv_qp}  # only the leading fields are declared: no size

# enum values from verbs.h
IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_READ = 1, 2, 4
IBV_QPT_RC = 2
IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS = 1, 2, 3
IBV_QP_STATE, IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX, IBV_QP_PORT = 1, 1 << 3, 1 << 4, 1 << 5
IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT = 1 << 7, 1 << 8, 1 << 9, 1 << 10
IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC = 1 << 11, 1 << 12, 1 << 13
IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN, IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 15, 1 << 16, 1 << 17
IBV_QP_DEST_QPN = 1 << 20
IBV_WR_SEND = 2
IBV_SEND_SIGNALED = 2
IBV_WC_SUCCESS, IBV_WC_SEND, IBV_WC_RECV = 0, 0, 128
IBV_PORT_ACTIVE = 4

failures = 0


def check(name, ok, detail=""):
    global failures
    print(f"RDMADL-CHECK {name} {'PASS' if ok else 'FAIL'}", flush=True)
    if not ok:
        failures += 1
        if detail:
            print(f"ffi_pingpong: {name}: {detail}", file=sys.stderr, flush=True)
    return ok


def load():
    """The library and the prototypes of the functions used, or None."""
    path = os.environ.get("RDMADL_FFI_LIB", "librdmadl-ffi.so.0")
    try:
        lib = ctypes.CDLL(path, use_errno=True)
    except OSError as e:
        print(f"ffi_pingpong: cannot load {path}: {e}", file=sys.stderr, flush=True)
        return None
    p = c_void_p
    protos = {
        "rdmadl_load": (c_int, []),
        "rdmadl_reason": (c_char_p, []),
        "ibv_get_device_list": (POINTER(p), [POINTER(c_int)]),
        "ibv_free_device_list": (None, [POINTER(p)]),
        "ibv_get_device_name": (c_char_p, [p]),
        "ibv_open_device": (p, [p]),
        "ibv_close_device": (c_int, [p]),
        "ibv_query_port": (c_int, [p, c_uint8, POINTER(ibv_port_attr)]),
        "ibv_query_gid": (c_int, [p, c_uint8, c_int, POINTER(ibv_gid)]),
        "ibv_alloc_pd": (p, [p]),
        "ibv_dealloc_pd": (c_int, [p]),
        "ibv_reg_mr": (POINTER(ibv_mr), [p, p, c_size_t, c_int]),
        "ibv_dereg_mr": (c_int, [POINTER(ibv_mr)]),
        "ibv_create_cq": (p, [p, c_int, p, p, c_int]),
        "ibv_destroy_cq": (c_int, [p]),
        "ibv_create_qp": (POINTER(ibv_qp), [p, POINTER(ibv_qp_init_attr)]),
        "ibv_destroy_qp": (c_int, [POINTER(ibv_qp)]),
        "ibv_modify_qp": (c_int, [POINTER(ibv_qp), POINTER(ibv_qp_attr), c_int]),
        "ibv_post_send": (c_int, [POINTER(ibv_qp), POINTER(ibv_send_wr),
                                  POINTER(POINTER(ibv_send_wr))]),
        "ibv_post_recv": (c_int, [POINTER(ibv_qp), POINTER(ibv_recv_wr),
                                  POINTER(POINTER(ibv_recv_wr))]),
        "ibv_poll_cq": (c_int, [p, c_int, POINTER(ibv_wc)]),
        "ibv_wc_status_str": (c_char_p, [c_int]),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def absent(lib):
    """No RDMA stack: every call must fail cleanly, and rdmadl must say why."""
    n = c_int(7)
    ctypes.set_errno(0)
    devs = lib.ibv_get_device_list(byref(n))
    err = ctypes.get_errno()
    reason = lib.rdmadl_reason().decode()
    print(f"ffi_pingpong: no RDMA stack: {reason}", flush=True)
    ok = (not devs and n.value == 0 and err == errno.EOPNOTSUPP
          and lib.rdmadl_load() == errno.EOPNOTSUPP and len(reason) > 0)
    ctypes.set_errno(0)
    pd = lib.ibv_alloc_pd(None)
    ok = ok and pd is None and ctypes.get_errno() == errno.EOPNOTSUPP
    return check("ffi.python.absent", ok,
                 f"ibv_get_device_list gave {bool(devs)} num {n.value} errno {err}")


class Side:
    """One RC queue pair with its CQ and its half of the buffer."""

    def __init__(self, lib, ctx, pd, mr, base, size):
        self.lib, self.mr, self.base, self.size = lib, mr, base, size
        self.cq = lib.ibv_create_cq(ctx, 16, None, None, 0)
        if not self.cq:
            raise OSError(ctypes.get_errno(), "ibv_create_cq")
        ia = ibv_qp_init_attr(send_cq=self.cq, recv_cq=self.cq, qp_type=IBV_QPT_RC,
                              cap=ibv_qp_cap(max_send_wr=4, max_recv_wr=4, max_send_sge=1,
                                             max_recv_sge=1))
        self.qp = lib.ibv_create_qp(pd, byref(ia))
        if not self.qp:
            raise OSError(ctypes.get_errno(), "ibv_create_qp")

    def connect(self, port, mtu, gid, gid_index, remote_qpn):
        access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
        a = ibv_qp_attr(qp_state=IBV_QPS_INIT, port_num=port, qp_access_flags=access)
        steps = [(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)]
        a = ibv_qp_attr(qp_state=IBV_QPS_RTR, path_mtu=mtu, dest_qp_num=remote_qpn, rq_psn=0,
                        max_dest_rd_atomic=1, min_rnr_timer=12)
        a.ah_attr.is_global, a.ah_attr.port_num = 1, port
        a.ah_attr.grh.dgid, a.ah_attr.grh.sgid_index, a.ah_attr.grh.hop_limit = gid, gid_index, 1
        steps.append((a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                      IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        a = ibv_qp_attr(qp_state=IBV_QPS_RTS, timeout=14, retry_cnt=7, rnr_retry=7, sq_psn=0,
                        max_rd_atomic=1)
        steps.append((a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                      IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
        for attr, mask in steps:
            ret = self.lib.ibv_modify_qp(self.qp, byref(attr), mask)
            if ret:
                raise OSError(ret, f"ibv_modify_qp to state {attr.qp_state}")

    def post_recv(self, wr_id):
        sge = ibv_sge(addr=self.base, length=self.size, lkey=self.mr.contents.lkey)
        wr = ibv_recv_wr(wr_id=wr_id, sg_list=ctypes.pointer(sge), num_sge=1)
        bad = POINTER(ibv_recv_wr)()
        return self.lib.ibv_post_recv(self.qp, byref(wr), byref(bad))

    def post_send(self, wr_id, length):
        sge = ibv_sge(addr=self.base, length=length, lkey=self.mr.contents.lkey)
        wr = ibv_send_wr(wr_id=wr_id, sg_list=ctypes.pointer(sge), num_sge=1, opcode=IBV_WR_SEND,
                         send_flags=IBV_SEND_SIGNALED)
        bad = POINTER(ibv_send_wr)()
        return self.lib.ibv_post_send(self.qp, byref(wr), byref(bad))

    def poll(self, want, timeout=5.0):
        """Completions until WANT arrived or TIMEOUT s passed."""
        got, wc, end = [], (ibv_wc * 4)(), time.monotonic() + timeout
        while len(got) < want and time.monotonic() < end:
            n = self.lib.ibv_poll_cq(self.cq, 4, wc)
            if n < 0:
                raise OSError(errno.EIO, "ibv_poll_cq")
            got += [(wc[i].wr_id, wc[i].status, wc[i].opcode, wc[i].byte_len) for i in range(n)]
        return got

    def close(self):
        self.lib.ibv_destroy_qp(self.qp)
        self.lib.ibv_destroy_cq(self.cq)


def message(kind, i):
    """Deterministic payload for message I; RDMADL_VM_BREAK flips one byte."""
    data = bytearray((kind * 131 + i * 7 + k) & 0xFF for k in range(256))
    return bytes(data)


def pingpong(lib, iters):
    n = c_int(0)
    devs = lib.ibv_get_device_list(byref(n))
    if not devs:
        print(f"ffi_pingpong: no device: {lib.rdmadl_reason().decode()}", file=sys.stderr)
        return check("ffi.python.setup", False, os.strerror(ctypes.get_errno()))
    want = os.environ.get("RDMADL_TEST_DEVICE")
    dev = None
    for i in range(n.value):
        if want is None or lib.ibv_get_device_name(devs[i]).decode() == want:
            dev = devs[i]
            break
    ctx = lib.ibv_open_device(dev) if dev else None
    lib.ibv_free_device_list(devs)
    if not ctx:
        return check("ffi.python.setup", False, f"device {want} not found or not opened")
    port = 1
    pattr = ibv_port_attr()
    ret = lib.ibv_query_port(ctx, port, byref(pattr))
    gid_index = int(os.environ.get("RDMADL_TEST_GID_INDEX", "1"))
    gid = ibv_gid()
    ok = ret == 0 and pattr.state == IBV_PORT_ACTIVE and \
        lib.ibv_query_gid(ctx, port, gid_index, byref(gid)) == 0
    if not check("ffi.python.setup", ok, f"ibv_query_port {ret} state {pattr.state}"):
        return False
    size = 4096
    buf = ctypes.create_string_buffer(2 * size)
    base = ctypes.addressof(buf)
    pd = lib.ibv_alloc_pd(ctx)
    access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ
    mr = lib.ibv_reg_mr(pd, base, 2 * size, access) if pd else None
    if not mr:
        return check("ffi.python.connect", False, f"ibv_reg_mr: {os.strerror(ctypes.get_errno())}")
    try:
        a = Side(lib, ctx, pd, mr, base, size)
        b = Side(lib, ctx, pd, mr, base + size, size)
        a.connect(port, pattr.active_mtu, gid, gid_index, b.qp.contents.qp_num)
        b.connect(port, pattr.active_mtu, gid, gid_index, a.qp.contents.qp_num)
    except OSError as e:
        return check("ffi.python.connect", False, f"{e.strerror or os.strerror(e.errno)}: {e}")
    check("ffi.python.connect", True)
    broken = os.environ.get("RDMADL_VM_BREAK") == "ffi.python.pingpong"
    ok, why, t0 = True, "", time.monotonic()
    for i in range(iters):
        for src, dst, kind in ((a, b, 1), (b, a, 2)):  # ping, then pong
            msg = message(kind, i)
            ctypes.memmove(src.base, msg, len(msg))
            ctypes.memset(dst.base, 0, len(msg))
            if dst.post_recv(100 + i) or src.post_send(i, len(msg)):
                ok, why = False, f"post failed at iteration {i}"
                break
            sent, recv = src.poll(1), dst.poll(1)
            if len(sent) != 1 or sent[0][:3] != (i, IBV_WC_SUCCESS, IBV_WC_SEND):
                ok, why = False, f"iteration {i}: send completion {sent}"
                break
            if len(recv) != 1 or recv[0] != (100 + i, IBV_WC_SUCCESS, IBV_WC_RECV, len(msg)):
                ok, why = False, f"iteration {i}: receive completion {recv}"
                break
            got = ctypes.string_at(dst.base, len(msg))
            if broken and i == 0 and kind == 1:
                msg = bytes([msg[0] ^ 1]) + msg[1:]
            if got != msg:
                ok, why = False, f"iteration {i}: payload differs"
                break
        if not ok:
            break
    dt = time.monotonic() - t0
    if ok:
        print(f"ffi_pingpong: {iters} round trips of 256 bytes in {dt:.3f} s "
              f"({dt / iters * 1e6:.0f} us each, TCG: traffic flows, not a benchmark)")
    check("ffi.python.pingpong", ok, why)
    a.close()
    b.close()
    lib.ibv_dereg_mr(mr)
    lib.ibv_dealloc_pd(pd)
    lib.ibv_close_device(ctx)
    return ok


def main(argv):
    iters = 100
    if "--layout" in argv:
        for s in STRUCTS:
            if s not in PREFIX_ONLY:
                print(f"{s.__name__} - 0 {sizeof(s)}")
            for f in s._fields_:
                print(f"{s.__name__} {f[0]} {getattr(s, f[0]).offset} {getattr(s, f[0]).size}")
        return 0
    if "--iters" in argv:
        iters = int(argv[argv.index("--iters") + 1])
    lib = load()
    if lib is None:
        check("ffi.python.load", False)
        return 1
    if "--absent" in argv:
        absent(lib)
    else:
        pingpong(lib, iters)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
