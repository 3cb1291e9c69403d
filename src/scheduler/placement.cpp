#include "scheduler/placement.hpp"

namespace gf {

size_t choose_placement(std::span<const PlacementOption> options, uint32_t preferred_worker,
                        double tolerance_s) {
  auto finish = [&](size_t i) {
    return options[i].backlog_s + options[i].transfer_s + options[i].compute_s;
  };
  size_t best = 0, local = 0;
  for (size_t i = 1; i < options.size(); ++i) {
    if (finish(i) < finish(best)) best = i;
    const PlacementOption &o = options[i];
    if (o.transfer_s < options[local].transfer_s ||
        (o.transfer_s == options[local].transfer_s && o.worker == preferred_worker)) {
      local = i;
    }
  }
  bool has_locality = options[local].transfer_s < options[best].transfer_s ||
                      options[local].worker == preferred_worker;
  if (has_locality && finish(local) <= 2 * finish(best) + tolerance_s) return local;
  return best;
}

}  // namespace gf
