#include "dask_command.hpp"

#include <dlfcn.h>
#include <gpuflow.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/regular_file.hpp"
#include "exit_codes.hpp"

namespace gpuflow_cli {

int run_on_dask(const std::string &scheduler, const std::string &graph,
                const std::vector<std::string> &plugins) {
  // Python opens the document by its path and would wait on a FIFO there: refused here first,
  // by the rule every document of the command is read by.
  if (graph != "-") {
    if (std::string why = gf::core::regular_file_problem(graph, "the graph document");
        !why.empty()) {
      std::fprintf(stderr, "gpuflow: %s\n", why.c_str());
      return kExitError;
    }
  }
  const char *env_python = std::getenv("GPUFLOW_PYTHON");
  const std::string python = env_python && *env_python ? env_python : "python3";
  // The Python package must load the library this command runs on, not whatever it finds.
  Dl_info info{};
  if (!std::getenv("GPUFLOW_LIBRARY") &&
      dladdr(reinterpret_cast<void *>(&gf_version), &info) != 0 && info.dli_fname) {
    setenv("GPUFLOW_LIBRARY", info.dli_fname, 1);
  }
  std::vector<std::string> args = {python, "-m", "gpuflow.dask", "run", scheduler, graph};
  for (const std::string &p : plugins) {
    args.push_back("--plugin");
    args.push_back(p);
  }
  std::vector<char *> argv;
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(nullptr);
  execvp(argv[0], argv.data());
  std::fprintf(stderr,
               "gpuflow: run --dask: cannot run %s: %s (it needs a Python with the gpuflow "
               "package and distributed; GPUFLOW_PYTHON names the interpreter)\n",
               python.c_str(), std::strerror(errno));
  return 2;
}

}  // namespace gpuflow_cli
