/* SPDX-License-Identifier: MIT */
/*
 * librdmacm's stubs: the generated ones (stubs.h) and the two by hand
 * (rdma_event_str, rfcntl), in an object file of their own because linking
 * it is what makes the constructor load librdmacm in the static libraries.
 *
 * A program that calls no rdma_* function must not pay for librdmacm (a
 * directly linked one has no NEEDED on it). In a static library
 * (librdmadl-verbs.a, librdmadl-loader.a, librdmadl-ffi.a) the linker pulls
 * this object in only when something references one of these stubs, and
 * with it rdmadl_cm_linked, which load.c references weakly: defined means
 * the program uses librdmacm, and the constructor loads it. The shared
 * drop-in, which holds every stub, asks the loaded objects' version
 * requirements instead (load.c). Otherwise the first rdma_* call loads
 * librdmacm (rdmadl_resolve_slow), like a lazy library.
 *
 * A shared librdmadl compiles its loader with RDMADL_CM_FIRST_USE, which
 * leaves the marker out: librdmadl.so holds cm.cpp and with it every stub
 * it calls, whether or not its program ever makes a cm object, so the
 * marker would load librdmacm into every program linked to it. There the
 * C++ API's first rdma_* call loads it, thread-safely, as above. (A static
 * librdmadl.a keeps the marker: the linker brings it in only with the cm
 * objects a program uses.)
 *
 * librdmadl-verbs.a (RDMADL_BIND_LINKED) has each generated stub in a file
 * of its own, and this one only the two by hand: there every linked stub
 * records its row (RDMADL_LINKED), and one of librdmacm's rows recorded is
 * what makes the constructor load it (load.c).
 */
#include <stdarg.h>

#include <rdma/rsocket.h>

#include "str_tables.h"
#include "stubs.h"

#if !defined(RDMADL_CM_FIRST_USE) && !defined(RDMADL_BIND_LINKED)
RDMADL_HIDDEN const char rdmadl_cm_linked = 1;
#endif

#define RDMADL_ROW_IBV(...)
#ifdef RDMADL_BIND_LINKED
#define RDMADL_ROW_CM(...)
#else
#define RDMADL_ROW_CM(...) __VA_ARGS__
#endif
#define RDMADL_ROW_MLX5(...)
#define RDMADL_ROW_EFA(...)
#define RDMADL_ROW_MLX4(...)
#define RDMADL_ROW_HNS(...)
#define RDMADL_ROW_MANA(...)
#define RDMADL_ROW_IONIC(...)
#define RDMADL_ROW_UMAD(...)
#define RDMADL_SYM(lib, minor, fail, impl, ret, name, params, args)                                \
  RDMADL_ROW_##lib(RDMADL_IMPL_##impl(fail, ret, name, params, args))
#include "symbols.def"
#undef RDMADL_SYM

/* Keeps working without a library: the strings rdma-core returns,
 * "UNKNOWN EVENT" outside the enum. */
RDMADL_STUB_API const char *RDMADL_NAME(rdma_event_str)(enum rdma_cm_event_type event) {
  const char *(*f)(enum rdma_cm_event_type) =
      (const char *(*)(enum rdma_cm_event_type))rdmadl_load_fn(RDMADL_IDX_rdma_event_str);
  if (f)
    return f(event);
  const char *s = RDMADL_STR_AT(cm_event_strs, event);
  return s ? s : "UNKNOWN EVENT";
}

/* fcntl-style varargs: the optional argument is forwarded as a pointer-sized
 * value, which is how every rfcntl command reads it. */
RDMADL_STUB_API int RDMADL_NAME(rfcntl)(int socket, int cmd, ...) {
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  int (*f)(int, int, ...) = (int (*)(int, int, ...))rdmadl_load_fn(RDMADL_IDX_rfcntl);
  if (f)
    return f(socket, cmd, arg);
  rdmadl_refuse(RDMADL_IDX_rfcntl);
  return -1;
}

RDMADL_LINKED(rdma_event_str)
RDMADL_LINKED(rfcntl)
