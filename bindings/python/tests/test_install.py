"""The package as a user installs it: `pip install bindings/python` (not editable) into a fresh
virtual environment, loading a gpuflow installed with `cmake --install` into a prefix that only
PKG_CONFIG_PATH names.

Needs a configured and built source tree (GPUFLOW_BUILD_DIR, else build/, build-rel/ or
build-py/ at the repository root, with the library, the `gpuflow` command and the plugin built)
and setuptools>=64 importable by the interpreter running pytest (borrowed by the fresh
environment through a .pth file, so no network is needed). Skips otherwise."""
import glob
import os
import shutil
import site
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.dirname(HERE)                       # bindings/python
ROOT = os.path.abspath(os.path.join(PROJECT, "..", ".."))


def _build_dir():
    """GPUFLOW_BUILD_DIR, else the build directory of GPUFLOW_LIBRARY (BUILD/src/libgpuflow.so,
    as scripts/test-python.sh sets it), else build/, build-rel/ or build-py/."""
    lib = os.environ.get("GPUFLOW_LIBRARY", "")
    if os.environ.get("GPUFLOW_BUILD_DIR"):
        dirs = [os.environ["GPUFLOW_BUILD_DIR"]]
    elif os.path.basename(os.path.dirname(lib)) == "src":
        dirs = [os.path.dirname(os.path.dirname(os.path.abspath(lib)))]
    else:
        dirs = [os.path.join(ROOT, b) for b in ("build", "build-rel", "build-py")]
    for d in dirs:
        if all(os.path.exists(os.path.join(d, f)) for f in (
                "CMakeCache.txt", "cmake_install.cmake", "src/libgpuflow.so",
                "tools/gpuflow/gpuflow", "examples/seed_kernels.so")):
            with open(os.path.join(d, "CMakeCache.txt")) as f:
                if any(l.startswith("GPUFLOW_SANITIZE:") and l.strip().split("=", 1)[1]
                       for l in f):
                    # A sanitized library loads only after its sanitizer runtime: not in a
                    # plain Python, as a user's install would.
                    pytest.skip(f"{d} is a sanitizer build")
            return d
    pytest.skip(f"no fully built gpuflow build directory among {dirs}")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in (
        "GPUFLOW_LIBRARY", "LD_LIBRARY_PATH", "PKG_CONFIG_PATH", "PYTHONPATH", "VIRTUAL_ENV",
        "PYTHONHOME")}
    env.update(extra)
    return env


def _tree_state():
    """`git status --porcelain --ignored` of bindings/python, less bytecode caches."""
    if shutil.which("git") is None or not os.path.isdir(os.path.join(ROOT, ".git")) and \
            not os.path.isfile(os.path.join(ROOT, ".git")):
        return None
    out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--", "."], cwd=PROJECT,
                         capture_output=True, text=True, check=True).stdout
    return sorted(l for l in out.splitlines() if "__pycache__" not in l)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, installed prefix's pkgconfig directory)."""
    if shutil.which("pkg-config") is None:
        pytest.skip("pkg-config is not installed")
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not importable: cannot build the package offline")
    if int(setuptools.__version__.split(".")[0]) < 64:
        pytest.skip(f"setuptools {setuptools.__version__} < 64")
    build = _build_dir()
    tmp = tmp_path_factory.mktemp("install")
    prefix = tmp / "prefix"
    subprocess.run(["cmake", "--install", build, "--prefix", str(prefix)], check=True,
                   capture_output=True, text=True)
    pcs = glob.glob(str(prefix / "**" / "pkgconfig" / "gpuflow.pc"), recursive=True)
    assert len(pcs) == 1, pcs
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], check=True, capture_output=True,
                             text=True).stdout.strip()
    # pip and setuptools from the interpreter running the tests (appended after the fresh
    # environment's own site-packages, so the package installed there wins).
    with open(os.path.join(purelib, "_gpuflow_test_borrowed.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    before = _tree_state()
    subprocess.run([python, "-m", "pip", "install", "--no-build-isolation", "--no-deps",
                    "--no-index", "-q", PROJECT], check=True, env=_clean_env(), cwd=str(tmp))
    # A non-editable install writes nothing into the source tree (no build/, no *.egg-info).
    assert _tree_state() == before
    assert not os.path.exists(os.path.join(PROJECT, "build"))
    assert not glob.glob(os.path.join(PROJECT, "*.egg-info"))
    return python, os.path.dirname(pcs[0]), tmp


PROGRAM = textwrap.dedent("""
    import sys, gpuflow, gpuflow._ffi as ffi
    assert gpuflow.__file__.startswith(sys.prefix), gpuflow.__file__  # the fresh environment's
    with gpuflow.Pool(cpu_workers=1, emulated_devices=0, backend="host") as pool:
        g = gpuflow.Graph()
        t = g.task(lambda: 6 * 7, keep=True)
        with pool.run(g) as run:
            run.result()
            print(ffi.library_path, run.value(t))
""")


def test_pip_installed_package_finds_library_through_pkg_config(installed):
    python, pkgconfig_dir, tmp = installed
    out = subprocess.run([python, "-c", PROGRAM], env=_clean_env(PKG_CONFIG_PATH=pkgconfig_dir),
                         cwd=str(tmp), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    path, value = out.stdout.split()
    assert value == "42"
    assert path.startswith(str(tmp / "prefix")) and path.endswith("libgpuflow.so.0"), path


def test_import_error_lists_every_place_tried(installed):
    python, _, tmp = installed
    empty = tmp / "no-pkgconfig"
    empty.mkdir(exist_ok=True)
    out = subprocess.run([python, "-c", "import gpuflow"],
                         env=_clean_env(PKG_CONFIG_PATH=str(empty), PKG_CONFIG_LIBDIR=str(empty)),
                         cwd=str(tmp), capture_output=True, text=True)
    if out.returncode == 0:
        pytest.skip("a libgpuflow is installed system-wide: the loader finds it")
    assert "ImportError" in out.stderr
    for place in ("GPUFLOW_LIBRARY: not set", "next to the package",
                  "pkg-config --variable=libdir gpuflow: no gpuflow.pc found",
                  "ctypes.util.find_library('gpuflow')", "the loader's search path"):
        assert place in out.stderr, (place, out.stderr)
