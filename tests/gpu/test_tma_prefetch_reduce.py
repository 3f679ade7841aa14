"""TMA L2 prefetches and tensor reductions on the GPU: every rank, every reduction op on the element
types the ISA allows, boxes hanging off the tensor, many blocks reducing into one box. Reductions
are compared exactly with numba_tma.bulk.reduce_reference (integer ops are exact; float adds are
one correctly rounded add per element, or exact on small integers when blocks contend)."""

import functools
import math

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, coords_fn, random_array, rng
from numba_tma import TensorMap, bulk, fence, mbarrier, tma
from numba_tma._frontend import cuda
from numba_tma.warp import bf16_bits

# ---------------------------------------------------------------------------------- prefetch


@functools.cache
def prefetch_load_kernel(rank, n_elems, dtype, prefetch=True):
    """Prefetch the descriptor and the box, then load the box. ``prefetch=False`` is the same
    kernel without the two prefetches: a prefetch is a hint, so no result on the GPU can tell
    them apart. tests/test_gpu_test_kernels_sass.py compiles both for every rank and checks
    that the prefetched one has the descriptor prefetch and the tensor prefetch of that rank
    and the other has neither, so the prefetch test fails (offline) without the instructions;
    here the GPU checks the load after them and that a prefetch writes nothing."""
    coords_of = coords_fn(rank)

    @cuda.jit
    def kernel(desc, c, out, ok):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        if prefetch:
            if cuda.threadIdx.x == 0:
                tma.prefetch_descriptor(desc)
            tma.prefetch(desc, coords_of(c))           # every thread: a hint, harmless repeated
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, desc, coords_of(c), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


# (shape, box, coords) per rank, coordinates >= 0 (inner ones a multiple of 16 bytes), one box
# past the end of the tensor.
PREFETCH_CASES = {
    1: ((1001,), (64,), [(0,), (516,), (988,)]),
    2: ((37, 112), (8, 32), [(0, 0), (5, 80), (33, 96)]),
    3: ((5, 19, 48), (2, 4, 16), [(0, 0, 0), (4, 17, 40), (1, 3, 8)]),
    4: ((3, 5, 7, 38), (2, 2, 4, 8), [(0, 0, 0, 0), (2, 4, 5, 32), (1, 0, 2, 6)]),
    5: ((2, 3, 5, 7, 36), (1, 2, 2, 4, 8), [(0, 0, 0, 0, 0), (1, 2, 4, 5, 32), (0, 0, 3, 6, 4)]),
}
PREFETCH_DTYPES = {1: np.float32, 2: np.uint8, 3: np.float16, 4: np.float64, 5: np.int32}


@pytest.mark.parametrize("rank", sorted(PREFETCH_CASES))
def test_prefetch_then_load_every_rank(rank):
    shape, box, coords_list = PREFETCH_CASES[rank]
    dtype = np.dtype(PREFETCH_DTYPES[rank])
    a = random_array(shape, dtype)
    d_a = cuda.to_device(a)
    tmap = TensorMap(d_a, box)
    n = math.prod(tmap.smem_shape)
    for coords in coords_list:
        out = cuda.to_device(random_array(n, dtype))          # poisoned with fresh noise
        ok = cuda.to_device(np.ones(1, np.int32))
        prefetch_load_kernel(rank, n, dtype)[1, 64](
            tmap, cuda.to_device(np.array(coords, np.int32)), out, ok)
        assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
        np.testing.assert_array_equal(out.copy_to_host().reshape(box), box_model(a, coords, box),
                                      err_msg=f"coords {coords}")
    np.testing.assert_array_equal(d_a.copy_to_host(), a)      # a prefetch writes nothing


# --------------------------------------------------------------------------------- reductions


@functools.cache
def reduce_kernel(rank, n_elems, dtype, op):
    """Every block loads its own tile (row blockIdx.x of ``tiles``) into shared memory with
    ordinary stores and reduces it into the box at ``c`` with ``op``."""
    coords_of = coords_fn(rank)

    @cuda.jit
    def kernel(desc, c, tiles):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            tile[i] = tiles[cuda.blockIdx.x, i]
        fence.proxy_async_shared()
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            tma.reduce(desc, coords_of(c), tile, op)
            tma.commit_group()
            tma.wait_group(0)
        cuda.syncthreads()

    return kernel


@functools.cache
def reduce_tile_kernel(n_elems, dtype, op):
    @cuda.jit
    def kernel(desc, c, tiles):
        tile = cuda.shared.array(n_elems, dtype, alignment=128)
        for i in range(cuda.threadIdx.x, n_elems, cuda.blockDim.x):
            tile[i] = tiles[cuda.blockIdx.x, i]
        tma.reduce_tile(desc, (c[0], c[1]), tile, op)

    return kernel


