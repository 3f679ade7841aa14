"""v8_sector on the GPU: exact transposes for rows that are not 16-byte multiples and for views
whose base is not 16-byte aligned, every element size, 2-D and batched; nothing written outside
``out`` (guard elements around it keep their values). test_transpose.py checks that transpose()
picks it."""

import numpy as np
import pytest

from gpu_helpers import random_array
from numba_tma._frontend import cuda
from numba_tma.transpose_api import transpose_kernels

DTYPES = [np.uint8, np.float16, np.int16, np.float32, np.int32, np.float64, np.int64]
# Odd shapes, tile multiples, partial tiles, shapes smaller than one tile; the first tile row of
# each out row and the last are the edge cases of the sector ownership.
SHAPES = [(1, 131, 197), (2, 130, 199), (1, 515, 517), (3, 259, 301), (1, 37, 45), (1, 7, 300),
          (1, 256, 256), (1, 777, 1029), (2, 1031, 129), (1, 300, 1)]
GUARD = 40   # elements around the views, enough to shift a base by up to 32 bytes


def _views(shape, dtype, src_offset, out_offset):
    n = int(np.prod(shape))
    a = random_array(shape, dtype)
    src_buf = cuda.to_device(random_array(n + GUARD, dtype))
    src = src_buf[src_offset:src_offset + n]
    src.copy_to_device(a.reshape(-1))
    guard = random_array(n + GUARD, dtype)                        # poisons out as well
    out_buf = cuda.to_device(guard)
    out = out_buf[out_offset:out_offset + n].reshape(shape[:-2] + shape[:-3:-1])
    return a, src.reshape(shape), out, out_buf, guard


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("offsets", [(0, 0), (1, 3), (5, 2)], ids=lambda o: f"off{o[0]}-{o[1]}")
def test_v8_sector_exact(dtype, shape, offsets):
    so, oo = offsets
    a, src, out, out_buf, guard = _views(shape, dtype, so, oo)
    transpose_kernels()["v8_sector"](src, out)
    got = out_buf.copy_to_host()
    n = a.size
    np.testing.assert_array_equal(got[oo:oo + n].reshape(out.shape), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(got[:oo], guard[:oo])
    np.testing.assert_array_equal(got[oo + n:], guard[oo + n:])
