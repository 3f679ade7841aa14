"""The numpy swizzle model against the hardware: TMA loads tiles of known values with each swizzle
mode and element size; the raw shared-memory bytes are copied out and compared with the model."""

import functools

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, random_array
from numba_tma import TensorMap, fence, mbarrier, swizzle, tma
from numba_tma._frontend import cuda

DTYPES = [np.uint8, np.float16, np.float32, np.float64]
ROWS = 16


@functools.cache
def raw_kernel(dtype, rows, cols, span):
    n = rows * cols
    n_smem = swizzle.shared_bytes((rows, cols), dtype.itemsize, span) // dtype.itemsize
    itemsize = dtype.itemsize
    align = swizzle.pattern_bytes(span) if span else 128

    @cuda.jit
    def kernel(desc, y, x, pad, raw, logical, ok):
        tile = cuda.shared.array(n_smem, dtype, alignment=align)
        bar = cuda.shared.array(1, np.uint64)
        for i in range(cuda.threadIdx.x, n_smem, cuda.blockDim.x):
            tile[i] = pad[0]                    # row padding must keep this
        fence.proxy_async_shared()              # ordinary writes before the async-proxy load
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, n * itemsize)
            tma.load(tile, desc, (y, x), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, n_smem, cuda.blockDim.x):
            raw[i] = tile[i]                    # shared memory as the hardware laid it out
        for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            logical[i] = tile[swizzle.index(i // cols, i % cols, cols, itemsize, span)]

    return kernel


def cases():
    for span in (0, 32, 64, 128):
        for dtype in DTYPES:
            itemsize = np.dtype(dtype).itemsize
            for row_bytes in sorted({span or 128, max(16, (span or 128) // 2), 16}):
                yield span, np.dtype(dtype), row_bytes // itemsize


@pytest.mark.parametrize("span,dtype,cols", list(cases()),
                         ids=lambda v: str(v) if not isinstance(v, np.dtype) else v.name)
def test_model_matches_hardware(span, dtype, cols):
    a = random_array((2 * ROWS + 5, 3 * cols + 16 // dtype.itemsize), dtype)
    y, x = 7, cols          # odd outer coordinate; the inner one stays 16-byte aligned
    tmap = TensorMap(cuda.to_device(a), (ROWS, cols), swizzle=span)
    assert tmap.smem_bytes == swizzle.shared_bytes((ROWS, cols), dtype.itemsize, span)
    n_smem = tmap.smem_bytes // dtype.itemsize
    pad = random_array(1, dtype)
    raw = cuda.to_device(random_array(n_smem, dtype))
    logical = cuda.to_device(random_array(ROWS * cols, dtype))
    ok = cuda.to_device(np.ones(1, np.int32))
    raw_kernel(dtype, ROWS, cols, span)[1, 128](tmap, y, x, cuda.to_device(pad), raw, logical, ok)
    assert ok.copy_to_host()[0] == 1, "the phase did not complete with the dense box bytes"
    tile = box_model(a, (y, x), (ROWS, cols))
    want = np.full(n_smem, pad[0], dtype).view(np.uint8).copy()
    image = swizzle.shared_image(tile, span)
    written = swizzle.physical_offsets(tile.shape, dtype.itemsize, span).reshape(-1)
    want[written] = image[written]
    np.testing.assert_array_equal(raw.copy_to_host().view(np.uint8), want,
                                  err_msg="hardware layout differs from the model")
    np.testing.assert_array_equal(logical.copy_to_host().reshape(ROWS, cols), tile,
                                  err_msg="swizzle.index does not undo the hardware swizzle")
