"""Offline (no GPU) checks that every intrinsic lands in sm_90a SASS as its instruction, inlined
(no CALL), with no stack, local memory or spills; and that bad operands fail at compile time."""

import os

import numpy as np
import pytest

from numba_tma._frontend import cuda, errors
from numba_tma import fence, gmem, griddep, mbarrier, smem, swizzle, tma
from numba_tma.offline import compile_kernel
from sass_checks import check_clean

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

DESC = "uint64[::1]"


def mbarrier_kernel(out):
    bar = cuda.shared.array(2, np.uint64)
    if cuda.threadIdx.x == 0:
        mbarrier.init(bar, 1)
        mbarrier.fence_init()
    cuda.syncthreads()
    s = mbarrier.arrive(bar)
    s += mbarrier.arrive(bar[1:], 3)
    s += mbarrier.arrive_expect_tx(bar, 64)
    mbarrier.expect_tx(bar[1:], 32)
    mbarrier.wait(bar, 0)
    ok = mbarrier.try_wait(bar, 1) + mbarrier.test_wait(bar[1:], 0)
    ok += mbarrier.wait_bounded(bar, 1, 1000)
    if cuda.threadIdx.x == 0:
        mbarrier.inval(bar)
    out[cuda.threadIdx.x] = s + ok


