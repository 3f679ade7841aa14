"""numba_tma.warp offline: every ldmatrix/stmatrix/mma variant lands in sm_90a SASS as its
instruction, inlined, with its fragments in registers (no stack, local memory, LDL/STL), also in a
GEMM main loop; bad operands fail at compile time naming the argument. And, on the CPU, the numpy
fragment models against the PTX ISA's formulas."""

import os

import numpy as np
import pytest

from numba_tma._frontend import cuda, errors
from numba_tma import bulk, warp
from numba_tma.ladders.warp_gemm import gemm_16x16
from sass_checks import check_clean

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

needs_compiler = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                    reason="offline compilation needs the real CUDA target")


def compile_kernel(kernel, sig):
    from numba_tma.offline import compile_kernel as compile_

    return compile_(kernel, sig)


# ------------------------------------------------------------------------ ldmatrix / stmatrix

def make_ldmatrix_kernel(count, trans):
    def kernel(out):
        tile = cuda.shared.array(256, np.uint16, alignment=128)
        lane = cuda.threadIdx.x % 32
        for i in range(lane, 256, 32):
            tile[i] = i
        cuda.syncwarp()
        regs = cuda.local.array(4, np.uint32)
        warp.ldmatrix(regs, tile, lane * 16, count=count, trans=trans)
        for i in range(count):
            out[lane * 4 + i] = regs[i]

    return kernel


def make_stmatrix_kernel(count, trans):
    def kernel(src, out):
        tile = cuda.shared.array(256, np.uint16, alignment=128)
        lane = cuda.threadIdx.x % 32
        regs = cuda.local.array(4, np.uint32)
        for i in range(count):
            regs[i] = src[lane * 4 + i]
        warp.stmatrix(tile, lane * 16, regs, count=count, trans=trans)
        cuda.syncwarp()
        for i in range(lane, 256, 32):
            out[i] = tile[i]

    return kernel


def sass_name(op, count, trans):
    # The x1 forms carry no ".1": LDSM.16.M88, STSM.16.MT88.
    return f"{op}.16.{'MT88' if trans else 'M88'}{'' if count == 1 else f'.{count}'}"


@needs_compiler
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_ldmatrix_sass(count, trans):
    kb = compile_kernel(make_ldmatrix_kernel(count, trans), "void(uint32[::1])")
    check_clean(kb)
    ops = {op: n for op, n in kb.opcodes().items() if op.startswith("LDSM")}
    assert ops == {sass_name("LDSM", count, trans): 1}


@needs_compiler
@pytest.mark.parametrize("trans", [False, True])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_stmatrix_sass(count, trans):
    kb = compile_kernel(make_stmatrix_kernel(count, trans), "void(uint32[::1], uint16[::1])")
    check_clean(kb)
    ops = {op: n for op, n in kb.opcodes().items() if op.startswith("STSM")}
    assert ops == {sass_name("STSM", count, trans): 1}


# ------------------------------------------------------------------------------------------ mma

MMA_CASES = {
    # name: (a words, b words, acc words, acc dtype, SASS)
    "mma_m16n8k16_f32_f16": (4, 2, 4, np.float32, "HMMA.16816.F32"),
    "mma_m16n8k16_f32_bf16": (4, 2, 4, np.float32, "HMMA.16816.F32.BF16"),
    "mma_m16n8k16_f16_f16": (4, 2, 2, np.uint32, "HMMA.16816.F16"),
    "mma_m16n8k8_f32_f16": (2, 1, 4, np.float32, "HMMA.1688.F32"),
    "mma_m16n8k8_f32_bf16": (2, 1, 4, np.float32, "HMMA.1688.F32.BF16"),
    "mma_m16n8k32_s32_s8": (4, 2, 4, np.int32, "IMMA.16832.S8.S8"),
}


