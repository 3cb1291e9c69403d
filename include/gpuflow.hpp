// gpuflow.hpp — C++20 over gpuflow's C ABI (gpuflow.h), header-only.
//
// Every class here owns or borrows a handle of gpuflow.h and calls the C functions; no C++ type
// crosses the library boundary, so this header works with any build of libgpuflow whose major
// version matches (the library itself stays C).
//
// Errors are exceptions: a failed call throws gpuflow::Error, a std::runtime_error carrying the
// gf_status (status()) and the library's message (message(), copied from gf_last_error() right
// after the call, before it can be overwritten). C++20 has no std::expected, and a hand-made
// result type would make every call site check twice; exceptions also carry a body's failure
// out of a task naturally. Outcomes that are not errors never throw: Run::wait_for returns false
// on timeout, Pool::acquire_lease with a timeout returns an empty optional, Run::status returns
// the plain gf_status (the non-throwing escape for hot polling loops), and destructors ignore
// what the C destroy functions report.
//
// Ownership: Pool, Graph, Run, Lease and Service own one handle each, are movable and not
// copyable (the C ABI has no copy). A moved-from or default-constructed object is empty: its
// get() is nullptr and destroying it does nothing. get() lends the C handle for calls this header
// does not wrap; release_handle() hands it over.
//
// Task bodies are callables taking a gpuflow::TaskContext& and returning void; a body fails its
// attempt by throwing (the exception's what() becomes the task's error). No exception ever
// crosses into C: the trampolines that gpuflow calls catch everything. Body storage (see
// Graph::task): empty callables (captureless lambdas) need none, a lone function pointer rides in
// the task's user_data, and anything with state is built in place in an arena owned by the
// graph, which grows in blocks of 1 to 64 KiB: no heap allocation per body. Bodies live until
// gpuflow destroys the task's user data: after the graph object and every run of it are gone.
//
// Thread safety follows gpuflow.h and is stated per class.
//
// The header is in pieces under gpuflow/ (error, body, describe, pool, graph, service, in
// reading order), all included here; include this one.
#ifndef GPUFLOW_HPP
#define GPUFLOW_HPP

#include "gpuflow/body.hpp"      // IWYU pragma: export
#include "gpuflow/describe.hpp"  // IWYU pragma: export
#include "gpuflow/error.hpp"     // IWYU pragma: export
#include "gpuflow/graph.hpp"     // IWYU pragma: export
#include "gpuflow/pool.hpp"      // IWYU pragma: export
#include "gpuflow/service.hpp"   // IWYU pragma: export

#endif  // GPUFLOW_HPP
