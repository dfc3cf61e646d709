# SPDX-License-Identifier: MIT
# Link aliases for unmodified build systems: one directory holding rdma-core's
# own link names (libibverbs.so, librdmacm.so, libibumad.so and the provider
# libraries' libmlx5.so, libefa.so, ...) and rdma-core's pkg-config modules
# (libibverbs.pc, libmlx5.pc, ...), every one of them the drop-in
# librdmadl-verbs.so.0. A build that asks for rdma-core then links rdmadl:
#
#   ./configure LDFLAGS=-L<dir> CPPFLAGS=-I<bundled headers>   (-libverbs -lmlx5 ...)
#   PKG_CONFIG_PATH=<dir> ...                                    (pkg-config libmlx5 ...)
#
# <dir> is <libdir>/rdmadl/rdma-core, installed and in the build tree (beside
# the built drop-in: <build>/rdmadl/rdma-core); RDMADL_LINK_ALIASES_DIR names
# the build-tree one (a generator expression).
#
# Symbolic links, not INPUT() linker scripts: ld follows a link to the ELF file
# and records its SONAME, so NEEDED says librdmadl-verbs.so.0 once however
# many -l name it. A linker script's INPUT(file) is looked up in the current
# directory or on the -L path, never beside the script, so it would need an
# absolute path (not relocatable) or the drop-in's own directory on -L too.
# libtool, lld, gold and mold, and file-existence checks (CMake's
# find_library, meson's) take a link for the library it names. The links are
# relative (../../librdmadl-verbs.so.0), so the directory moves with its
# prefix. The one .so.N here is librdmadl-verbs.so.0 itself, so that
# -Wl,-rpath-link,<dir> lets ld find the drop-in a shared library built
# against the aliases NEEDs (ld never looks for a NEEDED in -L directories);
# nothing here can be mistaken for the libibverbs.so.1 the drop-in dlopens.
#
# The .pc files are relocatable as rdmadl-verbs.pc is (their prefix is found
# from their own directory). Cflags: the bundled rdma-core headers; Libs: the
# drop-in. Their versions are those rdma-core's own files carry for the
# release the bundled headers come from (ABI version of the library, then
# rdma-core's: libmlx5 1.27.65.0), since that is the API a program sees.

# name, ABI version: rdma-core 65.0's pkg-config modules (Debian's -dev packages).
set(_rdmadl_aliases_of "65.0")
set(_rdmadl_aliases libibverbs=1.18 librdmacm=1.5 libibumad=3.4 libmlx5=1.27 libmlx4=1.0
                    libefa=1.7 libhns=1.0 libmana=1.1 libionic=1.0)

file(STRINGS "${PROJECT_SOURCE_DIR}/third_party/rdma-headers/VERSION" _rdmadl_hdr_ver
     REGEX "^RDMA_CORE=")
string(REPLACE "RDMA_CORE=" "" _rdmadl_hdr_ver "${_rdmadl_hdr_ver}")
if(NOT _rdmadl_hdr_ver STREQUAL _rdmadl_aliases_of)
  message(FATAL_ERROR "cmake/RdmadlLinkAliases.cmake lists rdma-core ${_rdmadl_aliases_of}'s "
          "pkg-config versions, the bundled headers are ${_rdmadl_hdr_ver}: update the list "
          "(Version: lines of the new release's libibverbs-dev/libibumad-dev .pc files)")
endif()

set(_dir "$<TARGET_FILE_DIR:rdmadl_verbs>/rdmadl/rdma-core")
set(RDMADL_LINK_ALIASES_DIR "${_dir}")
set(_soname "$<TARGET_SONAME_FILE_NAME:rdmadl_verbs>")

# pc_text(OUT NAME VERSION PREFIX-LINES): one module's .pc file.
function(_rdmadl_alias_pc out name version head)
  set(${out} "${head}
Name: ${name}
Description: rdma-core's ${name} API, served by rdmadl's drop-in (loaded at run time)
Version: ${version}.${_rdmadl_aliases_of}
Libs: -L\${libdir} -lrdmadl-verbs
Libs.private: -ldl -pthread
Cflags: -I\${includedir}
" PARENT_SCOPE)
endfunction()

# Build tree: absolute paths (the source tree's bundled headers).
set(_links "")
foreach(entry IN LISTS _rdmadl_aliases)
  string(REPLACE "=" ";" entry "${entry}")
  list(GET entry 0 name)
  list(GET entry 1 version)
  _rdmadl_alias_pc(text ${name} ${version} "libdir=$<TARGET_FILE_DIR:rdmadl_verbs>
includedir=${PROJECT_SOURCE_DIR}/third_party/rdma-headers/include
")
  file(GENERATE OUTPUT "${_dir}/${name}.pc" CONTENT "${text}")
  list(APPEND _links COMMAND ${CMAKE_COMMAND} -E create_symlink "../../${_soname}" "${_dir}/${name}.so")
endforeach()
list(APPEND _links COMMAND ${CMAKE_COMMAND} -E create_symlink "../../${_soname}" "${_dir}/${_soname}")
add_custom_command(TARGET rdmadl_verbs POST_BUILD
                   COMMAND ${CMAKE_COMMAND} -E make_directory "${_dir}" ${_links} VERBATIM)

if(RDMADL_INSTALL)
  set(_idir "${CMAKE_INSTALL_LIBDIR}/rdmadl/rdma-core")
  file(RELATIVE_PATH _up "/p/${_idir}" "/p")
  set(_stage "${CMAKE_CURRENT_BINARY_DIR}/rdmadl-install/rdma-core")
  set(_files "")
  foreach(entry IN LISTS _rdmadl_aliases)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 name)
    list(GET entry 1 version)
    _rdmadl_alias_pc(text ${name} ${version} "prefix=\${pcfiledir}/${_up}
libdir=\${prefix}/${CMAKE_INSTALL_LIBDIR}
includedir=\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}/rdmadl/rdma
")
    file(WRITE "${_stage}/${name}.pc" "${text}")
    # The build tree's links, copied as links (install(FILES) keeps a symlink).
    list(APPEND _files "${_stage}/${name}.pc" "${_dir}/${name}.so")
  endforeach()
  install(FILES ${_files} "${_dir}/${_soname}" DESTINATION ${_idir})
endif()
