"""numba_tma.warp on the GPU: every ldmatrix/stmatrix variant against the numpy fragment model
(bit-exact), every mma variant against numpy (host-side fragments scattered/gathered with the
warp.fragment_* helpers), and a 16x16 GEMM main loop (ldmatrix A/B + mma). One warp, one small
launch per case."""

import functools

import numpy as np
import pytest

from gpu_helpers import rng
from numba_tma import warp
from numba_tma._frontend import cuda
from numba_tma.ladders.warp_gemm import KMAX, gemm_16x16

STRIDE = 24              # halves per shared row: 48 bytes, 16-byte aligned, rows not contiguous


def bf16_bits(x):
    """bfloat16 bit patterns of float32 values: ml_dtypes when importable (round to nearest even),
    else the float32's top 16 bits (truncation). The test values are small integers, exactly
    representable, so both agree (and agree with ``warp.bf16_bits``)."""
    x = np.asarray(x, np.float32)
    try:
        import ml_dtypes
    except ImportError:
        return (x.view(np.uint32) >> 16).astype(np.uint16)
    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


def small_ints(shape, lo, hi, dtype):
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(dtype)


def nonzero_halves(shape):
    return rng.integers(1, 2**16, size=shape, dtype=np.uint16)   # random bits, never zero


# ------------------------------------------------------------------------ ldmatrix / stmatrix

@functools.cache
def ldmatrix_kernel(count, trans):
    rows = 8 * count
    n = rows * STRIDE

    @cuda.jit
    def kernel(src, out):
        tile = cuda.shared.array(n, np.uint16, alignment=128)
        lane = cuda.threadIdx.x
        for i in range(lane, n, 32):
            tile[i] = src[i]
        cuda.syncwarp()
        regs = cuda.local.array(4, np.uint32)
        # lane 8*m + r supplies row r of matrix m: row 8*m + r of the stacked tile; the lanes an
        # x1/x2 ignores repeat valid rows
        warp.ldmatrix(regs, tile, (lane % rows) * STRIDE * 2, count=count, trans=trans)
        for i in range(count):
            out[lane * count + i] = regs[i]

    return kernel


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_ldmatrix(count, trans):
    mats = nonzero_halves((count, 8, 8))
    tile = np.zeros((count * 8, STRIDE), np.uint16)
    tile[:, :8] = mats.reshape(count * 8, 8)
    out = cuda.device_array(32 * count, np.uint32)
    ldmatrix_kernel(count, trans)[1, 32](cuda.to_device(tile.ravel()), out)
    want = warp.pack_words(warp.fragment_ldmatrix(mats, trans))
    np.testing.assert_array_equal(out.copy_to_host().reshape(32, count), want)


@functools.cache
def stmatrix_kernel(count, trans):
    rows = 8 * count
    n = rows * STRIDE

    @cuda.jit
    def kernel(regs_in, out):
        tile = cuda.shared.array(n, np.uint16, alignment=128)
        lane = cuda.threadIdx.x
        for i in range(lane, n, 32):
            tile[i] = 0
        cuda.syncwarp()
        regs = cuda.local.array(4, np.uint32)
        for i in range(count):
            regs[i] = regs_in[lane * count + i]
        warp.stmatrix(tile, (lane % rows) * STRIDE * 2, regs, count=count, trans=trans)
        cuda.syncwarp()
        for i in range(lane, n, 32):
            out[i] = tile[i]

    return kernel


@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_stmatrix(count, trans):
    frag = nonzero_halves((32, 2 * count))
    out = cuda.device_array(count * 8 * STRIDE, np.uint16)
    stmatrix_kernel(count, trans)[1, 32](cuda.to_device(warp.pack_words(frag).ravel()), out)
    tile = out.copy_to_host().reshape(count * 8, STRIDE)
    want = warp.unfragment_ldmatrix(frag, trans).reshape(count * 8, 8)
    np.testing.assert_array_equal(tile[:, :8], want)
    assert not tile[:, 8:].any(), "stmatrix wrote outside the rows it was given"


# ------------------------------------------------------------------------------------------ mma

# name: (A shape, B shape, input kind, accumulator kind, a words, b words, c words)
MMA = {
    "mma_m16n8k16_f32_f16": ((16, 16), (16, 8), "f16", "f32", 4, 2, 4),
    "mma_m16n8k16_f32_bf16": ((16, 16), (16, 8), "bf16", "f32", 4, 2, 4),
    "mma_m16n8k16_f16_f16": ((16, 16), (16, 8), "f16", "f16", 4, 2, 2),
    "mma_m16n8k8_f32_f16": ((16, 8), (8, 8), "f16", "f32", 2, 1, 4),
    "mma_m16n8k8_f32_bf16": ((16, 8), (8, 8), "bf16", "f32", 2, 1, 4),
    "mma_m16n8k32_s32_s8": ((16, 32), (32, 8), "s8", "s32", 4, 2, 4),
}
ACC_DTYPE = {"f32": np.float32, "f16": np.uint32, "s32": np.int32}


