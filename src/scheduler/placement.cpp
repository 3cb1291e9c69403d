#include "scheduler/placement.hpp"

namespace gf {

size_t choose_placement(std::span<const PlacementOption> options, uint32_t preferred_worker) {
  size_t best = 0;
  double best_finish = 0;
  for (size_t i = 0; i < options.size(); ++i) {
    const PlacementOption &o = options[i];
    double finish = o.backlog_s + o.transfer_s + o.compute_s;
    bool better = i == 0 || finish < best_finish ||
                  (finish == best_finish && o.worker == preferred_worker);
    if (better) {
      best = i;
      best_finish = finish;
    }
  }
  return best;
}

}  // namespace gf