def test_mbarrier_sass():
    kb = compile_kernel(mbarrier_kernel, "void(uint64[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops["SYNCS.EXCH.64"] >= 1                           # init
    assert kb.count("SYNCS.ARRIVE.TRANS64") >= 3               # arrive, arrive(count), expect_tx
    assert kb.count("SYNCS.PHASECHK.TRANS64.TRYWAIT") >= 2     # wait, try_wait, bounded
    assert ops["SYNCS.PHASECHK.TRANS64"] >= 1                  # test_wait
    assert kb.has("SYNCS.CCTL.IV") or kb.has("CCTL.IVALL")     # inval


def griddep_kernel(out):
    griddep.wait()
    out[cuda.threadIdx.x] = 1
    griddep.launch_dependents()


def test_griddep_sass():
    kb = compile_kernel(griddep_kernel, "void(int32[::1])")
    check_clean(kb)
    sass = kb.sass
    assert kb.count("ACQBULK") == 1 and kb.count("PREEXIT") == 1
    assert sass.find("ACQBULK") < sass.find("STG") < sass.find("PREEXIT")


def fences_kernel(out):
    fence.proxy_async_shared()
    fence.proxy_async_global()
    fence.proxy_async()
    out[0] = 1


def test_fence_sass():
    kb = compile_kernel(fences_kernel, "void(int32[::1])")
    check_clean(kb)
    assert kb.has("FENCE.VIEW.ASYNC.S")
    assert kb.has("FENCE.VIEW.ASYNC.G")


def make_copy_kernel(rank):
    shape = (2,) * (rank - 1) + (16,)
    coords = {1: lambda c: (c,), 2: lambda c: (c, 1), 3: lambda c: (c, 1, 2),
              4: lambda c: (c, 1, 2, 3), 5: lambda c: (c, 1, 2, 3, -4)}[rank]
    coords = cuda.jit(device=True)(coords)

    def kernel(desc, c, out):
        tile = cuda.shared.array(shape, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, desc, coords(c), bar)
        mbarrier.wait(bar, 0)
        tma.store_tile(desc, coords(c), tile)
        out[0] = 1

    return kernel


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_tma_load_store_sass(rank):
    kb = compile_kernel(make_copy_kernel(rank), "void(uint64[::1], int32, int32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops[f"UTMALDG.{rank}D"] == 1
    assert ops[f"UTMASTG.{rank}D"] == 1
    assert kb.has("UTMACMDFLUSH")                               # commit_group
    assert kb.has("DEPBAR.LE")                                  # wait_group.read 0
    assert kb.has("FENCE.VIEW.ASYNC.S")                         # store_tile's fence


def groups_kernel(desc, out):
    tile = cuda.shared.array(64, np.float32, alignment=128)
    tma.store(desc, (1,), tile)
    tma.commit_group()
    tma.wait_group(7)
    tma.wait_group(0)
    tma.wait_group_read(3)
    tma.wait_group_read(0)
    out[0] = 1


def test_bulk_group_sass():
    kb = compile_kernel(groups_kernel, f"void({DESC}, int32[::1])")
    check_clean(kb)
    assert kb.count("DEPBAR.LE") >= 3


def swizzle_kernel(src, out):
    tile = cuda.shared.array(32 * 32, np.float32, alignment=1024)
    tid = cuda.threadIdx.x
    for r in range(32):
        tile[swizzle.index(r, tid, 32, 4, 128)] = src[r * 32 + tid]
    cuda.syncthreads()
    for r in range(32):
        out[r * 32 + tid] = tile[r * 32 + swizzle.col(tid, r, 4, 128)]


def test_swizzle_helpers_compile_to_register_math():
    kb = compile_kernel(swizzle_kernel, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.has("STS") and kb.has("LDS")


def bad_bar_kernel(out):
    bar = cuda.shared.array(1, np.float32)
    mbarrier.init(bar, 1)


def bad_group_kernel(n):
    tma.wait_group(n)


def bad_rank_kernel(desc):
    tile = cuda.shared.array(64, np.float32)
    tma.store(desc, (0, 0, 0, 0, 0, 0), tile)


@pytest.mark.parametrize("kernel,sig,message", [
    (bad_bar_kernel, "void(int32[::1])", r"mbarrier.init: bar must have dtype uint64"),
    (bad_group_kernel, "void(int32)", r"tma.wait_group: n must be a compile-time integer"),
    (bad_rank_kernel, f"void({DESC})", r"tma.store: coords must be a tuple of 1 to 5"),
])
def test_bad_operands_fail_at_compile_time(kernel, sig, message):
    with pytest.raises(TypingError, match=message):
        compile_kernel(kernel, sig)


def test_wait_group_count_out_of_range():
    def kernel(out):
        tma.wait_group_read(8)

    with pytest.raises(TypingError, match=r"n = 8 is outside 0..7"):
        compile_kernel(kernel, "void(int32[::1])")


def test_intrinsics_refuse_host_calls():
    with pytest.raises(RuntimeError, match="device intrinsic"):
        mbarrier.init(np.zeros(1, np.uint64), 1)


def smem_kernel(out):
    dyn = cuda.shared.array(0, np.uint8)
    regs = cuda.local.array(4, np.uint32)
    first = smem.aligned_offset(dyn, 16, 1024)     # a 1024-aligned ring after 16 bytes
    smem.load_v4(regs, dyn, first)
    smem.store_v4(dyn, first + 16, regs)
    out[cuda.threadIdx.x] = first + regs[0]


def test_smem_sass():
    kb = compile_kernel(smem_kernel, "void(int64[::1])")
    check_clean(kb)
    assert kb.has("LDS.128") and kb.has("STS.128")


def copy_async_kernel(src, out):
    buf = cuda.shared.array(64, np.float32, alignment=16)
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    t = cuda.threadIdx.x
    gmem.copy_async(buf[t:], src[t:], 4)
    gmem.copy_async(buf[16 + 2 * t:], src[16 + 2 * t:], 8)
    gmem.copy_async(buf[48:], src[48:], 16)
    gmem.copy_async_arrive(bar)
    mbarrier.arrive(bar)
    mbarrier.wait(bar, 0)
    out[t] = buf[t]


def test_copy_async_sass():
    kb = compile_kernel(copy_async_kernel, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.count("LDGSTS.E") >= 2 and kb.has("LDGSTS.E.64") and kb.has("LDGSTS.E.128")
    assert kb.has("ARRIVES.LDGSTSBAR.64")


@pytest.mark.parametrize("nbytes", [2, 12, 32])
def test_copy_async_sizes(nbytes):
    def kernel(src, out):
        buf = cuda.shared.array(8, np.float32)
        gmem.copy_async(buf, src, nbytes)

    with pytest.raises(TypingError, match=r"gmem.copy_async: nbytes = \d+ (must be one of|is "
                                          r"outside)"):
        compile_kernel(kernel, "void(float32[::1], float32[::1])")


def test_aligned_offset_needs_a_constant_power_of_two():
    def not_power(out):
        out[0] = smem.aligned_offset(cuda.shared.array(0, np.uint8), 0, 96)

    def not_constant(out, align):
        out[0] = smem.aligned_offset(cuda.shared.array(0, np.uint8), 0, align)

    with pytest.raises(TypingError, match="align = 96 must be a power of two"):
        compile_kernel(not_power, "void(int64[::1])")
    with pytest.raises(TypingError, match="align must be a compile-time integer"):
        compile_kernel(not_constant, "void(int64[::1], int64)")
