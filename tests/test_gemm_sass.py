"""Offline (no GPU) checks of the TMA-fed mma.sync GEMM's machine code: per stage every warp
issues 4 k16 steps x 32 HMMA.16816 with its fragments loaded by 16 LDSM.x4 (.trans for M/N-major
operands), fragments and accumulators stay in registers (no local memory, no spills), TMA loads
and stores and mbarrier waits are the hardware instructions; plus the host-side checks of
GemmConfig that need no GPU."""

import os

import pytest

from numba_tma.kernels.gemm import KernelSpec
from numba_tma.kernels.gemm.mma_sync import ACC, DEFAULT_CONFIG, GemmConfig, smem_bytes
from numba_tma.offline import compile_kernel

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

HMMA_PER_STAGE = 4 * 32          # 4 k16 steps x (4 m16 x 8 n8) tiles per warp
LDSM_PER_STAGE = 4 * 8           # 4 k16 steps x (4 A + 4 B) ldmatrix.x4


def _compile(cfg, *spec):
    return compile_kernel(cfg.kernel(KernelSpec(*spec)), cfg.signature)


@pytest.mark.parametrize("a_kmajor, b_kmajor", [(True, False), (True, True), (False, False),
                                                (False, True)])
def test_main_loop_sass(a_kmajor, b_kmajor):
    kb = _compile(DEFAULT_CONFIG, a_kmajor, b_kmajor, "f16", "f16", False)
    assert kb.local_bytes == 0 and kb.stack_bytes == 0
    assert kb.spill_stores == 0 and kb.spill_loads == 0
    assert not kb.has("LDL") and not kb.has("STL")
    assert kb.registers <= 255
    assert kb.count("HMMA.16816.F32") == HMMA_PER_STAGE
    ldsm_a = "LDSM.16.M88.4" if a_kmajor else "LDSM.16.MT88.4"
    ldsm_b = "LDSM.16.M88.4" if b_kmajor else "LDSM.16.MT88.4"
    if ldsm_a == ldsm_b:
        assert kb.count(ldsm_a) == LDSM_PER_STAGE
    else:
        assert kb.count(ldsm_a) == kb.count(ldsm_b) == LDSM_PER_STAGE // 2
    assert kb.count("STSM.16.M88.4") == 16          # the 64 x 64 epilogue tile
    assert kb.has("UTMALDG.2D") and kb.has("UTMASTG.2D")
    assert kb.has("SYNCS.PHASECHK.TRANS64.TRYWAIT") and kb.has("SYNCS.ARRIVE.TRANS64")


def test_odd_warp_count_compiles():
    # 192 x 128: 6 warps take turns as producer by j % 6 (not a power of two).
    kb = _compile(GemmConfig(192, 128, 2), True, False, "f16", "f16", False)
    assert kb.count("HMMA.16816.F32") == HMMA_PER_STAGE and kb.local_bytes == 0


def test_f32_out_with_beta_and_bf16():
    kb = _compile(DEFAULT_CONFIG, True, False, "bf16", "f32", True)
    assert kb.count("HMMA.16816.F32.BF16") == HMMA_PER_STAGE
    assert kb.local_bytes == 0 and kb.spill_stores == 0 and not kb.has("STSM")
    assert kb.count("UTMASTG.2D") == 2              # two 64 x 32 f32 boxes per warp
    kb = _compile(DEFAULT_CONFIG, True, True, "f16", "bf16", True)
    assert kb.has("F2FP.BF16.F32.PACK_AB") and kb.count("LDSM.16.M88.4") >= LDSM_PER_STAGE
    assert kb.local_bytes == 0 and kb.spill_stores == 0


def test_config_validation():
    for bad in [dict(bm=96), dict(bn=320), dict(bn=192), dict(stages=3), dict(stages=1), dict(bm=256, bn=512),
                dict(bm=256, bn=256, stages=2),     # 16 warps: their accumulators cannot fit
                dict(stages=8)]:                    # 8 x 48 KiB of ring: over 227 KiB
        with pytest.raises(ValueError):
            GemmConfig(**bad)
    assert ACC == 128
    # 4 stages of 128x64 + 256x64 fp16 fit in the H100's 227 KB; the f32 C tile reuses them.
    assert smem_bytes(DEFAULT_CONFIG, 4) <= 227 * 1024
    assert smem_bytes(DEFAULT_CONFIG, 2) == smem_bytes(DEFAULT_CONFIG, 4)
