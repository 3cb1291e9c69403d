// `gpuflow run`'s progress: a bar redrawn in place on a terminal (done/total, failures, tasks per
// second, ETA); elsewhere (batch logs) a "progress:" line every `interval` seconds and one at the
// end.
#pragma once

#include <gpuflow.h>

namespace gpuflow_cli {

class Progress {
 public:
  Progress(bool terminal, double interval) : terminal_(terminal), interval_(interval) {}
  // `final`: the run has finished; the terminal's line is ended.
  void show(const gf_run_stats &stats, bool final);

 private:
  bool terminal_;
  double interval_;
  double next_s_ = interval_;
};

}  // namespace gpuflow_cli
