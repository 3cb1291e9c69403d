# Warnings on the project's own code (gpuflow_strict(target)). They are errors in the project's
# own development and CI builds (GPUFLOW_WERROR=ON, set by scripts/), not in a user's build:
# compilers differ in false positives (GCC 12's -Wrestrict inside libstdc++ at -O3).
option(GPUFLOW_WERROR "Treat warnings in gpuflow's own code as errors" OFF)
function(gpuflow_strict target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    $<$<BOOL:${GPUFLOW_WERROR}>:-Werror>
    $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast>)
endfunction()
