# The layering check of one core/ layer, run by the build (core/CMakeLists.txt) whenever one of
# the layer's files changes: every `#include "core/X/..."` in the layer's sources and headers must
# name a layer it may use (itself and the layers it links, directly or through others). Anything
# else stops the build with one line per include, naming the file, the include and both layers.
#   cmake -DLAYER=backend -DALLOWED=backend,tensor,common -DLAYERS_ALL=common,...,sim -DROOT=src
#         -DFILES=list-file -DSTAMP=ok-file -P scripts/cmake/check_layers.cmake
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" allowed "${ALLOWED}")
string(REPLACE "," ";" all "${LAYERS_ALL}")
string(REPLACE "," ", " allowed_text "${ALLOWED}")
file(STRINGS "${FILES}" files)
set(errors "")
foreach(f IN LISTS files)
  if(f STREQUAL "")
    continue()
  endif()
  file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*\"core/[A-Za-z0-9_]+/")
  foreach(line IN LISTS lines)
    string(REGEX MATCH "\"core/([A-Za-z0-9_]+)/[^\"]*\"" inc "${line}")
    set(to "${CMAKE_MATCH_1}")
    if(to IN_LIST allowed)
      continue()
    endif()
    file(RELATIVE_PATH rel "${ROOT}" "${f}")
    if(to IN_LIST all)
      set(why "the layer '${LAYER}' may include ${allowed_text} (itself and the layers it links), not '${to}'")
    else()
      set(why "'${to}' is not a layer of the product (test helpers are for tests)")
    endif()
    list(APPEND errors "layering: ${rel} includes ${inc}: ${why}")
  endforeach()
endforeach()
if(errors)
  list(LENGTH errors n)
  string(REPLACE ";" "\n" text "${errors}")
  message(FATAL_ERROR "${text}\nlayering: ${n} include(s) against the layers of core/ (docs/ARCHITECTURE.md, \"Layers\"): "
                      "move the code to a layer that may use both, or what it needs down a layer.")
endif()
file(TOUCH "${STAMP}")
