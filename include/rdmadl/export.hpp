// SPDX-License-Identifier: MIT
// rdmadl/export.hpp - RDMADL_API marks what librdmadl.so exports.
//
// The library is compiled with hidden visibility; in a shared build
// (BUILD_SHARED_LIBS, which defines RDMADL_SHARED for the library and its
// users) RDMADL_API gives the public classes and functions default
// visibility, and the version script (src/rdmadl.map) keeps everything else
// local. In a static build it is empty.
#ifndef RDMADL_EXPORT_HPP
#define RDMADL_EXPORT_HPP

#if defined(RDMADL_SHARED) && defined(__GNUC__)
#define RDMADL_API __attribute__((visibility("default")))
#else
#define RDMADL_API
#endif

#endif // RDMADL_EXPORT_HPP