@functools.cache
def mma_kernel(name):
    _, _, _, acc, na, nb, nc = MMA[name]
    acc_dtype = ACC_DTYPE[acc]
    mma = getattr(warp, name)

    @cuda.jit
    def kernel(a_in, b_in, c_in, d_out, d_twice):
        lane = cuda.threadIdx.x
        a = cuda.local.array(na, np.uint32)
        b = cuda.local.array(nb, np.uint32)
        c = cuda.local.array(nc, acc_dtype)
        d = cuda.local.array(nc, acc_dtype)
        for i in range(na):
            a[i] = a_in[lane * na + i]
        for i in range(nb):
            b[i] = b_in[lane * nb + i]
        for i in range(nc):
            c[i] = c_in[lane * nc + i]
        mma(d, a, b, c)                      # D = A @ B + C into its own registers
        for i in range(nc):
            d_out[lane * nc + i] = d[i]
        mma(d, a, b, d)                      # in place (d aliases c): D = 2 A @ B + C
        for i in range(nc):
            d_twice[lane * nc + i] = d[i]

    return kernel


def mma_inputs(name):
    """Random A, B, C as the float32/int32 values numpy multiplies, and the per-lane words."""
    a_shape, b_shape, kind, acc, *_ = MMA[name]
    frag_a = getattr(warp, f"fragment_a_{name.split('_')[1]}")
    frag_b = getattr(warp, f"fragment_b_{name.split('_')[1]}")
    if kind == "s8":
        a = rng.integers(-128, 127, size=a_shape, endpoint=True).astype(np.int8)
        b = rng.integers(-128, 127, size=b_shape, endpoint=True).astype(np.int8)
        c = rng.integers(-2**20, 2**20, size=(16, 8)).astype(np.int32)
        words_a, words_b = warp.pack_words(frag_a(a)), warp.pack_words(frag_b(b))
        return a.astype(np.int32), b.astype(np.int32), c, words_a, words_b, warp.fragment_c(c)
    # Small integers: every product and partial sum is exact, in f32 and in f16 accumulators.
    lim = 8 if acc == "f32" else 4
    a = small_ints(a_shape, -lim, lim, np.float32)
    b = small_ints(b_shape, -lim, lim, np.float32)
    c = small_ints((16, 8), -64, 64, np.float32)
    if kind == "f16":
        bits_a, bits_b = a.astype(np.float16), b.astype(np.float16)
    else:
        bits_a, bits_b = bf16_bits(a), bf16_bits(b)
    words_a, words_b = warp.pack_words(frag_a(bits_a)), warp.pack_words(frag_b(bits_b))
    c_frag = warp.fragment_c(c)
    if acc == "f16":
        c_frag = warp.pack_words(c_frag.astype(np.float16))
    return a, b, c, words_a, words_b, c_frag


@pytest.mark.parametrize("name", list(MMA))
def test_mma(name):
    acc = MMA[name][3]
    a, b, c, words_a, words_b, c_words = mma_inputs(name)
    d_out = cuda.device_array(c_words.size, c_words.dtype)
    d_twice = cuda.device_array(c_words.size, c_words.dtype)
    mma_kernel(name)[1, 32](cuda.to_device(words_a.ravel()), cuda.to_device(words_b.ravel()),
                            cuda.to_device(np.ascontiguousarray(c_words).ravel()), d_out, d_twice)
    for got, want in ((d_out.copy_to_host(), a @ b + c), (d_twice.copy_to_host(), 2 * (a @ b) + c)):
        got = got.reshape(32, -1)
        if acc == "f16":
            # Small integers: |a @ b| <= 16 * 16 = 256 and |c| <= 64, so every value is an
            # integer below 2048, exact in fp16: the compare is exact (off by one fails it).
            d = warp.unfragment_c(warp.unpack_words(got, np.float16)).astype(np.float32)
            assert np.abs(want).max() < 2048
            np.testing.assert_array_equal(d, want)
        else:
            np.testing.assert_array_equal(warp.unfragment_c(got), want)


def test_mma_f16_random_normals():
    """fp16 inputs from random normals, f32 accumulation: within fp32-accumulation rounding."""
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d_out = cuda.device_array(128, np.float32)
    d_twice = cuda.device_array(128, np.float32)
    mma_kernel("mma_m16n8k16_f32_f16")[1, 32](
        cuda.to_device(warp.pack_words(warp.fragment_a_m16n8k16(a)).ravel()),
        cuda.to_device(warp.pack_words(warp.fragment_b_m16n8k16(b)).ravel()),
        cuda.to_device(warp.fragment_c(c).ravel()), d_out, d_twice)
    want = a.astype(np.float32) @ b.astype(np.float32) + c
    got = warp.unfragment_c(d_out.copy_to_host().reshape(32, 4))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3)


# ------------------------------------------------------------------------- a GEMM main loop

@pytest.mark.parametrize("k", [16, 48, 64])
def test_gemm_main_loop(k):
    a = small_ints((16, KMAX), -8, 8, np.float16)
    b = small_ints((KMAX, 16), -8, 8, np.float16)
    d = cuda.device_array(256, np.float32)
    gemm_16x16[1, 32](cuda.to_device(a.view(np.uint16).ravel()),
                      cuda.to_device(b.view(np.uint16).ravel()), d, np.int32(k))
    want = a[:, :k].astype(np.float32) @ b[:k].astype(np.float32)
    np.testing.assert_array_equal(d.copy_to_host().reshape(16, 16), want)


# ------------------------------------------------------------------------------- elect.sync

@cuda.jit
def elect_kernel(out):
    out[cuda.threadIdx.x] = 1 if warp.elect_one() else 0


def test_elect_one_picks_one_lane_per_warp():
    out = cuda.to_device(np.full(128, 7, np.int32))          # poisoned
    elect_kernel[1, 128](out)
    got = out.copy_to_host().reshape(4, 32)
    assert set(np.unique(got)) <= {0, 1}
    np.testing.assert_array_equal(got.sum(axis=1), 1)
