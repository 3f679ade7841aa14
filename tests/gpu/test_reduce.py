"""numba_tma.kernels.reduce.sum_axis0 on the GPU: exact on integer-valued data (every partial sum
is an exact float32, so the order of the TMA reductions cannot matter) at odd shapes and every
tile width, within the float32 summation bound on random normal data, with a poisoned ``out``,
repeated runs, empty shapes, CuPy/torch inputs, and bad arguments refused before the driver."""

import numpy as np
import pytest

from gpu_helpers import rng
from numba_tma._frontend import cuda
from numba_tma.kernels.reduce import TILE_COLS, plan_grid, sum_axis0, sum_axis0_launcher

# Odd row counts, N a multiple of 4 (16-byte rows) but not of the tile widths, every tile width
# (32, 64, 128 columns), one slab per block and many tiles per block.
SHAPES = [(1, 4), (3, 8), (1001, 100), (4097, 1024), (37, 132), (10000, 4), (129, 36),
          (257, 64), (3000, 2052), (70001, 12)]


def integer_valued(shape):
    # |x| <= 8: column sums of up to 70001 rows stay below 2**24, so every partial sum, in any
    # order, is exact in float32.
    return rng.integers(-8, 8, size=shape, endpoint=True).astype(np.float32)


@pytest.mark.parametrize("shape", SHAPES)
def test_exact_on_integer_values(shape):
    x = integer_valued(shape)
    out = cuda.to_device(np.full(shape[1], np.nan, np.float32))     # poisoned: must be zeroed
    got = sum_axis0(cuda.to_device(x), out=out)
    assert got is out
    np.testing.assert_array_equal(out.copy_to_host(), x.sum(axis=0, dtype=np.float64))


def test_every_tile_width_is_used():
    assert {plan_grid(m, n, 132)[0] for m, n in SHAPES} == set(TILE_COLS)


@pytest.mark.parametrize("shape", [(1001, 100), (4097, 1024), (20000, 36)])
def test_random_normal_within_the_float32_bound(shape):
    x = rng.standard_normal(shape).astype(np.float32)
    got = sum_axis0(cuda.to_device(x)).copy_to_host()
    ref = x.sum(axis=0, dtype=np.float64)
    # Any summation order of M float32 terms: |err| <= (M - 1) * 2**-24 * sum(|x|) (first order;
    # the 1.01 covers the second-order term).
    bound = 1.01 * (shape[0] - 1) * 2.0**-24 * np.abs(x).sum(axis=0, dtype=np.float64)
    err = np.abs(got.astype(np.float64) - ref)
    assert np.all(err <= bound), f"worst error {err.max()} vs bound {bound[err.argmax()]}"
    # Far tighter in practice (partial sums of 16 rows, then blocks): catch a lost tile.
    assert np.all(err <= 1e-5 * np.abs(x).sum(axis=0) + 1e-5)


def test_launcher_reruns_and_rezeroes():
    x = integer_valued((5000, 256))
    run, out = sum_axis0_launcher(cuda.to_device(x))
    for _ in range(3):                                   # each run must start from zero
        run()
    np.testing.assert_array_equal(out.copy_to_host(), x.sum(axis=0))


def test_empty_shapes():
    out = cuda.to_device(np.full(8, np.nan, np.float32))
    np.testing.assert_array_equal(sum_axis0(cuda.device_array((0, 8), np.float32), out=out)
                                  .copy_to_host(), np.zeros(8, np.float32))
    assert sum_axis0(cuda.device_array((5, 0), np.float32)).shape == (0,)


def test_cupy_and_torch_inputs():
    x = integer_valued((777, 40))
    want = x.sum(axis=0)
    ran = 0
    for lib in ("cupy", "torch"):
        try:
            mod = __import__(lib)
        except ImportError:                 # only a missing library skips it; errors fail
            continue
        src = mod.asarray(x, device="cuda") if lib == "torch" else mod.asarray(x)
        np.testing.assert_array_equal(sum_axis0(src).copy_to_host(), want, err_msg=lib)
        ran += 1
    if not ran:
        pytest.skip("neither CuPy nor torch is importable")


@pytest.mark.parametrize("make,exc,message", [
    (lambda: np.zeros((8, 8), np.float32), TypeError, r"host numpy.ndarray"),
    (lambda: cuda.device_array((8, 8), np.float64), TypeError, r"x must have dtype float32"),
    (lambda: cuda.device_array(8, np.float32), ValueError, r"x must be 2-D"),
    (lambda: cuda.device_array((8, 37), np.float32), ValueError,
     r"x's rows must be a multiple of 16 bytes for TMA: N \* 4 = 37 \* 4 = 148 bytes"),
    (lambda: cuda.device_array((8, 16), np.float32)[:, ::2], ValueError,
     r"x must be C-contiguous"),
])
def test_bad_inputs(make, exc, message):
    with pytest.raises(exc, match=message):
        sum_axis0(make())


def test_bad_out():
    x = cuda.device_array((8, 16), np.float32)
    with pytest.raises(ValueError, match=r"out must have shape \(16,\)"):
        sum_axis0(x, out=cuda.device_array(8, np.float32))
    with pytest.raises(TypeError, match="out must have dtype float32"):
        sum_axis0(x, out=cuda.device_array(16, np.float64))
    with pytest.raises(ValueError, match="out overlaps x"):
        sum_axis0(x, out=x[3])
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        sum_axis0(x, out=cuda.device_array(20, np.float32)[1:17])
