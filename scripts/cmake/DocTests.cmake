# ctest Docs.*: the documents' code blocks, ptdp flags and repository paths (scripts/doc_test.py;
# docs/ARCHITECTURE.md, "Documentation tests"). Included by the top-level CMakeLists.txt after
# experiments/, so the ptdp target exists; the checks run the ptdp of this build folder.
find_package(Python3 3.11 COMPONENTS Interpreter)  # tomllib
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "Docs.*: no Python 3.11 or newer, the documentation tests are not registered")
  return()
endif()
set(ptdp_doc_test ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/doc_test.py)

add_test(NAME Docs.EveryBlockIsClassified COMMAND ${ptdp_doc_test} --check classes ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
add_test(NAME Docs.FlagsExist COMMAND ${ptdp_doc_test} --check flags ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
add_test(NAME Docs.PathsExist COMMAND ${ptdp_doc_test} --check paths ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
add_test(NAME Docs.ShellBlocksRun COMMAND ${ptdp_doc_test} --check run -v ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})
add_test(NAME Docs.TheCheckerFindsPlantedFaults COMMAND ${ptdp_doc_test} --self-test ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR})

set_tests_properties(Docs.EveryBlockIsClassified Docs.FlagsExist Docs.PathsExist PROPERTIES LABELS docs TIMEOUT 60)
# The blocks run one document after another, each block under 60 s (all of them about 20 s on the
# 2-core VM); training runs and mpirun use both cores. docs/ACCEPTANCE.md's fleet blocks (85 s,
# timing a throttled node against three others) are not run here but by their own ctest tests,
# CliMpi.AcceptFleet* (`doctest: run ctest NAME`), so this test need not run alone; among the first
# (COST), as one of the longest.
set_tests_properties(Docs.ShellBlocksRun PROPERTIES LABELS docs TIMEOUT 300 PROCESSORS 2 COST 400)
set_tests_properties(Docs.TheCheckerFindsPlantedFaults PROPERTIES LABELS docs TIMEOUT 120 COST 60)
# The flags check runs every ptdp subcommand's and project script's --help (34 s): among the first.
set_tests_properties(Docs.FlagsExist PROPERTIES COST 100)
