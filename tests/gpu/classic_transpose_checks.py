"""Shared by the GPU tests of the classic transpose kernels: the ladder's v1-v5
(test_transpose_classic.py) and the shipped v6 rungs (test_transpose_v6.py). Poisoned outputs,
a byte-exact compare with numpy's transpose, and one checked run of a launcher."""

import numpy as np
import pytest

from numba_tma._frontend import cuda


def poisoned(shape, dtype):
    """A device array of ``shape`` whose every byte is 0xA5, so unwritten elements show."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    return cuda.to_device(np.full(n, 0xA5, np.uint8).view(dtype).reshape(shape))


def assert_transposed(out, a):
    got = out.copy_to_host()
    want = np.ascontiguousarray(a.transpose(0, 2, 1))
    same = (got.view(np.uint8).reshape(*got.shape, -1) == want.view(np.uint8).reshape(
        *want.shape, -1)).all(axis=-1)
    if not same.all():
        bad = np.argwhere(~same)
        pytest.fail(f"{len(bad)} of {same.size} elements differ; first at out index "
                    f"{tuple(int(v) for v in bad[0])}: got {got[tuple(bad[0])]!r}, "
                    f"want {want[tuple(bad[0])]!r}")


def run_checked(launcher, a, **kwargs):
    """``launcher(src, out, **kwargs)`` on a device copy of ``a`` into a poisoned out, compared."""
    B, M, N = a.shape
    out = poisoned((B, N, M), a.dtype)
    launcher(cuda.to_device(a), out, **kwargs)
    cuda.synchronize()
    assert_transposed(out, a)
