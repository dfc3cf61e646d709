/* SPDX-License-Identifier: MIT */
/** @file
 * rdmadl/loader.h - what rdmadl's run-time loader found.
 *
 * rdmadl dlopens libibverbs.so.1 and librdmacm.so.1 at start-up (and,
 * thread-safely, on first use) and binds every public symbol at its exact
 * version node. The providers' direct-verbs libraries (libmlx5.so.1, libefa.so.1,
 * libmlx4.so.1, libhns.so.1, libmana.so.1, libionic.so.1) and libibumad.so.3
 * are loaded the same way, but only when one of their functions is first
 * called (or rdmadl_lib_load() asks). This C header reports the outcome. It
 * includes no rdma-core header.
 *
 * The static drop-in (librdmadl-verbs.a) binds at start-up only the functions
 * its program links, and the rest before any function here reads them: what
 * they report is the same in every build.
 *
 * Environment (read with secure_getenv, so set-uid programs ignore it; see
 * README.md "Environment" for the exact rules):
 * - RDMADL_IBVERBS_PATH: a file to load instead of libibverbs.so.1 (a path;
 *   relative to the current directory, never searched; only a regular file
 *   is opened)
 * - RDMADL_RDMACM_PATH: a file to load instead of librdmacm.so.1 (same rules)
 * - RDMADL_MLX5_PATH, RDMADL_EFA_PATH, RDMADL_MLX4_PATH, RDMADL_HNS_PATH,
 *   RDMADL_MANA_PATH, RDMADL_IONIC_PATH, RDMADL_IBUMAD_PATH: the same for
 *   libmlx5.so.1 ... libibumad.so.3
 * - RDMADL_DISABLE=1: behave exactly as if no RDMA stack were installed
 *   (1/true/yes/on; 0/false/no/off do not disable)
 * - RDMADL_DEBUG=1: log a summary to stderr: one line per library as it
 *   loads, then the verdict (also true/yes/on/info)
 * - RDMADL_DEBUG=2: also every resolution step, one line per symbol (also
 *   any larger number, debug, symbols)
 *
 * All functions are thread-safe, never fail, and load libibverbs (and
 * librdmacm, when the program calls rdma_* functions) first if that has not
 * happened yet; they report a provider library, libibumad or a librdmacm
 * that nothing has used yet as RDMADL_STATE_NOT_LOADED (librdmacm's error:
 * "not loaded: no rdma_* function in this program"), and never load it,
 * except rdmadl_lib_load() and rdmadl_symbol_status(). Returned strings live as long as
 * the process. One exception to "load first": a thread that a library constructor running inside
 * rdmadl's own dlopen waits for (it started and joins it) cannot be served; after 5 s it gets what
 * is known so far (rdmadl_reason() then says that nothing is loaded yet) and its verbs calls fail
 * with EOPNOTSUPP.
 */
#ifndef RDMADL_LOADER_H
#define RDMADL_LOADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(RDMADL_BUILDING)
#define RDMADL_API __attribute__((visibility("default")))
#else
#define RDMADL_API
#endif

/** The libraries rdmadl loads: libibverbs, librdmacm, the providers'
 * direct-verbs libraries and libibumad. The provider libraries (MLX5 ...
 * IONIC) are part of one rdma-core release with its libibverbs: rdmadl loads
 * one only when libibverbs is usable, from libibverbs's own directory when it
 * is there (else the library search path), and refuses
 * (RDMADL_STATE_INCOMPATIBLE, saying which) a file that needs another
 * release's IBVERBS_PRIVATE_* node. libibumad stands alone. */
typedef enum rdmadl_lib {
  RDMADL_LIB_IBVERBS = 0, /**< libibverbs.so.1 */
  RDMADL_LIB_RDMACM = 1,  /**< librdmacm.so.1 */
  RDMADL_LIB_MLX5 = 2,    /**< libmlx5.so.1: mlx5dv_* (NVIDIA/Mellanox) */
  RDMADL_LIB_EFA = 3,     /**< libefa.so.1: efadv_* (AWS EFA) */
  RDMADL_LIB_MLX4 = 4,    /**< libmlx4.so.1: mlx4dv_* */
  RDMADL_LIB_HNS = 5,     /**< libhns.so.1: hnsdv_* (Huawei) */
  RDMADL_LIB_MANA = 6,    /**< libmana.so.1: manadv_* (Microsoft) */
  RDMADL_LIB_IONIC = 7,   /**< libionic.so.1: ionic_dv_* (AMD Pensando) */
  RDMADL_LIB_IBUMAD = 8,  /**< libibumad.so.3: umad_* */
  RDMADL_LIB_COUNT = 9    /**< the number of libraries, not one of them */
} rdmadl_lib;

