"""Offline (no GPU) checks of the 16-byte global accesses (numba_tma.gmem) and of v7_vec16's
machine code: LDG.E.128 / STG.E.128 inlined, operands in registers, bad operands refused at compile
time naming the argument; v7's 8 vector loads, 8 shared 16-byte reads and 8 vector stores per
thread, one barrier per path, launch bounds met without spills."""

import os

import numpy as np
import pytest
from numba import cuda
from numba.core.errors import TypingError

from numba_tma import gmem
from sass_checks import check_clean

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")


def compile_kernel(kernel, sig):
    from numba_tma.offline import compile_kernel as compile_

    return compile_(kernel, sig)


def test_gmem_v4_sass():
    @cuda.jit
    def copy16(src, out):
        regs = cuda.local.array(4, np.uint32)
        i = cuda.grid(1)
        gmem.load_v4(regs, src, i * 16)
        regs[0] ^= np.uint32(1)
        gmem.store_v4(out, i * 16, regs)

    kb = compile_kernel(copy16, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.count("LDG.E.128") == 1 and kb.count("STG.E.128") == 1
    assert not kb.has("LDG.E ") and not kb.has("STG.E ")


def test_gmem_rejects_bad_operands():
    @cuda.jit
    def bad_regs(src, out):
        regs = cuda.local.array(4, np.float64)
        gmem.load_v4(regs, src, 0)

    with pytest.raises(TypingError, match="regs"):
        compile_kernel(bad_regs, "void(float32[::1], float32[::1])")

    @cuda.jit
    def bad_offset(src, out):
        regs = cuda.local.array(4, np.uint32)
        gmem.store_v4(out, 1.5, regs)

    with pytest.raises(TypingError, match="byte_offset"):
        compile_kernel(bad_offset, "void(float32[::1], float32[::1])")


@pytest.mark.parametrize("itemsize, word", [(4, "uint32"), (8, "uint64")])
def test_v7_vec16_sass(itemsize, word):
    from numba_tma.kernels import transpose_vec as tv

    kb = compile_kernel(tv._kernel(itemsize)[0], f"void({word}[::1], {word}[::1], int64, int64)")
    check_clean(kb)
    assert kb.count("LDG.E.128") == tv.LOADS and kb.count("STG.E.128") == tv.LOADS
    assert kb.count("LDS.128") == tv.LOADS
    assert kb.barriers == 1 and kb.count("BAR.SYNC") == 2      # one per path: full, partial
    assert kb.registers <= 65536 // (tv.THREADS * tv.MIN_BLOCKS)
