"""Python helpers for libdetinfer_torch.so (detinfer's batch-invariant PyTorch operators).

    import detinfer_torch
    detinfer_torch.load("/usr/lib/libdetinfer_torch.so")   # or DETINFER_TORCH_LIB
    y = torch.ops.detinfer.mm(x, w)                        # explicit operators
    with detinfer_torch.batch_invariant():                 # or: an unmodified model
        out = model(x)

Inside batch_invariant(), aten::mm, addmm, _softmax, _log_softmax and mean.dim on CPU run
detinfer's kernels (numerics spec v1): a row's result no longer depends on how many other
rows are in the batch. The previous state is restored on exit (the scopes nest).
"""

import contextlib
import os

import torch

_loaded_path = None


def load(path=None):
    """Loads libdetinfer_torch.so once (path, else $DETINFER_TORCH_LIB); returns its path."""
    global _loaded_path
    if _loaded_path is not None:
        return _loaded_path
    path = path or os.environ.get("DETINFER_TORCH_LIB")
    if not path:
        raise RuntimeError("detinfer_torch.load: pass the path of libdetinfer_torch.so "
                           "or set DETINFER_TORCH_LIB")
    torch.ops.load_library(path)
    _loaded_path = path
    return path


@contextlib.contextmanager
def batch_invariant(enabled=True):
    """Routes aten's CPU matmul/softmax/log_softmax/mean kernels to detinfer for a scope."""
    previous = torch.ops.detinfer.set_aten_override(enabled)
    try:
        yield
    finally:
        torch.ops.detinfer.set_aten_override(previous)
