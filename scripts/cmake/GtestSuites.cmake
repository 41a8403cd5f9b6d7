# ptdp_gtest_suites(TARGET [LABELS l...] [ENVIRONMENT e...]): registers the GoogleTest binary
# TARGET with ctest one test *suite* at a time, not one test at a time as gtest_discover_tests
# does: a process per suite, so that a suite's shared set-up (a CPU reference run, a GPU context,
# loading the CUDA libraries) is paid once, not once per test. After each build the binary lists
# its tests (scripts/cmake/gtest_suites.cmake); each suite becomes up to three ctest tests, by the
# tests' full names:
#   SUITE          the tests that need no GPU (LABELS as given)
#   SUITE:gpu      the tests of the CUDA path (names with Cuda, Nccl, Gpu or vgpu; label "gpu";
#                  the virtual-GPU build runs them, scripts/test_vgpu.sh)
#   SUITE:nogpu    the tests of a machine without a GPU (WithoutGpu, WithoutAGpu, NoGpu; label "nogpu")
# A kind of over 24 tests is dealt into shards of at most 24, SUITE[:KIND]@K, that ctest -j runs side
# by side, the dearest first (COST: the number of tests, ten times that for GPU tests); a test whose
# name says "ThisMachine" measures the machine and runs alone. Each runs its tests with an explicit
# --gtest_filter, so a test is in exactly one of them.
# PER_TEST: one ctest test per GoogleTest test instead (named SUITE.TEST, labelled the same way),
# for binaries whose tests are separate processes anyway (the CLI tests start ptdp).
# CHECK_ONCE regex: the GPU tests of the suites it matches run with VGPU_ACCESS_CHECK=once (each
# distinct kernel launch checked once, vgpu/README.md): the training runs, whose steps repeat the
# launches of the first; the kernel tests keep every launch checked.
# HOOKS_ONLY regex: the GPU tests of the suites it matches also leave device memory open to the
# host (VGPU_PROTECT=0): host code touching device memory is then caught by the instrumentation's
# hooks alone, which ptdp's training code has (core/train, core/parallel, core/comm, core/model,
# core/optim, core/tensor, the CUDA backend: vgpu/README.md, "Host access"); what only the page
# protection catches, an uninstrumented library's access, the other suites keep checking. Without
# pkeys the protection is an mprotect per chunk a kernel touches, about a third of a training
# layout's time with many ranks (their threads contend for the process's address-space lock).
function(ptdp_gtest_suites target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "PER_TEST" "CHECK_ONCE;HOOKS_ONLY" "LABELS;ENVIRONMENT")
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_suites.cmake")
  string(REPLACE ";" "," labels "${arg_LABELS}")
  string(REPLACE ";" "|" env "${arg_ENVIRONMENT}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND ${CMAKE_COMMAND} -DEXE=$<TARGET_FILE:${target}> -DOUT=${ctest_file} "-DLABELS=${labels}"
            "-DENVIRONMENT=${env}" -DWORKDIR=${CMAKE_CURRENT_BINARY_DIR} -DPER_TEST=${arg_PER_TEST}
            "-DCHECK_ONCE=${arg_CHECK_ONCE}" "-DHOOKS_ONLY=${arg_HOOKS_ONLY}"
            -P ${PROJECT_SOURCE_DIR}/scripts/cmake/gtest_suites.cmake
    COMMENT "Listing the test suites of ${target}"
    VERBATIM)
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${ctest_file})
endfunction()
