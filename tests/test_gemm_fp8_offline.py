"""fp8 ``matmul()`` without a GPU: the kernels' machine code (QGMMA, no local memory, no calls,
the promotion in fp32), the configs fp8 chooses, and every bad argument refused with its own
message before anything needs the driver."""

import os
import pathlib
import re

import pytest

from numba_tma import NoGPUError, matmul, matmul_fp8, operands
from numba_tma.kernels.gemm import KernelSpec, WgmmaConfig
from numba_tma.kernels.gemm.choose import (FP8_BLOCK, FP8_PAIRS, FP8_SPLIT, FP8_NARROW,
                                           FP8_UNPAIRED, OVERLAPPED, TALL, WIDE, choose_config,
                                           choose_fp8_config)
from numba_tma.kernels.gemm.scheduler import waves
from sass_checks import on_mlir, producer_lane_loops, r2ur_in_wgmma_groups, skip_on_mlir

BASE, MB = 1 << 40, 1 << 20
offline = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                             reason="offline compilation needs the real CUDA target")


def _compile(cfg, spec):
    from numba_tma._frontend import types
    from numba_tma.kernels.gemm.plan import ARGTYPES, SCALE_ARGTYPES
    from numba_tma.offline import compile_kernel

    # (the parameters the launch packs: a stream-K config's workspace after the scales)
    argtypes = ARGTYPES + (SCALE_ARGTYPES if spec.scale else ()) + cfg.extra_argtypes
    return compile_kernel(cfg.kernel(spec), types.void(*argtypes))


KERNELS = [
    # (config, spec, wgmmas in the SASS' main loops)
    (OVERLAPPED[WIDE], KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "tensor"), 256),
    (OVERLAPPED[WIDE], KernelSpec(True, True, "e4m3_e4m3", "f16", False, "row"), 256),
    (TALL, KernelSpec(True, True, "e5m2_e4m3", "f32", True, "row"), 128),
    (FP8_BLOCK[128], KernelSpec(True, True, "e4m3_e5m2", "bf16", False, "block"), 128),
    (FP8_BLOCK[192], KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "block"), 192),
    (FP8_BLOCK[192], KernelSpec(True, True, "e5m2_e4m3", "f16", False, "tensor", True), 192),
    (FP8_SPLIT, KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "block"), 192),
    (FP8_NARROW[64], KernelSpec(True, True, "e5m2_e5m2", "f32", True, "row", True), 64),
    (FP8_NARROW[128], KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "", True), 128),
    (FP8_PAIRS["block"], KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "block"), 128),
    (FP8_PAIRS["promoted"], KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "tensor", True),
     128),
]


@offline
@pytest.mark.parametrize("cfg, spec, n", KERNELS, ids=lambda x: getattr(x, "scale", None)
                         or (repr(x) if not isinstance(x, int) else str(x)))
def test_fp8_kernels_sass(cfg, spec, n):
    if cfg.overlap_epilogue and spec.scale == "row":
        skip_on_mlir("the overlapped epilogue with row scales spills 16 bytes")
    if cfg.stream_k:
        skip_on_mlir("the stream-K kernels spill")
    kb = _compile(cfg, spec)
    a, b = spec.in_kind.upper().split("_")
    assert kb.count(f"QGMMA.64x{n}x32.F32.{a}.{b}") >= 4 and not kb.has("HGMMA")
    assert kb.stack_bytes == 0 and kb.local_bytes == 0
    assert kb.spill_stores == 0 and kb.spill_loads == 0
    assert not kb.has("CALL") and not kb.has("LDL") and not kb.has("STL")
    assert not kb.has("DFMA") and not kb.has("F2F.F64.F32")     # scales stay fp32
    # ptxas neither serializes the wgmmas nor injects waits (it says so in its info log)
    assert "C7514" not in kb.info_log and "C7517" not in kb.info_log
    # ... and each group's QGMMAs issue back to back from uniform registers (not yet with
    # f32 output and beta, as test_wgmma_offline's 16-bit kernels)
    if not (spec.out_kind == "f32" and spec.has_beta):
        assert r2ur_in_wgmma_groups(kb.sass) == 0
    if spec.scale == "block":
        # one fp32 FMA per accumulator and slice: 64 x 128 per consumer warpgroup = 64 each
        assert kb.count("FFMA") >= cfg.bn // 2
        # the producer bulk-copies the scales into the slots (and stream-K's fix-up the
        # partials into the ring); nothing loads them through the threads
        assert kb.has("UBLKCP.S.G") and not kb.has("LDGSTS") and not kb.has("LDG.E")
    elif spec.promote:
        assert kb.count("FADD") >= cfg.bn // 2          # ... or an add, without scales
    assert kb.has("UTMALDG.2D") and kb.has("UTMASTG.2D")
    # the producer's thread is elected (warp.elect_one): each load and bulk copy issues as it
    # is, not wrapped in a loop over the active lanes (ELECT ... BRA.U.ANY); with block scales
    # its instructions per slice are what the ring waits on
    assert not producer_lane_loops(kb.sass)
    if cfg.stream_k:
        # the fix-up bulk-copies the partials into the ring (the threads load none from L2)
        # and reads them from constant offsets of one view (each read beside the add of an
        # earlier one); a partial's stores issue back to back, not each behind its own index
        # arithmetic
        assert "UBLKCP.S.G" in kb.sass
        assert "LDG.E " not in kb.sass
        assert _longest_run(kb.sass, "LDS ", gap=6) >= cfg.bn // 2
        assert _longest_run(kb.sass, "STG.E ") >= cfg.bn // 2