/** The outcome of loading one library (rdmadl_lib_state()). */
typedef enum rdmadl_state {
  RDMADL_STATE_DISABLED = 0,     /**< RDMADL_DISABLE=1 */
  RDMADL_STATE_NOT_FOUND = 1,    /**< no such file (or not on the search path) */
  RDMADL_STATE_LOAD_FAILED = 2,  /**< the file exists but dlopen failed */
  RDMADL_STATE_INCOMPATIBLE = 3, /**< loaded, but not a usable rdma-core library
                                    (wrong soname, rdmadl itself, no symbol at
                                    any expected version node) */
  RDMADL_STATE_SKIPPED = 4,      /**< librdmacm only: libibverbs is unusable */
  RDMADL_STATE_LOADED = 5,       /**< every symbol resolved */
  RDMADL_STATE_PARTIAL = 6,      /**< loaded; some symbols missing (older
                                    release): those fail with EOPNOTSUPP */
  RDMADL_STATE_NOT_LOADED = 7    /**< a provider library, libibumad or
                                    librdmacm none of whose functions was
                                    called yet (librdmacm: the program has no
                                    rdma_* call; its first call loads it) */
} rdmadl_state;

/** What the whole stack can do, beyond the libraries. */
typedef enum rdmadl_stack {
  RDMADL_STACK_DISABLED = 0,          /**< RDMADL_DISABLE=1 */
  RDMADL_STACK_NO_LIBRARY = 1,        /**< libibverbs unusable (see its state) */
  RDMADL_STACK_NO_KERNEL_SUPPORT = 2, /**< library loaded, kernel has no RDMA
                                         (ibv_get_device_list: ENOSYS) */
  RDMADL_STACK_NO_DEVICES = 3,        /**< kernel support, zero devices */
  RDMADL_STACK_READY = 4              /**< at least one device */
} rdmadl_stack;

/** Loads both libraries if not done yet. Returns 0 when libibverbs is usable
 * (LOADED or PARTIAL), else EOPNOTSUPP. Never sets errno. */
RDMADL_API int rdmadl_load(void);

/** Loads LIB now if nothing has yet (any library; libibverbs and librdmacm
 * are loaded together). Returns 0 when it is usable (LOADED or PARTIAL),
 * else EOPNOTSUPP. Never sets errno. */
RDMADL_API int rdmadl_lib_load(rdmadl_lib lib);
/** The soname rdmadl loads for LIB ("libmlx5.so.1"), or NULL. */
RDMADL_API const char *rdmadl_lib_name(rdmadl_lib lib);
/** State of one library. */
RDMADL_API rdmadl_state rdmadl_lib_state(rdmadl_lib lib);
/** A stable lower-case name for a state ("loaded", "not-found", ...). */
RDMADL_API const char *rdmadl_state_name(rdmadl_state state);
/** The file name or path that was requested ("libibverbs.so.1" or the override). */
RDMADL_API const char *rdmadl_lib_requested(rdmadl_lib lib);
/** Real path of the file actually loaded, or NULL when nothing was loaded. */
RDMADL_API const char *rdmadl_lib_path(rdmadl_lib lib);
/** The dlerror() text (or rdmadl's own reason) of the failure, or NULL. */
RDMADL_API const char *rdmadl_lib_error(rdmadl_lib lib);
/** Highest version node the loaded file defines ("IBVERBS_1.14",
 * "MLX5_1.25.1"), or NULL. */
RDMADL_API const char *rdmadl_lib_version_node(rdmadl_lib lib);
/** Number of public symbols rdmadl binds for this library (95 for libibverbs,
 * 74 for librdmacm, ...). */
RDMADL_API size_t rdmadl_lib_symbol_count(rdmadl_lib lib);
/** Number of those not resolved (all of them when nothing was loaded). */
RDMADL_API size_t rdmadl_lib_missing_count(rdmadl_lib lib);
/** The i-th missing symbol's name (0 <= i < missing_count), else NULL. */
RDMADL_API const char *rdmadl_lib_missing_symbol(rdmadl_lib lib, size_t i);

/** What rdmadl_symbol_status() says about one symbol. */
enum {
  RDMADL_SYMBOL_UNKNOWN = -1, /**< rdmadl does not know the name */
  RDMADL_SYMBOL_MISSING = 0,  /**< not in the loaded library (or none loaded):
                                 calls fail with EOPNOTSUPP */
  RDMADL_SYMBOL_RESOLVED = 1, /**< bound in the loaded library */
  RDMADL_SYMBOL_EMULATED = 2  /**< not in the loaded library, but rdmadl runs a
                                 faithful fallback built from the calls that
                                 library has (README: the failure contract) */
};

