"""Offline (no GPU) checks of the two small units the warp-specialised GEMM leans on: named CTA
barriers (``numba_tma.barrier``) land as ``BAR.SYNC``/``BAR.ARV`` with their id and count, and
``numba_tma.intmath`` divides in 32 bits inline where numba's own 64-bit ``//`` by a run-time
value is a called subroutine; ``numba_tma.fastmath.tanh_approx`` is one ``MUFU.TANH``; bad
operands fail at compile time naming the argument."""

import os
import re

import numpy as np
import pytest

from numba_tma._frontend import cuda, errors
from numba_tma import barrier, intmath
from numba_tma.offline import compile_kernel
from sass_checks import check_clean

TypingError = errors.TypingError   # (the front end's: numba-cuda or numba-cuda-mlir)

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")


def test_named_barriers_sass():
    def kernel(out):
        wg = cuda.threadIdx.x >> 7
        if wg == 0:
            barrier.arrive(2, 256)          # warpgroup 0 signals the others, without waiting
        else:
            barrier.sync(2, 256)
            barrier.sync(1, 128)
        out[cuda.threadIdx.x] = wg

    kb = compile_kernel(kernel, "void(int32[::1])")
    check_clean(kb)
    # id and thread count as immediates, e.g. "@P0 BAR.SYNC.DEFER_BLOCKING 0x2, 0x100"
    bars = sorted(re.search(r"BAR\.[^;]*", ln).group().strip()
                  for ln in kb.sass.splitlines() if " BAR." in ln)
    assert bars == ["BAR.ARV 0x2, 0x100", "BAR.SYNC.DEFER_BLOCKING 0x1, 0x80",
                    "BAR.SYNC.DEFER_BLOCKING 0x2, 0x100"], bars


def test_u32_division_is_inline():
    def ours(out, a, b):
        out[0] = intmath.div_u32(a, b)
        out[1] = intmath.rem_u32(a, b)

    def numbas(out, a, b):
        out[0] = a // b
        out[1] = a % b

    sig = "void(uint32[::1], int64, int64)"
    kb = compile_kernel(ours, sig)
    check_clean(kb)
    assert not kb.has("CALL")
    assert compile_kernel(numbas, sig).has("CALL")       # what the wrappers avoid


def test_operands_must_be_integers():
    def bad_div(out):
        out[0] = intmath.div_u32(1.5, np.int32(2))

    def bad_barrier(out):
        barrier.sync(1.0, 64)

    with pytest.raises(TypingError, match="intmath.div_u32.*a"):
        compile_kernel(bad_div, "void(uint32[::1])")
    with pytest.raises(TypingError, match="barrier.sync.*barrier_id"):
        compile_kernel(bad_barrier, "void(uint32[::1])")


def test_tanh_approx_is_one_mufu():
    from numba_tma import fastmath

    def kernel(out, x):
        i = cuda.threadIdx.x
        out[i] = fastmath.tanh_approx(x[i])

    kb = compile_kernel(kernel, "void(float32[::1], float32[::1])")
    check_clean(kb)
    assert kb.count("MUFU.TANH") == 1
    assert kb.count("MUFU") == 1 and kb.count("FFMA") == 0     # no polynomial beside it


def test_tanh_approx_rejects_non_numbers():
    from numba_tma import fastmath

    def kernel(out):
        out[0] = fastmath.tanh_approx(out)

    with pytest.raises(TypingError, match="tanh_approx: x must be a number"):
        compile_kernel(kernel, "void(float32[::1])")
