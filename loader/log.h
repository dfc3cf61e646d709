/* SPDX-License-Identifier: MIT */
/*
 * The loader's log (log.c), for its C files (through libs.h) and for the
 * C++ library's few lines of its own (src/multi_channel_tcp.cpp). The line
 * goes to the application's hook (rdmadl_set_log_handler) or stderr; the
 * caller filters by level first (libs.h's LOGF) or lets it filter. Hidden:
 * not exported from any rdmadl library.
 */
#ifndef RDMADL_LOADER_LOG_H
#define RDMADL_LOADER_LOG_H

#ifdef __cplusplus
extern "C" {
#endif

/* One line at level (enum rdmadl_log_level), printf-style. */
__attribute__((visibility("hidden"))) void rdmadl_log_emit(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));

#ifdef __cplusplus
}
#endif

#endif
