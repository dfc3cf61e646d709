// SPDX-License-Identifier: MIT
/// @file
/// rdmadl/export.hpp - RDMADL_CXX_API marks what librdmadl.so exports.
///
/// The library is compiled with hidden visibility; in a shared build
/// (BUILD_SHARED_LIBS, which defines RDMADL_SHARED for the library and its
/// users) RDMADL_CXX_API gives the public classes and functions default
/// visibility, and the version script (src/rdmadl.map) keeps everything else
/// local. In a static build it is empty. (The loader's C API in loader.h has
/// its own RDMADL_API.)
#ifndef RDMADL_EXPORT_HPP
#define RDMADL_EXPORT_HPP

// Every public C++ header includes this one. C++17 code calls rdmadl through
// a C++20 target of its own (README, "C++ standard").
#if defined(__cplusplus) && __cplusplus < 201709L
#error "rdmadl's C++ API needs C++20 (-std=c++20, or CXX_STANDARD 20 on this target)"
#endif

#if defined(RDMADL_SHARED) && defined(__GNUC__)
#define RDMADL_CXX_API __attribute__((visibility("default")))
#else
#define RDMADL_CXX_API
#endif

#endif // RDMADL_EXPORT_HPP
