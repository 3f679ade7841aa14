"""The shipped v6 transpose kernels (numba_tma.kernels.transpose_v6: v6_packed, v6_persistent, the
last rungs of seed 003's classic ladder and what ``transpose()`` falls back to) on the GPU: every
element size, odd and large shapes, exact compare with numpy's transpose; v6's knobs, fallbacks
and resident grid; streams, empty arrays, mismatched shapes; the 32768^2 benchmark shape."""

import numpy as np
import pytest

from classic_transpose_checks import assert_transposed, poisoned, run_checked
from gpu_helpers import random_array
from numba_tma._frontend import cuda
from numba_tma.kernels import transpose_v6 as v6

LAUNCHERS = {"v6_packed": v6.v6_packed, "v6_persistent": v6.v6_persistent}
KERNELS = list(LAUNCHERS)
DTYPES = [np.uint8, np.float16, np.float32, np.float64]
SHAPES = [(1, 1000, 777), (2, 33, 4097), (1, 4096, 4096)]


def run(kernel, a, **kwargs):
    run_checked(LAUNCHERS[kernel], a, **kwargs)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernel", KERNELS)
def test_v6_exact(kernel, dtype, shape):
    run(kernel, random_array(shape, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("kernel", ["v6_packed", "v6_persistent"])
def test_v6_packed_path_partial_tiles(kernel, dtype):
    # M and N divisible by 8: the 8-byte word path for every dtype, with partial edge tiles.
    a = random_array((3, 1000, 776), dtype)
    B, M, N = a.shape
    k = v6._v6_setup(cuda.to_device(a), poisoned((B, N, M), dtype), B, M, N)[1]
    assert k == 8 // np.dtype(dtype).itemsize
    run(kernel, a)


@pytest.mark.parametrize("group", [1, 2, 4, 64])
@pytest.mark.parametrize("grid", [1, 7, 1000, None])
def test_v6_persistent_grid_and_group(grid, group):
    run("v6_persistent", random_array((2, 1000, 776), np.float32), grid=grid, group=group)
    run("v6_persistent", random_array((2, 333, 517), np.uint8), grid=grid, group=group)


@pytest.mark.parametrize("group", [1, 2, 16, 64])
def test_v6_packed_group(group):
    run("v6_packed", random_array((2, 1000, 776), np.float32), group=group)
    run("v6_packed", random_array((1, 4104, 136), np.float16), group=group)


@pytest.mark.parametrize("kernel", ["v6_packed", "v6_persistent"])
def test_v6_misaligned_views_fall_back(kernel):
    a = random_array((2, 48, 64), np.uint8)
    B, M, N = a.shape
    raw = cuda.to_device(np.concatenate([np.zeros(1, np.uint8), a.ravel()]))
    src = raw[1:].reshape(a.shape)
    out_raw = poisoned((B * N * M + 1,), np.uint8)
    out = out_raw[1:].reshape(B, N, M)
    assert v6._v6_setup(src, out, B, M, N)[1] == 1
    LAUNCHERS[kernel](src, out)
    cuda.synchronize()
    assert_transposed(out, a)


def test_v6_persistent_default_grid_is_resident():
    a = cuda.to_device(random_array((1, 4096, 4096), np.float32))
    out = poisoned((1, 4096, 4096), np.float32)
    word, k, TP, TQ, fs, fo, Mp, Nw = v6._v6_setup(a, out, 1, 4096, 4096)
    kern = v6._v6(word, k, TP, TQ, True, v6.V6_GROUP)
    TRn, TCn = -(-Mp // TP), -(-Nw // TQ)
    grid = v6._persistent_grid(kern, (fs, fo, Mp, Nw, TRn, TCn, TRn * TCn))
    sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
    # Launch bounds promise at least V6_BLOCKS_PER_SM blocks per SM; two 33 KiB blocks of shared
    # memory more than 6 would not fit in 228 KiB.
    assert sms * v6.V6_BLOCKS_PER_SM <= grid <= sms * 6, (grid, sms)


@pytest.mark.parametrize("kernel", KERNELS)
def test_stream_and_empty(kernel):
    a = random_array((2, 70, 45), np.float32)
    stream = cuda.stream()
    src = cuda.to_device(a, stream=stream)
    out = poisoned((2, 45, 70), np.float32)
    LAUNCHERS[kernel](src, out, stream=stream)
    stream.synchronize()
    assert_transposed(out, a)
    LAUNCHERS[kernel](cuda.device_array((0, 3, 5), np.float32),
                      cuda.device_array((0, 5, 3), np.float32))


@pytest.mark.parametrize("kernel", KERNELS)
def test_rejects_mismatched_shapes(kernel):
    with pytest.raises(ValueError, match=r"out must have shape"):
        LAUNCHERS[kernel](cuda.device_array((1, 4, 6), np.float32),
                          cuda.device_array((1, 4, 6), np.float32))


@pytest.mark.parametrize("kernel", ["v6_packed", "v6_persistent"])
def test_v6_benchmark_shape(kernel):
    """32768^2 fp32 (4 GiB, word indices past 2^29): the shape the ladder is measured on. The
    input is an iota of bit patterns rather than random numbers, to keep the host side quick."""
    n = 32768
    a = np.arange(n * n, dtype=np.uint32).view(np.float32).reshape(1, n, n)
    src = cuda.to_device(a)
    out = cuda.device_array((1, n, n), np.float32)
    LAUNCHERS[kernel](src, out)
    cuda.synchronize()
    del src
    got = out.copy_to_host().view(np.uint32)[0]
    # got[j, i] must be i * n + j: check whole rows against the formula, in slabs.
    cols = np.arange(n, dtype=np.uint32) * np.uint32(n)
    for j0 in range(0, n, 2048):
        j = np.arange(j0, j0 + 2048, dtype=np.uint32)[:, None]
        assert np.array_equal(got[j0:j0 + 2048], cols[None, :] + j), f"rows {j0}..{j0 + 2047}"
