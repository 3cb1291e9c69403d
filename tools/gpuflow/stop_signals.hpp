// SIGTERM, SIGINT and SIGHUP for the commands that stop in order (serve, run, trace), handled
// from their first moment, one way for all of them: a thread waits for the signals (blocked in
// every other thread), keeps the first for whoever asks, and, where the command says so, takes a
// second one to mean "now" and ends the process at once (status 128 + the signal). Blocking them
// and waiting only once the work had started left a start that hangs (a FIFO as the token file, a
// plugin that waits, a slow device) deaf to every stop signal. Processes the command starts
// (libuv's, for command tasks) begin with no signal blocked.
#pragma once

namespace gpuflow_cli {

// What a command does about stop signals.
struct StopPolicy {
  // Said on the first signal as "WHO: Terminated: stopping"; null: say nothing (the command says
  // what it does when it gets to it).
  const char *announce_as = nullptr;
  // A second signal ends the process at once, whatever it is doing. Off: later ones are ignored
  // (`run` must get to kill the commands its first cancel is stopping).
  bool second_exits = false;
  // SIGHUP asks to re-read the configuration instead of stopping (serve with --config, as
  // `systemctl reload` sends it).
  bool hup_reloads = false;
};

// Blocks the three signals in this thread, and so in every thread started after it (call it
// before any other starts), and starts the thread that takes them. Once per process.
void handle_stop_signals(StopPolicy policy);

// The first stop signal once it came, else 0.
int stop_signal_received();

// Waits for the first stop signal (returns at once when it came already) and returns it.
int wait_for_stop_signal();

// With hup_reloads: waits for a stop signal or a SIGHUP; true for a SIGHUP (each one counted
// once), false once a stop signal came.
bool wait_for_reload_or_stop();

}  // namespace gpuflow_cli
