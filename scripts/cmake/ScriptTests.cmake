# The tests of the Python tools (scripts/ptdp_tools/, the commands in scripts/ and plots/; label
# scripts). Included by the top-level CMakeLists.txt after experiments/, so the ptdp target exists.
# COST: the History.* tests are among the build's longest (a Python start with SciPy per step: the
# gate and the changes about a minute each on the 2-core VM, the page half that), so ctest -j starts
# them among the first rather than last, where one would run alone at the end.

# plots/history.py (scripts/track.sh): an input error exits 2, never 1, the regression code.
add_test(NAME History.InputErrorsExitTwoNotTheRegressionCode COMMAND ${CMAKE_SOURCE_DIR}/plots/history_test.sh)
set_tests_properties(History.InputErrorsExitTwoNotTheRegressionCode PROPERTIES
                     PASS_REGULAR_EXPRESSION "PASS: history input errors" TIMEOUT 60 LABELS scripts COST 50)
# plots/history.py --changes: steps and drifts named at their builds (scripts/ptdp_tools/plots/changes.py).
add_test(NAME History.ChangesAreNamedAtTheirBuilds COMMAND ${CMAKE_SOURCE_DIR}/plots/changes_test.sh)
set_tests_properties(History.ChangesAreNamedAtTheirBuilds PROPERTIES
                     PASS_REGULAR_EXPRESSION "PASS: history changes" TIMEOUT 240 LABELS scripts COST 200)
# plots/history.py --changes --recent K: the gate against a baseline window, alerts until acknowledged,
# its power from a simulation (scripts/ptdp_tools/plots/gate.py, gate_power.py).
add_test(NAME History.TheGateKeepsAnAlertUntilAcknowledged COMMAND ${CMAKE_SOURCE_DIR}/plots/gate_test.sh)
set_tests_properties(History.TheGateKeepsAnAlertUntilAcknowledged PROPERTIES
                     PASS_REGULAR_EXPRESSION "PASS: history gate" TIMEOUT 180 LABELS scripts COST 200)
# The history page in a real headless browser (chromium): a fixed width at 150 builds, its marks,
# links, filter and exports; skipped (77) without chromium or plotly (scripts/setup_packages.sh).
add_test(NAME History.ThePageHasAFixedWidthInABrowser COMMAND ${CMAKE_SOURCE_DIR}/plots/page_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(History.ThePageHasAFixedWidthInABrowser PROPERTIES
                     PASS_REGULAR_EXPRESSION "PASS: history page" SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS scripts COST 150)
# scripts/track.sh: the last GATE_RECENT builds below the baseline window fail the run until acknowledged.
add_test(NAME Track.ARecentDriftInTheHistoryFailsTheRun
         COMMAND ${CMAKE_SOURCE_DIR}/scripts/track_test.sh ${CMAKE_BINARY_DIR})
set_tests_properties(Track.ARecentDriftInTheHistoryFailsTheRun PROPERTIES
                     PASS_REGULAR_EXPRESSION "PASS: track history gate" TIMEOUT 180 DEPENDS ptdp LABELS scripts)

# export-hf gathers sharded saves (t, p > 1, --zero) into one model; needs numpy, skipped without.
add_test(NAME Scripts.ExportHfGathersShardedSaves
         COMMAND ${CMAKE_SOURCE_DIR}/scripts/export_hf_gather_test.sh $<TARGET_FILE:ptdp>)
set_tests_properties(Scripts.ExportHfGathersShardedSaves PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS scripts
                     ENVIRONMENT "OMP_NUM_THREADS=1")

# The package's own tests (unittest, the standard library only), run in scripts/ with $PTDP the
# ptdp of this build: NAME MODULE pairs.
find_package(Python3 3.11 COMPONENTS Interpreter)  # tomllib (scripts/ptdp_tools/calibrate.py)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "Scripts.*: no Python 3.11 or newer, the tests of scripts/ptdp_tools are not registered")
  return()
endif()
foreach(pair "ThePackageHasNoImportCycleAndThinEntryPoints ptdp_tools.package_test"
             "AtomicWritesLeaveTheOldFileOrTheNew ptdp_tools.atomic_test"
             "TheCheckpointReaderReadsWhatPtdpSaves ptdp_tools.checkpoint.reader_test"
             "ThePlotsWithoutMatplotlibSayWhatToInstall ptdp_tools.plots.figures_test"
             "AFatBinaryIsCutToOneArchitecture ptdp_tools.fatbin_test"
             "EachNcclLibraryIsNamedWithItsVersion ptdp_tools.nccl_versions_test"
             "TheGpuSummaryJudgesTheSpeedCriteria ptdp_tools.gpu_summary_test")
  separate_arguments(pair)
  list(GET pair 0 test_name)
  list(GET pair 1 test_module)
  add_test(NAME Scripts.${test_name}
           COMMAND ${CMAKE_COMMAND} -E env PTDP=$<TARGET_FILE:ptdp> ${Python3_EXECUTABLE} -m unittest -v ${test_module}
           WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/scripts)
  set_tests_properties(Scripts.${test_name} PROPERTIES TIMEOUT 120 LABELS scripts)
endforeach()
