// SIGTERM, SIGINT and SIGHUP for `gpuflow serve`, handled from its first moment. Blocking them
// and waiting only once the service has started left a start that hangs (a FIFO as the token
// file, a plugin that waits, a slow device) deaf to every stop signal: here a thread waits for
// them from the start; the first one is said ("gpuflow serve: Terminated: stopping") and kept
// for whoever asks, and a second one ends the process at once (status 128 + the signal),
// whatever it is doing.
#pragma once

namespace gpuflow_cli {

// Blocks the three signals in this thread, and so in every thread started after it (call it
// before any other starts), and starts the thread that takes them. Once per process.
void handle_stop_signals();

// The first stop signal once it came, else 0.
int stop_signal_received();

// Waits for the first stop signal (returns at once when it came already) and returns it.
int wait_for_stop_signal();

}  // namespace gpuflow_cli
