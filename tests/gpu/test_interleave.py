"""Interleaved tile-mode maps on the GPU: NC/8HWC8, NC/16HWC16 and NC/32HWC32 tensors (16B and
32B channel slices, fp16 and int8) load box for box like the numpy model of the interleaved array.

The map describes the *interleaved* array, slice innermost: NCHW stored as NC/kHWCk is the array
``(N, C/k, H, W, k)``.  Measured on the H100 (see numba_tma.tensormap, "Interleaved maps"): TMA's
dimension 0 is W with one whole slice per element, the slice axis takes no coordinate, and a load
copies one C/k slice (``box[1] == 1``).  Shared memory then holds the dense box of that array
(``box_model``), 32B-swizzled for 32B interleave (``numba_tma.swizzle.shared_image``).  Each
load's tile is followed by a poisoned guard that must stay untouched: a map that copies more than
``box_bytes`` (the failure mode of a slice-as-dimension-0 map) fails here instead of faulting."""

import functools

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, coords_fn, random_array
from numba_tma import TensorMap, fence, mbarrier, swizzle, tma
from numba_tma._frontend import cuda

GUARD_BYTES = 1024  # poisoned shared memory after the box


def interleave(x, per_slice):
    """NC... ``x`` -> the NC/k...Ck array ``(N, C/k, ..., k)``, zero-padding C to k."""
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
    def kernel(desc, c, expect, out, ok):
        tile = cuda.shared.array(nbytes, np.uint8, alignment=1024)
        bar = cuda.shared.array(1, np.uint64)
        for i in range(cuda.threadIdx.x, nbytes, cuda.blockDim.x):
            tile[i] = out[i]  # poison, so bytes the copy skips or overruns show
        fence.proxy_async_shared()
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, expect)
            tma.load(tile, desc, coords_of(c), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        cuda.syncthreads()
        for i in range(cuda.threadIdx.x, nbytes, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


def load_raw(tmap, coords):
    """(the box's shared-memory bytes after one TMA load at ``coords``, guard bytes, poison)."""
    nbytes = tmap.smem_bytes + GUARD_BYTES
    poison = random_array(nbytes, np.uint8)
    out = cuda.to_device(poison)
    ok = cuda.to_device(np.ones(1, np.int32))
    load_bytes_kernel(tmap.rank, nbytes)[1, 128](
        tmap, cuda.to_device(np.array(coords, np.int32)), tmap.box_bytes, out, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out (transaction bytes != box_bytes)"
    got = out.copy_to_host()
    return got[: tmap.smem_bytes], got[tmap.smem_bytes :], poison[tmap.smem_bytes :]


def want_bytes(xi, coords, box, span, element_strides=None):
    """The model: the dense box of the interleaved array (slice coordinate 0), swizzled."""
    dense = box_model(xi, tuple(coords) + (0,), box, element_strides)
    per_slice = xi.shape[-1]
    if span:
        return swizzle.shared_image(dense.reshape(-1, per_slice), span)
    return dense.reshape(-1).view(np.uint8)


# (logical NC... shape, dtype, slice bytes, box over (N, C/k, ..., W, k), coords over (N, C/k, ..., W)).
# Coords hang boxes off H/W, go negative (W, H and C/k), and hit the zero-padded last slice.
CASES = [
    ((2, 24, 5, 7), np.float16, 16, (1, 1, 4, 8, 8),             # NC/8HWC8
     [(0, 0, 0, 0), (1, 2, 3, 5), (0, 1, -2, -3), (1, -1, 0, 0), (0, 3, 0, 0)]),
    ((2, 20, 6, 9), np.float16, 16, (2, 1, 2, 16, 8),            # C = 20 -> 3 slices, padded
     [(0, 2, 1, 0), (-1, 1, 4, -3)]),
    ((3, 48, 4, 6), np.int8, 16, (1, 1, 4, 16, 16),              # int8 NC/16HWC16
     [(2, 1, 0, 0), (0, 2, -1, 1)]),
    ((1, 32, 9, 5), np.float16, 32, (1, 1, 4, 8, 16),            # fp16 NC/16HWC16, 32B slices
     [(0, 0, 0, 0), (0, 1, 6, 3), (0, 1, -1, -2)]),
    ((2, 64, 3, 10), np.int8, 32, (1, 1, 3, 16, 32),             # int8 NC/32HWC32
     [(1, 1, 0, 5), (0, 0, 2, -4)]),
    ((1, 16, 3, 4, 5), np.float16, 16, (1, 1, 2, 4, 8, 8),       # NC/8DHWC8: a rank-5 map
     [(0, 1, 1, 0, 0), (0, 0, -1, 2, -2)]),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_interleaved_box_loads(case):
    shape, dtype, slice_bytes, box, coords_list = CASES[case]
    per_slice = slice_bytes // np.dtype(dtype).itemsize
    x = random_array(shape, dtype)
    xi = interleave(x, per_slice)
    assert xi.shape[-1] * xi.itemsize == slice_bytes
    # The model of the interleaved array itself: slice element i of group g is channel g * k + i.
    g, i = 1, per_slice - 1
    np.testing.assert_array_equal(xi[:, g, ..., i], x[:, g * per_slice + i])
    span = 32 if slice_bytes == 32 else 0   # 32B interleave requires the 32B swizzle
    tmap = TensorMap(cuda.to_device(xi), box, interleave=slice_bytes, swizzle=span)
    assert tmap.rank == xi.ndim - 1
    assert tmap.box_bytes == tmap.smem_bytes == np.prod(box) * xi.itemsize
    for coords in coords_list:
        got, guard, poison = load_raw(tmap, coords)
        np.testing.assert_array_equal(got, want_bytes(xi, coords, box, span),
                                      err_msg=f"coords {coords}")
        np.testing.assert_array_equal(guard, poison, err_msg=f"coords {coords}: wrote past the box")


@pytest.mark.parametrize("shape, box, es, coords_list", [
    # NC/8WC8 (a rank-3 map) with every other W pixel.
    ((2, 24, 40), (1, 1, 16, 8), (1, 1, 2, 1), [(0, 0, 0), (1, 2, 30), (0, 1, -3)]),
    # NC/8HWC8 with every other H row and W pixel.
    ((2, 24, 9, 21), (1, 1, 4, 16, 8), (1, 1, 2, 2, 1), [(0, 0, 0, 0), (1, 2, 5, 9)]),
])
def test_interleaved_element_strides(shape, box, es, coords_list):
    x = random_array(shape, np.float16)
    xi = interleave(x, 8)
    tmap = TensorMap(cuda.to_device(xi), box, interleave=16, element_strides=es)
    assert tmap.element_strides == es
    assert tmap.smem_shape == tuple(-(-b // e) for b, e in zip(box, es))
    for coords in coords_list:
        got, guard, poison = load_raw(tmap, coords)
        np.testing.assert_array_equal(got, want_bytes(xi, coords, box, 0, es),
                                      err_msg=f"coords {coords}")
        np.testing.assert_array_equal(guard, poison, err_msg=f"coords {coords}: wrote past the box")
