"""Offline (no GPU) checks of the wgmma layer: the generated CUDA-C matches its generator, the
descriptor and fragment numpy models, the SASS of the one-warpgroup probe for every family
(HGMMA/QGMMA shape and qualifiers, accumulators in registers: no stack, no LDL/STL, no CALL,
no ptxas wgmma warnings) and of the warp-specialised GEMM (USETMAXREG both ways where 128
accumulators need it, HGMMA 64xBNx16, clean consumer path), and the typing errors."""

import dataclasses
import importlib.util
import math
import os

import numpy as np
import pytest

from numba_tma._frontend import NAME, cuda, errors
from numba_tma import swizzle, wgmma
from numba_tma._bridge import PTX_DIR
from numba_tma.kernels.gemm import GemmConfig, KernelSpec, WgmmaConfig, choose, scheduler
from numba_tma.kernels.gemm.config import C_BOX_BYTES, L2_PROMOTION, MAX_DYNAMIC_SMEM, smem_bytes
from numba_tma.ladders import gemm_stream_k
from numba_tma.ladders.gemm_pingpong import PingPongConfig
from numba_tma.ladders.gemm_stream_k import StreamKConfig
from numba_tma.ladders.wgmma_probe import probe_kernel, probe_signature
from numba_tma.offline import compile_kernel
from sass_checks import (check_clean, collected, compiled_in_processes, producer_lane_loops,
                         r2ur_in_wgmma_groups, take)

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

offline = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                             reason="offline compilation needs the real CUDA target")