def _longest_run(sass, op, gap=3):
    """The most ``op`` instructions in a row of the SASS, each within ``gap`` instructions of
    the one before."""
    at = [i for i, line in enumerate(sass.splitlines()) if op in line]
    best = run = 1 if at else 0
    for prev, i in zip(at, at[1:]):
        run = run + 1 if i - prev <= gap else 1
        best = max(best, run)
    return best


def test_fp8_configs_are_persistent():
    for m, n, k in [(64, 7168, 16384), (128, 7168, 16384), (4096, 4096, 4096), (8, 16, 32),
                    (4096, 7168, 16384), (1000, 1000, 1008), (8192, 8192, 8192)]:
        for scale in ("", "tensor", "row", "block"):
            for promote in (False, True):
                cfg = choose_fp8_config(m, n, k, 132, scale, promote)
                assert cfg.persistent
                spec = KernelSpec(True, True, "e4m3_e4m3", "bf16", False, scale, promote)
                cfg.check_spec(spec)
                if spec.promoted:
                    assert cfg.bn in (64, 128, 192) and cfg.bm == 128
                    assert not cfg.overlap_epilogue


def test_promoted_tiles_widen_where_they_take_no_more_time():
    # 128 x 192 tiles where their rounds of the SMs are at most two thirds of 128 x 128's
    # (8192^2: 21 against 32), else 128 x 128 (4096 x 7168: 10 against 14)
    for scale, promote in [("block", False), ("tensor", True), ("row", True)]:
        assert choose_fp8_config(8192, 8192, 8192, 132, scale, promote) is FP8_BLOCK[192]
        assert choose_fp8_config(8192, 8192, 4096, 132, scale, promote) is FP8_BLOCK[192]
        if scale != "block":
            assert choose_fp8_config(4096, 7168, 16384, 132, scale, promote).bn == 128
        assert choose_fp8_config(4096, 4096, 4096, 132, scale, promote).bn == 128
    assert choose_fp8_config(8192, 8192, 8192, 132, "tensor", False).bn == 256   # fast: as is


def test_one_level_path_takes_single_ctas_where_k_is_whole_lines():
    # choose_config's 128 x 256 CTA pairs become single CTAs for fp8 where K is a multiple of
    # 128 (measured level or faster but in one run of four at 8192^3: docs/fp8.md); at other K
    # the pairs stay (each box row then straddles two L2 lines, and a pair loads B's once),
    # and the single CTAs never take more rounds of the SMs.
    for m, n, k in [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 4096),
                    (3000, 5008, 4096)]:
        paired = choose_config(m, n, k, 132)
        assert paired in FP8_UNPAIRED
        for scale in ("", "tensor", "row"):
            cfg = choose_fp8_config(m, n, k, 132, scale)
            assert cfg is FP8_UNPAIRED[paired] and cfg.cluster_m == 1
            assert waves(m, n, cfg, 132) <= waves(m, n, paired, 132)
    assert choose_fp8_config(3000, 5008, 4112, 132, "tensor") is choose_config(3000, 5008, 4112,
                                                                               132)


