"""Builds detinfer._detinfer with CMake (the setuptools backend of pyproject.toml).

The extension is the CMake target detinfer_python of the source tree one folder up,
configured without tests, benchmarks or the CLI; it carries the library's objects, so the
installed package needs no libdetinfer.so. DETINFER_CMAKE_ARGS adds CMake arguments
(e.g. "-DDETINFER_WITH_TORCH=OFF"); DETINFER_BUILD_JOBS sets the parallel jobs.
DETINFER_SOURCE_DIR names the source tree when this folder was copied out of it, and
DETINFER_BUILD_DIR an existing configured CMake build folder to build the target in
instead of configuring a new one (the install test, tests/python/pip_install_test.sh).
"""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(os.environ.get("DETINFER_SOURCE_DIR") or Path(__file__).resolve().parent.parent)


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if not (ROOT / "CMakeLists.txt").exists() or not (ROOT / "src").is_dir():
            raise RuntimeError(f"detinfer's source tree is not at {ROOT}: build from a checkout "
                               "(pip install --no-build-isolation ./python)")
        existing = os.environ.get("DETINFER_BUILD_DIR")
        build = Path(existing).resolve() if existing else Path(self.build_temp).resolve() / "cmake"
        if not existing:
            self.configure(build)
        jobs = os.environ.get("DETINFER_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build), "--target", "detinfer_python", "-j", jobs],
                       check=True)
        built = sorted((build / "python" / "detinfer").glob("_detinfer*.so"))
        if not built:
            raise RuntimeError("the CMake build made no _detinfer*.so")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], dest)

    def configure(self, build: Path) -> None:
        build.mkdir(parents=True, exist_ok=True)
        args = [
            "cmake", "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG",
            "-DDETINFER_BUILD_PYTHON=ON", "-DDETINFER_BUILD_TESTS=OFF",
            "-DDETINFER_BUILD_BENCH=OFF", "-DDETINFER_BUILD_CLI=OFF", "-DDETINFER_INSTALL=OFF",
            "-DDETINFER_WERROR=OFF", f"-DPython_EXECUTABLE={sys.executable}",
        ]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        args += shlex.split(os.environ.get("DETINFER_CMAKE_ARGS", ""))
        subprocess.run(args, check=True)


setup(ext_modules=[CMakeExtension("detinfer._detinfer")], cmdclass={"build_ext": CMakeBuild})
