"""The classic transpose ladder (seed 003, numba_tma.ladders.transpose_classic: v1-v5) without a
GPU. The shipped v6 rungs that close the ladder are tested in test_transpose_v6_sim.py.

* Every ladder kernel runs under numba's CUDA simulator on small odd shapes, for int32, float64,
  uint8 and float16: fresh random bytes in (NaN payloads included), the output poisoned before each
  run, byte-exact compare with numpy's transpose. The simulator has to be switched on before
  ``numba.cuda`` is first imported, and this process has imported it for the real target, so the
  runs happen in two child processes (this file is also their script), in parallel.
* The bank-conflict table of the module docstring, from the host bank model.
* Launchers reject mismatched shapes before touching a device.
"""

import json
import sys

import pytest

from sim_workers import needs_simulator, run_cases
from transpose_sim import FakeDeviceArray, problems, run_child

DTYPES = ["int32", "float64", "uint8", "float16"]
SHAPES = [(1, 37, 45), (3, 33, 7), (2, 5, 70)]   # odd; partial tiles on both axes
KERNELS = ["v1_naive", "v2_smem", "v3_rotate", "v3_padded", "v4_double_buffer", "v5_64x32"]
#: The whole ladder, in order: v1-v5 here, then the shipped v6 rungs (numba_tma.kernels).
LADDER = KERNELS + ["v6_packed", "v6_persistent"]


def _cases():
    """(id, kernel, dtype, shape, kwargs, misaligned). The simulator runs ~2k threads/s, so every
    kernel gets every dtype and every shape, but not every product: shapes rotate per dtype."""
    cases = []
    for i, kernel in enumerate(KERNELS):
        for j, dtype in enumerate(DTYPES):
            cases.append((kernel, dtype, SHAPES[(i + j) % len(SHAPES)], {}, False))
    return [(f"{k}-{d}-{'x'.join(map(str, s))}-{n}", k, d, list(s), kw, mis)
            for n, (k, d, s, kw, mis) in enumerate(cases)]


# --------------------------------------------------------------------------- child process


def _run(cases):
    """Runs in the simulator: one JSON line per case."""
    from numba_tma.ladders import transpose_classic as tc

    run_child(cases, tc.LADDER)


if __name__ == "__main__":
    _run(json.loads(sys.stdin.read()))
    sys.exit(0)


# --------------------------------------------------------------------------- parent


@pytest.fixture(scope="module")
def sim_results():
    return run_cases(__file__, _cases())


@needs_simulator
@pytest.mark.parametrize("kernel", KERNELS)
def test_ladder_kernel_under_simulator(sim_results, kernel):
    mine = [c for c in _cases() if c[1] == kernel]
    assert mine
    found = problems(sim_results, mine)
    assert not found, "\n".join(found)


def test_ladder_order_and_best():
    from numba_tma.ladders import transpose_classic as tc

    assert list(tc.LADDER) == LADDER
    assert tc.BEST in tc.LADDER
    for name, fn in tc.LADDER.items():
        assert fn.__doc__ and "Changed from" in fn.__doc__ or name == "v1_naive", name


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("kernel", KERNELS)
def test_launchers_reject_mismatched_arrays(kernel):
    from numba_tma.ladders.transpose_classic import LADDER

    fn = LADDER[kernel]
    with pytest.raises(ValueError, match=r"out must have shape \(B, N, M\) = \(2, 5, 3\)"):
        fn(FakeDeviceArray((2, 3, 5)), FakeDeviceArray((2, 3, 5)))
    with pytest.raises(ValueError, match="must be 3-D"):
        fn(FakeDeviceArray((3, 5)), FakeDeviceArray((5, 3)))
    with pytest.raises(ValueError, match="same dtype"):
        fn(FakeDeviceArray((1, 3, 5)), FakeDeviceArray((1, 5, 3), "<f8"))


# --------------------------------------------------------------------------- banks


def _column_write(itemsize, layout, rows=32):
    """Worst conflict of v2/v3's column write tile[lx][f(lx, ly)] over the rows ly."""
    from numba_tma.ladders.transpose_classic import _bank_conflicts

    pitch = 33 if layout == "padded" else 32
    worst = 1
    for ly in range(rows):
        if layout == "rotate":
            def addr(lane, ly=ly):
                return lane * pitch + ((lane + ly) & 31)
        else:
            def addr(lane, ly=ly):
                return lane * pitch + ly
        worst = max(worst, _bank_conflicts(itemsize, addr))
    return worst


@pytest.mark.parametrize("itemsize, plain, rotate, padded",
                         [(4, 32, 1, 1), (8, 16, 1, 1), (2, 16, 1, 2), (1, 8, 1, 2)])
def test_bank_conflict_table(itemsize, plain, rotate, padded):
    assert _column_write(itemsize, "plain") == plain
    assert _column_write(itemsize, "rotate") == rotate
    assert _column_write(itemsize, "padded") == padded
