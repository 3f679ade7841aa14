"""The shipped v6 transpose kernels (numba_tma.kernels.transpose_v6: v6_packed, v6_persistent, the
last rungs of the classic ladder of seed 003 and what ``transpose()`` falls back to) without a GPU.

* Both kernels run under numba's CUDA simulator on small odd shapes, for int32, float64, uint8 and
  float16, on the packed (8-byte word) path with partial tiles, on misaligned views (the plain
  element path), and with several tiles per block, partial raster groups and several batches:
  fresh random bytes in (NaN payloads included), the output poisoned before each run, byte-exact
  compare with numpy's transpose. The simulator has to be switched on before ``numba.cuda`` is
  first imported, so the runs happen in two child processes (this file is also their script).
* Every warp access of v6's shared-memory tile is bank-conflict free (the ladder's host bank
  model, numba_tma.ladders.transpose_classic._bank_conflicts).
* The v6 kernels' SASS for sm_90a, compiled offline: 8-byte global and shared accesses, no local
  memory to speak of, registers within the launch bounds.
* Launchers reject mismatched shapes and a bad raster group before touching a device.
"""

import json
import sys

import numpy as np
import pytest

from sim_workers import needs_simulator, run_cases
from transpose_sim import FakeDeviceArray, problems, run_child

DTYPES = ["int32", "float64", "uint8", "float16"]
SHAPES = [(1, 37, 45), (3, 33, 7), (2, 5, 70)]   # odd; partial tiles on both axes
KERNELS = ["v6_packed", "v6_persistent"]
#: Where v6 sits in the classic ladder (after v1..v5's six rungs): the shapes rotate from there,
#: as when these cases ran with the ladder's.
LADDER_POSITION = 6


def _cases():
    """(id, kernel, dtype, shape, kwargs, misaligned). The simulator runs ~2k threads/s, so every
    kernel gets every dtype and every shape, but not every product: shapes rotate per dtype."""
    cases = []
    for i, kernel in enumerate(KERNELS, start=LADDER_POSITION):
        for j, dtype in enumerate(DTYPES):
            cases.append((kernel, dtype, SHAPES[(i + j) % len(SHAPES)], {}, False))
    # M, N divisible by 8: the packed (8-byte word) path, partial tiles; misaligned views fall
    # back to plain elements.
    cases += [
        ("v6_packed", "uint8", (2, 40, 24), {}, False),
        ("v6_persistent", "uint8", (2, 40, 24), {}, False),
        ("v6_packed", "uint8", (1, 16, 24), {}, True),
        ("v6_persistent", "uint8", (1, 16, 24), {}, True),
    ]
    # Packed int32 / float16 / float64 (k = 1) with several tiles per block, partial raster
    # groups, several batches.
    cases += [
        ("v6_persistent", "int32", (1, 136, 72), {"grid": 3, "group": 2}, False),
        ("v6_persistent", "float16", (2, 72, 136), {"grid": 3, "group": 4}, False),
        ("v6_persistent", "float64", (2, 70, 37), {"grid": 3, "group": 1}, False),
        ("v6_packed", "int32", (1, 136, 72), {"group": 2}, False),
        ("v6_packed", "float16", (1, 40, 24), {"group": 1}, False),
    ]
    return [(f"{k}-{d}-{'x'.join(map(str, s))}-{n}", k, d, list(s), kw, mis)
            for n, (k, d, s, kw, mis) in enumerate(cases)]


# --------------------------------------------------------------------------- child process


def _run(cases):
    """Runs in the simulator: one JSON line per case."""
    from numba_tma.kernels import transpose_v6 as v6

    run_child(cases, {"v6_packed": v6.v6_packed, "v6_persistent": v6.v6_persistent})


if __name__ == "__main__":
    _run(json.loads(sys.stdin.read()))
    sys.exit(0)


# --------------------------------------------------------------------------- parent


@pytest.fixture(scope="module")
def sim_results():
    return run_cases(__file__, _cases())


@needs_simulator
@pytest.mark.parametrize("kernel", KERNELS)
def test_v6_kernel_under_simulator(sim_results, kernel):
    mine = [c for c in _cases() if c[1] == kernel]
    assert mine
    found = problems(sim_results, mine)
    assert not found, "\n".join(found)


