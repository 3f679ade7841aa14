"""The classic transpose ladder (seed 003, numba_tma.ladders.transpose_classic: v1-v5) on the GPU:
every kernel, every element size, odd and large shapes, exact compare with numpy's transpose;
streams, empty arrays, mismatched shapes. The shipped v6 rungs that close the ladder are tested
in test_transpose_v6.py."""

import numpy as np
import pytest

from classic_transpose_checks import assert_transposed, poisoned, run_checked
from gpu_helpers import random_array
from numba_tma._frontend import cuda
from numba_tma.ladders import transpose_classic as tc

KERNELS = [k for k in tc.LADDER if not k.startswith("v6_")]      # v1..v5
DTYPES = [np.uint8, np.float16, np.float32, np.float64]
SHAPES = [(1, 1000, 777), (2, 33, 4097), (1, 4096, 4096)]


def run(kernel, a, **kwargs):
    run_checked(tc.LADDER[kernel], a, **kwargs)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernel", KERNELS)
def test_ladder_exact(kernel, dtype, shape):
    run(kernel, random_array(shape, dtype))


@pytest.mark.parametrize("kernel", KERNELS)
def test_stream_and_empty(kernel):
    a = random_array((2, 70, 45), np.float32)
    stream = cuda.stream()
    src = cuda.to_device(a, stream=stream)
    out = poisoned((2, 45, 70), np.float32)
    tc.LADDER[kernel](src, out, stream=stream)
    stream.synchronize()
    assert_transposed(out, a)
    tc.LADDER[kernel](cuda.device_array((0, 3, 5), np.float32),
                      cuda.device_array((0, 5, 3), np.float32))


@pytest.mark.parametrize("kernel", KERNELS)
def test_rejects_mismatched_shapes(kernel):
    with pytest.raises(ValueError, match=r"out must have shape"):
        tc.LADDER[kernel](cuda.device_array((1, 4, 6), np.float32),
                          cuda.device_array((1, 4, 6), np.float32))
