// Byte counts for people, in one form everywhere the command prints one (info, run, doctor,
// traces): powers of 1024 with their binary units, one decimal unless the value is whole
// ("512 B", "16 MiB", "1.5 GiB").
#pragma once

#include <string>

namespace gpuflow_cli {

std::string bytes_text(double bytes);

}  // namespace gpuflow_cli