def test_generated_sources_match_the_generator():
    spec = importlib.util.spec_from_file_location("wgmma_gen", os.path.join(PTX_DIR,
                                                                             "wgmma_gen.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for name, text in gen.sources().items():
        with open(os.path.join(PTX_DIR, name)) as f:
            assert f.read() == text, f"ptx/{name} is stale: run python ptx/wgmma_gen.py"
    assert gen.N_F32 == wgmma.N_F32 and gen.N_OTHER == wgmma.N_OTHER


def test_descriptor_bits():
    d = wgmma.make_descriptor(0x1C400, 16, 1024, 128)
    assert d & 0x3FFF == 0x1C400 >> 4
    assert (d >> 16) & 0x3FFF == 1 and (d >> 32) & 0x3FFF == 64
    assert d >> 62 == 1 and (d >> 49) & 7 == 0
    for span, code in ((0, 0), (32, 3), (64, 2), (128, 1)):
        d = wgmma.make_descriptor(4096, 8192, 256, span, base_offset=3)
        assert d >> 62 == code
        assert wgmma.descriptor_fields(d) == {"address": 4096, "lbo": 8192, "sbo": 256,
                                              "base_offset": 3, "swizzle": span}


@pytest.mark.parametrize("args, match", [
    ((1024 + 8, 16, 1024, 0), "address"), ((1024, 24, 1024, 0), "lbo"),
    ((1024, 16, 1 << 18, 0), "sbo"), ((512, 16, 1024, 128), "1024-byte period"),
    ((1024, 16, 1024, 96), "swizzle"),
])
def test_descriptor_rejects(args, match):
    with pytest.raises(ValueError, match=match):
        wgmma.make_descriptor(*args)


def test_fragment_models_round_trip():
    for n in wgmma.N_F32:
        D = np.arange(64 * n).reshape(64, n)
        frag = wgmma.fragment_d(D)
        assert frag.shape == (128, n // 2)
        np.testing.assert_array_equal(wgmma.unfragment_d(frag), D)
    # thread 37 = warp 1, lane 5 (g = 1, t = 1): d[0] is D[16 + 1][2], d[6] D[16 + 9][8 + 2]
    D = np.arange(64 * 16).reshape(64, 16)
    frag = wgmma.fragment_d(D)
    assert frag[37, 0] == D[17, 2] and frag[37, 6] == D[25, 10]
    A = np.arange(64 * 16).reshape(64, 16)
    assert wgmma.fragment_a(A).shape == (128, 8)


def test_operand_image_is_the_tma_layout():
    # K-major under the 128B swizzle: one rows x 64 box; M/N-major: K x 64 boxes per 64 rows.
    mat = np.arange(128 * 64, dtype=np.uint16).reshape(128, 64)
    img, lbo, sbo = wgmma.operand_image(mat, True, 128)
    np.testing.assert_array_equal(img, swizzle.shared_image(mat, 128))
    assert sbo == 1024
    img, lbo, sbo = wgmma.operand_image(mat, False, 128)
    assert lbo == 64 * 128 and sbo == 1024
    np.testing.assert_array_equal(img[:lbo], swizzle.shared_image(mat.T[:, :64].copy(), 128))


PROBE_CASES = [
    ("f16", 256, False, False, 128, False, "HGMMA.64x256x16.F32 "),
    ("f16", 8, False, False, 128, False, "HGMMA.64x8x16.F32 "),
    ("bf16", 192, True, True, 64, False, "HGMMA.64x192x16.F32.BF16"),
    ("f16", 128, False, True, 0, True, "HGMMA.64x128x16.F32 "),
    ("f16acc", 256, True, False, 32, False, "HGMMA.64x256x16.F16 "),
    ("e4m3_e5m2", 256, False, False, 128, False, "QGMMA.64x256x32.F32.E4M3.E5M2"),
    ("e5m2_e4m3", 64, False, False, 128, True, "QGMMA.64x64x32.F32.E5M2.E4M3"),
]


def _gmma_lines(kb):
    return [ln.split(";")[0].split("*/")[-1].strip() for ln in kb.sass.splitlines()
            if "GMMA" in ln]


def build_probe(case):
    """The probe kernel of a PROBE_CASES entry, compiled (in a worker process)."""
    *args, _ = case
    return compile_kernel(probe_kernel(*args), probe_signature(args[0]))


@pytest.fixture(scope="module")
def probe_binaries(request):
    return compiled_in_processes(collected(request, "test_probe_sass", "case"), build_probe)


@offline
@pytest.mark.parametrize("case", PROBE_CASES, ids=lambda c: "-".join(map(str, c[:6])))
def test_probe_sass(case, probe_binaries):
    *args, mnemonic = case
    kind, n, trans_a, trans_b, span, regs = args
    kb = take(probe_binaries, case)
    check_clean(kb)
    assert wgmma.check_wgmma_link_log(kb.info_log) == []
    lines = _gmma_lines(kb)
    assert len(lines) == 2 and all(ln.startswith(mnemonic) for ln in lines), lines
    # The first step ignores the (poisoned) accumulators: scale-d = 0 reads RZ.
    assert "RZ, !UPT" in lines[0]
    assert ("tnspA" in lines[0]) == trans_a and ("tnspB" in lines[0]) == trans_b
    assert ("gdesc" in lines[0].split(",")[1]) != regs      # A from a descriptor or registers
    assert kb.has("WARPGROUP.ARRIVE") and kb.has("WARPGROUP.DEPBAR")


@offline
def test_dynamic_accumulator_index_is_caught():
    # The failure the module docstring describes: one run-time index keeps the accumulator on
    # the stack, and the offline checks see it (STL of the accumulators after the HGMMA).
    @cuda.jit(launch_bounds=(128, 1))
    def leaky(out, n):
        sa = cuda.shared.array(1024, np.uint16, alignment=1024)
        acc = cuda.local.array(128, np.float32)
        for i in range(128):
            acc[i] = 0.0
        d = wgmma.descriptor(sa, 0, 16, 1024, 128)
        wgmma.fence_operand(acc, 128)
        wgmma.fence()
        wgmma.mma_f32_f16(acc, d, d, 256)
        wgmma.commit_group()
        wgmma.fence_operand(acc, 128)
        wgmma.wait_group(0)
        wgmma.fence_operand(acc, 128)
        for i in range(n):
            out[i] = acc[i]

    kb = compile_kernel(leaky, "void(float32[::1], int64)")
    assert kb.stack_bytes >= 512 and kb.has("STL")


GEMM_CASES = [(True, True, "f16", "f16", False, 256, {}),
              (True, False, "bf16", "f32", True, 128, {}),
              (False, False, "f16", "bf16", True, 64, {}),
              (False, True, "f16", "f16", False, 192, {"stages": 3}),
              (True, True, "f16", "f16", False, 256, {"cluster_m": 2}),
              (False, True, "bf16", "bf16", True, 128, {"cluster_m": 2, "stages": 5}),
              (True, True, "f16", "f16", True, 256, {"persistent": False}),
              (False, False, "bf16", "f32", False, 128, {"persistent": False}),
              (True, True, "f16", "f16", False, 256, {"stream_k": True}),
              (False, True, "bf16", "f32", True, 128, {"stream_k": True}),
              # 8 f32 boxes with beta's loads: one loop over them kept its accumulator index
              # dynamic and put the 128 accumulators in local memory (512 stack bytes)
              (True, False, "bf16", "f32", True, 256, {}),
              (True, True, "f16", "f16", True, 256, {"c_buffers": 4}),
              # matmul()'s 128 x 256 choice: 4 slots, each slot's group retired (mma_pipe=0)
              (True, False, "f16", "f16", False, 256, {"stages": 4, "mma_pipe": 0}),
              (False, True, "bf16", "f32", True, 256, {"stages": 4, "mma_pipe": 0}),
              (True, False, "f16", "f16", False, 256, {"stages": 4, "mma_pipe": 0,
                                                       "cluster_m": 2}),
              (True, True, "f16", "bf16", False, 256, {"stages": 4, "mma_pipe": 0,
                                                       "persistent": False}),
              # 256 x 128 tiles: each consumer two m64 halves, 2 x 64 accumulators
              (True, False, "f16", "f16", False, 128, {"stages": 4, "mma_pipe": 0, "bm": 256}),
              (False, True, "bf16", "f32", True, 128, {"stages": 4, "mma_pipe": 0, "bm": 256}),
              (True, False, "f16", "f16", False, 128, {"stages": 4, "mma_pipe": 0, "bm": 256,
                                                       "cluster_m": 2}),
              (False, False, "f16", "f32", True, 128, {"stages": 4, "bm": 256}),
              # ping-pong: each consumer its own 128-row tile, two m64 halves
              (True, True, "f16", "f16", False, 128, {"stages": 6, "pingpong": True}),
              (False, False, "bf16", "f32", True, 64, {"pingpong": True}),
              # the overlapped epilogue (matmul()'s 128 x 256 choice beyond one wave): 16-bit C
              # packed into 64 more registers while the next tile's accumulators fill
              (True, False, "f16", "f16", False, 256, {"stages": 4, "mma_pipe": 0,
                                                       "cluster_m": 2, "overlap_epilogue": True}),
              (False, True, "bf16", "bf16", False, 256, {"stages": 4, "mma_pipe": 0,
                                                         "overlap_epilogue": True}),
              (True, True, "f16", "f16", False, 192, {"stages": 4, "mma_pipe": 0,
                                                      "overlap_epilogue": True}),
              (False, False, "f16", "f16", False, 64, {"stages": 6, "mma_pipe": 0,
                                                       "overlap_epilogue": True}),
              # f32 output and beta keep the plain epilogue
              (True, False, "f16", "f32", False, 256, {"stages": 4, "mma_pipe": 0,
                                                       "overlap_epilogue": True}),
              (True, False, "f16", "f16", True, 256, {"stages": 4, "mma_pipe": 0,
                                                      "cluster_m": 2, "overlap_epilogue": True}),
              # matmul()'s narrow tiles: 128 x 64 (1024^3), and on ragged rows CTA pairs along
              # N multicasting A
              (True, False, "f16", "f16", False, 64, {"stages": 8, "persistent": False,
                                                      "consumers": 1}),
              (True, False, "f16", "f16", False, 64, {"stages": 4, "persistent": False,
                                                      "cluster_n": 2}),
              # one consumer warpgroup taking both m64 halves (2 x BN / 2 accumulators)
              (False, True, "bf16", "f32", True, 64, {"stages": 8, "persistent": False,
                                                      "consumers": 1}),
              (False, False, "f16", "bf16", True, 64, {"stages": 8, "persistent": False,
                                                       "consumers": 1}),
              (True, True, "f16", "f16", False, 128, {"stages": 4, "persistent": False,
                                                      "consumers": 1}),
              (True, False, "bf16", "bf16", False, 64, {"stages": 4, "persistent": False,
                                                        "cluster_n": 2, "consumers": 1}),
              (True, False, "f16", "f16", False, 64, {"stages": 8, "persistent": False}),
              (False, True, "bf16", "f32", True, 128, {"stages": 4, "persistent": False,
                                                       "cluster_n": 2})]


def _stores_under_wgmma(sass):
    """Whether a C store (STSM or UTMASTG) sits between a wgmma group's last HGMMA (the one
    that sets gsb0) and the WARPGROUP.DEPBAR that waits for it, in program order."""
    in_flight = False
    for line in sass.splitlines():
        if "HGMMA" in line and "gsb0" in line:
            in_flight = True
        elif "WARPGROUP.DEPBAR" in line:
            in_flight = False
        elif in_flight and ("STSM" in line or "UTMASTG" in line):
            return True
    return False


def gemm_config(bn, kw):
    """The config of a GEMM_CASES entry: ``stream_k`` and ``pingpong`` name the ladders'."""
    kw = dict(kw)
    cls = WgmmaConfig
    if kw.pop("stream_k", False):
        cls = StreamKConfig
    if kw.pop("pingpong", False):
        cls = PingPongConfig
    return cls(bn, **kw)


def build_gemm(case):
    """The GEMM kernel of a GEMM_CASES entry, compiled (in a worker process)."""
    *args, bn, kw = case
    cfg = gemm_config(bn, kw)
    return compile_kernel(cfg.kernel(KernelSpec(*args)), cfg.signature)


@pytest.fixture(scope="module")
def gemm_binaries(request):
    return compiled_in_processes(collected(request, "test_gemm_sass", "case"), build_gemm)


@offline
@pytest.mark.parametrize("case", GEMM_CASES, ids=lambda c: "-".join(map(str, c)))
def test_gemm_sass(case, gemm_binaries):
    *args, bn, kw = case
    cfg = gemm_config(bn, kw)
    stream_k = isinstance(cfg, StreamKConfig)
    if stream_k and NAME == "numba-cuda-mlir":
        pytest.skip("the stream-K ladder spills its workspace addresses on numba-cuda-mlir "
                    "(docs/front_ends.md, 'Not yet on numba-cuda-mlir')")
    kb = take(gemm_binaries, case)
    check_clean(kb)
    assert wgmma.check_wgmma_link_log(kb.info_log) == []
    # Registers move from producer to consumers where 128 accumulators need them (every
    # persistent kernel, one block per tile at bn = 256); the one-block-per-tile kernels up to
    # bn = 128 keep every warp at the kernel's registers and skip the exchange.
    if cfg.persistent or bn > 128:
        assert kb.registers == 168                       # 65536 / 384, rounded down to 8
        assert kb.has("USETMAXREG.DEALLOC") and kb.has("USETMAXREG.TRY_ALLOC")
    else:
        assert kb.registers <= 168 and not kb.has("USETMAXREG")
    lines = _gmma_lines(kb)
    assert lines and all(ln.startswith(f"HGMMA.64x{bn}x16.F32") for ln in lines)
    # m64 halves per consumer: a ping-pong or a block's only consumer takes a tile's two
    halves = 2 if isinstance(cfg, PingPongConfig) or cfg.consumers == 1 else cfg.bm // 128
    assert len(lines) % (4 * halves) == 0                # 4 k16 steps per slot and m64 half
    assert kb.has("UTMALDG.2D") and kb.has("UTMASTG.2D") and kb.has("STSM" if args[3] != "f32"
                                                                     else "STS")
    assert kb.has("UTMALDG.2D.MULTICAST") == (cfg.cluster_m * cfg.cluster_n == 2)
    # A cluster's CTAs meet once: a relaxed arrive and a wait at the start (the producer drains
    # its empty barriers at the end), never a releasing arrive's GPU-scope MEMBAR, which waited
    # on every thread's stores (docs/gemm.md).
    assert kb.sass.count("UCGABAR_ARV") == kb.sass.count("UCGABAR_WAIT") == \
        (cfg.cluster_m * cfg.cluster_n - 1)
    assert not kb.has("MEMBAR.ALL.GPU")
    # mma_pipe: after a slot's group the consumers wait for the previous group (1) or this
    # one (0), never leaving one in flight with mma_pipe=0.
    depbar = {ln.split("*/")[1].split(";")[0].strip() for ln in kb.sass.splitlines()
              if "WARPGROUP.DEPBAR" in ln}
    assert ("WARPGROUP.DEPBAR.LE gsb0, 0x1" in depbar) == (cfg.mma_pipe == 1), depbar
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x0" in depbar
    # Stream-K's fixup: the partial's flag raised (EXCH) and lowered by its finalizer (CAS),
    # behind gpu-scope fences; nothing of it in the other kernels.
    for op in ("ATOMG.E.EXCH.STRONG.GPU", "ATOMG.E.CAS.STRONG.GPU", "MEMBAR.SC.GPU"):
        assert kb.has(op) == stream_k, op
    # The overlapped epilogue stores C while the next tile's wgmma group runs; only there.
    overlapped = cfg.overlap_epilogue and args[3] != "f32" and not args[4]
    assert _stores_under_wgmma(kb.sass) == overlapped
    # The launch may start before the previous kernel ends (matmul() launches it dependent):
    # griddepcontrol.wait before the first TMA load or store, the next launch let in once,
    # and the three tensor maps prefetched. A single CTA per tile waits once more: its
    # barrier thread issues the first slot's loads before the block barrier.
    sass = kb.sass
    early = not cfg.persistent and cfg.cluster_n == 1
    assert kb.count("ACQBULK") == 1 + early and kb.count("PREEXIT") == 1
    assert sass.find("ACQBULK") < min(sass.find("UTMALDG"), sass.find("UTMASTG"))
    assert kb.count("UTMACCTL.PF") == 3
    # Each group's HGMMAs issue back to back from uniform registers (wgmma.warpgroup_index and
    # the consumers' uniform ring slot; docs/gemm.md). Not yet where f32 output with beta or
    # stream-K's fixup crowd the uniform registers: there ptxas still builds B's descriptors
    # per thread.
    if not stream_k and not (args[3] == "f32" and args[4]):
        assert r2ur_in_wgmma_groups(sass) == 0
    # The producer's thread is elected (warp.elect_one): its loads issue as they are, not
    # each in a loop over the active lanes (ELECT ... BRA.U.ANY).
    assert not producer_lane_loops(sass)


def test_config_errors():
    with pytest.raises(ValueError, match="bn = 96"):
        WgmmaConfig(96)
    with pytest.raises(ValueError, match="power of two"):
        WgmmaConfig(256, stages=3, persistent=False)
    with pytest.raises(ValueError, match="cluster_m = 2 must be 1, or 2 with persistent"):
        WgmmaConfig(256, persistent=False, cluster_m=2)
    with pytest.raises(ValueError, match="bn = 128 or 256"):
        WgmmaConfig(192, cluster_m=2)
    for bad in (dict(), dict(persistent=False, cluster_n=3)):
        with pytest.raises(ValueError, match="cluster_n = [23] must be 1, or 2 with "
                                             "persistent=False"):
            WgmmaConfig(64, **{"cluster_n": 2, **bad})
    cn = WgmmaConfig(64, stages=8, persistent=False, cluster_n=2)
    assert "cluster_n=2" in repr(cn)
    for bad in ({"consumers": 3}, {"consumers": 0}, {"consumers": 1, "persistent": True},
                {"consumers": 1, "bn": 256, "stages": 4}):
        with pytest.raises(ValueError, match="consumers"):
            WgmmaConfig(**{"bn": 64, "persistent": False, **bad})
    one = WgmmaConfig(64, stages=8, persistent=False, consumers=1)
    assert "consumers=1" in repr(one) and "consumers" not in repr(cn) and one != cn
    assert (one.threads, cn.threads, WgmmaConfig().threads) == (256, 384, 384)
    assert scheduler.grid_size(1000, 1032, cn) == 8 * 18    # 17 tiles along N, paired: 18
    for bad in (dict(cluster_m=2), dict(persistent=False, stages=4), dict(bm=256, bn=128),
                dict(stages=4, mma_pipe=0, overlap_epilogue=True)):
        with pytest.raises(ValueError, match="stream-K needs persistent=True, cluster_m=1"):
            StreamKConfig(**{"bn": 256, **bad})
    with pytest.raises(ValueError, match="stages = 2 is too few for bn = 256"):
        StreamKConfig(256, stages=2)        # (the fix-up's buffers: half a ring per consumer)
    for bad in (dict(cluster_m=2), dict(bm=256), dict(mma_pipe=0),
                dict(stages=4, mma_pipe=0, overlap_epilogue=True)):
        with pytest.raises(ValueError, match="ping-pong"):
            PingPongConfig(128, **bad)
    with pytest.raises(ValueError, match="ping-pong"):
        PingPongConfig(256)
    pp = PingPongConfig(128, stages=6)
    assert repr(pp).startswith("PingPongConfig(bn=128, stages=6")
    assert pp != WgmmaConfig(128, stages=6)          # (a dataclass compares its class too)
    # the two turn barriers: 16 bytes more than the same ring without ping-pong
    assert (smem_bytes(pp, 2) - smem_bytes(WgmmaConfig(128, stages=6), 2)) == 16
    assert smem_bytes(pp, 4) <= MAX_DYNAMIC_SMEM
    sk = StreamKConfig(256)
    assert sk != WgmmaConfig(256) and repr(sk).startswith("StreamKConfig(bn=256")
    assert sk.signature == gemm_stream_k.SIGNATURE_STREAM_K != WgmmaConfig().signature
    assert gemm_stream_k.workspace_floats(256, 132) == 132 * 256 * 128
    for bad in (dict(c_buffers=3), dict(c_buffers=4, persistent=False, stages=4)):
        with pytest.raises(ValueError, match="c_buffers = "):
            WgmmaConfig(256, **bad)
    with pytest.raises(ValueError, match="shared memory"):          # 4 x 48 + 64 KiB
        WgmmaConfig(256, stages=4, c_buffers=4)
    with pytest.raises(ValueError, match="mma_pipe = 2"):
        WgmmaConfig(256, mma_pipe=2)
    p0 = WgmmaConfig(256, stages=4, mma_pipe=0)
    assert "mma_pipe=0" in repr(p0) and p0 != WgmmaConfig(256, stages=4)
    cb4 = WgmmaConfig(256, c_buffers=4)
    assert "c_buffers=4" in repr(cb4)
    assert smem_bytes(cb4, 2) - smem_bytes(WgmmaConfig(), 2) == 8 * 2 * C_BOX_BYTES
    with pytest.raises(ValueError, match="resident"):
        scheduler.grid_size(1000, 1000, WgmmaConfig(256))
    cfg = WgmmaConfig(256, cluster_m=2)
    assert scheduler.grid_size(100000, 1000, cfg, 131) == 130       # whole clusters
    assert scheduler.grid_size(1100, 1000, cfg, 1000) == 10 * 4     # 9 tile rows: 5 pairs
    assert scheduler.grid_size(1000, 1000, WgmmaConfig(256, persistent=False)) == 32
    assert scheduler.grid_size(64, 7168, StreamKConfig(64), 132) == 132     # 112 tiles: split
    with pytest.raises(ValueError, match="shared memory"):
        WgmmaConfig(256, stages=8)
    assert smem_bytes(WgmmaConfig(), 2) <= MAX_DYNAMIC_SMEM
    with pytest.raises(ValueError, match="bm = 192 must be 128 or 256"):
        WgmmaConfig(128, bm=192)
    for bad in (dict(bn=256), dict(bn=128, persistent=False, stages=4)):
        with pytest.raises(ValueError, match="bm = 256 .* needs persistent=True and "
                                             "bn <= 128"):
            WgmmaConfig(bm=256, **bad)
    tall = WgmmaConfig(128, stages=4, mma_pipe=0, bm=256, cluster_m=2)
    assert "bm=256" in repr(tall) and tall != WgmmaConfig(128, stages=4, mma_pipe=0, cluster_m=2)
    # the same slot bytes as 128 x 256 tiles; 9 rows of 256 in pairs: 5 pairs x 8 columns
    assert smem_bytes(tall, 2) == smem_bytes(WgmmaConfig(256, stages=4), 2)
    assert scheduler.grid_size(2100, 1000, tall, 1000) == 5 * 2 * 8


def test_configs_are_frozen_keys():
    # A config is its own cache key: hashable, equal by value, immutable; replace() validates
    # as the constructor does.
    a, b = WgmmaConfig(256, stages=4, mma_pipe=0), WgmmaConfig(256, stages=4, mma_pipe=0)
    assert a == b and hash(a) == hash(b) and len({a, b, a.replace(mma_pipe=1)}) == 2
    assert WgmmaConfig().stages == 3 and WgmmaConfig(persistent=False).stages == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.bn = 128
    with pytest.raises(TypeError, match="bogus"):
        a.replace(bogus=1)
    with pytest.raises(ValueError, match="cluster_m = 3"):
        a.replace(cluster_m=3)
    assert eval(repr(a), {"WgmmaConfig": WgmmaConfig}) == a
    g = GemmConfig(128, 128, 2)
    assert g == GemmConfig(128, 128, 2) and {g: 1}[GemmConfig(128, 128, 2)] == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.bm = 64
    # the variant a config builds: one block per tile, the plain or the overlapped epilogue
    spec16, spec32 = KernelSpec(True, False, "f16", "f16", False), KernelSpec(
        True, False, "f16", "f32", False)
    ov = WgmmaConfig(256, stages=4, mma_pipe=0, overlap_epilogue=True)
    assert ov.kernel(spec16) is ov.kernel(spec16) is not ov.kernel(spec32)
    assert ov.kernel(spec32) is not ov.replace(overlap_epilogue=False).kernel(spec32)
    assert StreamKConfig().kernel(spec16) is not WgmmaConfig().kernel(spec16)


def test_overlap_epilogue_config():
    ov = WgmmaConfig(256, stages=4, mma_pipe=0, cluster_m=2, overlap_epilogue=True)
    assert "overlap_epilogue=True" in repr(ov) and "overlap" not in repr(ov.replace(
        overlap_epilogue=False))
    assert ov.kernel_config() != ov.replace(overlap_epilogue=False).kernel_config()
    assert smem_bytes(ov, 2) == smem_bytes(ov.replace(overlap_epilogue=False), 2)
    for bad in (dict(persistent=False), dict(mma_pipe=1), dict(bn=128, bm=256)):
        with pytest.raises(ValueError, match="overlap_epilogue=True .* needs persistent=True, "
                                             "bm=128 and mma_pipe=0"):
            ov.replace(cluster_m=1, **bad)


def test_l2_promotion_is_a_host_setting():
    # A and B's maps' L2 promotion: part of the config (matmul()'s caches keep configs apart)
    # but not of the kernel's (configs that differ only there share one kernel).
    cfg = WgmmaConfig(256, stages=4, mma_pipe=0)
    assert cfg.l2_promotion == L2_PROMOTION == 128 and "l2_promotion" not in repr(cfg)
    none = cfg.replace(l2_promotion=0)
    assert repr(none) == repr(cfg)[:-1] + ", l2_promotion=0)"
    assert none != cfg and none.kernel_config() == cfg.kernel_config() == cfg
    spec = KernelSpec(True, True, "f16", "f16", False)
    assert cfg.kernel(spec) is none.kernel(spec)
    for bad in (100, 512, -1, "128"):
        with pytest.raises(ValueError, match="l2_promotion = .* must be 0, 64, 128 or 256"):
            WgmmaConfig(256, l2_promotion=bad)


def _typing_error(body, match):
    with pytest.raises(TypingError, match=match):
        compile_kernel(body, "void(float32[::1])")


@offline
def test_typing_errors():
    def bad_n(out):
        acc = cuda.local.array(48, np.float32)
        wgmma.mma_f32_f16(acc, np.uint64(0), np.uint64(0), 96 + 8)

    def trans_a_in_registers(out):
        acc = cuda.local.array(32, np.float32)
        a = cuda.local.array(4, np.uint32)
        wgmma.mma_f32_f16(acc, a, np.uint64(0), 64, 1, True, False)

    def bad_maxnreg(out):
        wgmma.setmaxnreg_inc(100)

    def bad_count(out):
        acc = cuda.local.array(8, np.float32)
        wgmma.fence_operand(acc, 6)

    _typing_error(bad_n, "n = 104 is not wrapped")
    _typing_error(trans_a_in_registers, "trans_a must be False")
    _typing_error(bad_maxnreg, "multiple of 8")
    _typing_error(bad_count, "multiple of 4")


def test_choose_config():
    # matmul's chooser on a 132-SM GPU: where 128 x 256 tiles give half the SMs a tile, the
    # large tile taking the fewest waves, 2-CTA clusters (multicast B) first; narrower tiles
    # below.
    waves = scheduler.waves

    def choose_config(m, n, k, ragged_rows=False):
        return choose.choose_config(m, n, k, 132, ragged_rows)

    for (m, n, k), bm, bn, cm in (((8192, 8192, 8192), 128, 256, 2),
                                  ((2048, 2048, 2048), 128, 256, 2),
                                  ((4095, 4104, 4096), 256, 128, 2),
                                  ((3000, 5000, 2000), 128, 256, 2),
                                  ((1024, 8192, 8192), 128, 256, 2),
                                  ((8192, 1024, 8192), 128, 256, 2),
                                  # one tile row: pairs would leave half their CTAs idle
                                  ((128, 32768, 4096), 128, 256, 1),
                                  ((1024, 2048, 1024), 128, 128, 1),
                                  ((1000, 1000, 1000), 128, 64, 1),
                                  # 128 x 192 where it takes no more rounds: one (96 tiles
                                  # against 36 pairs), two (256 against 96 pairs), three
                                  ((1536, 1536, 1536), 128, 192, 1),
                                  ((1024, 3072, 4096), 128, 192, 1),
                                  ((2048, 3072, 2048), 128, 192, 1),
                                  ((3072, 3072, 3072), 128, 192, 1),
                                  ((1, 8, 8), 128, 64, 1)):
        cfg = choose_config(m, n, k)
        assert (cfg.bm, cfg.bn, cfg.cluster_m) == (bm, bn, cm), ((m, n, k), cfg)
        # 128 x 256 and 256 x 128, in clusters or not: persistent, 4 slots, each slot's group
        # retired; the narrower tiles one block per tile, in one wave; A's and B's maps with
        # 128-byte L2 promotion
        large = bn in (192, 256) or bm == 256
        assert cfg.persistent == large, cfg
        assert (cfg.stages, cfg.mma_pipe) == ((4, 0) if large else (cfg.stages, 1)), cfg
        if not large:
            assert math.ceil(m / 128) * math.ceil(n / bn) <= 132
        assert cfg.l2_promotion == 128
        # one consumer warpgroup takes a 128 x 64 tile's two m64 halves (not in pairs)
        assert cfg.consumers == (1 if (not large and bn == 64) else 2), cfg
        # 128 x 256 tiles store C under the next tile's wgmmas where blocks take several
        assert cfg.overlap_epilogue == (bm == 128 and bn in (192, 256)
                                        and waves(m, n, cfg, 132) > 1), cfg
    assert choose_config(8192, 8192, 8192).overlap_epilogue
    assert not choose_config(2048, 2048, 2048).overlap_epilogue      # one tile per pair
    # the wave model: 4095 x 4104 is 32 x 17 tiles of 128 x 256 (16 x 17 cluster pairs: 5
    # rounds of 66) but 16 x 33 of 256 x 128 (4 rounds of 132, or of 66 pairs)
    assert waves(4095, 4104, choose.CLUSTER, 132) == 5
    assert waves(4095, 4104, choose.TALL_CLUSTER, 132) == 4
    # 128 x 192 only where it takes no more rounds than the large tile: 8192^3 is 21 rounds of
    # 128 x 192 tiles against 16 of 128 x 256 pairs, 2048^3 2 against 1
    assert waves(8192, 8192, choose.N192, 132) == 21
    assert waves(2048, 2048, choose.N192, 132) == 2
    assert waves(1536, 1536, choose.N192, 132) == waves(1536, 1536, choose.CLUSTER, 132) == 1
    # rows that are not whole 128-byte lines: the narrow tiles in pairs along N sharing A
    for (m, n, k), bn in (((1000, 1000, 1000), 64), ((760, 2040, 4000), 128)):
        assert choose_config(m, n, k) == choose.NARROW[bn]
        pairs = choose_config(m, n, k, ragged_rows=True)
        assert (pairs.bn, pairs.cluster_n, pairs.persistent) == (bn, 2, False)
        assert pairs.stages == 4        # the 128 x 64 pairs too (gemm-oneblock-h100.txt)
        assert pairs.consumers == 2
    # (the large tiles do not change)
    assert (choose_config(3000, 5000, 2000, ragged_rows=True)
            == choose_config(3000, 5000, 2000))
    assert waves(4095, 4104, choose.TALL, 132) == 4
    assert waves(4096, 4096, choose.WIDE, 132) == 4


def test_stream_k_split():
    split = gemm_stream_k.stream_k_split
    assert split(512, 132, 64) == (396, 116 * 64)           # 4096^3 at 128 x 256: 3.88 waves
    assert split(2048, 132, 128) == (1980, 68 * 128)        # 8192^3: 15.5 waves
    assert split(264, 132, 64) == (264, 0)                  # whole waves: nothing to split
    assert split(100, 132, 64) == (0, 100 * 64)             # under one wave: every tile
    assert split(100, 132, 4) == (100, 0)                   # ... < 4 slices per block
    assert split(133, 132, 64) == (133, 0)                  # 1 tile x 64 slices < 4 per block
    assert split(133, 132, 600) == (132, 600)
    assert split(133, 132, 2 ** 26) == (133, 0)             # blocks * slices past 32 bits


def test_stream_k_launch_takes_its_stream_workspace_or_runs_whole(monkeypatch):
    # The split's arguments, and per stream the workspace; a capture on a stream without one
    # (no allocation there) launches every tile whole and asks again on the next launch.
    from numba_tma.kernels.gemm import stream_k

    cfg = StreamKConfig(192, stages=5, mma_pipe=0, c_buffers=1)
    args, per_stream = cfg.launch_extras(1216, 132, 128)      # 4096 x 7168 x 16384, fp8
    assert args[2:] == (1188, 28 * 128) and per_stream is not None
    monkeypatch.setattr(stream_k, "_workspace", lambda ctx, stream, blocks: None)
    assert per_stream(1, 7) == ({stream_k._DP_UNITS: 1216, stream_k._SK_ITERS: 0}, False)

    class Buffer:
        def __init__(self, ptr):
            self.__cuda_array_interface__ = {"data": (ptr, False)}

    monkeypatch.setattr(stream_k, "_workspace",
                        lambda ctx, stream, blocks: (Buffer(4096), Buffer(8192)))
    assert per_stream(1, 7) == ({stream_k._WORKSPACE: 4096, stream_k._FLAGS: 8192,
                                 stream_k._DP_UNITS: 1188, stream_k._SK_ITERS: 28 * 128}, True)
    assert cfg.launch_extras(1188, 132, 128)[1] is None      # whole rounds: no workspace


@pytest.mark.parametrize("blocks, tiles, num_k", [(132, 512, 64), (132, 2048, 128),
                                                  (132, 134, 300), (7, 30, 20), (132, 144, 46),
                                                  (114, 300, 33), (5, 9, 6), (132, 112, 128),
                                                  (132, 1, 600)])
def test_stream_k_schedule_covers_each_slice_once(blocks, tiles, num_k):
    """The model of the kernel's stream-K walk: every K slice of every split tile is computed
    by exactly one block; each tile has one finalizer, the segment at its slice 0, which is
    the last of its block's segments; every other segment of the tile is the first of a
    higher block, and those blocks are exactly the ones the finalizer's loop waits on (block
    ``p`` after the finalizer while ``p``'s share starts before the tile's end)."""
    dp, w = gemm_stream_k.stream_k_split(tiles, blocks, num_k)
    assert w > 0 and dp % blocks == 0 and (tiles - dp) * num_k == w
    plan = gemm_stream_k.stream_k_schedule(blocks, dp, w, num_k)
    covered = {}
    for b, segs in enumerate(plan):
        assert segs, "every block gets slices"
        for j, (tile, k0, k1, role) in enumerate(segs):
            assert dp <= tile < tiles and 0 <= k0 < k1 <= num_k
            assert (role == "final") == (k0 == 0)
            if role == "partial":
                assert j == 0, "only a block's first segment can start inside a tile"
            for kt in range(k0, k1):
                assert (tile, kt) not in covered
                covered[(tile, kt)] = (b, role)
    assert len(covered) == w
    start = [b * w // blocks for b in range(blocks)]
    for tile in range(dp, tiles):
        owners = sorted({b for (t, _), (b, _) in covered.items() if t == tile})
        final = covered[(tile, 0)][0]
        assert owners[0] == final and plan[final][-1][:2] == (tile, 0)
        t_end = (tile - dp + 1) * num_k
        waited = []
        if plan[final][-1][2] < num_k:
            p = final + 1
            while p < blocks and start[p] < t_end:
                waited.append(p)
                p += 1
        assert waited == owners[1:]
        for p in waited:
            assert plan[p][0][0] == tile and plan[p][0][3] == "partial"


def test_matmul_packs_the_kernels_parameters():
    # The launch packs the argument words of the signatures the kernels compile for.
    from numba_tma._frontend import sigutils, types

    from numba_tma.kernels.gemm import plan, stream_k

    for cfg in (WgmmaConfig(), GemmConfig(), StreamKConfig(), PingPongConfig(128)):
        argtypes = plan.ARGTYPES + cfg.extra_argtypes
        assert tuple(sigutils.normalize_signature(cfg.signature)[0]) == argtypes
    sk = StreamKConfig.extra_argtypes
    assert sk[stream_k._WORKSPACE].dtype.name == "float32"
    assert sk[stream_k._FLAGS].dtype.name == "uint32"
    assert sk[stream_k._DP_UNITS] == sk[stream_k._SK_ITERS] == types.int64
