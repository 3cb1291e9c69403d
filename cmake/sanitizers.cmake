# GPUFLOW_SANITIZE="address;undefined" or "thread" instruments everything built after this point.
if(GPUFLOW_SANITIZE)
  list(JOIN GPUFLOW_SANITIZE "," _gf_sanitizers)
  add_compile_options(-fsanitize=${_gf_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_gf_sanitizers})
endif()

# UCX's memory hooks (UCM) binary-patch libc's mmap/munmap/madvise when libucs loads, in every
# process that starts a data plane (libgpuflow loads UCX then); under a sanitizer the patched
# madvise that glibc calls as a thread exits crashes the process (docs/transport.md, "UCX's memory hooks"). Sanitized test runs turn
# the hooks off: tests and smoke benchmarks get this environment (scripts/test.sh sets it too).
set(GPUFLOW_TEST_ENVIRONMENT "")
if(GPUFLOW_SANITIZE)
  set(GPUFLOW_TEST_ENVIRONMENT "UCX_MEM_EVENTS=no")
endif()
