# Warnings on the project's own code (gpuflow_strict(target)). They are errors in the project's
# own development and CI builds (GPUFLOW_WERROR=ON, set by scripts/), not in a user's build:
# compilers differ in false positives. GCC 12's -Wrestrict is off: at -O3 (a plain Release build)
# it reported 16 overlaps of exabytes at negative offsets inside libstdc++'s string concatenation
# (GCC bug 105329), in Debian 12's compiler. Clang checks the thread-safety annotations
# (core/thread_safety.hpp); scripts/test.sh builds the library so (scripts/check-thread-safety.sh).
option(GPUFLOW_WERROR "Treat warnings in gpuflow's own code as errors" OFF)
function(gpuflow_strict target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    $<$<BOOL:${GPUFLOW_WERROR}>:-Werror>
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
    $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast>)
endfunction()
