"""Interleaved tile-mode maps on the GPU: NC/8HWC8 and NC/16HWC16 tensors (16B and 32B channel
slices, fp16 and int8) load box for box like the numpy model of the interleaved array.

With interleave the map describes the *interleaved* global tensor, slice innermost: an NCHW
tensor stored as NC/kHWCk is the 5-D array ``(N, C/k, H, W, k)`` and the box's innermost extent is
one whole slice (16 or 32 bytes). TMA copies what it finds there, as in tile mode; it does not
de-interleave (PTX ISA "Interleave layout"). 32B interleave requires the 32B swizzle, so its
shared tile is the swizzled image of the dense box (``numba_tma.swizzle.shared_image``)."""

import functools
import math

import numpy as np
import pytest
from numba import cuda

from gpu_helpers import TIMEOUT_NS, box_model, coords_fn, random_array
from numba_tma import TensorMap, mbarrier, swizzle, tma


def interleave(x, per_slice):
    """NCHW (or NCW) ``x`` -> the NC/kHWCk array ``(N, C/k, H, W, k)``, zero-padding C to k."""
    n, c = x.shape[:2]
    groups = -(-c // per_slice)
    padded = np.zeros((n, groups * per_slice) + x.shape[2:], x.dtype)
    padded[:, :c] = x
    spatial = x.ndim - 2
    sliced = padded.reshape((n, groups, per_slice) + x.shape[2:])
    return np.ascontiguousarray(np.moveaxis(sliced, 2, 2 + spatial))


@functools.cache
def load_bytes_kernel(rank, nbytes):
    coords_of = coords_fn(rank)

    @cuda.jit
    def kernel(desc, c, out, ok):
        tile = cuda.shared.array(nbytes, np.uint8, alignment=256)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, nbytes)
            tma.load(tile, desc, coords_of(c), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, nbytes, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


def load_raw(tmap, coords):
    """The shared-memory bytes one TMA load of ``tmap``'s box at ``coords`` leaves."""
    nbytes = tmap.box_bytes
    out = cuda.to_device(random_array(nbytes, np.uint8))  # poisoned
    ok = cuda.to_device(np.ones(1, np.int32))
    load_bytes_kernel(tmap.rank, nbytes)[1, 128](
        tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    return out.copy_to_host()


# (logical NCHW shape, dtype, slice bytes, box over (N, C/k, H, W, k)), coords lists with boxes
# hanging off H/W, negative outer coordinates, and the last (zero-padded) channel slice.
CASES = [
    ((2, 24, 5, 7), np.float16, 16, (1, 2, 4, 4, 8),              # NC/8HWC8
     [(0, 0, 0, 0, 0), (1, 2, 3, 5, 0), (0, -1, -2, 3, 0)]),
    ((2, 20, 6, 9), np.float16, 16, (2, 1, 2, 8, 8),              # C = 20 -> 3 slices, padded
     [(0, 2, 1, 2, 0), (-1, 1, 4, -3, 0)]),
    ((3, 48, 4, 6), np.int8, 16, (1, 2, 4, 6, 16),                # int8 NC/16HWC16
     [(2, 1, 0, 0, 0), (0, 2, -1, 1, 0)]),
    ((1, 32, 9, 5), np.float16, 32, (1, 2, 4, 4, 16),             # NC/16HWC16, 32B slices
     [(0, 0, 0, 0, 0), (0, 1, 6, 3, 0), (0, -1, -1, 2, 0)]),
    ((2, 64, 3, 10), np.int8, 32, (1, 1, 3, 8, 32),               # int8 NC/32HWC32
     [(1, 1, 0, 5, 0), (0, 0, 2, 0, 0)]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_interleaved_box_loads(case):
    shape, dtype, slice_bytes, box, coords_list = CASES[case]
    per_slice = slice_bytes // np.dtype(dtype).itemsize
    x = random_array(shape, dtype)
    xi = interleave(x, per_slice)
    assert xi.shape[-1] * xi.itemsize == slice_bytes
    # The model of the interleaved array itself: slice k of group g is channel g * k + i.
    g, i = 1, per_slice - 1
    np.testing.assert_array_equal(xi[:, g, ..., i], np.pad(
        x, [(0, 0), (0, xi.shape[1] * per_slice - shape[1])] + [(0, 0)] * (x.ndim - 2))[
        :, g * per_slice + i])
    span = 32 if slice_bytes == 32 else 0   # 32B interleave requires the 32B swizzle
    tmap = TensorMap(cuda.to_device(xi), box, interleave=slice_bytes, swizzle=span)
    assert tmap.box_bytes == math.prod(box) * xi.itemsize
    for coords in coords_list:
        got = load_raw(tmap, coords)
        dense = box_model(xi, coords, box)
        want = swizzle.shared_image(dense.reshape(-1, per_slice), span) if span else \
            dense.reshape(-1).view(np.uint8)
        np.testing.assert_array_equal(got, want, err_msg=f"coords {coords}")


def test_interleaved_rank3_with_outer_element_stride():
    # (C/8, W, 8) fp16 with every other W pixel: element strides along W behave as in tile mode.
    x = random_array((24, 40), np.float16)                 # (C, W)
    xi = interleave(x[None], 8)[0]                          # (3, 40, 8)
    box, es = (2, 16, 8), (1, 2, 1)
    tmap = TensorMap(cuda.to_device(xi), box, interleave=16, element_strides=es)
    assert tmap.smem_shape == (2, 8, 8)
    for coords in [(0, 0, 0), (1, 30, 0)]:
        got = load_raw(tmap, coords)
        want = box_model(xi, coords, box, es).reshape(-1).view(np.uint8)
        np.testing.assert_array_equal(got, want, err_msg=f"coords {coords}")
