"""TMA tile loads and stores on the GPU, every rank, odd coordinates, boxes hanging off the tensor."""

import functools
import math

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, coords_fn, random_array, store_model
from numba_tma import TensorMap, fence, mbarrier, tma
from numba_tma._frontend import cuda


@functools.cache
def load_kernel(rank, n_elems, dtype):
    coords_of = coords_fn(rank)

    @cuda.jit
    def kernel(desc, c, out, ok):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, desc, coords_of(c), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


@functools.cache
def store_kernel(rank, n_elems, dtype):
    coords_of = coords_fn(rank)

    @cuda.jit
    def kernel(desc, c, tile_in):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            tile[i] = tile_in[i]
        fence.proxy_async_shared()
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            tma.store(desc, coords_of(c), tile)
            tma.commit_group()
            tma.wait_group_read(0)
        cuda.syncthreads()

    return kernel


def run_load(a_host, box, coords, **map_kw):
    a = cuda.to_device(a_host)
    tmap = TensorMap(a, box, **map_kw)
    n = math.prod(tmap.smem_shape)
    out = cuda.to_device(random_array(n, a_host.dtype))  # poisoned with fresh noise
    ok = cuda.to_device(np.ones(1, np.int32))
    load_kernel(a_host.ndim, n, a_host.dtype)[1, 128](
        tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    return out.copy_to_host().reshape(tmap.smem_shape)


# (shape, box, coords) per rank: odd sizes and odd or negative outer coordinates, boxes past the
# end. The innermost coordinate times the element size stays a multiple of 16 bytes: on the H100
# any other inner coordinate makes the TMA unit fault (CUDA_ERROR_ILLEGAL_INSTRUCTION).
CASES = {
    1: ((1001,), (64,), [(0,), (516,), (-12,), (988,)]),
    2: ((37, 112), (8, 32), [(0, 0), (5, 80), (-3, -16), (33, 96)]),
    3: ((5, 19, 48), (2, 4, 16), [(0, 0, 0), (4, 17, 40), (-1, 3, -8)]),
    4: ((3, 5, 7, 38), (2, 2, 4, 8), [(0, 0, 0, 0), (2, 4, 5, 32), (1, -1, 2, 6)]),
    5: ((2, 3, 5, 7, 36), (1, 2, 2, 4, 8), [(0, 0, 0, 0, 0), (1, 2, 4, 5, 32), (-1, 0, 3, 6, -4)]),
}
# Stores clip boxes past the end, but on the H100 a negative coordinate makes a store fault.
STORE_COORDS = {
    1: [(0,), (516,), (988,)],
    2: [(0, 0), (5, 80), (33, 96)],
    3: [(0, 0, 0), (4, 17, 40), (1, 3, 8)],
    4: [(0, 0, 0, 0), (2, 4, 5, 32), (1, 0, 2, 6)],
    5: [(0, 0, 0, 0, 0), (1, 2, 4, 5, 32), (0, 0, 3, 6, 4)],
}
DTYPES = {1: np.float32, 2: np.uint8, 3: np.float16, 4: np.float64, 5: np.int32}


@pytest.mark.parametrize("rank", sorted(CASES))
def test_load_every_rank(rank):
    shape, box, coords_list = CASES[rank]
    dtype = DTYPES[rank]
    a = random_array(shape, dtype)
    for coords in coords_list:
        got = run_load(a, box, coords)
        np.testing.assert_array_equal(got, box_model(a, coords, box), err_msg=f"coords {coords}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_load_oob_nan_fill(dtype):
    a = random_array((19, 40), dtype)
    box, coords = (8, 16), (15, 32)
    got = run_load(a, box, coords, oob_fill="nan")
    want = box_model(a, coords, box, fill=np.nan)
    assert np.isnan(got).sum() == np.isnan(want).sum() > 0
    np.testing.assert_array_equal(got, want)


def test_load_element_strides():
    a = random_array((64, 96), np.float32)
    # Strides along the outer axis only: without interleave the driver ignores an inner stride.
    box, es = (8, 32), (3, 1)
    for coords in [(0, 0), (7, 12), (40, 52)]:
        got = run_load(a, box, coords, element_strides=es)
        np.testing.assert_array_equal(got, box_model(a, coords, box, es))


def test_load_padded_rows():
    # A view whose rows are padded (row stride 160 B > 33 * 4 B): the map follows the strides.
    base = random_array((24, 40), np.float32)
    a = cuda.to_device(base)[:, 4:37]
    tmap = TensorMap(a, (8, 16))
    n = math.prod(tmap.smem_shape)
    out = cuda.device_array(n, np.float32)
    ok = cuda.to_device(np.ones(1, np.int32))
    coords = (5, 20)
    load_kernel(2, n, np.dtype(np.float32))[1, 64](
        tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
    assert ok.copy_to_host()[0] == 1
    want = box_model(base[:, 4:37], coords, (8, 16))
    np.testing.assert_array_equal(out.copy_to_host().reshape(8, 16), want)


@pytest.mark.parametrize("rank", sorted(CASES))
def test_store_every_rank(rank):
    shape, box, _ = CASES[rank]
    dtype = DTYPES[rank]
    for coords in STORE_COORDS[rank]:
        before = random_array(shape, dtype)
        tile = random_array(box, dtype)
        d_out = cuda.to_device(before)
        tmap = TensorMap(d_out, box)
        store_kernel(rank, tile.size, np.dtype(dtype))[1, 128](
            tmap, cuda.to_device(np.array(coords, np.int32)), cuda.to_device(tile.reshape(-1)))
        np.testing.assert_array_equal(d_out.copy_to_host(), store_model(before, tile, coords),
                                      err_msg=f"coords {coords}")


def test_load_from_cupy_and_torch():
    a = random_array((33, 72), np.float32)
    box, coords = (8, 16), (29, 60)
    want = box_model(a, coords, box)
    for lib in ("cupy", "torch"):
        mod = pytest.importorskip(lib)
        src = mod.asarray(a, device="cuda") if lib == "torch" else mod.asarray(a)
        tmap = TensorMap(src, box)
        out = cuda.device_array(128, np.float32)
        ok = cuda.to_device(np.ones(1, np.int32))
        load_kernel(2, 128, np.dtype(np.float32))[1, 64](
            tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
        assert ok.copy_to_host()[0] == 1
        np.testing.assert_array_equal(out.copy_to_host().reshape(box), want, err_msg=lib)


def test_torch_bfloat16_roundtrip():
    torch = pytest.importorskip("torch")
    src = torch.randn(17, 40, device="cuda").to(torch.bfloat16)
    box, coords = (8, 16), (12, 32)
    tmap = TensorMap(src, box)
    out = cuda.device_array(128, np.uint16)
    ok = cuda.to_device(np.ones(1, np.int32))
    load_kernel(2, 128, np.dtype(np.uint16))[1, 64](
        tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
    assert ok.copy_to_host()[0] == 1
    bits = src.view(torch.int16).cpu().numpy().view(np.uint16)
    np.testing.assert_array_equal(out.copy_to_host().reshape(box), box_model(bits, coords, box))
