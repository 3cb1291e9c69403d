#include "stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

namespace gpuflow_cli {

namespace {

struct StopState {
  StopPolicy policy;
  sigset_t signals;
  std::mutex mu;
  std::condition_variable came;
  int first = 0;    // under mu
  int reloads = 0;  // under mu: SIGHUPs not yet taken by wait_for_reload_or_stop
};

// Never destroyed: the waiting thread may still use it while the process exits.
StopState *state = nullptr;

void take_signals(StopState *s) {
  for (;;) {
    int sig = 0;
    if (sigwait(&s->signals, &sig) != 0) continue;
    std::lock_guard lock(s->mu);
    if (sig == SIGHUP && s->policy.hup_reloads) {
      ++s->reloads;
      s->came.notify_all();
      continue;
    }
    if (s->first == 0) {
      if (s->policy.announce_as) {
        // Said at once, not when the caller gets to it: a start may go on for long.
        std::fprintf(stderr, "%s: %s: stopping\n", s->policy.announce_as, strsignal(sig));
        std::fflush(stderr);
      }
      s->first = sig;
      s->came.notify_all();
      continue;
    }
    if (!s->policy.second_exits) continue;
    // The first one asked for an orderly stop that has not ended: the caller means it now.
    std::fprintf(stderr, "%s: %s again: exiting at once\n",
                 s->policy.announce_as ? s->policy.announce_as : "gpuflow", strsignal(sig));
    std::fflush(stderr);
    ::_exit(128 + sig);
  }
}

}  // namespace

void handle_stop_signals(StopPolicy policy) {
  if (state) return;
  state = new StopState;
  state->policy = policy;
  sigemptyset(&state->signals);
  sigaddset(&state->signals, SIGTERM);
  sigaddset(&state->signals, SIGINT);
  sigaddset(&state->signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &state->signals, nullptr);
  std::thread(take_signals, state).detach();
}

int stop_signal_received() {
  if (!state) return 0;
  std::lock_guard lock(state->mu);
  return state->first;
}

int wait_for_stop_signal() {
  std::unique_lock lock(state->mu);
  state->came.wait(lock, [] { return state->first != 0; });
  return state->first;
}

bool wait_for_reload_or_stop() {
  std::unique_lock lock(state->mu);
  state->came.wait(lock, [] { return state->first != 0 || state->reloads > 0; });
  if (state->first != 0) return false;
  --state->reloads;
  return true;
}

}  // namespace gpuflow_cli