/** Per-symbol query: one of RDMADL_SYMBOL_*. When NODE is non-NULL it receives
 * the version node NAME is bound at ("IBVERBS_1.1"), for known names. An
 * emulated symbol still counts as missing in rdmadl_lib_missing_count(). A
 * symbol of a library not loaded yet (RDMADL_STATE_NOT_LOADED) loads it. */
RDMADL_API int rdmadl_symbol_status(const char *name, const char **node);
/** The i-th known symbol (0 <= i < the sum of the symbol counts), else NULL.
 * LIB may be NULL. */
RDMADL_API const char *rdmadl_symbol_name(size_t i, rdmadl_lib *lib);

/** Asks libibverbs for its device list (once per call) and classifies it. */
RDMADL_API rdmadl_stack rdmadl_stack_state(void);
/** A stable lower-case name for a stack state ("ready", "no-kernel-support",
 * ...), "unknown" for a value outside the enumeration. */
RDMADL_API const char *rdmadl_stack_name(rdmadl_stack stack);

/** What the libraries are, for example "libibverbs.so.1 (rdma-core 44.0,
 * IBVERBS_1.14, PATH): complete for its release, 14 newer symbols absent, 5
 * emulated; librdmacm.so.1 (...)": an older release lacking newer symbols is
 * complete. Based on the libraries only, never the kernel or the devices: to
 * tell a user why RDMA is off, show rdmadl_verdict(). Control characters are
 * escaped as rdmadl-info prints them: backslash-n, backslash-t,
 * backslash-xNN, and a backslash doubled. */
RDMADL_API const char *rdmadl_reason(void);

/** The one sentence to show a user: whether RDMA is usable here and, if not,
 * why and what to do. It is what `rdmadl-info` prints after "usable: yes|no: ".
 * Looks at everything, computed afresh on each call: the libraries, the
 * kernel (ibv_get_device_list), the devices (each is opened once to find an
 * active port). E.g. "libibverbs is installed (PATH) but the kernel has no
 * RDMA support (ibv_get_device_list: ENOSYS): load an RDMA driver, or
 * Soft-RoCE: modprobe rdma_rxe; rdma link add rxe0 type rxe netdev IFACE";
 * "RDMA is disabled by RDMADL_DISABLE"; "RDMA is usable: 1 device (rxe0),
 * active: rxe0 port 1". Control characters are escaped as in rdmadl_reason().
 * @return never NULL. The string lives as long as the process: each distinct
 *         sentence is kept once (interned), so a pointer returned earlier
 *         stays valid when the devices change; memory grows only with the
 *         number of distinct sentences. */
RDMADL_API const char *rdmadl_verdict(void);
/** rdmadl_verdict(), and from the same computation the stack's state
 * (*stack, when non-NULL) and whether RDMA is usable (*usable: 1 when a
 * device has an active port, else 0; when non-NULL). RDMADL_STACK_READY with
 * *usable 0 means devices exist but no port is active (or none opens). */
RDMADL_API const char *rdmadl_verdict_state(rdmadl_stack *stack, int *usable);

/** Log levels: a line of level L reaches a handler set with max_level >= L. */
typedef enum rdmadl_log_level {
  RDMADL_LOG_ERROR = 0, /**< a call fails in an unusual way (the load deadlock guard) */
  RDMADL_LOG_WARN = 1,  /**< a setting is ignored (RDMADL_DISABLE=please) */
  RDMADL_LOG_INFO = 2,  /**< the summary: a line per library as it loads, then the verdict */
  RDMADL_LOG_DEBUG = 3  /**< every step: each dlopen, each symbol bound or missing */
} rdmadl_log_level;

/** Receives one log line: LEVEL (rdmadl_log_level), LINE without "rdmadl: "
 * and without a newline, control characters escaped as in rdmadl_reason();
 * valid only during the call. CTX is what rdmadl_set_log_handler() was given. */
typedef void (*rdmadl_log_fn)(int level, const char *line, void *ctx);

/** Sends rdmadl's log lines up to MAX_LEVEL to FN(level, line, CTX) instead
 * of stderr; FN NULL restores the default (stderr, "rdmadl: " LINE, errors
 * always, more as RDMADL_DEBUG asks; MAX_LEVEL and CTX are then ignored).
 * A handler set before rdmadl's own constructor runs (from a program's
 * constructor or .preinit_array) sees the start-up lines: setting one loads
 * nothing. At RDMADL_LOG_INFO or above, the first load ends with the verdict,
 * so it then also lists the devices and opens each once. Thread-safe: FN and
 * CTX change together; FN may be called from any thread, several at once;
 * once this returns, the previous handler is not running in any thread and is
 * never called again. Lines a handler causes itself (it calls rdmadl) are
 * dropped.
 * @return 0, or EDEADLK when called from inside a handler (nothing changes). */
RDMADL_API int rdmadl_set_log_handler(int max_level, rdmadl_log_fn fn, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RDMADL_LOADER_H */
