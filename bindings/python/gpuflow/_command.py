"""The ``gpuflow`` script of a wheel built at the repository root: runs the command the wheel
carries (gpuflow/bin/gpuflow) in this process's place, so signals, the terminal and the exit
status are the command's own (``gpuflow lease`` relies on all three)."""
from __future__ import annotations

import os
import sys


def main() -> int:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "gpuflow")
    if not os.access(exe, os.X_OK):
        print(f"gpuflow: this gpuflow Python package carries no command ({exe} is missing): it was "
              "installed from bindings/python, without the native parts; install the gpuflow "
              "Debian package, or `pip install` the repository root", file=sys.stderr)
        return 2
    os.execv(exe, [exe, *sys.argv[1:]])
    return 2  # not reached: execv replaces this process or raises


if __name__ == "__main__":
    sys.exit(main())
