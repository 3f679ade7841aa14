"""Seed 000's add-one kernel: TMA load, +1 in shared memory, TMA store; with and without swizzle."""

import numpy as np
import pytest

from gpu_helpers import random_array
from numba_tma._frontend import cuda
from numba_tma.ladders.add_one import add_one


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("shape", [(64, 64), (1000, 772), (3, 8)])
def test_add_one_int32(shape, swizzle):
    a = random_array(shape, np.int32) // 2
    d = cuda.to_device(a)
    add_one(d, swizzle=swizzle)
    np.testing.assert_array_equal(d.copy_to_host(), a + 1)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float64])
def test_add_one_other_dtypes(dtype):
    a = random_array((129, 336 // np.dtype(dtype).itemsize), dtype)  # 10.5 tiles wide
    if np.dtype(dtype).kind == "u":
        a //= 2
    d = cuda.to_device(a)
    add_one(d, swizzle=32)
    np.testing.assert_array_equal(d.copy_to_host(), a + dtype(1))


def test_add_one_rejects_bad_input():
    with pytest.raises(ValueError, match="swizzle"):
        add_one(cuda.to_device(np.zeros((8, 8), np.int32)), swizzle=16)
    with pytest.raises(TypeError, match="array"):
        add_one(np.zeros((8, 8), np.int32))
    with pytest.raises(ValueError, match="2-D"):
        add_one(cuda.to_device(np.zeros((2, 8, 8), np.int32)))
