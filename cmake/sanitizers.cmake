# GPUFLOW_SANITIZE="address;undefined" or "thread" instruments everything built after this point.
if(GPUFLOW_SANITIZE)
  list(JOIN GPUFLOW_SANITIZE "," _gf_sanitizers)
  add_compile_options(-fsanitize=${_gf_sanitizers} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${_gf_sanitizers})
endif()
