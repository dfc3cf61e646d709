#!/bin/sh
# SPDX-License-Identifier: MIT
# doxygen-filter.sh FILE: what Doxygen reads of a public header (docs/Doxyfile,
# FILTER_PATTERNS). Blanks the X-macro helper RDMADL_ERRC_ENUM's #define and
# #undef lines in error.hpp (keeping the line count, so warnings point at the
# real lines): Doxygen would otherwise list the #define as an enumerator of
# rdmadl::errc. The Doxyfile's PREDEFINED gives the helper a definition that
# documents each enumerator with its RDMADL_ERRC_TABLE row instead.
exec sed -e 's/^#define RDMADL_ERRC_ENUM(name, cond, msg) name,$//' \
  -e 's/^#undef RDMADL_ERRC_ENUM$//' "$1"
