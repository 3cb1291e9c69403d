"""The progress display of a run being waited for: a bar redrawn in place on stderr, like
``dask.diagnostics.ProgressBar`` and the ``gpuflow run`` CLI (whose format it copies).

Whether it shows (the ``progress`` setting of a run, or of gpuflow.dask.get):

- ``None`` (auto, the default): only when someone is watching -- stderr is a terminal, or the
  code runs in a Jupyter kernel -- and only once the run has lasted ``MINIMUM_S``, so short runs
  print nothing. ``GPUFLOW_PROGRESS=1`` shows it without a terminal too (a batch log then gets
  a line every ``LINE_EVERY_S`` and one at the end, as from the CLI); ``GPUFLOW_PROGRESS=0``
  never.
- ``True``: shown for every run, from the start, wherever stderr goes. ``False``: never.

The waiting thread draws it from the run's statistics (gf_run_stats_get), at most every
``REDRAW_S``: task bodies do nothing for it.
"""
from __future__ import annotations

import os
import sys
import time

ENV = "GPUFLOW_PROGRESS"
MINIMUM_S = 1.0  # Dask's ProgressBar(minimum=1.0): a run shorter than this prints nothing
REDRAW_S = 0.2
LINE_EVERY_S = 10.0  # the CLI's default --progress-interval
WIDTH = 30


def as_setting(value) -> bool | None:
    """A setting from a bool, None or text ("1", "off", ...: environment, dask.config)."""
    if value is None or isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    return None


def env_setting() -> bool | None:
    return as_setting(os.environ.get(ENV))


def in_notebook() -> bool:
    """Whether this is a Jupyter (IPython kernel) process: its stderr is no terminal, but the
    notebook renders a line rewritten with \\r in place."""
    ipython = sys.modules.get("IPython")  # never imported here: only if the user has it loaded
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return getattr(shell, "kernel", None) is not None


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def watcher(stats, setting):
    """A Watcher drawing progress from `stats` (a callable returning a RunStats) under
    `setting` (None, True, False), or None when nothing is to be shown."""
    if setting is False:
        return None
    stream = sys.stderr
    if stream is None:  # pythonw, daemons
        return None
    in_place = _is_terminal(stream) or in_notebook()
    if setting is True:
        return Watcher(stats, stream, in_place, 0.0)
    env = env_setting()
    if env is False or (env is None and not in_place):
        return None
    return Watcher(stats, stream, in_place, MINIMUM_S)


def duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds) % 60:02d}s"
    return f"{int(seconds // 3600)}h{int(seconds // 60) % 60:02d}m"


def _numbers(s):
    done = min(s.succeeded + s.failed + s.cancelled, s.tasks)
    rate = done / s.elapsed_s if s.elapsed_s > 0 else 0.0
    if done == s.tasks:
        eta = duration_text(0)
    elif rate > 0:
        eta = duration_text((s.tasks - done) / rate)
    else:
        eta = "?"
    percent = 100 * done // s.tasks if s.tasks else 100
    return done, rate, eta, percent


def bar_text(s) -> str:
    """The in-place bar, as the CLI draws it on a terminal."""
    done, rate, eta, percent = _numbers(s)
    filled = WIDTH * done // s.tasks if s.tasks else WIDTH
    failed = f", {s.failed} failed" if s.failed else ""
    return (f"[{'#' * filled}{'.' * (WIDTH - filled)}] {percent:3d}% {done}/{s.tasks} tasks"
            f"{failed}  {rate:.1f} tasks/s  ETA {eta}  elapsed {duration_text(s.elapsed_s)}")


def line_text(s) -> str:
    """One line of a log, as the CLI prints it when its output is no terminal."""
    done, rate, eta, percent = _numbers(s)
    return (f"progress: {done}/{s.tasks} tasks ({percent}%), {s.failed} failed, "
            f"{rate:.1f} tasks/s, ETA {eta}, elapsed {duration_text(s.elapsed_s)}")


class Watcher:
    """The display of one wait: tick() while the run runs, close() when the wait ends (the run
    finished, the wait timed out, or Ctrl-C), which finishes the line."""

    def __init__(self, stats, stream, in_place: bool, minimum: float):
        self._stats = stats
        self._stream = stream
        self._in_place = in_place
        self._minimum = minimum
        self._due = 0.0  # monotonic time of the next look at the statistics
        self._next_line = max(minimum, LINE_EVERY_S)
        self._width = 0  # of the bar last drawn: a shorter one must blank its tail
        self.shown = False

    def tick(self) -> None:
        now = time.monotonic()
        if now < self._due:
            return
        self._due = now + REDRAW_S
        s = self._stats()
        if s.elapsed_s < self._minimum:
            return
        if self._in_place:
            self._draw(s, final=False)
        elif s.elapsed_s >= self._next_line:
            while self._next_line <= s.elapsed_s:
                self._next_line += LINE_EVERY_S
            self._write(line_text(s) + "\n")

    def close(self) -> None:
        try:
            s = self._stats()
        except Exception:  # the run is gone: just end the line
            s = None
        if s is None or not (self.shown or s.elapsed_s >= self._minimum):
            if self.shown and self._in_place:
                self._write("\n")
            return
        if self._in_place:
            self._draw(s, final=True)
        else:
            self._write(line_text(s) + "\n")

    def _draw(self, s, final: bool) -> None:
        text = bar_text(s)
        # Blank what a longer previous bar left (no ANSI erase: notebooks do not all take it).
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        self._write("\r" + text + pad + ("\n" if final else ""))

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # stderr closed or gone: the run matters, not the bar
            self._in_place = False
            self._minimum = float("inf")
            return
        self.shown = True
