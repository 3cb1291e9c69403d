"""A Python child process whose stderr is a pseudo-terminal or a pipe: what a user at a terminal,
or a batch log, would see of it (used by test_progress.py and plugins/dask/tests)."""
import os
import pty
import select
import signal
import subprocess
import sys
import textwrap
import time

import gpuflow
from waiting import HANG_S


HERE = os.path.dirname(os.path.abspath(__file__))


def child_env(**extra):
    """The environment of a child: this checkout's gpuflow, and this directory (a child may
    `from waiting import ...`) on its PYTHONPATH."""
    env = dict(os.environ)
    env.pop("GPUFLOW_PROGRESS", None)  # the tests say what they want
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(gpuflow.__file__)), HERE, env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


class Child:
    """Runs `code`; `output` collects its stderr (and its stdout with stdout_too), read from a
    terminal when tty, else from a pipe. Without stdout_too, stdout is a pipe read at the end."""

    def __init__(self, code, tty=True, stdout_too=False, **env):
        argv = [sys.executable, "-c", textwrap.dedent(code)]
        env = child_env(**env)
        if tty:
            self._fd, slave = pty.openpty()
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                         stdout=slave if stdout_too else subprocess.PIPE,
                                         stderr=slave, env=env)
            os.close(slave)  # so that reading sees the end once the child is gone
        else:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT if stdout_too
                                         else subprocess.PIPE, env=env)
            self._fd = (self.proc.stdout if stdout_too else self.proc.stderr).fileno()
        self.tty, self.stdout_too = tty, stdout_too
        self.output = b""

    def read_until(self, text: bytes | None, timeout: float) -> bool:
        """Reads until `text` was output (None: until the end); whether it was."""
        deadline = time.monotonic() + timeout
        while text is None or text not in self.output:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not select.select([self._fd], [], [], left)[0]:
                continue
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:  # EIO: a terminal whose last writer is gone
                chunk = b""
            if not chunk:
                break
            self.output += chunk
        return text is not None and text in self.output

    def finish(self, timeout: float = 120):
        """Reads to the end; (exit status, output, stdout if it was not in output)."""
        try:
            self.read_until(None, timeout)
            rc = self.proc.wait(timeout=10)
            stdout = b"" if self.stdout_too else self.proc.stdout.read()
            return rc, self.output.decode(errors="replace"), stdout.decode(errors="replace")
        finally:
            self.close()

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.tty and self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for f in (self.proc.stdout, self.proc.stderr):
            if f is not None:
                f.close()


def run(code, tty=True, stdout_too=False, timeout=120, **env):
    """(exit status, output, stdout) of `code` run as a Child."""
    return Child(code, tty, stdout_too, **env).finish(timeout)


def interrupt_while_drawing(child, bar):
    """Sends SIGINT once `child` draws its bar, and checks what a user relies on. The child runs
    many tasks on one worker, whose bodies do not end until its main thread lets them (if ever):
    each body writes "body started" on stderr first; on KeyboardInterrupt the main thread prints
    "interrupted <bodies started> <bodies ended>" on stdout, then "AFTER" on stderr. So the
    child gets KeyboardInterrupt while its one body still runs (not waiting for it; the body
    cannot end before), exits, and the bar (`bar`, a regex) was drawn with its line ended before
    the program wrote on. Returns the child's stdout, for what a child prints after."""
    try:
        assert child.read_until(b"body started", HANG_S), child.output
        assert child.read_until(b"tasks/s", HANG_S), child.output  # the bar is drawn
        child.proc.send_signal(signal.SIGINT)
        rc, out, stdout = child.finish(HANG_S)
    finally:
        child.close()
    assert rc == 0, out
    assert stdout.split()[:3] == ["interrupted", "1", "0"], (stdout, out)
    before, _ = out.split("AFTER", 1)
    assert bar.search(before) and before.endswith("\n"), repr(before[-120:])
    return stdout
