// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/runtime.hpp - is RDMA usable here, and what does the loaded release
/// support?
///
/// The values mirror <rdmadl/loader.h>; they are answered from what the loader
/// actually found (libraries, version nodes, resolved symbols, the kernel),
/// never assumed from the headers rdmadl was built with.
#ifndef RDMADL_RUNTIME_HPP
#define RDMADL_RUNTIME_HPP

#include <cstddef>
#include <string_view>
#include <system_error>
#include <vector>

#include "rdmadl/export.hpp"

namespace rdmadl {

/// Mirrors rdmadl_lib: libibverbs, librdmacm, the providers' direct-verbs
/// libraries and libibumad. The last seven are loaded on first use (load()).
enum class library {
  ibverbs = 0, ///< libibverbs.so.1
  rdmacm = 1,  ///< librdmacm.so.1
  mlx5 = 2,    ///< libmlx5.so.1: mlx5dv_*
  efa = 3,     ///< libefa.so.1: efadv_*
  mlx4 = 4,    ///< libmlx4.so.1: mlx4dv_*
  hns = 5,     ///< libhns.so.1: hnsdv_*
  mana = 6,    ///< libmana.so.1: manadv_*
  ionic = 7,   ///< libionic.so.1: ionic_dv_*
  ibumad = 8   ///< libibumad.so.3: umad_*
};
/// Every library, for listings.
inline constexpr library all_libraries[] = {library::ibverbs, library::rdmacm, library::mlx5,
                                            library::efa,     library::mlx4,   library::hns,
                                            library::mana,    library::ionic,  library::ibumad};

/// Mirrors rdmadl_state.
enum class library_state {
  disabled = 0,     ///< RDMADL_DISABLE=1
  not_found = 1,    ///< no such file
  load_failed = 2,  ///< the file exists, dlopen failed
  incompatible = 3, ///< loaded, not a usable rdma-core library
  skipped = 4,      ///< librdmacm only: libibverbs unusable
  loaded = 5,       ///< every symbol resolved
  partial = 6,      ///< loaded, some (newer) symbols missing
  not_loaded = 7    ///< a lazily loaded library nothing has used yet (librdmacm: the
                    ///< program calls no rdma_* function)
};

/// Mirrors rdmadl_stack.
enum class stack_state {
  disabled = 0,          ///< RDMADL_DISABLE=1
  no_library = 1,        ///< libibverbs unusable
  no_kernel_support = 2, ///< library loaded, kernel has no RDMA
  no_devices = 3,        ///< kernel support, no device
  ready = 4              ///< at least one device
};

/// What the loader found for one library. Strings live as long as the process;
/// empty when not applicable.
struct library_status {
  library_state state;                   ///< the outcome of loading it
  std::string_view state_name;           ///< "loaded", "not-found", ...
  std::string_view requested;            ///< file name or override path asked for
  std::string_view path;                 ///< real path of the file loaded
  std::string_view error;                ///< dlerror() or rdmadl's reason
  std::string_view version_node;         ///< highest version node, e.g. "IBVERBS_1.14"
  std::size_t symbol_count;              ///< public symbols rdmadl binds
  std::vector<std::string_view> missing; ///< names of those not resolved
  /// The subset of missing that rdmadl emulates with a fallback built from the
  /// library's older calls (RDMADL_SYMBOL_EMULATED); the rest fail with
  /// EOPNOTSUPP.
  std::vector<std::string_view> emulated;
};

/// Optional capabilities of the loaded release (and, through
/// context::supports(), of a device).
enum class feature {
  extended_cq,  ///< ibv_create_cq_ex + ibv_start_poll (provider op)
  wr_api,       ///< ibv_qp_to_qp_ex / ibv_wr_start..complete (symbol + provider op)
  query_gid_ex, ///< _ibv_query_gid_ex (IBVERBS_1.11); a sysfs fallback exists without it
  dmabuf_mr,    ///< ibv_reg_dmabuf_mr (IBVERBS_1.12)
  reg_mr_iova,  ///< ibv_reg_mr_iova2 (IBVERBS_1.8)
  rdma_cm,      ///< librdmacm usable (asking loads it if the program has not yet)
  srq,          ///< ibv_create_srq resolved (device: max_srq > 0)
};

/// True when libibverbs is loaded and usable (LOADED or PARTIAL). Loads it if
/// that has not happened yet. Devices may still be absent: see stack().
RDMADL_CXX_API bool available() noexcept;
/// What the loader found for lib. Does not load a lazily loaded library
/// (state not_loaded, every symbol counted missing): see load().
RDMADL_CXX_API library_status status(library lib);
/// Loads lib if nothing has yet; true when it is usable (loaded or partial).
RDMADL_CXX_API bool load(library lib) noexcept;
/// The soname rdmadl loads for lib ("libmlx5.so.1").
RDMADL_CXX_API std::string_view soname(library lib) noexcept;
/// Classifies the whole stack (asks libibverbs for its device list once per call).
RDMADL_CXX_API stack_state stack() noexcept;
/// A stable name for a stack state ("ready", "no-kernel-support", ...).
RDMADL_CXX_API std::string_view name(stack_state s) noexcept;
/// What the libraries are (rdmadl_reason()): an older release lacking newer
/// symbols reads as complete. The libraries only: show diagnose().sentence to
/// users.
RDMADL_CXX_API std::string_view reason() noexcept;

/// Whether RDMA is usable here and, if not, why: the loader's one verdict.
struct diagnosis {
  bool usable;       ///< a device has an active port
  stack_state state; ///< disabled, no_library, no_kernel_support, no_devices or ready
  /// What a call needing RDMA fails with: {} when usable;
  /// std::errc::operation_not_supported (disabled, no library);
  /// errc::no_kernel_support; errc::no_devices; errc::no_active_port (ready,
  /// but no port is active or no device opens). Each of the rdmadl::errc
  /// values compares equal to its std::errc (error.hpp).
  std::error_code error;
  /// rdmadl_verdict(): the sentence rdmadl-info prints ("RDMA is usable: ...",
  /// "libibverbs is installed (...) but the kernel has no RDMA support ...").
  /// Lives as long as the process.
  std::string_view sentence;
};
/// Computes the verdict afresh (asks for the device list and opens each
/// device once). Never throws.
RDMADL_CXX_API diagnosis diagnose() noexcept;

/// Log levels of set_log_handler (values of rdmadl_log_level).
enum class log_level {
  error = 0, ///< a call fails in an unusual way (the load deadlock guard)
  warn = 1,  ///< a setting is ignored (RDMADL_DISABLE=please)
  info = 2,  ///< the summary: a line per library as it loads, then the verdict
  debug = 3  ///< every step: each dlopen, each symbol bound or missing
};
/// A log handler: the level, the line (no "rdmadl: " prefix, no newline,
/// control characters escaped; valid during the call) and the context.
using log_fn = void (*)(log_level level, std::string_view line, void *ctx);
/// rdmadl_set_log_handler() for C++: lines up to max_level go to fn(level,
/// line, ctx); fn == nullptr restores the default (stderr as RDMADL_DEBUG
/// asks). Same promises: thread-safe, never loads anything, the previous
/// handler is not running and never runs again once this returns.
/// @return {} or std::errc::resource_deadlock_would_occur when called from
///         inside a handler.
RDMADL_CXX_API std::error_code set_log_handler(log_level max_level, log_fn fn,
                                               void *ctx = nullptr) noexcept;
/// Whether the loaded release provides f (library level: resolved symbols).
/// For device-level answers use context::supports().
RDMADL_CXX_API bool supports(feature f) noexcept;
/// A stable name for f ("extended-cq", "wr-api", ...).
RDMADL_CXX_API std::string_view name(feature f) noexcept;
/// Every feature, for listings.
inline constexpr feature all_features[] = {
    feature::extended_cq, feature::wr_api,  feature::query_gid_ex, feature::dmabuf_mr,
    feature::reg_mr_iova, feature::rdma_cm, feature::srq};

} // namespace rdmadl

#endif // RDMADL_RUNTIME_HPP
