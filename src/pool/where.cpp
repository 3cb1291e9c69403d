#include "pool/where.hpp"

#include <string>
#include <unordered_set>

#include "core/error.hpp"
#include "core/resource_names.hpp"
#include "pool/pool_core.hpp"

namespace gf {

namespace {

// Whether a task asks for a device (a GPU, or a command on GPU workers).
bool needs_device(const Graph &graph, const TaskDesc &task) {
  if (task.command_on_gpu) return true;
  for (const auto &[name, amount] : graph.requests().get(task.request)) {
    if (name == resource_names::kGpu || name == resource_names::kGpuMemory) return true;
  }
  return false;
}

// Whether a task must run in the service: a kernel the service loaded and this pool has not,
// or, when the service is on another host (none of its devices are here), a task that needs a
// device and whose body the service can run (its kernel, or a command).
bool service_only(PoolCore &pool, const std::unordered_set<std::string> &service_kernels,
                  const Graph &graph, const TaskDesc &task) {
  TaskBody body;
  const std::string &kernel = graph.kernel_name(task);
  const bool service_kernel = task.names_kernel() && service_kernels.count(kernel);
  if (service_kernel && !pool.kernels().resolve(kernel, body)) return true;
  return pool.connection()->remote() && needs_device(graph, task) &&
         (service_kernel || task.command != UINT32_MAX);
}

std::unordered_set<std::string> kernels_of(const client::Connection &connection) {
  const std::vector<std::string> &names = connection.welcome().kernels;
  return {names.begin(), names.end()};
}

}  // namespace

gf_run_where choose_where(PoolCore &pool, const Graph &graph, gf_run_where asked) {
  if (asked == GF_RUN_IN_PROCESS) return GF_RUN_IN_PROCESS;
  if (asked != GF_RUN_ANYWHERE && asked != GF_RUN_IN_SERVICE) {
    fail(GF_ERR_INVALID_ARGUMENT, "gf_submit_options.where is " +
                                      std::to_string(static_cast<int>(asked)) +
                                      ", which is no gf_run_where");
  }
  const bool forced = asked == GF_RUN_IN_SERVICE;
  auto cannot = [&](const std::string &why) {
    if (forced) fail(GF_ERR_INFEASIBLE, "this graph cannot run in the service: " + why);
    return GF_RUN_IN_PROCESS;
  };
  const std::shared_ptr<client::Connection> &connection = pool.connection();
  if (!connection) {
    return cannot("the pool is not connected to a gpuflow service (gf_pool_config.endpoint)");
  }
  const client::Welcome &welcome = connection->welcome();
  if (!welcome.data_plane) {
    return cannot("the gpuflow service at " + connection->endpoint() + " offers no data plane");
  }
  if (graph.task_count() == 0) return cannot("it has no tasks");
  const std::unordered_set<std::string> service_kernels = kernels_of(*connection);
  bool any_service_only = false;  // a kernel only the service has
  std::string local_only;         // why some task must run here, naming it ("": none must)
  for (TaskIndex t = 0; t < graph.task_count() && local_only.empty(); ++t) {
    const TaskDesc &task = graph.task(t);
    if (task.command != UINT32_MAX) continue;
    if (!task.names_kernel()) {
      local_only = graph.task_label(t) + " has a C callback body, which runs only in this process";
      continue;
    }
    TaskBody body;
    const std::string &kernel = graph.kernel_name(task);
    const bool here = pool.kernels().resolve(kernel, body);
    if (!service_kernels.count(kernel)) {
      local_only = graph.task_label(t) + " names kernel '" + kernel + "', which the service at " +
                   connection->endpoint() + " has not loaded (gpuflow serve --plugin LIB)";
    } else if (!here) {
      any_service_only = true;
    }
  }
  for (DataIndex d = 0; d < graph.data_count() && local_only.empty(); ++d) {
    if (graph.data(d).origin == DataOrigin::kHostValue) {
      local_only =
          graph.data_label(d) + " is an opaque host value, which cannot leave this process";
    }
  }
  if (forced) {
    if (!local_only.empty()) return cannot(local_only);
    return GF_RUN_IN_SERVICE;
  }
  // A kernel only the service has must run there; the rest follows (the service can run
  // commands and kernels both have; only this process runs what only it has).
  // A remote service runs whatever it can run: the caller connected to it to use that node.
  if (connection->remote() && local_only.empty()) return GF_RUN_IN_SERVICE;
  for (TaskIndex t = 0; t < graph.task_count() && !any_service_only; ++t) {
    any_service_only = service_only(pool, service_kernels, graph, graph.task(t));
  }
  if (!any_service_only) return GF_RUN_IN_PROCESS;
  return local_only.empty() ? GF_RUN_IN_SERVICE : GF_RUN_SPLIT;
}

std::vector<bool> service_tasks(PoolCore &pool, const Graph &graph) {
  const std::unordered_set<std::string> service_kernels = kernels_of(*pool.connection());
  std::vector<bool> out(graph.task_count());
  for (TaskIndex t = 0; t < graph.task_count(); ++t) {
    out[t] = service_only(pool, service_kernels, graph, graph.task(t));
  }
  return out;
}

}  // namespace gf
