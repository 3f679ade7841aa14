"""Offline (no GPU) halves of GPU tests whose instruction no GPU result can reveal.

A proxy fence that is missing shows only as a rare race, and a prefetch is a hint: the GPU tests
``test_proxy_async_global_fence`` (tests/gpu/test_mbarrier_fence.py) and
``test_prefetch_then_load_every_rank`` (tests/gpu/test_tma_prefetch_reduce.py) check the data
around them, and here their very kernels are compiled for sm_90a: each must contain the
instruction, and the same kernel built without it must not (so this check fails when the
instruction is removed, rather than passing on anything)."""

import importlib.util
import os
import sys

import numpy as np
import pytest

from numba_tma.offline import compile_kernel

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

GPU_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpu")


def gpu_test_module(name):
    """Import tests/gpu/<name>.py (its kernels compile lazily: no GPU needed)."""
    if GPU_TESTS not in sys.path:
        sys.path.insert(0, GPU_TESTS)
    spec = importlib.util.spec_from_file_location(f"offline_{name}",
                                                  os.path.join(GPU_TESTS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fence_test_kernel_has_the_global_proxy_fence():
    m = gpu_test_module("test_mbarrier_fence")
    sig = "void(float32[:, ::1], uint64[::1], float32[::1], float32[:, ::1], int32[::1])"
    fenced = compile_kernel(m.global_fence_kernel(True), sig)
    bare = compile_kernel(m.global_fence_kernel(False), sig)
    assert fenced.has("FENCE.VIEW.ASYNC.G"), fenced.opcodes()
    assert not bare.has("FENCE.VIEW.ASYNC.G"), bare.opcodes()   # (.S: init_block's own)
    # It sits between the stores and the TMA load that reads them.
    ops = fenced.mnemonics()
    fence_at = ops.index(next(op for op in ops if op.startswith("FENCE.VIEW.ASYNC.G")))
    store_at = max(i for i, op in enumerate(ops[:fence_at]) if op.startswith("STG"))
    load_at = next(i for i, op in enumerate(ops) if op.startswith("UTMALDG"))
    assert store_at < fence_at < load_at


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_prefetch_test_kernel_has_the_prefetches(rank):
    m = gpu_test_module("test_tma_prefetch_reduce")
    shape, box, _ = m.PREFETCH_CASES[rank]
    dtype = np.dtype(m.PREFETCH_DTYPES[rank])
    n = int(np.prod(box))
    sig = f"void(uint64[::1], int32[::1], {dtype}[::1], int32[::1])"
    with_pf = compile_kernel(m.prefetch_load_kernel(rank, n, dtype), sig)
    without = compile_kernel(m.prefetch_load_kernel(rank, n, dtype, False), sig)
    assert with_pf.has(f"UTMAPF.L2.{rank}D"), with_pf.opcodes()
    assert with_pf.has("UTMACCTL.PF"), with_pf.opcodes()
    assert not without.has("UTMAPF") and not without.has("UTMACCTL"), without.opcodes()
    assert with_pf.has(f"UTMALDG.{rank}D") and without.has(f"UTMALDG.{rank}D")
