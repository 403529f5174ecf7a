"""Fixtures of the detinfer Python tests: tiny models written by `detinfer make-tiny-model`.

The package must be importable (ctest puts <build>/python on PYTHONPATH) and DETINFER_CLI
must name the `detinfer` program; otherwise every test is skipped with the reason.
"""

import os
import subprocess

import pytest

detinfer = pytest.importorskip(
    "detinfer", reason="the detinfer Python package is not built (DETINFER_BUILD_PYTHON)")


def cli() -> str:
    path = os.environ.get("DETINFER_CLI", "")
    if not path or not os.access(path, os.X_OK):
        pytest.skip("DETINFER_CLI does not name the detinfer program")
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """The tiny qwen2 model (seed 1) with detinfer's byte-level tokenizer and template."""
    out = str(tmp_path_factory.mktemp("tiny-qwen2"))
    subprocess.run([cli(), "make-tiny-model", "--arch", "qwen2", "--seed", "1", "--out", out],
                   check=True, capture_output=True)
    return out


@pytest.fixture(scope="session")
def session(tiny_model):
    with detinfer.Session(tiny_model, threads=1, max_batch=16) as s:
        yield s
