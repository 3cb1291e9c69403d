# Tests run as on a machine that hands no devices down. A GPU node's container runtime
# (NVIDIA_VISIBLE_DEVICES), a Slurm job (SLURM_JOB_GPUS, SLURM_STEP_GPUS) or the developer's shell
# (CUDA_VISIBLE_DEVICES) would otherwise narrow every emulated pool a test builds to the devices
# named there: the H200 machine's NVIDIA_VISIBLE_DEVICES=0 failed 15 tests run straight from
# ctest (docs/benchmarks.md). The tests of those variables set them themselves.
set(GPUFLOW_HANDED_DOWN_DEVICE_VARIABLES
  CUDA_VISIBLE_DEVICES NVIDIA_VISIBLE_DEVICES SLURM_STEP_GPUS SLURM_JOB_GPUS)

# For a GoogleTest executable (gpuflow_add_gtest). Its tests are found when ctest runs, and in
# CMake 3.25 the properties gtest_discover_tests gives them cannot hold a list, so the executable
# is started through `env -u VARIABLE...`: the emulator property, which add_test and
# gtest_discover_tests put in front of it (CMake 3.29 names this TEST_LAUNCHER).
function(gpuflow_start_without_handed_down_devices target)
  set(launcher env)
  foreach(variable IN LISTS GPUFLOW_HANDED_DOWN_DEVICE_VARIABLES)
    list(APPEND launcher -u ${variable})
  endforeach()
  set_target_properties(${target} PROPERTIES CROSSCOMPILING_EMULATOR "${launcher}")
endfunction()

# Every test add_test registered in the directory that calls this, once the directory is done
# (`cmake_language(DEFER CALL gpuflow_tests_here_without_handed_down_devices)` at its top): the
# variables are unset, but for any a test's ENVIRONMENT sets on purpose.
function(gpuflow_tests_here_without_handed_down_devices)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} ENVIRONMENT environment)
    set(unset)
    foreach(variable IN LISTS GPUFLOW_HANDED_DOWN_DEVICE_VARIABLES)
      if(NOT "${environment}" MATCHES "(^|;)${variable}=")
        list(APPEND unset "${variable}=unset:")
      endif()
    endforeach()
    if(unset)
      set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT_MODIFICATION ${unset})
    endif()
  endforeach()
endfunction()
