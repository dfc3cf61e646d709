# SPDX-License-Identifier: MIT
# Install rules: headers, libraries, a CMake package (find_package(rdmadl)
# gives rdmadl::rdmadl, rdmadl::verbs, rdmadl::verbs_static, and rdmadl::ffi,
# rdmadl::ffi_static when RDMADL_BUILD_FFI is on) and a pkg-config
# file for the drop-in library (pkg-config --cflags --libs rdmadl-verbs), so
# Makefile-built C programs can swap -libverbs -lrdmacm for it.
include(CMakePackageConfigHelpers)

set(RDMADL_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/rdmadl")

# Our headers, and the bundled rdma-core headers in a directory of their own:
# C++ API users never see them; drop-in users get them through the targets'
# (or pkg-config's) include path, ahead of any /usr/include copy.
install(DIRECTORY include/rdmadl DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY third_party/rdma-headers/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmadl/rdma)

# Licences: ours, and those of the bundled rdma-core and kernel headers.
install(FILES LICENSE DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES third_party/rdma-headers/licenses/rdma-core.copyright
              third_party/rdma-headers/licenses/linux-libc-dev.copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR}/rdma-headers)

set_target_properties(rdmadl_loader PROPERTIES EXPORT_NAME loader)
set_target_properties(rdmadl_rdma_headers PROPERTIES EXPORT_NAME rdma_headers)
set_target_properties(rdmadl_verbs PROPERTIES EXPORT_NAME verbs)
set_target_properties(rdmadl_verbs_static PROPERTIES EXPORT_NAME verbs_static)
set(_rdmadl_install_targets rdmadl_loader rdmadl_rdma_headers rdmadl_verbs rdmadl_verbs_static)
if(TARGET rdmadl)
  # rdmadl is a static library by default: its private link to the loader
  # becomes a link-only dependency, so the loader is installed too.
  list(APPEND _rdmadl_install_targets rdmadl)
endif()
if(TARGET rdmadl_ffi)
  # librdmadl-ffi (rdmadl::ffi, rdmadl::ffi_static), its FFI header and the
  # list of its exported names for binding generators' allowlists.
  set_target_properties(rdmadl_ffi PROPERTIES EXPORT_NAME ffi)
  set_target_properties(rdmadl_ffi_static PROPERTIES EXPORT_NAME ffi_static)
  list(APPEND _rdmadl_install_targets rdmadl_ffi rdmadl_ffi_static)
  install(FILES "${RDMADL_FFI_GEN_DIR}/include/rdmadl/ffi.h"
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rdmadl)
  install(FILES "${RDMADL_FFI_GEN_DIR}/rdmadl-ffi.symbols"
          DESTINATION ${CMAKE_INSTALL_DATADIR}/rdmadl)
endif()
install(TARGETS ${_rdmadl_install_targets} EXPORT rdmadlTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_COMPONENT Development
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT rdmadlTargets NAMESPACE rdmadl:: DESTINATION ${RDMADL_CMAKE_DIR})

file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfig.cmake.in" [=[
@PACKAGE_INIT@
include(CMakeFindDependencyMacro)
find_dependency(Threads)
include("${CMAKE_CURRENT_LIST_DIR}/rdmadlTargets.cmake")
check_required_components(rdmadl)
]=])
configure_package_config_file("${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfig.cmake.in"
                              "${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfig.cmake"
                              INSTALL_DESTINATION ${RDMADL_CMAKE_DIR})
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/rdmadlConfigVersion.cmake"
        DESTINATION ${RDMADL_CMAKE_DIR})

# pkg-config for the drop-in library. Libs.private: what its static archive
# needs (libdl, pthread; both are part of libc on glibc >= 2.34).
# Relocatable: the prefix is found from the .pc file's own directory, so
# cmake --install --prefix anywhere works.
set(_pc "${CMAKE_CURRENT_BINARY_DIR}/rdmadl-verbs.pc")
file(RELATIVE_PATH _pc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
file(WRITE "${_pc}" "prefix=\${pcfiledir}/${_pc_up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: rdmadl-verbs
Description: libibverbs and librdmacm API, loaded at run time (works without rdma-core)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir}/rdmadl/rdma -I\${includedir}
Libs: -L\${libdir} -lrdmadl-verbs
Libs.private: -ldl -pthread
")
install(FILES "${_pc}" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# pkg-config for the C++ API (pkg-config --cflags --libs rdmadl). A shared
# librdmadl.so.0 holds the loader: -lrdmadl is the whole link line, and its
# users get RDMADL_SHARED as CMake's do; --static adds what the archive
# would need. A static librdmadl.a needs the loader's archive after it, and
# libdl and pthread: with no shared library installed these are in Libs, so
# the plain and the --static line both link. The headers need C++20 (README,
# "C++ standard"); pkg-config cannot choose a standard, so Cflags has none.
if(TARGET rdmadl)
  get_target_property(_rdmadl_type rdmadl TYPE)
  set(_pc_deps "-lrdmadl-loader -ldl -pthread")
  if(_rdmadl_type STREQUAL "SHARED_LIBRARY")
    set(_pc_cflags "-I\${includedir} -DRDMADL_SHARED")
    set(_pc_libs "-L\${libdir} -lrdmadl")
    set(_pc_private "${_pc_deps}")
  else()
    set(_pc_cflags "-I\${includedir}")
    set(_pc_libs "-L\${libdir} -lrdmadl ${_pc_deps}")
    set(_pc_private "")
  endif()
  set(_pc_private_line "")
  if(_pc_private)
    set(_pc_private_line "Libs.private: ${_pc_private}\n")
  endif()
  set(_pc "${CMAKE_CURRENT_BINARY_DIR}/rdmadl.pc")
  file(WRITE "${_pc}" "prefix=\${pcfiledir}/${_pc_up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}

Name: rdmadl
Description: C++20 API over RDMA verbs and rdma_cm, loaded at run time (works without rdma-core)
Version: ${PROJECT_VERSION}
Cflags: ${_pc_cflags}
Libs: ${_pc_libs}
${_pc_private_line}")
  install(FILES "${_pc}" DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
