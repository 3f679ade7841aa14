"""Offline sm_90a SASS of the im2col loads, the tensormap.replace variants and the tensormap-proxy
fences: each lands as its instruction, inlined (no CALL), with no local memory; bad operands fail
at compile time naming the argument."""

import os

import numpy as np
import pytest

from numba_tma import mbarrier, tma
from numba_tma._frontend import cuda, errors
from numba_tma.tensormap import device as tmd
from numba_tma.offline import compile_kernel
from sass_checks import check_clean, pinned_toolchain

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

DESC = "uint64[::1]"
ELEMTYPE_F32 = tmd.ELEMTYPE["float32"]  # a module constant is a compile-time literal


def im2col_kernel(rank):
    def kernel(desc, c, out):
        tile = cuda.shared.array(64 * 16, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            mbarrier.arrive_expect_tx(bar, 64 * 16 * 4)
            if rank == 3:
                tma.load_im2col(tile, desc, (c[0], c[1], c[2]), (c[3],), bar)
            elif rank == 4:
                tma.load_im2col(tile, desc, (c[0], c[1], c[2], c[3]), (c[4], c[5]), bar)
            else:
                tma.load_im2col(tile, desc, (c[0], c[1], c[2], c[3], c[4]), (c[5], c[6], 3), bar)
        mbarrier.wait(bar, 0)
        out[cuda.threadIdx.x] = tile[cuda.threadIdx.x]

    return kernel


@pytest.mark.parametrize("rank", [3, 4, 5])
def test_load_im2col_sass(rank):
    kb = compile_kernel(im2col_kernel(rank), f"void({DESC}, int32[::1], float32[::1])")
    check_clean(kb)
    ops = kb.opcodes()
    assert ops[f"UTMALDG.{rank}D.IM2COL"] == 1
    assert not any(op.startswith("UTMALDG") and "IM2COL" not in op for op in ops)


def replace_kernel(desc, ptr, out):
    sdesc = cuda.shared.array(16, np.uint64, alignment=128)
    if cuda.threadIdx.x < 16:
        sdesc[cuda.threadIdx.x] = desc[cuda.threadIdx.x]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        n = out[1]
        tmd.replace_global_address(sdesc, ptr, space="shared")
        tmd.replace_rank(sdesc, 2, space="shared")
        tmd.replace_box_dim(sdesc, 1, n, space="shared")
        tmd.replace_global_dim(sdesc, 0, n, space="shared")
        tmd.replace_global_stride(sdesc, 0, n * 16, space="shared")
        tmd.replace_element_stride(sdesc, 1, 2, space="shared")
        tmd.replace_elemtype(sdesc, ELEMTYPE_F32, space="shared")
        tmd.replace_interleave_layout(sdesc, 0, space="shared")
        tmd.replace_swizzle_mode(sdesc, 3, space="shared")
        tmd.replace_fill_mode(sdesc, 1, space="shared")
        tmd.replace_global_address(desc, ptr, space="global")
        tmd.replace_global_dim(desc, 1, n, space="global")
        tmd.replace_global_stride(desc, 3, n * 32)  # generic
        tmd.fence_release()
        tmd.fence_acquire(desc)
    out[0] = 1


def test_tensormap_replace_is_a_read_modify_write_of_the_descriptor():
    kb = compile_kernel(replace_kernel, f"void({DESC}, float32[::1], int64[::1])")
    check_clean(kb)
    # No instruction of its own on sm_90a: ptxas edits the descriptor's bit fields with ordinary
    # loads and stores of the state space named (shared::cta -> LDS/STS, global -> LDG/STG,
    # generic -> LD/ST).
    assert kb.count("STS") >= 6 and kb.count("LDS") >= 3
    assert kb.has("STG.E")
    assert kb.has("ST.E")
    assert not kb.has("UTMALDG")


def fences_kernel(desc, out):
    tmd.fence_release()
    tmd.fence_release("sys")
    tmd.fence_acquire(desc)
    out[0] = 1


def test_tensormap_fences_sass():
    kb = compile_kernel(fences_kernel, f"void({DESC}, int32[::1])")
    check_clean(kb)
    assert kb.has("MEMBAR.ALL.GPU") and kb.has("MEMBAR.ALL.SYS")   # release.gpu / release.sys
    assert kb.has("UTMACCTL.IV")                                     # acquire: drop cached copy
    # nvJitLink 13.5 adds a tensormap command flush to the release; 13.0 (the H100 image's)
    # emits the MEMBARs alone (seen 2026-11-25).
    if pinned_toolchain():
        assert kb.has("UTMACMDFLUSH"), sorted(set(kb.mnemonics()))


def cp_fence_kernel(desc, out):
    sdesc = cuda.shared.array(16, np.uint64, alignment=128)
    if cuda.threadIdx.x < 16:
        sdesc[cuda.threadIdx.x] = desc[cuda.threadIdx.x]
    cuda.syncwarp()
    if cuda.threadIdx.x < 32:
        tmd.cp_fence_release(desc, sdesc)
    out[0] = 1


def test_cp_fenceproxy_sass():
    kb = compile_kernel(cp_fence_kernel, f"void({DESC}, int32[::1])")
    check_clean(kb)
    # Each lane moves 4 of the 128 bytes with a strong gpu-scope exchange: the release.
    assert kb.has("ATOMG.E.EXCH.STRONG.GPU")


def test_grouped_copy_kernels_compile_clean():
    from numba_tma.kernels import grouped_copy

    for via_shared in (True, False):
        kb = compile_kernel(grouped_copy._kernel(np.dtype(np.float32), via_shared),
                            f"void({DESC}, int64[:, ::1], {DESC}, int32[::1])")
        assert kb.local_bytes == 0 and kb.spill_stores == 0
        ops = kb.opcodes()
        assert ops["UTMALDG.2D"] == 1 and ops["UTMASTG.2D"] == 1
        assert ops["UTMACCTL.IV"] == 2                               # two acquires
        if via_shared:
            assert ops["ATOMG.E.EXCH.STRONG.GPU"] == 2               # two cp_fenceproxy
        else:
            assert ops["MEMBAR.ALL.GPU"] == 1                        # one release fence


def test_im2col_kernels_compile_clean():
    from numba_tma.kernels import im2col

    kb = compile_kernel(im2col._gather_kernel(np.dtype(np.float16), 32),
                        f"void({DESC}, float16[:, ::1], int64, int64, int64, int64, int64, int64,"
                        f" int32[::1])")
    assert kb.local_bytes == 0 and kb.spill_stores == 0
    assert kb.opcodes()["UTMALDG.4D.IM2COL"] == 1


def bad_offsets_kernel(desc, out):
    tile = cuda.shared.array(64, np.float32)
    bar = cuda.shared.array(1, np.uint64)
    tma.load_im2col(tile, desc, (0, 1, 2, 0), (1,), bar)


def bad_ord_kernel(desc, out):
    tmd.replace_box_dim(desc, out[0], 4)


def bad_ord_range_kernel(desc, out):
    tmd.replace_global_stride(desc, 4, 64)


def bad_space_kernel(desc, out):
    tmd.replace_global_dim(desc, 0, 4, space="local")


def bad_scope_kernel(desc, out):
    tmd.fence_acquire(desc, scope="block")


def bad_code_kernel(desc, out):
    tmd.replace_swizzle_mode(desc, 4)


def bad_desc_kernel(desc, out):
    tmd.fence_acquire(out)


@pytest.mark.parametrize("kernel,message", [
    (bad_offsets_kernel, r"tma.load_im2col: offsets must be a tuple of rank - 2 = 2 integers"),
    (bad_ord_kernel, r"replace_box_dim: dim must be a compile-time integer"),
    (bad_ord_range_kernel, r"replace_global_stride: dim = 4 is outside 0..3"),
    (bad_space_kernel, r"replace_global_dim: space = 'local' is not one of 'generic', 'global'"),
    (bad_scope_kernel, r"fence_acquire: scope = 'block' is not one of 'cta'"),
    (bad_code_kernel, r"replace_swizzle_mode: code = 4 is outside 0..3"),
    (bad_desc_kernel, r"fence_acquire: desc must have dtype uint64, int64, got int32"),
])
def test_bad_operands_fail_at_compile_time(kernel, message):
    with pytest.raises(errors.TypingError, match=message):
        compile_kernel(kernel, f"void({DESC}, int32[::1])")


def test_refuse_host_calls():
    with pytest.raises(RuntimeError, match="device intrinsic"):
        tmd.fence_release()
