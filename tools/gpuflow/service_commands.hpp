// The service's commands of the gpuflow tool: serve, lease, status, trace, doctor.
#pragma once

namespace gpuflow_cli {

bool is_service_command(const char *command);
int service_main(int argc, char **argv);

}  // namespace gpuflow_cli
