# Writes OUT with the git sha of SRC (and "-dirty" for uncommitted changes); leaves OUT
# untouched when nothing changed, so that a rebuild only recompiles what uses it on a new commit.
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD
  OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR sha STREQUAL "")
  set(sha "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no
    OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    set(sha "${sha}-dirty")
  endif()
endif()
set(text "#pragma once\n#define PTDP_GIT_SHA \"${sha}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE "${OUT}" "${text}")
endif()