def test_block_scales_split_the_last_round_where_it_pays():
    # 128 x 192 tiles with stream-K where 9.21 rounds of them (4096 x 7168) cost less than
    # 128 x 128's 14 whole rounds; not where 5.33 (4096 x 4096) cost about as much as 8, nor
    # where K is short (4096^3: the fix-up's share of a round grows), where the 192 tiles fill
    # their rounds (8192^2), for promoted per-tensor scales (whose 128 x 128 kernel is as
    # fast), nor on fewer SMs where 128 x 128 tiles fill whole rounds.
    split = FP8_BLOCK[128] if on_mlir() else FP8_SPLIT    # (its build spills there)
    assert choose_fp8_config(4096, 7168, 16384, 132, "block") is split
    assert choose_fp8_config(4096, 4096, 7168, 132, "block") is FP8_BLOCK[128]
    assert choose_fp8_config(4096, 4096, 4096, 132, "block") is FP8_BLOCK[128]
    assert choose_fp8_config(8192, 8192, 8192, 132, "block") is FP8_BLOCK[192]
    assert choose_fp8_config(4096, 7168, 16384, 132, "tensor", True) is FP8_NARROW[128]
    assert choose_fp8_config(4096, 4096, 7168, 128, "block") is FP8_BLOCK[128]   # 8 rounds
    assert choose_fp8_config(1024, 1152, 8192, 132, "block") is FP8_BLOCK[128]   # < 1 round


def test_decode_products_split_long_k_over_every_sm():
    # M up to 64: 128 x 192 tiles split along K where each block gets >= 32 slices (64 x 7168
    # x 16384: 38 tiles x 128 slices over 132 blocks, 36.8 each), in every mode; not 64 x 4096
    # x 7168 (9.3 each), nor M = 128; never on numba-cuda-mlir (its build spills)
    for scale, promote in [("block", True), ("tensor", True), ("tensor", False), ("", False),
                           ("row", True)]:
        got = choose_fp8_config(64, 7168, 16384, 132, scale, promote)
        assert got.bn == 64 if on_mlir() else got is FP8_SPLIT
        assert choose_fp8_config(1, 7168, 16384, 132, scale, promote) is got
        assert choose_fp8_config(64, 4096, 7168, 132, scale, promote).bn == 64
        assert choose_fp8_config(128, 7168, 16384, 132, scale, promote).bn == 64


def test_promoted_tiles_pair_up_where_k_rows_are_ragged():
    # K not a multiple of 128: each 128-byte box row straddles two lines; 2-CTA clusters
    # multicast B (docs/fp8.md). Whole rows, an odd count of row tiles, or 128 x 64 tiles keep
    # single CTAs.
    from numba_tma.kernels.gemm.choose import FP8_PAIRS

    for scale, promote, key in [("block", True, "block"), ("tensor", True, "promoted"),
                                ("row", True, "promoted"), ("", True, "promoted")]:
        assert choose_fp8_config(3000, 5008, 4112, 132, scale, promote) is FP8_PAIRS[key]
        assert choose_fp8_config(3000, 5008, 4096, 132, scale, promote).cluster_m == 1
        assert choose_fp8_config(128, 1024, 4112, 132, scale, promote).bn == 64
        assert choose_fp8_config(1100, 7168, 4112, 132, scale, promote).cluster_m == 1  # 9 rows
    assert choose_fp8_config(3000, 5008, 4112, 132, "tensor", False).bn == 256   # fast: as is


def test_block_scales_read_in_place_where_their_layout_allows():
    # (M, kb) M-contiguous, K blocks 16-byte multiples apart, 16-byte aligned, M % 4 == 0: the
    # kernel's (kb, M) view of the same memory; the staged layouts need a GPU (tests/gpu)
    from numba_tma.matmul_fp8 import _bulk_rows, _scale_view

    m, kb, ptr = 300, 5, BASE + 8 * MB
    view, stage = _bulk_rows(_scale_view(ptr, (m, kb), (4, 4 * 304)), (kb, m), True)
    assert stage is None
    cai = view.__cuda_array_interface__
    assert cai["shape"] == (kb, m) and cai["strides"] == (4 * 304, 4) and cai["data"][0] == ptr
    view, stage = _bulk_rows(_scale_view(ptr, (m, 1), (4, 0)), (1, m), True)
    assert stage is None and view.__cuda_array_interface__["shape"] == (1, m)
    # B's (nb, kb) row-major, rows 16-byte aligned, kb % 4 == 0: the same memory, as it is
    b = _scale_view(ptr, (3, 8), (4 * 8, 4))
    view, stage = _bulk_rows(b, (3, 8), False)
    assert stage is None and view.__cuda_array_interface__ == b.__cuda_array_interface__


