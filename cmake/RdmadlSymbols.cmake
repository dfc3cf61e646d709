# SPDX-License-Identifier: MIT
# Derives build inputs from loader/symbols.def, the one symbol table:
#   rdmadl_symbols_generate(DEF OUTDIR)
# writes into OUTDIR
#   rdmadl_rename.h    #define <name> rdmadl_sym_<name>, for internal consumers
#                      (the C++ API), so rdma-core's inline helpers call the
#                      loader's hidden stubs and no ibv_*/rdma_* reference remains
#   rdmadl-verbs.map   the drop-in shared library's version script: each name
#                      at its node, each library's nodes chained as its own
#                      map chains them (IBVERBS_1.0..N, RDMACM_1.0..N,
#                      MLX5_1.0..N with MLX5_1.25.1 after MLX5_1.25, EFA_1.x,
#                      ..., IBUMAD_1.x), except ibv_register_driver (see
#                      loader/hand_compat.c)
#   rdmadl_symbols.txt "name node" per symbol, for tests and CI scripts
#   rdmadl_hashes.h    #define RDMADL_GNU_HASH_<name> <ELF GNU hash of name>, so
#                      the loader looks symbols up without hashing at run time
#   linked/<name>.c    the generated stub of each GEN entry of libibverbs and
#                      librdmacm alone, recording its row (RDMADL_LINKED): what
#                      librdmadl-verbs.a compiles instead of stubs.c and
#                      stubs_cm.c's, one archive member per stub, so that its
#                      constructor binds only what a program links
#                      (loader/bind.c); their paths in RDMADL_LINKED_STUB_SOURCES
# rdmadl_version_nodes(OUT PREFIX MAX_MINOR LOCAL_ALL OMIT PAIRS...): sets OUT
# to version-script text for the chained nodes PREFIX0 .. PREFIX<MAX_MINOR>
# (and any PREFIX<minor>.<sub> node a pair names, right after PREFIX<minor>),
# each listing the names of PAIRS ("name node", as in rdmadl_symbols.txt) at
# that node, except OMIT (a name, or ""); the first node hides everything else
# ("local: *;") when LOCAL_ALL. Also used by tests/fakes for its libraries.
function(rdmadl_version_nodes out prefix max_minor local_all omit)
  string(REPLACE "." "\\." rx "${prefix}")
  set(nodes "")
  foreach(minor RANGE 0 ${max_minor})
    list(APPEND nodes "${minor}")
    set(subs "")
    foreach(pair IN LISTS ARGN)
      if(pair MATCHES " ${rx}${minor}\\.([0-9]+)$")
        list(APPEND subs "${minor}.${CMAKE_MATCH_1}")
      endif()
    endforeach()
    list(REMOVE_DUPLICATES subs)
    list(SORT subs)
    list(APPEND nodes ${subs})
  endforeach()
  set(text "")
  set(prev "")
  foreach(node IN LISTS nodes)
    string(REPLACE "." "\\." node_rx "${node}")
    set(names "")
    foreach(pair IN LISTS ARGN)
      if(pair MATCHES "^([A-Za-z_0-9]+) ${rx}${node_rx}$" AND NOT CMAKE_MATCH_1 STREQUAL omit)
        string(APPEND names "    ${CMAKE_MATCH_1};\n")
      endif()
    endforeach()
    string(APPEND text "${prefix}${node} {\n")
    if(names)
      string(APPEND text "  global:\n${names}")
    endif()
    if(local_all AND node STREQUAL "0")
      string(APPEND text "  local: *;\n")
    endif()
    if(prev STREQUAL "")
      string(APPEND text "};\n")
    else()
      string(APPEND text "} ${prefix}${prev};\n")
    endif()
    set(prev "${node}")
  endforeach()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# The table's library tokens and their version-node prefixes, in table order.
set(RDMADL_LIB_TOKENS IBV CM MLX5 EFA MLX4 HNS MANA IONIC UMAD)
set(RDMADL_PREFIX_IBV "IBVERBS_1.")
set(RDMADL_PREFIX_CM "RDMACM_1.")
set(RDMADL_PREFIX_MLX5 "MLX5_1.")
set(RDMADL_PREFIX_EFA "EFA_1.")
set(RDMADL_PREFIX_MLX4 "MLX4_1.")
set(RDMADL_PREFIX_HNS "HNS_1.")
set(RDMADL_PREFIX_MANA "MANA_1.")
set(RDMADL_PREFIX_IONIC "IONIC_1.")
set(RDMADL_PREFIX_UMAD "IBUMAD_1.")

# rdmadl_gnu_hash(OUT NAME): the ELF GNU hash (h = h * 33 + c, from 5381,
# modulo 2^32) of NAME, as 0x-prefixed hexadecimal.
function(rdmadl_gnu_hash out name)
  string(HEX "${name}" hex)
  string(LENGTH "${hex}" len)
  set(h 5381)
  set(i 0)
  while(i LESS len)
    string(SUBSTRING "${hex}" ${i} 2 byte)
    math(EXPR h "(${h} * 33 + 0x${byte}) & 0xFFFFFFFF")
    math(EXPR i "${i} + 2")
  endwhile()
  math(EXPR h "${h}" OUTPUT_FORMAT HEXADECIMAL)
  set(${out} "${h}" PARENT_SCOPE)
endfunction()

