"""The stream-K rung of the wgmma GEMM ladder (``StreamKConfig``) on the GPU:
shapes whose tiles leave a part-filled last wave, so the tail's K slices are split over every
block and finished through the workspace (a tile split in two, and a tile split over dozens of
blocks), every operand layout, output dtype and alpha/beta, repeated launches (each launch must
lower every flag it raised), launches on several streams, and agreement with the kernel without
the split.

Small-integer inputs keep every partial and total sum an exact fp32 integer, so the results
compare exactly however the K slices are grouped.
"""

import math

import numpy as np
import pytest

from numba_tma import matmul
from numba_tma._frontend import cuda
from numba_tma.kernels.gemm import WgmmaConfig
from numba_tma.kernels.gemm.config import BM
from numba_tma.ladders.gemm_stream_k import StreamKConfig, stream_k_split
from numba_tma.matmul_api import plan_matmul

SK = StreamKConfig(256)
rng = np.random.default_rng()


def small_ints(shape):
    return rng.integers(-4, 5, size=shape).astype(np.float16)


def layout(x, order):
    return cuda.to_device(np.ascontiguousarray(x) if order == "C" else np.asfortranarray(x))


def exact(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def sm_count():
    return cuda.get_current_device().MULTIPROCESSOR_COUNT


def split_of(m, n, k, cfg=SK):
    """(dp_units, sk_iters) that the launch of an m x n x k problem with ``cfg`` will use."""
    tiles = math.ceil(m / BM) * math.ceil(n / cfg.bn)
    return stream_k_split(tiles, min(tiles, sm_count()), math.ceil(k / 64))


def two_way_shape():
    """About 1.5 waves of tiles (each split tile shared by about two blocks); M, N, K not tile
    multiples, but multiples of 8, so every layout (column-major too) is TMA-legal in fp16."""
    g = sm_count()
    tiles_m = 12
    tiles_n = math.ceil((g + g // 2) / tiles_m)
    return tiles_m * 128 - 24, tiles_n * 256 - 56, 40 * 64 - 24


def many_way_shape():
    """Tiles = SMs + 2: each of the two split tiles is shared by about half of the blocks, so a
    finalizer adds dozens of partials."""
    g = sm_count()
    num_k = 2 * g + 6
    return (g + 2) * 128 - 40, 200, num_k * 64 - 8


@pytest.mark.parametrize("shape_of", [two_way_shape, many_way_shape], ids=["two_way", "many_way"])
def test_split_happens_and_is_exact(shape_of):
    m, n, k = shape_of()
    dp, w = split_of(m, n, k)
    assert w > 0, f"{m}x{n}x{k} should split the last wave over the blocks"
    a, b = small_ints((m, k)), small_ints((k, n))
    da, db = layout(a, "C"), layout(b, "C")
    ref = exact(a, b)
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    matmul(da, db, out, config=SK)
    np.testing.assert_array_equal(out.copy_to_host(), ref)


@pytest.mark.parametrize("orders", ["CC", "CF", "FC", "FF"])
@pytest.mark.parametrize("out_dtype", [np.float32, np.float16])
def test_every_layout_alpha_beta(orders, out_dtype):
    m, n, k = two_way_shape()
    a, b = small_ints((m, k)), small_ints((k, n))
    c = small_ints((m, n)).astype(out_dtype)
    out = cuda.to_device(c)
    matmul(layout(a, orders[0]), layout(b, orders[1]), out, alpha=-1.0, beta=2.0, config=SK)
    ref = -exact(a, b) + 2.0 * c.astype(np.float64)
    np.testing.assert_array_equal(out.copy_to_host(), ref.astype(out_dtype))


def test_repeated_launches_and_streams():
    # The flags a launch raises must all be lowered again by it: five launches in a row on the
    # default stream, then on two numba streams (each with its own workspace), each on fresh
    # inputs into a poisoned out, all exact. Same buffers: the cached launcher runs them.
    m, n, k = two_way_shape()
    da = cuda.device_array((m, k), np.float16)
    db = cuda.device_array((k, n), np.float16)
    out = cuda.device_array((m, n), np.float32)
    streams = [0, 0, 0, 0, 0, cuda.stream(), cuda.stream(), 0]
    for s in streams:
        a, b = small_ints((m, k)), small_ints((k, n))
        da.copy_to_device(a)
        db.copy_to_device(b)
        out.copy_to_device(np.full((m, n), np.nan, np.float32))
        matmul(da, db, out, config=SK, stream=s)
        cuda.synchronize()
        np.testing.assert_array_equal(out.copy_to_host(), exact(a, b))


def test_matches_the_unsplit_kernel_on_random_normal():
    # Random-normal data: grouping K differently changes fp32 rounding only, within the fp32
    # accumulation bound of both kernels.
    m, n, k = many_way_shape()
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    da, db = cuda.to_device(a), cuda.to_device(b)
    got = {}
    for name, cfg in (("sk", SK), ("plain", WgmmaConfig(256))):
        out = cuda.to_device(np.full((m, n), np.nan, np.float32))
        matmul(da, db, out, config=cfg)
        got[name] = out.copy_to_host().astype(np.float64)
    ref = exact(a, b)
    bound = 2 * k * 2.0 ** -24 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    for name, c in got.items():
        assert np.all(np.abs(c - ref) <= bound + 1e-6), name


def test_no_split_where_waves_are_whole_or_k_is_zero():
    # Under one wave, and K = 0 (C = beta * C): the stream-K kernel runs its tiles whole.
    m, n, k = 300, 520, 136
    assert split_of(m, n, k)[1] == 0
    a, b = small_ints((m, k)), small_ints((k, n))
    out = cuda.to_device(np.full((m, n), np.nan, np.float32))
    matmul(cuda.to_device(a), cuda.to_device(b), out, config=SK)
    np.testing.assert_array_equal(out.copy_to_host(), exact(a, b))
    c = small_ints((m, n)).astype(np.float32)
    out = cuda.to_device(c)
    matmul(cuda.to_device(np.zeros((m, 0), np.float16)), cuda.to_device(np.zeros((0, n),
                                                                                  np.float16)),
           out, beta=3.0, config=SK)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * c)


def test_plan_keeps_the_config():
    m, n, k = two_way_shape()
    plan = plan_matmul(cuda.device_array((m, k), np.float16), cuda.device_array((k, n),
                                                                                np.float16),
                       cuda.device_array((m, n), np.float16), SK)
    assert plan.config == SK