def test_config_refuses_what_it_cannot_run():
    spec = KernelSpec(True, True, "e4m3_e4m3", "bf16", False, "block")
    for cfg, what in [(WgmmaConfig(128, persistent=False), "persistent"),
                      (WIDE, "promoted accumulation need"),
                      (TALL, "promoted accumulation need"),
                      (WgmmaConfig(128, stages=4), "mma_pipe=0"),
                      (FP8_NARROW[128], "with block scales .* fewer stages")]:
        with pytest.raises(ValueError, match=what):
            cfg.kernel(spec)
    with pytest.raises(ValueError, match="K-major"):
        WIDE.kernel(KernelSpec(True, False, "e4m3_e4m3", "bf16", False, "tensor"))


class Cai:
    """An array exposing only a __cuda_array_interface__ (never dereferenced here); strides in
    bytes."""

    def __init__(self, shape, typestr="|u1", ptr=BASE, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "data": (ptr, False), "strides": strides, "version": 3}


def weight_t(n, k, ptr=BASE + MB):
    """``w.t()`` of a row-major (N, K) byte array: (K, N) with strides (1, K)."""
    return Cai((k, n), ptr=ptr, strides=(1, k))


def f32(shape, ptr=BASE + 8 * MB, strides=None):
    return Cai(shape, "<f4", ptr, strides)


A = Cai((64, 256))
BAD = [
    ("b_row_major", lambda: matmul(A, Cai((256, 64), ptr=BASE + MB), in_dtype="e4m3"),
     ValueError, "b must be the transpose of a row-major (N, K) weight (w.t()"),
    ("a_column_major", lambda: matmul(Cai((64, 256), strides=(1, 64)), weight_t(64, 256),
                                      in_dtype="e4m3"), ValueError, "a must be row-major"),
    ("k_not_16", lambda: matmul(Cai((64, 40)), weight_t(64, 40), in_dtype="e4m3"), ValueError,
     "must be a multiple of 16 bytes for TMA"),
    ("in_dtype", lambda: matmul(A, weight_t(64, 256), in_dtype="e3m4"), ValueError,
     "in_dtype must be 'e4m3' or 'e5m2'"),
    ("in_dtype_on_f16", lambda: matmul(Cai((64, 256), "<f2"), weight_t(64, 256),
                                       in_dtype="e4m3"), TypeError, "a must hold fp8 bytes"),
    ("scale_a_shape", lambda: matmul(A, weight_t(64, 256), scale_a=f32((63,)),
                                     in_dtype="e4m3"), ValueError, "scale_a has shape (63,)"),
    ("scale_b_block_shape", lambda: matmul(A, weight_t(200, 256), scale_a=f32((64, 2)),
                                           scale_b=f32((1, 2)), in_dtype="e4m3"),
     ValueError, "scale_b has shape (1, 2)"),
    ("row_with_block", lambda: matmul(A, weight_t(64, 256), scale_a=f32((64, 2)),
                                      scale_b=f32((64,)), in_dtype="e4m3"),
     ValueError, "block scales go with block scales"),
    ("scale_dtype", lambda: matmul(A, weight_t(64, 256), scale_a=Cai((64,), "<f8", BASE + 8 * MB),
                                   in_dtype="e4m3"), TypeError, "scale_a must be float32"),
    ("fp8_out", lambda: matmul(A, weight_t(64, 256), Cai((64, 64), ptr=BASE + 16 * MB),
                               in_dtype="e4m3"), TypeError, "fp8 output is not supported"),
    ("beta_without_out", lambda: matmul(A, weight_t(64, 256), beta=1.0, in_dtype="e4m3"),
     ValueError, "beta must be 0 when out is None"),
    ("out_dtype", lambda: matmul(A, weight_t(64, 256), out_dtype="int8", in_dtype="e4m3"),
     TypeError, "out_dtype must be bfloat16, float16 or float32"),
    ("fast_accum_block", lambda: matmul(A, weight_t(64, 256), scale_a=f32((64, 2)),
                                        scale_b=f32((1, 2)), in_dtype="e4m3", fast_accum=True),
     ValueError, "fast_accum=True: block scales"),
    ("mma_sync_config", lambda: matmul(A, weight_t(64, 256), in_dtype="e4m3",
                                       config=_mma_sync()), TypeError, "fp8 runs the wgmma GEMM"),
]