def test_v6_closes_the_classic_ladder():
    from numba_tma.kernels import transpose_v6 as v6
    from numba_tma.ladders import transpose_classic as tc

    assert list(tc.LADDER)[LADDER_POSITION:] == KERNELS
    assert tc.LADDER["v6_packed"] is v6.v6_packed
    assert tc.LADDER["v6_persistent"] is v6.v6_persistent
    assert v6.BEST in KERNELS and tc.BEST == v6.BEST


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("kernel", KERNELS)
def test_launchers_reject_mismatched_arrays(kernel):
    from numba_tma.kernels import transpose_v6 as v6

    fn = getattr(v6, kernel)
    with pytest.raises(ValueError, match=r"out must have shape \(B, N, M\) = \(2, 5, 3\)"):
        fn(FakeDeviceArray((2, 3, 5)), FakeDeviceArray((2, 3, 5)))
    with pytest.raises(ValueError, match="must be 3-D"):
        fn(FakeDeviceArray((3, 5)), FakeDeviceArray((5, 3)))
    with pytest.raises(ValueError, match="same dtype"):
        fn(FakeDeviceArray((1, 3, 5)), FakeDeviceArray((1, 5, 3), "<f8"))


def test_v6_rejects_bad_group():
    from numba_tma.kernels.transpose_v6 import _check_group

    assert _check_group(16) == 16
    with pytest.raises(ValueError, match="power of two"):
        _check_group(3)


# --------------------------------------------------------------------------- banks


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
@pytest.mark.parametrize("packed", [True, False])
def test_v6_shared_accesses_conflict_free(itemsize, packed):
    """Every warp access of v6's to_smem/from_smem, with the kernels' own thread mapping."""
    from numba_tma.ladders.transpose_classic import _bank_conflicts
    from numba_tma.kernels.transpose_v6 import V6_THREADS, v6_config

    W, k, TP, TQ = v6_config(itemsize, packed)
    PSTEP, RSTEP = V6_THREADS // TQ, V6_THREADS // TP
    worst = 1
    for warp in range(V6_THREADS // 32):
        for i in range(TP // PSTEP):
            for c in range(k):
                def write(lane, i=i, c=c, warp=warp):
                    tid = warp * 32 + lane
                    lq, lp = tid % TQ, tid // TQ
                    return (k * lq + c) * TP + (lp + i * PSTEP + lq) % TP
                worst = max(worst, _bank_conflicts(W, write))
        for j in range(k * TQ // RSTEP):
            def read(lane, j=j, warp=warp):
                tid = warp * 32 + lane
                R = tid // TP + j * RSTEP
                return R * TP + (tid % TP + R // k) % TP
            worst = max(worst, _bank_conflicts(W, read))
    assert worst == 1


# --------------------------------------------------------------------------- offline SASS


@pytest.mark.parametrize("persistent", [False, True])
def test_v6_fp32_sass(persistent):
    """v6 on fp32 compiles to 8-byte accesses, one barrier, and fits its launch bounds."""
    pytest.importorskip("numba_tma.offline")
    from numba_tma.kernels import transpose_v6 as v6
    from numba_tma.offline import compile_kernel, find_tool

    try:
        find_tool("cuobjdump")
    except RuntimeError as exc:
        pytest.skip(str(exc))
    _, k, TP, TQ = v6.v6_config(4, True)
    kern = v6._v6(np.dtype(np.uint64), k, TP, TQ, persistent, v6.V6_GROUP)
    extra = ", int64" if persistent else ""
    kb = compile_kernel(kern, f"void(uint64[::1], uint64[::1], int64, int64, int64, int64{extra})")
    blocks = v6.V6_BLOCKS_PER_SM if persistent else v6.V6_PACKED_MIN_BLOCKS
    assert kb.registers * v6.V6_THREADS * blocks <= 65536, kb
    for op in ("LDG.E.64", "STG.E.64", "STS.64", "LDS.64"):
        assert kb.has(op), (op, kb)
    assert kb.count("BAR.SYNC") == 1
    assert kb.count("CALL") == 0
    assert kb.spill_stores <= 8, kb       # ptxas may park one smem address; nothing per element
