"""fp8 ``matmul()`` on the GPU: every e4m3/e5m2 pair, every scale mode (none, per tensor, per
row/column, 1 x 128 / 128 x 128 blocks), every output dtype, at tile multiples and odd shapes,
against a float64 reference of the dequantised operands.

Small integers scaled by powers of two make every product and every fp32 sum exact, so those
results compare exactly (16-bit outputs after the same round-to-nearest); random-normal inputs
check the ordinary case within the fp8 accumulation's bound. NaN, Inf and fp16 overflow follow
IEEE (and torch): NaN propagates, Inf times a nonzero stays Inf, values beyond fp16's range
become Inf.
"""

import math

import numpy as np
import pytest
from test_readme_examples import as_front_end

from numba_tma import matmul
from numba_tma.kernels.gemm import WgmmaConfig
from numba_tma.kernels.gemm.choose import (CLUSTER, FP8_BLOCK, FP8_NARROW, N192, OVERLAPPED, TALL,
                                           WIDE)
from numba_tma.kernels.gemm.plan import sm_count
from numba_tma.kernels.gemm.stream_k import StreamKConfig, stream_k_split

torch = pytest.importorskip("torch")

PAIRS = ["e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3", "e5m2_e5m2"]
MODES = ["", "tensor", "row", "block"]
SHAPES = [(128, 256, 128), (257, 200, 336), (1, 16, 16), (8, 8, 32), (1000, 1000, 1008),
          (64, 1032, 2064), (300, 24, 16)]
FP8 = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
OUT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}

_gen = []


def generator():
    """The tests' seeded CUDA generator, made at first use: created at import, it initialised
    CUDA before numba's driver probe, whose missing entry points compute-sanitizer then
    reported as API errors."""
    if not _gen:
        _gen.append(torch.Generator(device="cuda"))
        _gen[0].manual_seed(int(np.random.SeedSequence().entropy % 2**31))
    return _gen[0]


def _ints(shape, lo=-2, hi=3):
    return torch.randint(lo, hi, shape, device="cuda", generator=generator()).float()


def _pow2(shape):
    return 2.0 ** _ints(shape, -2, 3)


def problem(m, n, k, pair="e4m3_e4m3", mode="tensor", exact=True):
    """``(a, b, scale_a, scale_b)``: fp8 a (M, K), b = w.t() for an fp8 (N, K) weight, and the
    scales of ``mode`` (powers of two when ``exact``)."""
    ka, kb = pair.split("_")
    draw = _ints if exact else (lambda s: torch.randn(s, device="cuda", generator=generator()))
    a = draw((m, k)).to(FP8[ka])
    w = draw((n, k)).to(FP8[kb])
    scale = _pow2 if exact else (lambda s: torch.rand(s, device="cuda", generator=generator()) + 0.5)
    kb_, nb = math.ceil(k / 128), math.ceil(n / 128)
    sa, sb = {"": (None, None), "tensor": (scale(()), scale(())),
              "row": (scale((m, 1)), scale((1, n))),
              "block": (scale((m, kb_)), scale((nb, kb_)))}[mode]
    return a, w.t(), sa, sb


def reference(a, b, sa, sb, alpha=1.0):
    """float64 ``alpha * (sa * a) @ (sb * b)`` of the dequantised operands."""
    A, B = a.to(torch.float64), b.to(torch.float64)
    m, k = A.shape
    n = B.shape[1]
    if sa is not None and sa.dim() == 2 and sa.shape[1] == math.ceil(k / 128) and \
            sb.dim() == 2 and sb.shape == (math.ceil(n / 128), math.ceil(k / 128)) and \
            sb.numel() > 1:
        A = A * sa.double().repeat_interleave(128, 1)[:, :k]
        W = sb.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
        B = B * W.t()
    else:
        if sa is not None:
            A = A * (sa.double().reshape(m, 1) if sa.numel() > 1 else sa.double())
        if sb is not None:
            B = B * (sb.double().reshape(1, n) if sb.numel() > 1 else sb.double())
    return alpha * (A @ B)


