"""Front-end defects, each pinned offline by a minimal kernel's machine code, with numba_tma's
workaround in place (docs/front_ends.md lists them). These hold on both front ends.

numba-cuda-mlir 0.6.0 dropped the stores a user epilogue makes to an array of its arguments
(the pre-activation ``pre[row, col] = x``, as ``bias_gelu_aux`` wrote it before the
auxiliary output went through TMA): its dead-code elimination, run when an ``@overload`` is
inlined, did not see that ``pre`` (an item of the epilogue arguments' tuple) aliases a kernel
argument. On the GPU some elements of ``pre`` stayed unwritten; a one-block-per-tile GEMM kept
98 of its 128 ``STG``. ``numba_tma._frontend_mlir._patch_alias_analysis`` is the
workaround."""

import os

import numpy as np
import pytest

from numba_tma import epilogues
from numba_tma._frontend import cuda, types
from numba_tma.kernels.gemm.epilogue import box_writer
from numba_tma.kernels.gemm.user_epilogue import EpilogueFn, element_epilogue

F32V, F32M = types.float32[::1], types.float32[:, ::1]


@cuda.jit(device=True)
def bias_gelu_store(acc, row, col, b, pre):
    x = acc + np.float32(b[col])
    pre[row, col] = x
    return epilogues.gelu_tanh(x)


GELU_STORE = EpilogueFn(bias_gelu_store, (F32V, F32M))
offline = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                             reason="compiles for sm_90a (not under the simulator)")


def compiled(kernel):
    from numba_tma.offline import compile_kernel

    return compile_kernel(kernel, (F32V, F32V, F32M, types.int64, types.int64))


@offline
def test_every_auxiliary_store_of_an_epilogue_is_kept():
    # Four elements through the GELU_STORE epilogue, its arguments' tuple built in the kernel (as
    # the GEMM's entry point builds it): four aux stores and the one output. The last aux store
    # was dropped (a built tuple was not linked to its items).
    _, inside = element_epilogue(GELU_STORE)

    def four(out, b, pre, m, n):
        r = cuda.threadIdx.x >> 2
        c = 2 * (cuda.threadIdx.x & 3)
        e = (b, pre)
        v0 = inside(np.float32(1.0), r, c, m, n, e)
        v1 = inside(np.float32(2.0), r, c + 1, m, n, e)
        v2 = inside(np.float32(3.0), r, c + 8, m, n, e)
        v3 = inside(np.float32(4.0), r, c + 9, m, n, e)
        out[cuda.threadIdx.x] = v0 + v1 + v2 + v3

    assert compiled(four).count("STG") == 5


@offline
def test_every_auxiliary_store_of_a_box_is_kept():
    # One 16 x 64 box of fp16 C through the GELU_STORE box writer: 32 elements per thread, each
    # stored to `pre` once in the branch for a box inside C and once in the branch across its
    # edge. 15 of the edge branch's were dropped (an item read from the tuple before the tuple
    # was known to alias an argument stayed out of the argument aliases).
    write_box = box_writer("f16", False, GELU_STORE, 0)

    def box(acc_in, b, pre, m, n):
        acc = cuda.local.array(32, np.float32)
        for i in range(32):
            acc[i] = acc_in[i]
        smem8 = cuda.shared.array(4096, np.uint8)
        dynf = cuda.shared.array(1024, np.float32)
        words = cuda.local.array(4, np.uint32)
        old = cuda.local.array(4, np.uint32)
        write_box(acc, smem8, dynf, 0, 0, 0, cuda.threadIdx.x & 31, np.float32(1.0),
                  np.float32(0.0), words, old, 0, 0, m, n, (b, pre))

    assert compiled(box).count("STG") == 64


@offline
def test_a_contiguous_array_is_indexed_without_its_stride():
    # An element of a C-contiguous array is 4 bytes times its index from the data, on either
    # front end. numba-cuda-mlir 0.6.0 multiplied the index by the memref descriptor's run-time
    # stride (a 64-bit multiply per access; transpose_v6's persistent kernel spilled 32 B
    # under its 48 registers): _frontend_mlir._patch_contiguous_indexing.
    from numba_tma.offline import compile_kernel

    def copy(src, dst, i):
        dst[i] = src[i + 1]

    kb = compile_kernel(copy, (F32V, F32V, types.int64))
    assert "mul.lo.s64" not in kb.ptx and "mul.wide" not in kb.ptx


@offline
def test_a_declared_function_loaded_twice_types_once():
    # numba-cuda-mlir typed each load of a declare_device function anew ("Cannot unify
    # Function(<ExternFunction>) and Function(<ExternFunction>)") where two loads meet, as two
    # waits on one barrier in the two arms of a branch do.
    from numba_tma import mbarrier
    from numba_tma._bridge import address_of
    from numba_tma.offline import compile_kernel

    def kernel(out, parity):
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if parity > 0:
            mbarrier._wait(address_of(bar), parity & 1)
        else:
            mbarrier._wait(address_of(bar), (parity + 1) & 1)
        out[0] = 1

    kb = compile_kernel(kernel, "void(int32[::1], int32)")
    assert kb.has("SYNCS.PHASECHK.TRANS64.TRYWAIT") and not kb.has("CALL")
