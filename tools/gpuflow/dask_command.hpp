// `gpuflow run --dask SCHEDULER GRAPH`: a graph document on a Dask cluster, handed to the Python
// side that does it (python -m gpuflow.dask run; bindings/python/gpuflow/_dask_documents.py).
#pragma once

#include <string>
#include <vector>

namespace gpuflow_cli {

// Replaces this process with `PYTHON -m gpuflow.dask run SCHEDULER GRAPH [--plugin P]...`, where
// PYTHON is $GPUFLOW_PYTHON or python3, with GPUFLOW_LIBRARY pointing at this library when
// unset. Returns only on failure, with exit code 2 after saying why.
int run_on_dask(const std::string &scheduler, const std::string &graph,
                const std::vector<std::string> &plugins);

}  // namespace gpuflow_cli
