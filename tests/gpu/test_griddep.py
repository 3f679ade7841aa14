"""Programmatic dependent launch (numba_tma.griddep) on the GPU: kernels launched back to back
with ``DirectKernel.prepare(..., dependent=True)`` start before the one ahead of them ends, and
``griddep.wait()`` keeps each from reading what that one has not written yet."""

import numpy as np
import pytest

from numba_tma import griddep
from numba_tma._frontend import cuda, types
from numba_tma.launch import DirectKernel


@cuda.jit
def _plus_one(src, dst, spin):
    # Set-up that touches no global memory may run early; then wait for the kernel before.
    t = cuda.threadIdx.x
    acc = np.int64(0)
    for i in range(spin):           # a while of work before the wait: the overlap to hide
        acc += i * t
    griddep.wait()
    griddep.launch_dependents()
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i] + 1 + (acc & 0)


@pytest.mark.parametrize("cluster", [None, (2, 1, 1)])
def test_dependent_chain_reads_after_the_writer(cluster):
    n = 1 << 20
    arr = types.Array(types.int32, 1, "C")
    k = DirectKernel(_plus_one, (arr, arr, types.int64), cache=False)
    x = np.random.default_rng().integers(0, 1000, n).astype(np.int32)
    bufs = [cuda.to_device(x), cuda.to_device(np.full(n, -1, np.int32))]
    grid = (n // 256, 1, 1)
    launches = [k.prepare(grid, (256, 1, 1), (bufs[j].device_ctypes_pointer.value, n),
                          (bufs[1 - j].device_ctypes_pointer.value, n), 2000,
                          cluster=cluster, dependent=True) for j in (0, 1)]
    for step in range(40):           # no host sync between them
        launches[step % 2](0)
    np.testing.assert_array_equal(bufs[0].copy_to_host(), x + 40)