def make_mma_kernel(name):
    na, nb, nc, acc_dtype, _ = MMA_CASES[name]
    mma = getattr(warp, name)

    def kernel(a_in, b_in, c_in, d_out):
        lane = cuda.threadIdx.x % 32
        a = cuda.local.array(na, np.uint32)
        b = cuda.local.array(nb, np.uint32)
        c = cuda.local.array(nc, acc_dtype)
        for i in range(na):
            a[i] = a_in[lane * na + i]
        for i in range(nb):
            b[i] = b_in[lane * nb + i]
        for i in range(nc):
            c[i] = c_in[lane * nc + i]
        mma(c, a, b, c)                      # d aliases c: accumulate in place
        mma(c, a, b, c)
        for i in range(nc):
            d_out[lane * nc + i] = c[i]

    return kernel


def acc_type(name):
    return {np.float32: "float32", np.uint32: "uint32", np.int32: "int32"}[MMA_CASES[name][3]]


@needs_compiler
@pytest.mark.parametrize("name", list(MMA_CASES))
def test_mma_sass(name):
    acc = acc_type(name)
    kb = compile_kernel(make_mma_kernel(name),
                        f"void(uint32[::1], uint32[::1], {acc}[::1], {acc}[::1])")
    check_clean(kb)
    sass = MMA_CASES[name][4]
    mmas = {op: n for op, n in kb.opcodes().items() if op.startswith(("HMMA", "IMMA"))}
    assert mmas == {sass: 2}


# ------------------------------------------------------------------- a GEMM main loop (16x16)

@needs_compiler
def test_gemm_main_loop_keeps_fragments_in_registers():
    kb = compile_kernel(gemm_16x16, "void(uint16[::1], uint16[::1], float32[::1], int32)")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops["LDSM.16.M88.4"] >= 1 and ops["LDSM.16.MT88.4"] >= 1
    assert ops["HMMA.16816.F32"] >= 2
    assert ops["LDSM.16.M88.4"] * 2 == ops["HMMA.16816.F32"]  # 2 mmas per A load, unrolled or not