def poisoned(m, n, out):
    return torch.full((m, n), float("nan"), dtype=OUT[out], device="cuda")


def assert_exact(got, ref, out):
    want = ref.to(OUT[out]).to(torch.float64)
    got = got.to(torch.float64)
    bad = ~((got == want) | (got.isnan() & want.isnan()))
    assert not bad.any(), (f"{int(bad.sum())} of {got.numel()} differ; first at "
                           f"{bad.nonzero()[0].tolist()}: {got[bad][0].item()} vs "
                           f"{want[bad][0].item()}")


def run(a, b, sa, sb, out="f32", **kw):
    c = poisoned(a.shape[0], b.shape[1], out)
    r = matmul(a, b, c, scale_a=sa, scale_b=sb, **kw)
    assert r is c
    torch.cuda.synchronize()
    return c


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m or "unscaled")
@pytest.mark.parametrize("pair", PAIRS)
def test_exact_every_pair_and_mode(pair, mode):
    a, b, sa, sb = problem(384, 520, 528, pair, mode)
    assert_exact(run(a, b, sa, sb), reference(a, b, sa, sb), "f32")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m or "unscaled")
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_exact_shapes(shape, mode):
    a, b, sa, sb = problem(*shape, mode=mode)
    assert_exact(run(a, b, sa, sb), reference(a, b, sa, sb), "f32")


