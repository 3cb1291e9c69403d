"""Waiting in tests for a condition, not for the clock (also used by plugins/dask/tests and by
the child processes of terminal_child, whose PYTHONPATH has this directory).

A test waits until what it needs has happened (an event, a count, a state), polling with a
deadline that only guards against a hang: the deadline is never what the test asserts. How fast
something happens is a latency, measured in bench/, not checked here."""
import os
import sys
import threading
import time

HANG_S = 60.0  # long enough for a loaded machine; reached only when something is stuck


def wait_until(condition, what, timeout: float = HANG_S, interval: float = 0.01):
    """Calls `condition` until it returns something true, and returns that. After `timeout`
    seconds without, fails with an AssertionError saying `what` (a text, or a callable giving
    one, e.g. to show the state last seen)."""
    deadline = time.monotonic() + timeout
    while True:
        got = condition()
        if got:
            return got
        if time.monotonic() > deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {timeout:g} s: {said}")
        time.sleep(interval)


# The functions in which a thread waits for a run: gpuflow._run.wait_run (Run.wait, Run.result,
# Future.result, gpuflow.dask.get without callbacks) and the Dask reporter's loop (with them).
_WAITS = ("wait_run", "wait")


def main_thread_waits_for_a_run() -> bool:
    """Whether the main thread is in one of gpuflow's waits for a run, where Ctrl-C cancels the
    run (its innermost Python frame is the wait loop while gf_run_wait blocks). A body that is
    to interrupt the main thread waits for this first, so that the interrupt reaches the wait
    and not the code before it."""
    import gpuflow
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return False
    code = frame.f_code
    return code.co_name in _WAITS and \
        os.path.dirname(os.path.abspath(code.co_filename)) == \
        os.path.dirname(os.path.abspath(gpuflow.__file__))
