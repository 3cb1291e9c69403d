// `gpuflow run --show-outputs`: the value of every output the run kept (literal inputs left out):
// its size; for 8 bytes also as int64 and double; a small one as text when it is printable UTF-8,
// else in hex.
#pragma once

#include <gpuflow.h>

#include "graph_document.hpp"

namespace gpuflow_cli {

void show_outputs(gf_run *run, gf_graph *graph, const GraphNames &names);

}  // namespace gpuflow_cli
