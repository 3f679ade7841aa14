"""Compile-time errors for intrinsic operands in the wrong address space (numba_tma._address_space):
a thread-local array or a kernel's parameter where shared memory is needed, a shared or local
array where a bulk copy needs global memory. Offline (no GPU): the errors come from compiling."""

import os

import numpy as np
import pytest

from numba_tma import _address_space, bulk, gmem, mbarrier, tma, warp
from numba_tma._frontend import cuda, errors
from numba_tma.offline import compile_kernel

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

MAP_AND_OUT = "void(uint64[::1], float32[::1])"


def local_barrier(desc, out):
    bar = cuda.local.array(1, np.uint64)
    mbarrier.init(bar, 1)


def local_barrier_slice(desc, out):
    bars = cuda.local.array(4, np.uint64)
    b = bars[2:]
    mbarrier.arrive(b)


def global_tma_destination(desc, out):
    bar = cuda.shared.array(1, np.uint64)
    tma.load(out, desc, (0, 0), bar)


def global_tma_source(desc, out):
    tma.store(desc, (0, 0), out[4:])


def shared_bulk_global_side(desc, out):
    bar = cuda.shared.array(1, np.uint64)
    tile = cuda.shared.array(64, np.float32)
    other = cuda.shared.array(64, np.float32)
    bulk.copy_global_to_shared(tile, other, 256, bar)


def global_copy_async_destination(desc, out):
    gmem.copy_async(out, out[4:], 4)


def local_ldmatrix_tile(desc, out):
    regs = cuda.local.array(4, np.uint32)
    tile = cuda.local.array(256, np.uint16)
    warp.ldmatrix(regs, tile, 0, count=4)


@pytest.mark.parametrize("kernel, message", [
    (local_barrier, r"mbarrier.init: bar is a cuda.local.array \(thread-local memory\); it must "
                    "be shared memory"),
    (local_barrier_slice, r"mbarrier.arrive: bar \(b\) is a cuda.local.array"),
    (global_tma_destination, r"tma.load: dst \(out\) is a kernel parameter \(global memory\); it "
                             "must be shared memory"),
    (global_tma_source, "tma.store: src is a kernel parameter"),
    (shared_bulk_global_side, r"bulk.copy_global_to_shared: src \(other\) is a cuda.shared.array; "
                              "it must be global memory"),
    (global_copy_async_destination, r"gmem.copy_async: dst \(out\) is a kernel parameter"),
    (local_ldmatrix_tile, r"warp.ldmatrix: tile is a cuda.local.array"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_wrong_address_space_fails_to_compile(kernel, message):
    with pytest.raises(errors.TypingError, match=message):
        compile_kernel(kernel, MAP_AND_OUT)


@cuda.jit(device=True)
def _load_into(dst, desc, bar):
    tma.load(dst, desc, (0, 0), bar)


def right_spaces(desc, out):
    bars = cuda.shared.array(2, np.uint64)
    tile = cuda.shared.array(64, np.float32)
    regs = cuda.local.array(4, np.uint32)
    mbarrier.init(bars[1:], 1)
    tma.load(tile, desc, (0, 0), bars[1:])
    _load_into(tile, desc, bars)               # a device function's parameters are not judged
    bulk.copy_global_to_shared(tile, out, 256, bars)
    warp.ldmatrix(regs, tile, 0, count=4)      # (regs: thread-local, as it must be)
    out[0] = regs[0]


def test_right_spaces_compile():
    kb = compile_kernel(right_spaces, MAP_AND_OUT)
    assert kb.has("UTMALDG.2D") and kb.count("CALL") == 0


def test_the_table_names_real_parameters():
    assert _address_space.OPERANDS, "numba_tma's import installs the check"
    for fn, operands in _address_space.OPERANDS.items():
        params = fn.__code__.co_varnames[:fn.__code__.co_argcount]
        for pos, (name, space) in operands.items():
            assert params[pos] == name and space in ("shared", "global"), (fn, name)
