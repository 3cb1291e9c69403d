// Which of the node's devices this process was handed, from the environment it was started in:
// CUDA_VISIBLE_DEVICES, Slurm's SLURM_STEP_GPUS / SLURM_JOB_GPUS, Kubernetes'
// NVIDIA_VISIBLE_DEVICES. A pool drives exactly those (docs/service.md, "Which devices").
//
// Precedence, first one set wins:
//   1. CUDA_VISIBLE_DEVICES: the CUDA runtime itself honours it, so nothing may contradict it.
//      Inside a Slurm step Slurm sets it as well, renumbered to what the step sees.
//   2. SLURM_STEP_GPUS, then SLURM_JOB_GPUS: the node's GPU numbers the step (job) was given.
//   3. NVIDIA_VISIBLE_DEVICES: "all"; "none", "void" or empty for no device; else a list.
// Pure: the environment comes in as a lookup, so every rule is testable without a GPU.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace gf {

struct HandedDown {
  std::string variable;  // the variable the list came from; empty: none is set
  std::string value;     // its text as it stands
  bool all = true;       // every device the process sees (nothing set, or "all")
  // Otherwise the devices, in order: ordinals ("3") or UUIDs ("GPU-…", "MIG-…", or a prefix of
  // one unique among the devices, as CUDA accepts). Empty: no device at all.
  std::vector<std::string> entries;
  // Where the list came from, in words for `gpuflow info` and `status`:
  // "CUDA_VISIBLE_DEVICES=1,3", "all the node shows", "the service's".
  std::string source = "all the node shows";
};

using EnvLookup = std::function<const char *(const char *)>;

// The list handed down, by the precedence above. Throws gf::Error (GF_ERR_INVALID_ARGUMENT)
// for an entry that is neither an ordinal nor a UUID, or that repeats, naming variable and entry.
// CUDA ends its list at the first negative ordinal ("-1": no device); so does this.
HandedDown handed_down(const EnvLookup &getenv);
HandedDown handed_down();  // of this process

// A list that names devices by UUID, from `source` (a connected pool mirrors its service's).
HandedDown named_devices(std::string source, std::vector<std::string> uuids);

// The devices a pool drives: indices into `node_uuids` (the devices the process sees, in their
// order), in the list's order. `node` says in words what those devices are ("4 emulated devices
// (GPUFLOW_EMULATED_DEVICES)"). An entry naming no device is refused (GF_ERR_NOT_FOUND, naming
// variable and entry), as is a UUID prefix that matches several. One exception: ordinals from
// SLURM_* or NVIDIA_VISIBLE_DEVICES number the node's GPUs, and where Slurm's device cgroup or
// the container runtime has applied the list already the process sees exactly that many
// devices, renumbered from 0: then all of them are the list.
std::vector<int> select_devices(const HandedDown &list, const std::vector<std::string> &node_uuids,
                                const std::string &node);

}  // namespace gf
