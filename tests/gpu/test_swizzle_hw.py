"""The numpy swizzle model against the hardware: TMA loads tiles of known values with each swizzle
mode and element size; the raw shared-memory bytes are copied out and compared with the model."""

import functools

import numpy as np
import pytest
from numba import cuda

from gpu_helpers import TIMEOUT_NS, box_model, random_array
from numba_tma import TensorMap, mbarrier, swizzle, tma

DTYPES = [np.uint8, np.float16, np.float32, np.float64]
ROWS = 16


@functools.cache
def raw_kernel(dtype, rows, cols, span):
    n = rows * cols
    itemsize = dtype.itemsize
    align = swizzle.pattern_bytes(span) if span else 128

    @cuda.jit
    def kernel(desc, y, x, raw, logical, ok):
        tile = cuda.shared.array(n, dtype, alignment=align)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, desc, (y, x), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            raw[i] = tile[i]                    # shared memory as the hardware laid it out
            r = i // cols
            c = i % cols
            logical[i] = tile[swizzle.index(r, c, cols, itemsize, span)]   # the device helper

    return kernel


def cases():
    for span in (0, 32, 64, 128):
        for dtype in DTYPES:
            itemsize = np.dtype(dtype).itemsize
            widths = {span or 128, (span or 128) // 2} if span != 32 else {32, 16}
            for row_bytes in sorted(widths):
                if row_bytes >= 16:
                    yield span, np.dtype(dtype), row_bytes // itemsize


@pytest.mark.parametrize("span,dtype,cols", list(cases()),
                         ids=lambda v: str(v) if not isinstance(v, np.dtype) else v.name)
def test_model_matches_hardware(span, dtype, cols):
    a = random_array((2 * ROWS + 5, 3 * cols + 16 // dtype.itemsize), dtype)
    y, x = 7, cols          # the inner coordinate stays 16-byte aligned
    tmap = TensorMap(cuda.to_device(a), (ROWS, cols), swizzle=span)
    n = ROWS * cols
    raw = cuda.to_device(random_array(n, dtype))
    logical = cuda.to_device(random_array(n, dtype))
    ok = cuda.to_device(np.ones(1, np.int32))
    raw_kernel(dtype, ROWS, cols, span)[1, 128](tmap, y, x, raw, logical, ok)
    assert ok.copy_to_host()[0] == 1
    tile = box_model(a, (y, x), (ROWS, cols))
    got = raw.copy_to_host().view(np.uint8)
    np.testing.assert_array_equal(got, swizzle.shared_image(tile, span),
                                  err_msg="hardware layout differs from the model")
    np.testing.assert_array_equal(logical.copy_to_host().reshape(ROWS, cols), tile,
                                  err_msg="swizzle.index does not undo the hardware swizzle")