def box_reduce_model(before, tile, coords, op, ptx_type=None):
    """``before`` after reducing ``tile`` into the box at ``coords`` (parts outside skipped)."""
    out = before.copy()
    idx = [coords[d] + np.arange(tile.shape[d]) for d in range(before.ndim)]
    ok = [(i >= 0) & (i < before.shape[d]) for d, i in enumerate(idx)]
    dst = np.ix_(*[i[m] for i, m in zip(idx, ok)])
    src = np.ix_(*[np.nonzero(m)[0] for m in ok])
    out[dst] = bulk.reduce_reference(op, before[dst], tile[src], ptx_type)
    return out


def values(shape, kind, op, contended=False):
    """Fresh test data of ``kind`` for ``op`` (bfloat16 as its uint16 bits).

    Halves: multiples of 1/8 in [-8, 8], exact in float16 and bfloat16, and so is the sum of two
    (no subnormals, no rounding). ``contended`` (many blocks adding into one element): integers
    in [-2, 2], whose running sums over 48 blocks stay exact integers below 256 in either order.
    """
    if kind in ("bfloat16", "float16"):
        if contended:
            v = rng.integers(-2, 2, size=shape, endpoint=True).astype(np.float32)
        else:
            v = (rng.integers(-64, 64, size=shape, endpoint=True) / 8).astype(np.float32)
        return bf16_bits(v) if kind == "bfloat16" else v.astype(np.float16)
    dtype = np.dtype(kind)
    if op in ("inc", "dec"):
        # Small values, so old >= src, old == 0 and old > src all occur.
        return rng.integers(0, 12, size=shape, endpoint=True).astype(dtype)
    return random_array(shape, dtype)


MAP_DTYPE = {"bfloat16": "bfloat16"}
ARRAY_DTYPE = {"bfloat16": np.uint16}
MODEL_TYPE = {"bfloat16": "bf16"}

# Every op on every element type tensor reductions take (tma.REDUCE_MAP_TYPES): the ISA's table,
# less and/or/xor on int64 maps, which fault on the H100 (see
# test_reduce_bitwise_int64_data_through_a_uint64_map for the way to do them).
REDUCE_CASES = [
    ("add", "float32"), ("add", "int32"), ("add", "uint32"), ("add", "uint64"),
    ("add", "float16"), ("add", "bfloat16"),
    ("min", "int32"), ("min", "uint32"), ("min", "int64"), ("min", "uint64"), ("min", "float16"),
    ("min", "bfloat16"),
    ("max", "int32"), ("max", "uint32"), ("max", "int64"), ("max", "uint64"), ("max", "float16"),
    ("max", "bfloat16"),
    ("inc", "uint32"), ("dec", "uint32"),
    ("and", "int32"), ("and", "uint32"), ("and", "uint64"),
    ("or", "int32"), ("or", "uint32"), ("or", "uint64"),
    ("xor", "int32"), ("xor", "uint32"), ("xor", "uint64"),
]

SHAPE2, BOX2 = (37, 40), (8, 16)
# Inner coordinates a multiple of 16 elements (16 bytes for every dtype here); the last box
# hangs past both ends (rows 33..40, columns 32..47 of a 37 x 40 tensor).
COORDS2 = [(0, 0), (13, 16), (33, 32)]


def run_reduce(kind, op, coords_list, blocks=1):
    dtype = np.dtype(ARRAY_DTYPE.get(kind, kind))
    contended = blocks > 1
    before = values(SHAPE2, kind, op, contended).astype(dtype)
    d = cuda.to_device(before)
    tmap = TensorMap(d, BOX2, dtype=MAP_DTYPE.get(kind))
    tma.check_reduce(tmap, op)
    want = before
    n = math.prod(BOX2)
    for coords in coords_list:
        tiles = values((blocks, n), kind, op, contended).astype(dtype)
        reduce_kernel(2, n, dtype, op)[blocks, 64](
            tmap, cuda.to_device(np.array(coords, np.int32)), cuda.to_device(tiles))
        for b in range(blocks):
            want = box_reduce_model(want, tiles[b].reshape(BOX2), coords, op, MODEL_TYPE.get(kind))
    return d.copy_to_host(), want


def test_reduce_cases_cover_the_table():
    kinds = {"UINT32": "uint32", "INT32": "int32", "UINT64": "uint64", "INT64": "int64",
             "FLOAT32": "float32", "FLOAT16": "float16", "BFLOAT16": "bfloat16"}
    assert sorted(REDUCE_CASES) == sorted((op, kinds[t]) for op in tma.REDUCE_OPS
                                          for t in tma.REDUCE_MAP_TYPES[op])


@pytest.mark.parametrize("op,kind", REDUCE_CASES)
def test_reduce_every_op(op, kind):
    got, want = run_reduce(kind, op, COORDS2)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_reduce_bitwise_int64_data_through_a_uint64_map(op):
    # and/or/xor on an INT64 map fault (CUDA_ERROR_ILLEGAL_INSTRUCTION); the same bits through a
    # UINT64 map and a uint64 tile give the int64 result.
    before = random_array(SHAPE2, np.int64)
    d = cuda.to_device(before)
    tmap = TensorMap(d, BOX2, dtype="uint64")
    assert tma.check_reduce(tmap, op) == "UINT64"
    n = math.prod(BOX2)
    want = before
    for coords in COORDS2:
        tiles = random_array((1, n), np.int64)
        reduce_kernel(2, n, np.dtype(np.uint64), op)[1, 64](
            tmap, cuda.to_device(np.array(coords, np.int32)),
            cuda.to_device(tiles.view(np.uint64)))
        want = box_reduce_model(want, tiles[0].reshape(BOX2), coords, op)
    np.testing.assert_array_equal(d.copy_to_host(), want)