def elect_copy_kernel(elected):
    # A warp's one thread copies n chunks of 512 bytes (an mbarrier counts them): elected by
    # warp.elect_one, or by its lane number.
    def kernel(src, n):
        buf = cuda.shared.array(1024, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        lane = cuda.threadIdx.x % 32
        if (warp.elect_one() if elected else lane == 0):
            for i in range(n):
                bulk.copy_global_to_shared(buf[(i & 7) * 128:], src[i * 128:], 512, bar)
        cuda.syncwarp()

    return kernel


@needs_compiler
def test_elect_one_issues_copies_as_they_are():
    """A copy under warp.elect_one is the one UBLKCP; under ``lane == 0`` ptxas wraps each in a
    loop over the active lanes (ELECT, PLOP3, BRA.U.ANY)."""
    kb = compile_kernel(elect_copy_kernel(True), "void(float32[::1], int32)")
    check_clean(kb)
    assert kb.count("ELECT") == 1 and kb.has("UBLKCP.S.G") and not kb.has("BRA.U.ANY")
    kb = compile_kernel(elect_copy_kernel(False), "void(float32[::1], int32)")
    assert kb.has("UBLKCP.S.G") and kb.has("BRA.U.ANY")


@needs_compiler
def test_ampere_builds():
    """ldmatrix and mma are sm_80 instructions: the GEMM loop and the int8 mma build for sm_80;
    stmatrix (sm_90) compiles to a trap there instead of failing the whole ptx/warp.cu unit."""
    from numba_tma.offline import compile_kernel as compile_

    kb = compile_(gemm_16x16, "void(uint16[::1], uint16[::1], float32[::1], int32)", arch="sm_80")
    check_clean(kb)
    assert kb.has("LDSM.16.M88.4") and kb.has("LDSM.16.MT88.4") and kb.has("HMMA.16816.F32")
    kb = compile_(make_mma_kernel("mma_m16n8k32_s32_s8"),
                  "void(uint32[::1], uint32[::1], int32[::1], int32[::1])", arch="sm_80")
    assert kb.opcodes()["IMMA.16832.S8.S8"] == 2
    kb = compile_(make_stmatrix_kernel(4, False), "void(uint32[::1], uint16[::1])", arch="sm_80")
    assert not kb.has("STSM") and kb.has("BPT.TRAP")


# ----------------------------------------------------------------------------- typing errors

def bad_mma_a_kernel(out):
    a = cuda.local.array(4, np.float32)
    b = cuda.local.array(2, np.uint32)
    c = cuda.local.array(4, np.float32)
    warp.mma_m16n8k16_f32_f16(c, a, b, c)
    out[0] = c[0]


def bad_mma_c_kernel(out):
    a = cuda.local.array(4, np.uint32)
    b = cuda.local.array(2, np.uint32)
    c = cuda.local.array(4, np.int32)
    d = cuda.local.array(4, np.float32)
    warp.mma_m16n8k16_f32_bf16(d, a, b, c)
    out[0] = d[0]


def bad_imma_d_kernel(out):
    a = cuda.local.array(4, np.uint32)
    b = cuda.local.array(2, np.uint32)
    c = cuda.local.array(4, np.int32)
    d = cuda.local.array(4, np.float32)
    warp.mma_m16n8k32_s32_s8(d, a, b, c)
    out[0] = d[0]


def bad_hmma_f16_b_kernel(out):
    a = cuda.local.array(4, np.uint32)
    b = cuda.local.array(2, np.float16)
    c = cuda.local.array(2, np.uint32)
    warp.mma_m16n8k16_f16_f16(c, a, b, c)
    out[0] = c[0]


def bad_ldmatrix_regs_kernel(out):
    tile = cuda.shared.array(256, np.uint16)
    regs = cuda.local.array(4, np.float32)
    warp.ldmatrix(regs, tile, 0)
    out[0] = regs[0]


def bad_ldmatrix_count_kernel(out):
    tile = cuda.shared.array(256, np.uint16)
    regs = cuda.local.array(4, np.uint32)
    warp.ldmatrix(regs, tile, 0, count=3)
    out[0] = regs[0]


def runtime_count_kernel(out):
    tile = cuda.shared.array(256, np.uint16)
    regs = cuda.local.array(4, np.uint32)
    warp.ldmatrix(regs, tile, 0, count=out[1])
    out[0] = regs[0]


def runtime_trans_kernel(out):
    tile = cuda.shared.array(256, np.uint16)
    regs = cuda.local.array(4, np.uint32)
    warp.stmatrix(tile, 0, regs, count=4, trans=out[1] > 0)
    out[0] = regs[0]


def bad_stmatrix_tile_kernel(out):
    regs = cuda.local.array(4, np.uint32)
    warp.stmatrix(out[0], 0, regs)


@needs_compiler
@pytest.mark.parametrize("kernel,message", [
    (bad_mma_a_kernel, r"warp.mma_m16n8k16_f32_f16: a must have dtype uint32, int32, got float32"),
    (bad_mma_c_kernel, r"warp.mma_m16n8k16_f32_bf16: c must have dtype float32, got int32"),
    (bad_imma_d_kernel, r"warp.mma_m16n8k32_s32_s8: d must have dtype int32, got float32"),
    (bad_hmma_f16_b_kernel, r"warp.mma_m16n8k16_f16_f16: b must have dtype uint32, int32"),
    (bad_ldmatrix_regs_kernel, r"warp.ldmatrix: regs must have dtype uint32, int32, got float32"),
    (bad_ldmatrix_count_kernel, r"warp.ldmatrix: count must be 1, 2 or 4"),
    (runtime_count_kernel, r"warp.ldmatrix: count must be a compile-time integer"),
    (runtime_trans_kernel, r"warp.stmatrix: trans must be a compile-time constant"),
    (bad_stmatrix_tile_kernel, r"warp.stmatrix: tile must be an array"),
])
def test_bad_operands_fail_at_compile_time(kernel, message):
    with pytest.raises(TypingError, match=message):
        compile_kernel(kernel, "void(uint32[::1])")


def test_intrinsics_refuse_host_calls():
    with pytest.raises(RuntimeError, match="device intrinsic"):
        warp.ldmatrix(np.zeros(4, np.uint32), np.zeros(64, np.uint16), 0)
    with pytest.raises(RuntimeError, match="device intrinsic"):
        warp.mma_m16n8k32_s32_s8(*(np.zeros(4, np.int32),) * 4)


# --------------------------------------------------------- numpy fragment models (CPU, no GPU)
# The PTX ISA's formulas, spelled out per lane and element exactly as the ISA writes them.

def ptx_a_m16n8k16(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
    col = t * 2 + (i & 1) if i < 4 else t * 2 + (i & 1) + 8
    return row, col


def ptx_b_m16n8k16(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 2 + (i & 1) if i < 2 else t * 2 + (i & 1) + 8
    return row, g


def ptx_c(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def ptx_a_m16n8k8(lane, i):
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def ptx_b_m16n8k8(lane, i):
    g, t = lane >> 2, lane % 4
    return t * 2 + i, g


def ptx_a_m16n8k32(lane, i):
    g, t = lane >> 2, lane % 4
    row = g if (0 <= i < 4 or 8 <= i < 12) else g + 8
    col = t * 4 + (i & 3) if i < 8 else t * 4 + (i & 3) + 16
    return row, col


def ptx_b_m16n8k32(lane, i):
    g, t = lane >> 2, lane % 4
    row = t * 4 + (i & 3) if i < 4 else t * 4 + (i & 3) + 16
    return row, g


LAYOUTS = [
    (warp.fragment_a_m16n8k16, warp.unfragment_a_m16n8k16, ptx_a_m16n8k16, (16, 16), 8),
    (warp.fragment_b_m16n8k16, warp.unfragment_b_m16n8k16, ptx_b_m16n8k16, (16, 8), 4),
    (warp.fragment_a_m16n8k8, warp.unfragment_a_m16n8k8, ptx_a_m16n8k8, (16, 8), 4),
    (warp.fragment_b_m16n8k8, warp.unfragment_b_m16n8k8, ptx_b_m16n8k8, (8, 8), 2),
    (warp.fragment_a_m16n8k32, warp.unfragment_a_m16n8k32, ptx_a_m16n8k32, (16, 32), 16),
    (warp.fragment_b_m16n8k32, warp.unfragment_b_m16n8k32, ptx_b_m16n8k32, (32, 8), 8),
    (warp.fragment_c, warp.unfragment_c, ptx_c, (16, 8), 4),
]


@pytest.mark.parametrize("frag,unfrag,formula,shape,per_lane", LAYOUTS,
                         ids=[f[0].__name__ for f in LAYOUTS])
def test_fragment_layouts_match_the_ptx_isa(frag, unfrag, formula, shape, per_lane):
    m = np.arange(np.prod(shape)).reshape(shape)
    f = frag(m)
    assert f.shape == (32, per_lane)
    for lane in range(32):
        for i in range(per_lane):
            assert f[lane, i] == m[formula(lane, i)], (lane, i)
    assert sorted(f.ravel()) == list(m.ravel())              # every element held exactly once
    np.testing.assert_array_equal(unfrag(f), m)
    with pytest.raises(ValueError):
        frag(np.zeros((shape[0] + 1, shape[1])))


def test_ldmatrix_model():
    mats = np.arange(4 * 64, dtype=np.uint16).reshape(4, 8, 8)
    for trans in (False, True):
        f = warp.fragment_ldmatrix(mats, trans)
        assert f.shape == (32, 8)
        for lane in range(32):
            for m in range(4):
                for j in range(2):
                    r, c = lane >> 2, 2 * (lane % 4) + j
                    want = mats[m][c, r] if trans else mats[m][r, c]
                    assert f[lane, 2 * m + j] == want
        np.testing.assert_array_equal(warp.unfragment_ldmatrix(f, trans), mats)
    for count in (1, 2):
        np.testing.assert_array_equal(warp.fragment_ldmatrix(mats[:count]),
                                      warp.fragment_ldmatrix(mats)[:, :2 * count])


def test_ldmatrix_feeds_mma_fragments():
    """The recipes of the docstrings: ldmatrix.x4 of A's quadrants is the m16n8k16 A fragment,
    ldmatrix.x2.trans of row-major B (K x N) the B fragment, stmatrix.x2 of f16 accumulators
    writes D's two 8-row halves."""
    rng = np.random.default_rng(0)
    a = rng.integers(1, 2**16, size=(16, 16), dtype=np.uint16)
    quads = np.stack([a[:8, :8], a[8:, :8], a[:8, 8:], a[8:, 8:]])
    np.testing.assert_array_equal(warp.fragment_ldmatrix(quads), warp.fragment_a_m16n8k16(a))
    b = rng.integers(1, 2**16, size=(16, 8), dtype=np.uint16)
    np.testing.assert_array_equal(warp.fragment_ldmatrix(np.stack([b[:8], b[8:]]), trans=True),
                                  warp.fragment_b_m16n8k16(b))
    a8 = a[:, :8]
    np.testing.assert_array_equal(warp.fragment_ldmatrix(np.stack([a8[:8], a8[8:]])),
                                  warp.fragment_a_m16n8k8(a8))
    np.testing.assert_array_equal(warp.fragment_ldmatrix(b[None, :8], trans=True),
                                  warp.fragment_b_m16n8k8(b[:8]))
    np.testing.assert_array_equal(warp.unfragment_ldmatrix(warp.fragment_c(b)),
                                  np.stack([b[:8], b[8:]]))


def test_model_gemm_through_fragments():
    """An mma in numpy on fragments: gather A, B, C from fragments and back gives A @ B + C."""
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, size=(16, 32), dtype=np.int8)
    b = rng.integers(-128, 128, size=(32, 8), dtype=np.int8)
    c = rng.integers(-1000, 1000, size=(16, 8), dtype=np.int32)
    aw = warp.pack_words(warp.fragment_a_m16n8k32(a))
    bw = warp.pack_words(warp.fragment_b_m16n8k32(b))
    assert aw.shape == (32, 4) and bw.shape == (32, 2) and aw.dtype == np.uint32
    a2 = warp.unfragment_a_m16n8k32(warp.unpack_words(aw, np.int8))
    b2 = warp.unfragment_b_m16n8k32(warp.unpack_words(bw, np.int8))
    d = a2.astype(np.int32) @ b2.astype(np.int32) + c
    np.testing.assert_array_equal(warp.unfragment_c(warp.fragment_c(d)),
                                  a.astype(np.int32) @ b.astype(np.int32) + c)


def test_pack_words_puts_lower_elements_low():
    halves = np.array([[0x1111, 0x2222, 0x3333, 0x4444]] * 32, np.uint16)
    words = warp.pack_words(halves)
    assert words.shape == (32, 2) and words[0, 0] == 0x22221111 and words[0, 1] == 0x44443333
    np.testing.assert_array_equal(warp.unpack_words(words, np.uint16), halves)
    q = np.array([[1, 2, 3, -4]] * 32, np.int8)
    assert warp.pack_words(q)[0, 0] == 0xFC030201
    np.testing.assert_array_equal(warp.unpack_words(warp.pack_words(q), np.int8), q)
    f16 = np.array([[1.0, -2.0]] * 32, np.float16)
    assert warp.pack_words(f16)[0, 0] == (0xC000 << 16) | 0x3C00
    with pytest.raises(ValueError):
        warp.pack_words(np.zeros((32, 3), np.uint16))
    with pytest.raises(ValueError):
        warp.pack_words(np.zeros((32, 4), np.float32))


def test_bf16_bits():
    ints = np.arange(-256, 257, dtype=np.float32)
    bits = warp.bf16_bits(ints)
    truncated = (ints.view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(bits, truncated)            # exact values: any rounding agrees
    np.testing.assert_array_equal(warp.bf16_to_float32(bits), ints)
    one = np.float32(1.0)
    halfway = np.array([one + 2.0**-8, one + 3 * 2.0**-8, -(one + 2.0**-8)], np.float32)
    np.testing.assert_array_equal(warp.bf16_bits(halfway), [0x3F80, 0x3F82, 0xBF80])  # to even
    assert np.isnan(warp.bf16_to_float32(warp.bf16_bits(np.float32("nan"))))
    assert warp.bf16_bits(np.float32(np.inf)) == 0x7F80
    try:
        import ml_dtypes
    except ImportError:
        return
    x = np.random.default_rng(2).standard_normal(1000).astype(np.float32)
    np.testing.assert_array_equal(warp.bf16_bits(x), x.astype(ml_dtypes.bfloat16).view(np.uint16))
