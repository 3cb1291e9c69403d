// A pool's named kernels: registered through the C ABI or by plugin libraries, resolved by the
// scheduler when a graph that names kernels is submitted. Entries are never removed or replaced,
// so a body resolved by a run stays valid for as long as the pool lives (runs keep it alive).
#pragma once

#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/task_body.hpp"

namespace gf {

class KernelRegistry final : public KernelResolver {
 public:
  KernelRegistry() = default;
  ~KernelRegistry() override;
  KernelRegistry(const KernelRegistry &) = delete;
  KernelRegistry &operator=(const KernelRegistry &) = delete;

  // Checks and adds a kernel; on success the registry owns user_data. Thread-safe.
  void add(const gf_kernel_desc &desc);
  bool resolve(const std::string &name, TaskBody &out) const override;
  size_t size() const;
  const std::string &name(size_t index) const;  // throws for an index out of range

  // Loads a plugin library and lets it register its kernels; the library stays loaded until the
  // registry is destroyed. Thread-safe.
  void load_plugin(const std::string &path);

 private:
  struct Entry {
    std::string name;
    TaskBody body;
    gf_destroy_fn destroy = nullptr;
  };
  mutable std::shared_mutex mu_;
  std::vector<std::unique_ptr<Entry>> entries_;  // registration order; addresses stable
  std::unordered_map<std::string, const Entry *> by_name_;
  std::vector<void *> libraries_;  // dlopen handles, closed after every entry is destroyed
};

}  // namespace gf
