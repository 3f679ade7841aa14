"""TMA im2col mode on the GPU: single loads of every rank against the numpy model of the PTX ISA's
traversal, then the im2col gather and the implicit-GEMM convolution against numpy (exact)."""

import functools

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, random_array
from numba_tma import mbarrier, tma
from numba_tma._frontend import cuda
from numba_tma.kernels.im2col import conv2d_nhwc, conv2d_numpy, im2col, im2col_numpy
from numba_tma.kernels.im2col import load_im2col_model
from numba_tma.tensormap import Im2colTensorMap


@functools.cache
def _to_tuple(n):
    fns = {1: lambda c: (c[0],), 2: lambda c: (c[0], c[1]), 3: lambda c: (c[0], c[1], c[2]),
           4: lambda c: (c[0], c[1], c[2], c[3]), 5: lambda c: (c[0], c[1], c[2], c[3], c[4])}
    return cuda.jit(device=True)(fns[n])


@functools.cache
def load_kernel(rank, n_elems, dtype):
    coords_of, offsets_of = _to_tuple(rank), _to_tuple(rank - 2)
    nbytes = n_elems * np.dtype(dtype).itemsize

    @cuda.jit
    def kernel(desc, c, o, out, ok):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, nbytes)
            tma.load_im2col(tile, desc, coords_of(c), offsets_of(o), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


def run_load(x, coords, offsets, lower, upper, pixels, channels, element_strides=None):
    d_x = cuda.to_device(x)
    m = Im2colTensorMap(d_x, pixel_box_lower_corner=lower, pixel_box_upper_corner=upper,
                        channels_per_pixel=channels, pixels_per_column=pixels,
                        element_strides=element_strides)
    n = pixels * channels
    assert m.box_bytes == n * x.itemsize
    out = cuda.to_device(random_array(n, x.dtype))  # poisoned with fresh noise
    ok = cuda.to_device(np.ones(1, np.int32))
    load_kernel(x.ndim, n, x.dtype)[1, 128](
        m, cuda.to_device(np.array(coords, np.int32)), cuda.to_device(np.array(offsets, np.int32)),
        out, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    return out.copy_to_host().reshape(pixels, channels)


# (shape, lower, upper, pixels, channels, [(coords, offsets), ...]); coords = (n, [d, h,] w, c)
# with c * itemsize a multiple of 16 bytes; the first base pixel inside the pixel box. Runs cross
# the end of rows and images, tap offsets push reads into the padding, channel slices hang past C.
CASES = {
    3: ((3, 37, 24), (-2,), (-1,), 64, 16, np.float32,
        [((0, -2, 0), (3,)), ((1, 30, 16), (0,)), ((2, 5, 8), (1,))]),
    4: ((2, 9, 14, 40), (-1, -1), (-1, -1), 64, 16, np.float16,
        [((0, -1, -1, 0), (0, 0)), ((1, 5, 10, 32), (2, 1)), ((0, 3, 12, 16), (1, 2))]),
    5: ((2, 5, 6, 7, 16), (-1, -1, -1), (-1, -1, -1), 100, 16, np.uint8,
        [((0, -1, 2, 3, 0), (1, 2, 0)), ((1, 2, -1, 5, 0), (2, 0, 1))]),
}


@pytest.mark.parametrize("rank", sorted(CASES))
def test_load_im2col_every_rank(rank):
    shape, lower, upper, pixels, channels, dtype, loads = CASES[rank]
    x = random_array(shape, dtype)
    for coords, offsets in loads:
        got = run_load(x, coords, offsets, lower, upper, pixels, channels)
        want = load_im2col_model(x, coords, offsets, lower, upper, pixels, channels)
        np.testing.assert_array_equal(got, want, err_msg=f"coords {coords} offsets {offsets}")


def test_load_im2col_traversal_stride():
    # element_strides on H and W: a stride-2 convolution's filter bases (PTX ISA example 3).
    x = random_array((2, 11, 13, 16), np.float32)
    es = (1, 2, 2, 1)
    for coords, offsets in [((0, -1, -1, 0), (0, 0)), ((0, 5, 3, 0), (2, 1))]:
        got = run_load(x, coords, offsets, (-1, -1), (-1, -1), 64, 16, element_strides=es)
        want = load_im2col_model(x, coords, offsets, (-1, -1), (-1, -1), 64, 16, es)
        np.testing.assert_array_equal(got, want, err_msg=f"coords {coords} offsets {offsets}")


@pytest.mark.parametrize("shape,k,p,dtype", [
    ((2, 9, 14, 8), 3, 1, np.float32),        # 3x3 "same": 252 rows, 4 blocks, the last partial
    ((3, 7, 5, 40), 3, 1, np.float16),        # C = 40 fp16: one 80-byte slice per tap
    ((1, 16, 16, 64), 5, 2, np.float32),      # C = 64: two 32-channel slices per tap
    ((2, 6, 11, 16), 2, 0, np.uint8),         # even filter, no padding (upper corner -1)
    ((1, 5, 5, 16), 3, 2, np.int8),           # padding > K - 1: output larger than the input
])
def test_im2col_matches_numpy(shape, k, p, dtype):
    x = random_array(shape, dtype)
    want = im2col_numpy(x, k, p)
    out = cuda.to_device(random_array(want.shape, dtype))  # poisoned
    got = im2col(cuda.to_device(x), k, p, out=out).copy_to_host()
    np.testing.assert_array_equal(got, want)


def test_conv2d_implicit_gemm_matches_numpy():
    rng = np.random.default_rng()
    # Small integers: every product and partial sum is exact in float32.
    x = rng.integers(-3, 4, size=(2, 9, 13, 24)).astype(np.float32)
    w = rng.integers(-3, 4, size=(3, 3, 24, 5)).astype(np.float32)
    got = conv2d_nhwc(cuda.to_device(x), cuda.to_device(w), padding=1).copy_to_host()
    np.testing.assert_array_equal(got, conv2d_numpy(x, w, 1).astype(np.float32))
