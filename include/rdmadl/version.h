/* SPDX-License-Identifier: MIT */
/** @file
 * rdmadl's version, written once here; CMake parses it. */
#ifndef RDMADL_VERSION_H
#define RDMADL_VERSION_H
/** @name The version
 * MAJOR.MINOR.PATCH of the rdmadl these headers belong to, also the CMake
 * project's version and the shared libraries' VERSION. */
/** @{ */
/** The major, minor and patch number of rdmadl's version. */
#define RDMADL_VERSION_MAJOR 0
#define RDMADL_VERSION_MINOR 1
#define RDMADL_VERSION_PATCH 0
/** @} */
#endif
