# The Debian package (`cpack -G DEB` in a build tree configured with -DCMAKE_INSTALL_PREFIX=/usr,
# which gives Debian's multiarch libdir and /etc; scripts/build-deb.sh; docs/install.md): the library with its
# SONAME, headers, the CMake package and gpuflow.pc, the `gpuflow` command and gpuflow-relay, the
# example plugin and documents, man pages, the systemd units and /etc/gpuflow/serve.toml.
# Runtime dependencies are found by dpkg-shlibdeps from what the binaries link, plus UCX, which
# the data plane loads with dlopen. The CUDA runtime is linked statically and the driver is
# optional at run time: without one, gpuflow runs on the host backend.

option(GPUFLOW_INSTALL_SYSTEM_FILES
  "Install the systemd units (lib/systemd/system) and /etc/gpuflow/serve.toml" ON)
if(GPUFLOW_INSTALL_SYSTEM_FILES)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/systemd/gpuflow.socket
    ${PROJECT_SOURCE_DIR}/packaging/systemd/gpuflow.service
    DESTINATION lib/systemd/system)
  # /etc for a /usr prefix (GNUInstallDirs), as the package is configured; else PREFIX/etc.
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/serve.toml
    DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/gpuflow)
endif()

# Man pages from the command's own --help, when help2man is there (Debian's help2man).
find_program(GPUFLOW_HELP2MAN help2man)
if(GPUFLOW_HELP2MAN AND NOT GPUFLOW_WHEEL_LAYOUT)
  set(_gf_man ${PROJECT_BINARY_DIR}/man/gpuflow.1)
  add_custom_command(OUTPUT ${_gf_man}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
    COMMAND ${GPUFLOW_HELP2MAN} --no-info --no-discard-stderr
      --name "run annotated task graphs on a shared pool of GPUs" --output ${_gf_man}
      $<TARGET_FILE:gpuflow_cli>
    DEPENDS gpuflow_cli VERBATIM)
  add_custom_target(gpuflow_man ALL DEPENDS ${_gf_man})
  install(FILES ${_gf_man} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
endif()

set(CPACK_PACKAGE_NAME gpuflow)
set(CPACK_PACKAGE_VENDOR "gpuflow")
set(CPACK_PACKAGE_CONTACT "gpuflow developers <gpuflow@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "shared multi-GPU pool for annotated task graphs, behind a stable C ABI")
set(CPACK_PACKAGE_DESCRIPTION
  "gpuflow runs annotated task graphs from C, C++, Rust, Julia and Python, and from Dask and\n\
Snakemake, on one pool of a node's GPUs that every user of the node shares safely: a node\n\
service with leases and fair share, socket-activated by systemd.")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libucx0, libssl3")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nvidia-driver, python3-venv")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
  ${PROJECT_SOURCE_DIR}/packaging/debian/postinst
  ${PROJECT_SOURCE_DIR}/packaging/debian/prerm
  ${PROJECT_SOURCE_DIR}/packaging/debian/postrm
  ${PROJECT_SOURCE_DIR}/packaging/debian/conffiles
  ${PROJECT_SOURCE_DIR}/packaging/debian/triggers)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
