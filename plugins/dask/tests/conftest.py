import os
import sys

# the Dask test-suite plugin (gpuflow_dask_pytest) lives one directory up
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