# rdmadl_write_if_changed(FILE CONTENT): writes FILE only when its content
# changes, so that what depends on it does not rebuild needlessly.
function(rdmadl_write_if_changed file content)
  set(old "")
  if(EXISTS "${file}")
    file(READ "${file}" old)
  endif()
  if(NOT old STREQUAL "${content}")
    file(WRITE "${file}" "${content}")
  endif()
endfunction()

# Matches LINE of the table WHAT against REGEX (a fatal error when it does
# not) and sets the variables named after it to its groups, in order.
function(rdmadl_parse_line line regex what)
  if(NOT line MATCHES "${regex}")
    message(FATAL_ERROR "${what}: cannot parse: ${line}")
  endif()
  set(i 1)
  foreach(var IN LISTS ARGN)
    set(${var} "${CMAKE_MATCH_${i}}" PARENT_SCOPE)
    math(EXPR i "${i} + 1")
  endforeach()
endfunction()

function(rdmadl_symbols_generate def outdir)
  file(STRINGS "${def}" lines REGEX "^RDMADL_SYM\\(")
  set(rename "/* Generated from loader/symbols.def by cmake/RdmadlSymbols.cmake. */\n")
  string(APPEND rename "#ifndef RDMADL_RENAME_H\n#define RDMADL_RENAME_H\n")
  set(list "")
  set(hashes "/* Generated from loader/symbols.def by cmake/RdmadlSymbols.cmake. */\n")
  set(pairs "")
  set(linked_sources "")
  foreach(lib IN LISTS RDMADL_LIB_TOKENS)
    set(max_${lib} -1)
  endforeach()
  foreach(line IN LISTS lines)
    rdmadl_parse_line("${line}"
      "^RDMADL_SYM\\(([A-Z0-9]+), ([0-9]+)(\\.[0-9])?, [A-Z0-9]+, [A-Z]+, [^,]+, ([A-Za-z_0-9]+), "
      symbols.def lib minor sub name)
    if(NOT DEFINED RDMADL_PREFIX_${lib})
      message(FATAL_ERROR "symbols.def: unknown library ${lib}: ${line}")
    endif()
    string(APPEND rename "#define ${name} rdmadl_sym_${name}\n")
    set(node "${RDMADL_PREFIX_${lib}}${minor}${sub}")
    string(APPEND list "${name} ${node}\n")
    rdmadl_gnu_hash(hash "${name}")
    string(APPEND hashes "#define RDMADL_GNU_HASH_${name} ${hash}u\n")
    list(APPEND pairs "${name} ${node}")
    if(minor GREATER max_${lib})
      set(max_${lib} ${minor})
    endif()
    if(line MATCHES "^RDMADL_SYM\\((IBV|CM), [0-9.]+, ([A-Z0-9]+), GEN, ([^,]+), [A-Za-z_0-9]+, (\\(.*\\)), (\\(.*\\))\\)$")
      set(stub "/* Generated from loader/symbols.def by cmake/RdmadlSymbols.cmake: ${name}'s\n")
      string(APPEND stub " * stub alone, an archive member of librdmadl-verbs.a (loader/bind.c). */\n")
      string(APPEND stub "#include \"stubs.h\"\n\nRDMADL_IMPL_GEN(${CMAKE_MATCH_2}, ${CMAKE_MATCH_3}, ${name}, ")
      string(APPEND stub "${CMAKE_MATCH_4}, ${CMAKE_MATCH_5})\nRDMADL_LINKED(${name})\n")
      rdmadl_write_if_changed("${outdir}/linked/${name}.c" "${stub}")
      list(APPEND linked_sources "${outdir}/linked/${name}.c")
    endif()
  endforeach()
  set(RDMADL_LINKED_STUB_SOURCES "${linked_sources}" PARENT_SCOPE)
  string(APPEND rename "#endif\n")
  set(map "/* Generated from loader/symbols.def by cmake/RdmadlSymbols.cmake. */\n")
  # rdmadl's own diagnostics API (include/rdmadl/loader.h); everything else
  # of ours is hidden by visibility.
  string(APPEND map "RDMADL_0 {\n  global:\n    rdmadl_*;\n};\n")
  # ibv_register_driver: like libibverbs, only a non-default IBVERBS_1.1
  # entry, which loader/hand_compat.c makes with .symver (a script can only make
  # default versions).
  rdmadl_version_nodes(ibv_nodes "IBVERBS_1." ${max_IBV} ON "ibv_register_driver" ${pairs})
  string(APPEND map "${ibv_nodes}")
  foreach(lib IN LISTS RDMADL_LIB_TOKENS)
    if(NOT lib STREQUAL "IBV" AND max_${lib} GREATER_EQUAL 0)
      rdmadl_version_nodes(nodes "${RDMADL_PREFIX_${lib}}" ${max_${lib}} OFF "" ${pairs})
      string(APPEND map "${nodes}")
    endif()
  endforeach()
  file(MAKE_DIRECTORY "${outdir}")
  foreach(pair "rdmadl_rename.h;rename" "rdmadl-verbs.map;map" "rdmadl_symbols.txt;list"
               "rdmadl_hashes.h;hashes")
    list(GET pair 0 file)
    list(GET pair 1 var)
    rdmadl_write_if_changed("${outdir}/${file}" "${${var}}")
  endforeach()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${def}")
endfunction()