@pytest.mark.parametrize("op,kind", [("add", "int32"), ("add", "uint64"), ("min", "int64"),
                                     ("max", "uint32"), ("and", "uint64"), ("or", "int32"),
                                     ("xor", "uint32"), ("add", "bfloat16"), ("add", "float16")])
def test_reduce_many_blocks_into_one_box(op, kind):
    # 48 blocks reduce into the same boxes at once: each element update must be atomic. These ops
    # are associative and commutative on these values (f16/bf16: multiples of 1/8, exact), so
    # the order in which the blocks land does not matter.
    got, want = run_reduce(kind, op, [(13, 16), (33, 32)], blocks=48)
    np.testing.assert_array_equal(got, want)


def test_reduce_add_float32_many_blocks_exact_on_integers():
    n = math.prod(BOX2)
    before = rng.integers(-1000, 1000, size=SHAPE2).astype(np.float32)
    tiles = rng.integers(-1000, 1000, size=(64, n)).astype(np.float32)
    d = cuda.to_device(before)
    tmap = TensorMap(d, BOX2)
    coords = (21, 32)
    reduce_tile_kernel(n, np.dtype(np.float32), "add")[64, 128](
        tmap, cuda.to_device(np.array(coords, np.int32)), cuda.to_device(tiles))
    want = before.astype(np.float64)
    want[21:29, 32:40] += tiles.reshape(64, *BOX2).sum(axis=0, dtype=np.float64)[:, :8]
    np.testing.assert_array_equal(d.copy_to_host(), want.astype(np.float32))


# (shape, box, coords) per rank for the reductions: coordinates >= 0 (TMA writes fault on
# negative ones), inner coordinates a multiple of 16 bytes, a box past the end.
REDUCE_RANK_CASES = {
    1: ((1001,), (64,), [(0,), (516,), (988,)]),
    2: ((37, 112), (8, 32), [(0, 0), (5, 80), (33, 96)]),
    3: ((5, 19, 48), (2, 4, 16), [(0, 0, 0), (4, 17, 40), (1, 3, 8)]),
    # 36 x 4 bytes per row: every global stride a multiple of 16 bytes, as TMA needs.
    4: ((3, 5, 7, 36), (2, 2, 4, 8), [(0, 0, 0, 0), (2, 4, 5, 32), (1, 0, 2, 4)]),
    5: ((2, 3, 5, 7, 36), (1, 2, 2, 4, 8), [(0, 0, 0, 0, 0), (1, 2, 4, 5, 32), (0, 0, 3, 6, 4)]),
}


@pytest.mark.parametrize("rank", sorted(REDUCE_RANK_CASES))
@pytest.mark.parametrize("op,kind", [("add", "float32"), ("xor", "int32")])
def test_reduce_every_rank(rank, op, kind):
    shape, box, coords_list = REDUCE_RANK_CASES[rank]
    dtype = np.dtype(kind)
    before = random_array(shape, dtype)
    d = cuda.to_device(before)
    tmap = TensorMap(d, box)
    want = before
    n = math.prod(box)
    for coords in coords_list:
        tile = random_array((1, n), dtype)
        reduce_kernel(rank, n, dtype, op)[1, 64](
            tmap, cuda.to_device(np.array(coords, np.int32)), cuda.to_device(tile))
        want = box_reduce_model(want, tile.reshape(box), coords, op)
    np.testing.assert_array_equal(d.copy_to_host(), want)


def test_check_reduce_on_real_maps():
    a = cuda.device_array((16, 16), np.float64)
    with pytest.raises(ValueError, match="cannot reduce a map of FLOAT64"):
        tma.check_reduce(TensorMap(a, (8, 8)), "add")
    b = cuda.device_array((16, 16), np.int32)
    with pytest.raises(ValueError, match="cannot reduce a map of INT32"):
        tma.check_reduce(TensorMap(b, (8, 8)), "inc")
    assert tma.check_reduce(TensorMap(b, (8, 8)), "max") == "INT32"
    c = cuda.device_array((16, 16), np.int64)
    for op in ("and", "or", "xor"):              # would fault on the GPU: refused on the host
        with pytest.raises(ValueError, match=r"cannot reduce a map of INT64.*dtype='uint64'"):
            tma.check_reduce(TensorMap(c, (8, 8)), op)
        assert tma.check_reduce(TensorMap(c, (8, 8), dtype="uint64"), op) == "UINT64"
    assert tma.check_reduce(TensorMap(c, (8, 8)), "min") == "INT64"