def _mma_sync():
    from numba_tma.kernels.gemm import GemmConfig

    return GemmConfig()


@pytest.fixture(autouse=True)
def one_gpu(monkeypatch):
    monkeypatch.setattr(operands, "_device_count", lambda: 1)


@pytest.mark.parametrize("call, exc, message", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_bad_arguments_are_reported_before_the_driver(call, exc, message, monkeypatch):
    monkeypatch.setattr(matmul_fp8, "require_hopper",
                        lambda what: pytest.fail("reached the GPU check"))
    monkeypatch.setattr(matmul_fp8, "allocate_like",
                        lambda *a, **k: pytest.fail("allocated before the checks"))
    with pytest.raises(exc, match=re.escape(message)):
        call()


def test_good_arguments_meet_the_gpu_check(monkeypatch):
    def no_gpu(what):
        raise NoGPUError(f"{what} needs a GPU")

    monkeypatch.setattr(matmul_fp8, "require_hopper", no_gpu)
    for sa, sb in [(None, None), (2.0, f32(())), (f32((64, 1)), f32((1, 64), BASE + 9 * MB)),
                   (f32((64, 2)), f32((1, 2), BASE + 9 * MB)),
                   (f32((64, 2), strides=(4, 256)), f32((1, 2), BASE + 9 * MB))]:
        with pytest.raises(NoGPUError):
            matmul(A, weight_t(64, 256), scale_a=sa, scale_b=sb, in_dtype=("e4m3", "e5m2"))


GUIDE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "fp8.md"


def guide_blocks():
    """docs/fp8.md's ```python blocks: the kernel, its offline compile, its GPU run."""
    return re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.S)


@offline
def test_fp8_guide_kernel_compiles_as_the_guide_says():
    from test_readme_examples import as_front_end     # (its `from numba import cuda`)

    kernel, compile_it, _ = guide_blocks()
    scope = {}
    exec(compile(as_front_end(kernel), str(GUIDE), "exec"), scope)
    exec(compile(compile_it, str(GUIDE), "exec"), scope)      # its own asserts
    assert scope["kb"].spill_stores == 0


def test_repeated_call_without_out_checks_once_and_allocates_alike(monkeypatch):
    # The host path alone (no GPU): a repeat of the same inputs without out skips the checks,
    # allocates what the first call did, and reuses the first call's launch for that out.
    calls = {"check": 0, "bind": 0, "runs": []}
    real_check = matmul_fp8.check_fp8

    def counting_check(*args):
        calls["check"] += 1
        return real_check(*args)

    def bind(a, b, out, c, config, beta, ctx, fast_accum):
        calls["bind"] += 1
        return lambda alpha, beta, stream: calls["runs"].append((alpha, c.mode))

    allocated = []

    def allocate(like, shape, dtype_name, stream=0, ctx_id=None):
        allocated.append((shape, dtype_name))
        return Cai(shape, "<f4", BASE + 32 * MB)        # the same buffer each time

    monkeypatch.setattr(matmul_fp8, "check_fp8", counting_check)
    monkeypatch.setattr(matmul_fp8, "require_hopper", lambda what: None)
    monkeypatch.setattr(matmul_fp8, "context_id_or_none", lambda: 1)
    monkeypatch.setattr(matmul_fp8, "refuse_capture", lambda handle: None)
    monkeypatch.setattr(matmul_fp8, "allocate_like", allocate)
    monkeypatch.setattr(matmul_fp8, "_bind", bind)
    b, sa = weight_t(64, 256), f32((64, 1))
    for _ in range(3):
        matmul(A, b, scale_a=sa, scale_b=2.0, in_dtype="e4m3", alpha=0.5)
    assert allocated == [((64, 64), "float32")] * 3
    # the first call checks twice (inputs, then with its out); the repeats not at all
    assert calls["check"] == 2 and calls["bind"] == 1
    assert calls["runs"] == [(1.0, "row")] * 3
    with pytest.raises(ValueError, match="beta must be 0 when out is None"):
        matmul(A, b, scale_a=sa, scale_b=2.0, in_dtype="e4m3", beta=1.0)
