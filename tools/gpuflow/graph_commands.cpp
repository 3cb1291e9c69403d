#include "graph_commands.hpp"

#include <gpuflow.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "core/bytes_text.hpp"
#include "exit_codes.hpp"
#include "graph_document.hpp"
#include "local_pool.hpp"
#include "options.hpp"

namespace gpuflow_cli {

namespace {

void print_devices(const PoolOptions &o, gf_pool *pool) {
  uint32_t devices = 0;
  gf_pool_device_count(&devices, pool);
  const char *source = nullptr;
  gf_pool_devices_source(&source, pool);
  std::printf("\ndevices: %u (%s)\n", devices, source ? source : "?");
  if (std::string why = emulation_reason(o, pool); !why.empty()) {
    std::printf("  emulated by the host backend: %s\n", why.c_str());
  }
  for (uint32_t d = 0; d < devices; ++d) {
    gf_device_info info = GF_DEVICE_INFO_INIT;
    if (gf_pool_device_info(&info, pool, d) != GF_OK) continue;
    std::printf("  %d  %-24s %s  memory %s (pool %s)%s%s\n", info.ordinal,
                info.name ? info.name : "?", info.emulated ? "emulated" : "cuda",
                gf::bytes_text(static_cast<double>(info.total_memory)).c_str(),
                gf::bytes_text(static_cast<double>(info.pool_memory)).c_str(),
                info.uuid && *info.uuid ? "  " : "", info.uuid ? info.uuid : "");
  }
}

void print_workers(gf_pool *pool) {
  uint32_t workers = 0;
  gf_pool_worker_count(&workers, pool);
  std::printf("\nworkers: %u\n", workers);
  for (uint32_t w = 0; w < workers; ++w) {
    gf_worker_info info = GF_WORKER_INFO_INIT;
    if (gf_pool_worker_info(&info, pool, w) != GF_OK) continue;
    std::printf("  %-8s threads %u  resources:", info.name, info.threads);
    uint32_t lines = 0;
    gf_pool_ledger_size(&lines, pool, w);
    for (uint32_t i = 0; i < lines; ++i) {
      gf_ledger_entry e = GF_LEDGER_ENTRY_INIT;
      if (gf_pool_ledger_entry(&e, pool, w, i) != GF_OK) continue;
      if (std::strcmp(e.resource, "gpu_memory") == 0) {
        std::printf(" %s=%s", e.resource, gf::bytes_text(e.capacity).c_str());
      } else {
        std::printf(" %s=%g", e.resource, e.capacity);
      }
    }
    std::printf("\n");
  }
}

int info(const PoolOptions &o) {
  gf_pool *pool = make_pool(o);
  if (!pool) return kExitError;
  std::printf("gpuflow %s (library), built with header %d.%d.%d\n", gf_version_string(),
              GF_VERSION_MAJOR, GF_VERSION_MINOR, GF_VERSION_PATCH);
  print_devices(o, pool);
  print_workers(pool);
  uint32_t kernels = 0;
  gf_pool_kernel_count(&kernels, pool);
  std::printf("\nkernels: %u\n", kernels);
  for (uint32_t k = 0; k < kernels; ++k) {
    const char *name = nullptr;
    if (gf_pool_kernel_name(&name, pool, k) == GF_OK) std::printf("  %s\n", name);
  }
  gf_pool_destroy(pool);
  return kExitOk;
}

int validate(const std::string &path, const PoolOptions &o) {
  gf_graph *graph = load_graph(path);
  if (!graph) return kExitError;
  uint64_t tasks = 0, data = 0;
  gf_graph_task_count(&tasks, graph);
  gf_graph_data_count(&data, graph);
  // Always checked against the pool the options describe: requests must be feasible there. A
  // graph naming kernels cannot be resolved without the plugins that provide them.
  gf_pool *pool = make_pool(o);
  if (!pool) {
    gf_graph_destroy(graph);
    return kExitError;
  }
  int rc = kExitOk;
  std::string verdict = "; feasible on this pool";
  gf_status s = gf_graph_check(graph, pool);
  if (s == GF_ERR_NOT_FOUND && o.plugins.empty()) {
    verdict = "; NOT checked against a pool: it names kernels, give --plugin LIB to check it";
  } else if (s != GF_OK) {
    rc = library_error(path);
  }
  gf_pool_destroy(pool);
  if (rc == kExitOk) {
    std::printf("%s: valid (%" PRIu64 " tasks, %" PRIu64 " data objects)%s\n", path.c_str(), tasks,
                data, verdict.c_str());
  }
  gf_graph_destroy(graph);
  return rc;
}

int convert(const std::string &path, const std::string &output, gf_graph_format format) {
  gf_graph *graph = load_graph(path);
  if (!graph) return kExitError;
  int rc = kExitOk;
  gf_bytes bytes{nullptr, 0};
  if (gf_graph_serialize(&bytes, graph, format) != GF_OK) {
    rc = library_error(path);
  } else {
    std::ofstream out(output, std::ios::binary);
    out.write(static_cast<const char *>(bytes.data), static_cast<std::streamsize>(bytes.size));
    if (format == GF_GRAPH_FORMAT_JSON) out << "\n";
    if (!out) {
      std::fprintf(stderr, "gpuflow: cannot write %s\n", output.c_str());
      rc = kExitError;
    }
  }
  gf_bytes_free(&bytes);
  gf_graph_destroy(graph);
  return rc;
}

// Graph commands build a pool: its devices, plugins and (shared) service.
void add_pool_options(CLI::App &command, PoolOptions &pool) {
  add_plugin_option(command, pool.plugins);
  add_device_options(command, pool, /*device_memory=*/false);
  add_service_options(command, pool.endpoint, pool.token_file);
}

}  // namespace

void add_info_command(CLI::App &app, int &exit_code) {
  auto pool = std::make_shared<PoolOptions>();
  CLI::App *command = app.add_subcommand("info");
  add_pool_options(*command, *pool);
  command->callback([pool, &exit_code] { exit_code = info(*pool); });
}

void add_validate_command(CLI::App &app, int &exit_code) {
  struct Options {
    std::string graph;
    PoolOptions pool;
  };
  auto o = std::make_shared<Options>();
  CLI::App *command = app.add_subcommand("validate");
  command->add_option("GRAPH", o->graph)->required();
  add_pool_options(*command, o->pool);
  command->callback([o, &exit_code] { exit_code = validate(o->graph, o->pool); });
}

void add_convert_command(CLI::App &app, int &exit_code) {
  struct Options {
    std::string graph, output;
    bool json = false, binary = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App *command = app.add_subcommand("convert");
  command->add_option("GRAPH", o->graph)->required();
  command->add_option("OUT", o->output)->required();
  CLI::Option_group *format = command->add_option_group("format");
  format->add_flag("--json", o->json);
  format->add_flag("--binary", o->binary);
  format->require_option(1);
  command->callback([o, &exit_code] {
    exit_code =
        convert(o->graph, o->output, o->json ? GF_GRAPH_FORMAT_JSON : GF_GRAPH_FORMAT_BINARY);
  });
}

}  // namespace gpuflow_cli
