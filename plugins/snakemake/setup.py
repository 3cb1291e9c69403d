"""Keeps `pip install plugins/snakemake` from writing into the source tree.

All metadata lives in pyproject.toml. setuptools builds in place (pip builds a local directory
in place) and by default writes build/ and its .egg-info/ next to this file; these commands
put them in a temporary directory instead, removed when the build process exits.
"""
import atexit
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.egg_info import egg_info

_scratch = tempfile.mkdtemp(prefix="gpuflow-smk-pybuild-")
atexit.register(shutil.rmtree, _scratch, ignore_errors=True)


class _Build(build):
    def initialize_options(self):
        super().initialize_options()
        self.build_base = _scratch


class _EggInfo(egg_info):
    def initialize_options(self):
        super().initialize_options()
        self.egg_base = _scratch


setup(cmdclass={"build": _Build, "egg_info": _EggInfo})
