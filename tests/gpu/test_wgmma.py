"""wgmma.mma_async on the H100 against numpy: every wrapped N for f16/bf16 with f32 accumulators,
every transpose combination, every swizzle (none/32B/64B/128B) with the descriptor's LBO/SBO from
``wgmma.operand_image`` (the TMA swizzle model's layout), A from registers, f16 accumulators and
the four fp8 type pairs. Inputs are small random integers, so every product and sum is exact in
the accumulator: the compare is exact. The accumulators start as NaN and the first instruction
runs with scale_d = 0, so a step that reads them (or a result never written) shows as NaN."""

import numpy as np
import pytest

from numba_tma import warp, wgmma
from numba_tma.ladders.wgmma_probe import K_STEPS, KINDS, run_probe

rng = np.random.default_rng()


def _fp8_table(kind):
    """{value: code} of the fp8 format for the small integers the tests use."""
    exp_bits, bias = (4, 7) if kind == "e4m3" else (5, 15)
    man_bits = 7 - exp_bits
    table = {0.0: 0}
    for code in range(1, 128):
        e, m = code >> man_bits, code & ((1 << man_bits) - 1)
        if e == 0:
            continue
        v = 2.0 ** (e - bias) * (1 + m / (1 << man_bits))
        if v == int(v) and v <= 4:
            table[v] = code
            table[-v] = code | 0x80
    return table


def _operands(kind, n):
    """(A values, B values as N x K, A bits, B bits) with entries in -3..3."""
    _, item, kstep, _ = KINDS[kind]
    k = kstep * K_STEPS
    A = rng.integers(-3, 4, (64, k)).astype(np.float64)
    B = rng.integers(-3, 4, (n, k)).astype(np.float64)
    if kind in ("f16", "f16acc"):
        return A, B, A.astype(np.float16), B.astype(np.float16)
    if kind == "bf16":
        return A, B, warp.bf16_bits(A), warp.bf16_bits(B)
    ta, tb = (_fp8_table(p) for p in kind.split("_"))
    enc = (lambda t: np.vectorize(lambda v: t[float(v)], otypes=[np.uint8]))
    return A, B, enc(ta)(A), enc(tb)(B)


def _check(kind, n, **kw):
    A, B, abits, bbits = _operands(kind, n)
    D = run_probe(abits, bbits, kind, **kw)
    np.testing.assert_array_equal(D.astype(np.float64), A @ B.T)


@pytest.mark.parametrize("kind", ["f16", "bf16"])
@pytest.mark.parametrize("n", wgmma.N_F32)
def test_f32_accumulate_every_n(kind, n):
    _check(kind, n)


@pytest.mark.parametrize("trans_a, trans_b", [(False, True), (True, False), (True, True)])
@pytest.mark.parametrize("kind, n", [("f16", 256), ("bf16", 128), ("f16", 64)])
def test_transposed_operands(kind, n, trans_a, trans_b):
    _check(kind, n, trans_a=trans_a, trans_b=trans_b)


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
@pytest.mark.parametrize("trans_a, trans_b", [(False, False), (True, True)])
def test_every_swizzle(swizzle, trans_a, trans_b):
    _check("f16", 64, swizzle=swizzle, trans_a=trans_a, trans_b=trans_b)


@pytest.mark.parametrize("kind, n, trans_b", [("f16", 64, False), ("f16", 128, True),
                                              ("f16", 192, False), ("f16", 256, False),
                                              ("bf16", 256, True)])
def test_a_in_registers(kind, n, trans_b):
    _check(kind, n, a_in_registers=True, trans_b=trans_b)


@pytest.mark.parametrize("n", wgmma.N_OTHER)
def test_f16_accumulators(n):
    _check("f16acc", n)


def test_f16_accumulators_transposed():
    _check("f16acc", 128, trans_a=True, trans_b=True)


@pytest.mark.parametrize("kind", ["e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3", "e5m2_e5m2"])
def test_fp8(kind):
    _check(kind, 256)


@pytest.mark.parametrize("n", [64, 128, 192])
def test_fp8_n(n):
    _check("e4m3_e4m3", n)


def test_fp8_a_in_registers():
    _check("e4m3_e4m3", 128, a_in_registers=True)


def test_fp8_swizzle_32():
    _check("e5m2_e4m3", 64, swizzle=32)


def test_warpgroup_index():
    # Every thread of a 384-thread block (and of a second block) reads threadIdx.x // 128.
    from numba_tma._frontend import cuda

    @cuda.jit
    def kernel(out):
        i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        out[i] = wgmma.warpgroup_index()

    out = cuda.to_device(np.full(2 * 384, -1, np.int32))
    kernel[2, 384](out)
    assert (out.copy_to_host() == np.tile(np.arange(384) // 128, 2)).all()
