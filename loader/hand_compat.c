/* SPDX-License-Identifier: MIT */
/*
 * Old-ABI entries: ibv_register_driver, bound only as libibverbs's
 * non-default IBVERBS_1.1 entry, and (shared drop-in only) libmlx5's
 * mlx5dv_init_obj@MLX5_1.0.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "extra_decls.h"
#include "internal.h"
#include "rdmadl/loader.h"

/* Deprecated and bound only as the non-default IBVERBS_1.1 entry; the shared
 * drop-in exports it the same way, as ibv_register_driver@IBVERBS_1.1 (the
 * version script leaves the name out, so only this versioned alias remains). */
#ifdef RDMADL_DROPIN_SHARED
__asm__(".symver ibv_register_driver, ibv_register_driver@IBVERBS_1.1");
#endif
RDMADL_STUB_API void RDMADL_NAME(ibv_register_driver)(const char *name,
                                                      rdmadl_ibv_driver_init_func init_func) {
  __typeof__(&ibv_register_driver) f = RDMADL_FN(ibv_register_driver);
  if (f)
    f(name, init_func);
  else
    errno = EOPNOTSUPP;
}

#ifdef RDMADL_DROPIN_SHARED
/* libmlx5's old-ABI mlx5dv_init_obj@MLX5_1.0 (the table binds the default
 * MLX5_1.2 one), which programs linked against rdma-core before MLX5_1.2
 * reference: the shared drop-in exports it too, as that non-default entry,
 * and forwards it to the loaded libmlx5's own MLX5_1.0 entry; without one it
 * fails as mlx5dv_init_obj(3) documents, with EOPNOTSUPP. */
struct mlx5dv_obj;
__attribute__((visibility("default"))) int mlx5dv_init_obj_1_0_compat(struct mlx5dv_obj *obj,
                                                                      uint64_t obj_type);
__asm__(".symver mlx5dv_init_obj_1_0_compat, mlx5dv_init_obj@MLX5_1.0");
int mlx5dv_init_obj_1_0_compat(struct mlx5dv_obj *obj, uint64_t obj_type) {
  static void *entry; /* atomic */
  void *f = __atomic_load_n(&entry, __ATOMIC_ACQUIRE);
  if (!f && rdmadl_lib_load(RDMADL_LIB_MLX5) == 0) {
    const char *path = rdmadl_lib_path(RDMADL_LIB_MLX5);
    void *h = path ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (h) {
      f = dlvsym(h, "mlx5dv_init_obj", "MLX5_1.0");
      dlclose(h); /* the loader's own reference keeps it loaded */
      __atomic_store_n(&entry, f, __ATOMIC_RELEASE);
    }
  }
  if (f)
    return ((int (*)(struct mlx5dv_obj *, uint64_t))f)(obj, obj_type);
  rdmadl_refuse(RDMADL_IDX_mlx5dv_init_obj);
  return EOPNOTSUPP;
}
#endif

RDMADL_LINKED(ibv_register_driver)
