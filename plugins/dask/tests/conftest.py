import os
import signal
import sys

# A run started in the background of a script inherits SIGINT ignored, and Python then raises no
# KeyboardInterrupt (nor do the children it starts): the Ctrl-C tests need the default.
signal.signal(signal.SIGINT, signal.default_int_handler)

HERE = os.path.dirname(os.path.abspath(__file__))
# the Dask test-suite plugin (gpuflow_dask_pytest) lives one directory up
sys.path.insert(0, os.path.dirname(HERE))
# the binding's test support (waiting: conditions, not the clock; terminal_child) is shared
sys.path.insert(0, os.path.join(HERE, os.pardir, os.pardir, os.pardir, "bindings", "python",
                                "tests"))
