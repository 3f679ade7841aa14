"""16-byte global accesses (numba_tma.gmem) and the v7_vec16 transpose on the GPU: exact results
for tile multiples, partial tiles, batches and every element size; the fallback to v6_packed for
shapes and views the vector path cannot take."""

import numpy as np
import pytest

from gpu_helpers import random_array
from numba_tma import gmem
from numba_tma._frontend import cuda
from numba_tma.kernels import transpose_vec
from numba_tma.transpose_api import transpose_kernels


def test_gmem_load_store_v4_roundtrip():
    @cuda.jit
    def shuffle16(src, out):
        # Vector i of src goes to vector n - 1 - i of out, its words rotated by one.
        i = cuda.grid(1)
        n = src.size // 4
        if i < n:
            regs = cuda.local.array(4, np.uint32)
            gmem.load_v4(regs, src, i * 16)
            t = regs[0]
            regs[0] = regs[1]
            regs[1] = regs[2]
            regs[2] = regs[3]
            regs[3] = t
            gmem.store_v4(out, (n - 1 - i) * 16, regs)

    a = random_array(4 * 1000, np.uint32)
    out = cuda.to_device(random_array(a.shape, np.uint32))
    shuffle16[8, 128](cuda.to_device(a), out)
    want = np.roll(a.reshape(-1, 4), -1, axis=1)[::-1].reshape(-1)
    np.testing.assert_array_equal(out.copy_to_host(), want)


# Tile multiples and partial tiles for every element size (tiles: 64 x 64 fp32, 64 x 32 fp64,
# 128 x 128 fp16, 256 x 256 uint8); shapes whose rows are not 16-byte multiples are skipped.
SHAPES = [(1, 64, 64), (1, 128, 192), (1, 200, 136), (3, 36, 4100), (2, 1000, 1032),
          (1, 4, 8), (1, 2048, 2048), (2, 1008, 1040), (1, 272, 528), (3, 48, 4112),
          (1, 512, 256)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.float16, np.int16, np.float32,
                                   np.int32, np.float64, np.int64])
def test_v7_exact(dtype, shape):
    a = random_array(shape, dtype)
    if (shape[-1] * a.itemsize) % 16 or (shape[-2] * a.itemsize) % 16:
        pytest.skip("rows are not 16-byte multiples: the vector path does not apply")
    src = cuda.to_device(a)
    out = cuda.to_device(random_array(shape[:-2] + shape[:-3:-1], dtype))   # poisoned
    assert transpose_vec.applies(src, out, shape[-2], shape[-1])
    transpose_kernels()["v7_vec16"](src, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.swapaxes(a, -1, -2))


@pytest.mark.parametrize("dtype,shape", [(np.float32, (1, 37, 45)), (np.float16, (1, 36, 100)),
                                         (np.uint8, (2, 40, 72)), (np.float64, (1, 33, 6))])
def test_v7_falls_back_where_vectors_do_not_fit(dtype, shape):
    a = random_array(shape, dtype)
    src = cuda.to_device(a)
    out = cuda.to_device(random_array(shape[:-2] + shape[:-3:-1], dtype))
    assert not transpose_vec.applies(src, out, shape[-2], shape[-1])
    transpose_kernels()["v7_vec16"](src, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.swapaxes(a, -1, -2))


def test_v7_misaligned_view_falls_back():
    # A view 4 bytes into its allocation: rows are 16-byte multiples, the base is not.
    flat = cuda.to_device(random_array(1 + 64 * 64, np.float32))
    src = flat[1:].reshape(1, 64, 64)
    out = cuda.to_device(random_array((1, 64, 64), np.float32))
    assert not transpose_vec.applies(src, out, 64, 64)
    transpose_kernels()["v7_vec16"](src, out)
    np.testing.assert_array_equal(out.copy_to_host(), np.swapaxes(src.copy_to_host(), -1, -2))
