// The exception barrier every C entry point goes through, and the thread-local last-error
// message it fills. Nothing thrown inside the runtime crosses into the caller.
//
// Where a shim lives (DuckDB's habit: grep finds a function's home): gf_<kind>_* is defined in
// <kind>_c.cpp, one file per handle or value kind: pool_c.cpp (gf_pool_*), graph_c.cpp
// (gf_graph_*), run_c.cpp (gf_run_*), lease_c.cpp (gf_lease_*), service_c.cpp (gf_service_*),
// task_ctx_c.cpp (gf_task_ctx_*), data_plane_c.cpp (gf_data_plane_*), bytes_c.cpp (gf_bytes_*),
// error_c.cpp (gf_last_error, gf_status_*), version_c.cpp (gf_version*). A struct's *_init
// function lives with the functions that take the struct (gf_submit_options_init and
// gf_command_desc_init in graph_c.cpp, gf_kernel_desc_init in pool_c.cpp, gf_value_ops_init in
// task_ctx_c.cpp), and gf_default_endpoint with the service. Files without _c hold what the
// shims share: handle tables (objects.*, handles.hpp), struct layouts (structs.hpp,
// layouts.hpp), dashboards (dashboards.*), returned bytes (bytes.hpp).
#pragma once

#include <new>
#include <string>
#include <system_error>

#include "core/error.hpp"
#include "gpuflow.h"

namespace gf::capi {

void set_last_error(std::string message);
void clear_last_error();
const char *last_error_text();

template <class Body>
gf_status guard(Body &&body) noexcept {
  try {
    clear_last_error();
    return body();
  } catch (const Error &e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc &) {
    set_last_error("out of host memory");
    return GF_ERR_OUT_OF_MEMORY;
  } catch (const std::system_error &e) {
    set_last_error(std::string("system error: ") + e.what());
    return GF_ERR_SYSTEM;
  } catch (const std::exception &e) {
    set_last_error(std::string("internal error: ") + e.what());
    return GF_ERR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: unknown exception");
    return GF_ERR_INTERNAL;
  }
}

// For functions that return nothing (destroy): errors are swallowed after being recorded.
template <class Body>
void guard_void(Body &&body) noexcept {
  (void)guard([&] {
    body();
    return GF_OK;
  });
}

template <class T>
void require_out(T *out, const char *name) {
  if (!out) fail(GF_ERR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

}  // namespace gf::capi
