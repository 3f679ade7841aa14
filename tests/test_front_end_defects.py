"""Front-end defects met on the GPU, each pinned by a minimal kernel's machine code, offline.

A test here that is marked ``xfail(strict=True)`` on one front end records a defect of that
front end that numba_tma has no workaround for yet (docs/front_ends.md); when an upgrade fixes
it the test passes, the strict mark fails, and the note and mark go."""

import os

import numpy as np
import pytest

from numba_tma import epilogues
from numba_tma._frontend import cuda, front_end, types
from numba_tma.kernels.gemm.user_epilogue import EpilogueFn, element_epilogue

F32V, F32M = types.float32[::1], types.float32[:, ::1]
offline = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                             reason="compiles for sm_90a (not under the simulator)")


@offline
@pytest.mark.xfail(front_end() == "numba-cuda-mlir", strict=True,
                   reason="numba-cuda-mlir 0.6.0 drops the last store of bias_gelu_aux's "
                          "auxiliary output (missing from its LLVM IR already)")
def test_every_auxiliary_store_of_an_epilogue_is_kept():
    # Four elements through the shipped GELU_AUX epilogue, as a GEMM's box writer calls it:
    # each writes pre[row, col], so the kernel stores four aux values and its one output.
    # (On the GPU, numba-cuda-mlir's GEMMs with this epilogue left elements of `pre` unwritten.)
    from numba_tma.offline import compile_kernel

    _, inside = element_epilogue(EpilogueFn(epilogues.bias_gelu_aux, (F32V, F32M)))

    def four(out, b, pre, m, n):
        r = cuda.threadIdx.x >> 2
        c = 2 * (cuda.threadIdx.x & 3)
        e = (b, pre)
        v0 = inside(np.float32(1.0), r, c, m, n, e)
        v1 = inside(np.float32(2.0), r, c + 1, m, n, e)
        v2 = inside(np.float32(3.0), r, c + 8, m, n, e)
        v3 = inside(np.float32(4.0), r, c + 9, m, n, e)
        out[cuda.threadIdx.x] = v0 + v1 + v2 + v3

    kb = compile_kernel(four, (F32V, F32V, F32M, types.int64, types.int64))
    assert kb.count("STG") == 5, kb.count("STG")