@pytest.mark.parametrize("out", ["bf16", "f16"])
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m or "unscaled")
def test_exact_16bit_out(mode, out):
    a, b, sa, sb = problem(1000, 1000, 1008, mode=mode)
    assert_exact(run(a, b, sa, sb, out), reference(a, b, sa, sb), out)


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("shape", [(2048, 2048, 2048), (1000, 1032, 4000), (128, 7168, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
def test_random_within_bounds(shape, mode):
    a, b, sa, sb = problem(*shape, mode=mode, exact=False)
    got = run(a, b, sa, sb, "bf16").to(torch.float64)
    ref = reference(a, b, sa, sb)
    mag = reference(a.float().abs().to(a.dtype), b.float().abs().to(b.dtype),
                    None if sa is None else sa.abs(), None if sb is None else sb.abs())
    # fp8 products are exact in fp32; the tensor cores' fp8 sums keep fewer bits than fp32's,
    # bounded here by 2^-10 of the sum of magnitudes; then bf16's rounding of the result.
    bound = 2.0 ** -10 * mag + 2.0 ** -8 * ref.abs() + 1e-30
    worst = ((got - ref).abs() / bound).max().item()
    print(f"worst error {worst:.3g} x the bound")
    assert worst <= 1, f"error {worst:.3g} x the bound"


@pytest.mark.parametrize("mode", ["", "tensor", "row", "block"], ids=lambda m: m or "unscaled")
def test_promotion_holds_fp32_precision_on_long_k(mode):
    # A long K of positive values: promoted per 128-deep block (the default) the sum keeps fp32
    # precision; with fast_accum=True the tensor cores' fp8 accumulator, which keeps fewer bits
    # and rounds toward zero, comes out short.
    m, n, k = 256, 256, 16384
    a = (torch.rand((m, k), device="cuda", generator=generator()) + 0.5).to(FP8["e4m3"])
    w = (torch.rand((n, k), device="cuda", generator=generator()) + 0.5).to(FP8["e4m3"])
    b = w.t()
    ones = {"": (None, None), "tensor": (torch.ones((), device="cuda"),) * 2,
            "row": (torch.ones((m, 1), device="cuda"), torch.ones((1, n), device="cuda")),
            "block": (torch.ones((m, k // 128), device="cuda"),
                      torch.ones((n // 128, k // 128), device="cuda"))}[mode]
    ref = reference(a, b, None, None)
    err = (run(a, b, *ones).double() - ref).abs().max().item()
    fp32_bound = 2.0 ** -24 * k * ref.abs().max().item()
    print(f"{mode or 'unscaled'}: max |error| promoted {err:.4g} (fp32 bound {fp32_bound:.4g})")
    assert err <= fp32_bound
    if mode != "block":
        fast = (run(a, b, *ones, fast_accum=True).double() - ref).abs().max().item()
        print(f"  fast_accum {fast:.4g}")
        assert fast > err


def test_nan_inf_and_fp16_overflow():
    m, n, k = 64, 64, 64
    a = _ints((m, k), 1, 3)
    w = _ints((n, k), 1, 3)
    a[3, 5] = float("nan")
    a[7, 1] = float("inf")
    a8, w8 = a.to(FP8["e5m2"]), w.to(FP8["e5m2"])        # e5m2 has Inf; e4m3fn saturates
    assert a8[7, 1].float().isinf()
    got = run(a8, w8.t(), None, None)
    assert got[3].isnan().all()
    assert (got[7] == float("inf")).all()
    rest = torch.ones(m, dtype=torch.bool, device="cuda")
    rest[[3, 7]] = False
    assert got[rest].isfinite().all()
    # e4m3's largest value (448) squared times K = 64 is beyond fp16's 65504: Inf, as torch.
    big = torch.full((m, k), 448.0, device="cuda").to(FP8["e4m3"])
    got = run(big, big.t(), None, None, "f16")
    assert (got == float("inf")).all()


@pytest.mark.parametrize("m", [300, 301])
@pytest.mark.parametrize("layout", ["row-major", "column-major", "tma-aligned", "misaligned"])
def test_block_scale_layouts(layout, m):
    # A's scales are read in place where M-contiguous, 16-byte aligned with whole 16-byte K
    # blocks (column-major with M = 300, "tma-aligned" with M = 300); any other layout is
    # copied into that one first
    n, k = 392, 640
    a, b, sa, sb = problem(m, n, k, mode="block")
    if layout == "column-major":            # torch's layout for its block-wise scales
        sa = sa.t().contiguous().t()
        sb = sb.t().contiguous().t()
    elif layout == "tma-aligned":           # DeepGEMM's: M padded to 16 bytes
        pad = torch.full((sa.shape[1], -(-m // 4) * 4), float("nan"), device="cuda")
        pad[:, :m] = sa.t()
        sa = pad.t()[:m]
    elif layout == "misaligned":            # M-contiguous, one float past a 16-byte boundary
        pad = torch.full((sa.shape[1], m + 1), float("nan"), device="cuda")
        pad[:, 1:] = sa.t()
        sa = pad.t()[1:]
    assert_exact(run(a, b, sa, sb), reference(a, b, sa, sb), "f32")


def test_row_scale_shapes_and_mixed_sides():
    m, n, k = 200, 136, 272
    a, b, sa, sb = problem(m, n, k, mode="row")
    want = reference(a, b, sa, sb)
    for sa_, sb_ in [(sa, sb), (sa.reshape(m), sb.reshape(n)), (sa, sb.reshape(n, 1))]:
        assert_exact(run(a, b, sa_, sb_), want, "f32")
    two = torch.full((), 2.0, device="cuda")
    assert_exact(run(a, b, sa, two), reference(a, b, sa, two), "f32")       # row x tensor
    assert_exact(run(a, b, 0.5, sb), reference(a, b, None, sb) * 0.5, "f32")  # number x col
    assert_exact(run(a, b, 0.5, 4.0), reference(a, b, None, None) * 2, "f32")
    blocks = (math.ceil(n / 128), math.ceil(k / 128))
    sa_b = _pow2((m, blocks[1]))
    assert_exact(run(a, b, sa_b, two),                                       # block x tensor
                 reference(a, b, sa_b, torch.full(blocks, 2.0, device="cuda")), "f32")


@pytest.mark.parametrize("cfg, fast", [(None, False), (None, True), (WIDE, True), (TALL, True),
                                       (FP8_NARROW[64], False), (FP8_BLOCK[192], False)],
                         ids=lambda x: repr(x) if isinstance(x, WgmmaConfig) else str(x))
def test_row_scales_where_the_last_tile_has_four_columns(cfg, fast):
    # N = 132 (f32 C: rows of whole 16 bytes): the last tile's threads of columns 132 and 134
    # start past C and read its last column's scale (scales.col_index)
    m, n, k = 300, 132, 272
    a, b, sa, sb = problem(m, n, k, mode="row")
    assert_exact(run(a, b, sa, sb, "f32", config=cfg, fast_accum=fast), reference(a, b, sa, sb),
                 "f32")


def test_alpha_beta_f32_out():
    m, n, k = 500, 264, 304
    a, b, sa, sb = problem(m, n, k, mode="row")
    c0 = _ints((m, n))
    c = c0.clone()
    matmul(a, b, c, scale_a=sa, scale_b=sb, alpha=0.5, beta=2.0)
    torch.cuda.synchronize()
    assert_exact(c, reference(a, b, sa, sb, 0.5) + 2.0 * c0.double(), "f32")


def test_allocates_out_and_repeats():
    a, b, sa, sb = problem(256, 256, 256, mode="block")
    got = matmul(a, b, scale_a=sa, scale_b=sb)
    assert got.dtype == torch.bfloat16 and got.shape == (256, 256)
    assert_exact(got, reference(a, b, sa, sb), "bf16")
    f16 = matmul(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float16)
    assert f16.dtype == torch.float16
    sa2 = sa * 2            # new scale values at a new address: the cached launch follows them
    assert_exact(matmul(a, b, scale_a=sa2, scale_b=sb), reference(a, b, sa2, sb), "bf16")
    sa.mul_(4)              # the same address, new values: read at run time
    assert_exact(matmul(a, b, scale_a=sa, scale_b=sb), reference(a, b, sa, sb), "bf16")


def test_raw_bytes_with_in_dtype_numba_and_cupy():
    from numba_tma._frontend import cuda

    m, n, k = 136, 72, 160
    a, b, sa, sb = problem(m, n, k, "e4m3_e5m2", "row")
    want = reference(a, b, sa, sb)
    a_bytes = a.view(torch.uint8).cpu().numpy()
    w_bytes = b.t().contiguous().view(torch.uint8).cpu().numpy()
    da, dw = cuda.to_device(a_bytes), cuda.to_device(w_bytes)
    dsa = cuda.to_device(sa.cpu().numpy())
    dsb = cuda.to_device(sb.cpu().numpy())
    got = matmul(da, _numba_t(dw), scale_a=dsa, scale_b=dsb,
                 in_dtype=("e4m3", "e5m2"))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.copy_to_host(), want.cpu().numpy())
    cupy = pytest.importorskip("cupy")
    ca, cw = cupy.asarray(a_bytes), cupy.asarray(w_bytes)
    got = matmul(ca, cw.T, scale_a=cupy.asarray(sa.cpu().numpy()),
                 scale_b=cupy.asarray(sb.cpu().numpy()), in_dtype=("e4m3", "e5m2"))
    np.testing.assert_array_equal(cupy.asnumpy(got), want.cpu().numpy())


def _numba_t(d):
    from numba_tma.matmul_api import _transposed

    return _transposed(d)


# (config, scale mode, fast_accum)
FORCED = [(OVERLAPPED[WIDE], "row", True), (OVERLAPPED[WIDE], "tensor", True),
          (WIDE, "row", True), (TALL, "row", True), (OVERLAPPED[CLUSTER], "tensor", True),
          (OVERLAPPED[CLUSTER], "row", True), (OVERLAPPED[N192], "row", True),
          (FP8_BLOCK[64], "block", False), (FP8_BLOCK[128], "block", False),
          (FP8_NARROW[128], "row", False),
          (FP8_NARROW[64], "tensor", False),
          (WgmmaConfig(128, stages=5, mma_pipe=0, cluster_m=2), "block", False),
          (WgmmaConfig(192, stages=5, mma_pipe=0, c_buffers=1), "block", False),
          (WgmmaConfig(192, stages=5, mma_pipe=0, c_buffers=1), "tensor", False)]


@pytest.mark.parametrize("cfg, mode, fast", FORCED,
                         ids=lambda x: repr(x) if isinstance(x, WgmmaConfig) else str(x))
# (1100 rows: nine row tiles, so a 2-CTA cluster's last pair has a tile past M)
@pytest.mark.parametrize("shape", [(2048, 4096, 512), (2000, 3992, 528), (1100, 1000, 528)],
                         ids=lambda s: "x".join(map(str, s)))
def test_forced_configs_exact(cfg, mode, fast, shape):
    a, b, sa, sb = problem(*shape, mode=mode)
    got = run(a, b, sa, sb, "bf16", config=cfg, fast_accum=fast)
    assert_exact(got, reference(a, b, sa, sb), "bf16")


SK192 = StreamKConfig(192, stages=5, mma_pipe=0, c_buffers=1)


def split_shape(ways):
    """An fp8 problem whose 128 x 192 tiles leave a part-filled last round: "two" (about 1.5
    rounds, each split tile shared by about two blocks), "many" (SMs + 2 tiles: each of the
    two split tiles shared by about half of the blocks) or "under" (six tiles, a decode-like
    M: every tile split over a sixth of the blocks). Not tile multiples; K not a multiple of
    128 either, so the last K block is partial."""
    g = sm_count()
    if ways == "two":
        tiles_n = math.ceil((g + g // 2) / 12)
        return 12 * 128 - 24, tiles_n * 192 - 56, 40 * 128 - 16
    if ways == "under":
        return 60, 1000, (4 * g // 6 + 10) * 128 - 16
    return (g + 2) * 128 - 40, 152, (2 * g + 6) * 128 - 16


@pytest.mark.parametrize("mode, fast", [("block", False), ("tensor", False), ("row", False),
                                        ("tensor", True)], ids=lambda x: str(x))
@pytest.mark.parametrize("ways", ["two", "many", "under"])
def test_stream_k_split_is_exact(ways, mode, fast):
    """The persistent kernel with stream-K (128 x 192; promoted unless fast): the split tiles'
    partial sums (with their block scales) meet exactly, launch after launch (each lowers the
    flags it raised), on two streams."""
    m, n, k = split_shape(ways)
    tiles = math.ceil(m / 128) * math.ceil(n / 192)
    assert stream_k_split(tiles, sm_count(), math.ceil(k / 128))[1] > 0
    a, b, sa, sb = problem(m, n, k, mode=mode)
    ref = reference(a, b, sa, sb)
    for _ in range(2):
        assert_exact(run(a, b, sa, sb, "f32", config=SK192, fast_accum=fast), ref, "f32")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = run(a, b, sa, sb, "bf16", config=SK192, fast_accum=fast)
    assert_exact(got, ref, "bf16")


def test_stream_k_captured_on_a_new_stream_runs_unsplit():
    """A graph captured on a stream that has no stream-K workspace yet (torch.cuda.graph's own
    stream) holds the launch with every tile whole, and replays exact."""
    m, n, k = split_shape("two")
    a, b, sa, sb = problem(m, n, k, mode="block")
    c = poisoned(m, n, "f32")
    matmul(a, b, c, scale_a=sa, scale_b=sb, config=SK192)     # planned before the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        matmul(a, b, c, scale_a=sa, scale_b=sb, config=SK192)
    for _ in range(2):
        a2, b2, sa2, sb2 = problem(m, n, k, mode="block")
        for dst, src in ((a, a2), (b, b2), (sa, sa2), (sb, sb2)):
            dst.copy_(src)
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert_exact(c, reference(a, b, sa, sb), "f32")


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m or "unscaled")
def test_fast_accum_exact(mode):
    if mode == "block":
        a, b, sa, sb = problem(300, 400, 512, mode=mode)
        with pytest.raises(ValueError, match="fast_accum=True: block scales"):
            matmul(a, b, scale_a=sa, scale_b=sb, fast_accum=True)
        return
    for shape in [(1000, 1000, 1008), (3000, 4000, 528), (64, 1032, 2064)]:
        a, b, sa, sb = problem(*shape, mode=mode)
        assert_exact(run(a, b, sa, sb, "bf16", fast_accum=True), reference(a, b, sa, sb),
                     "bf16")


def test_k_zero_scales_out():
    a = torch.empty((64, 0), device="cuda").to(FP8["e4m3"])
    w = torch.empty((32, 0), device="cuda").to(FP8["e4m3"])
    c0 = _ints((64, 32))
    c = c0.clone()
    matmul(a, w.t(), c, scale_a=torch.ones((), device="cuda"),
           scale_b=torch.ones((), device="cuda"), beta=3.0)
    torch.cuda.synchronize()
    assert torch.equal(c, 3 * c0)


@pytest.mark.parametrize("call, exc, match", [
    (lambda a, w: matmul(a, w), ValueError, r"transpose of a row-major \(N, K\)"),
    (lambda a, w: matmul(a.t().contiguous().t(), w.t()), ValueError, "a must be row-major"),
    (lambda a, w: matmul(a, w.t(), scale_a=torch.ones(3, device="cuda")), ValueError,
     "scale_a has shape"),
    (lambda a, w: matmul(a, w.t(), scale_a=torch.ones((64, 1), device="cuda"),
                         scale_b=torch.ones((1, 1), device="cuda", dtype=torch.float64)),
     TypeError, "scale_b must be float32"),
    (lambda a, w: matmul(a, w.t(), torch.empty((64, 64), device="cuda").to(FP8["e4m3"])),
     TypeError, "fp8 output is not supported"),
    (lambda a, w: matmul(a, w.t().to(torch.float16)), TypeError, "b must be float8"),
    (lambda a, w: matmul(a, w.t(), scale_a=torch.ones((64, 1), device="cuda"),
                         scale_b=torch.ones((1, 1), device="cuda")[:, :0]), ValueError,
     "scale_b has shape"),
    (lambda a, w: matmul(a, w.t(), beta=1.0), ValueError, "beta must be 0"),
    (lambda a, w: matmul(a, w.t(), scale_a=torch.ones((64, 1), device="cuda"),
                         scale_b=torch.ones((1, 1), device="cuda").expand(1, 1),
                         config=WgmmaConfig(128, persistent=False)), ValueError, "persistent"),
    (lambda a, w: matmul(a, w.t(), config=WIDE), ValueError, "promoted accumulation need"),
])
def test_bad_input(call, exc, match):
    a = _ints((64, 128)).to(FP8["e4m3"])
    w = _ints((64, 128)).to(FP8["e4m3"])
    with pytest.raises(exc, match=match):
        call(a, w)


def test_docs_guide_kernel_runs_exact():
    # docs/fp8.md's kernel for @cuda.jit authors, run as the guide runs it (its own assert).
    import pathlib
    import re

    guide = pathlib.Path(__file__).resolve().parents[2] / "docs" / "fp8.md"
    kernel, _, run_it = re.findall(r"```python\n(.*?)```", as_front_end(guide.read_text()),
                                   re.S)
    scope = {}
    exec(compile(kernel, str(guide), "exec"), scope)
    exec(compile(run_it, str(guide), "exec"), scope)
