"""The classic transpose ladder (seed 003) without a GPU.

* Every ladder kernel runs under numba's CUDA simulator on small odd shapes, for int32, float64,
  uint8 and float16: fresh random bytes in (NaN payloads included), the output poisoned before each
  run, byte-exact compare with numpy's transpose. The simulator has to be switched on before
  ``numba.cuda`` is first imported, and this process has imported it for the real target, so the
  runs happen in two child processes (this file is also their script), in parallel.
* The bank-conflict table of the module docstring, from the host bank model.
* The v6 kernels' SASS for sm_90a, compiled offline: 8-byte global and shared accesses, no local
  memory to speak of, registers within the launch bounds.
* Launchers reject mismatched shapes before touching a device.
"""

import json
import sys
import time

import numpy as np
import pytest

from sim_workers import run_cases

DTYPES = ["int32", "float64", "uint8", "float16"]
SHAPES = [(1, 37, 45), (3, 33, 7), (2, 5, 70)]   # odd; partial tiles on both axes
KERNELS = ["v1_naive", "v2_smem", "v3_rotate", "v3_padded", "v4_double_buffer", "v5_64x32",
           "v6_packed", "v6_persistent"]


def _cases():
    """(id, kernel, dtype, shape, kwargs, misaligned). The simulator runs ~2k threads/s, so every
    kernel gets every dtype and every shape, but not every product: shapes rotate per dtype."""
    cases = []
    for i, kernel in enumerate(KERNELS):
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
    from numba import cuda

    from numba_tma.kernels import transpose_v6 as v6
    from numba_tma.ladders import transpose_classic as tc

    rng = np.random.default_rng()
    for cid, kernel, dtype, shape, kwargs, misaligned in cases:
        t0 = time.perf_counter()
        try:
            B, M, N = shape
            dt = np.dtype(dtype)
            nbytes = B * M * N * dt.itemsize
            a = rng.integers(0, 256, size=nbytes, dtype=np.uint8).view(dt).reshape(shape)
            poison = np.full(nbytes, 0xA5, np.uint8)
            if misaligned:
                # Device buffers one byte past an 8-byte boundary.
                pad = np.zeros(1, np.uint8)
                src = cuda.to_device(np.concatenate([pad, a.view(np.uint8).ravel()]))[1:]
                src = src.view(dt).reshape(shape)
                out = cuda.to_device(np.concatenate([pad, poison]))[1:]
                out = out.view(dt).reshape(B, N, M)
                k = v6._v6_setup(src, out, B, M, N)[1]
                assert k == 1, f"misaligned buffers took the packed path (k={k})"
            else:
                src = cuda.to_device(a)
                out = cuda.to_device(poison.view(dt).reshape(B, N, M))
            tc.LADDER[kernel](src, out, **kwargs)
            got = out.copy_to_host().view(np.uint8).reshape(B, N, M, dt.itemsize)
            want = np.ascontiguousarray(a.transpose(0, 2, 1)).view(np.uint8)
            want = want.reshape(B, N, M, dt.itemsize)
            bad = np.argwhere((got != want).any(axis=-1))
            err = None
            if len(bad):
                err = (f"{len(bad)} of {B * N * M} elements differ, first at out index "
                       f"{tuple(int(v) for v in bad[0])}")
        except Exception as exc:  # reported to the parent, which fails the case
            err = f"{type(exc).__name__}: {exc}"
        print(json.dumps({"id": cid, "err": err, "s": round(time.perf_counter() - t0, 2)}),
              flush=True)


if __name__ == "__main__":
    _run(json.loads(sys.stdin.read()))
    sys.exit(0)


# --------------------------------------------------------------------------- parent


@pytest.fixture(scope="module")
def sim_results():
    return run_cases(__file__, _cases())


@pytest.mark.parametrize("kernel", KERNELS)
def test_ladder_kernel_under_simulator(sim_results, kernel):
    results, errors = sim_results
    mine = [c for c in _cases() if c[1] == kernel]
    assert mine
    problems = []
    for cid, *_ in mine:
        r = results.get(cid)
        if r is None:
            problems.append(f"{cid}: no result" + (f" ({errors[0]})" if errors else ""))
        elif r["err"]:
            problems.append(f"{cid}: {r['err']}")
    assert not problems, "\n".join(problems)


def test_ladder_order_and_best():
    from numba_tma.ladders import transpose_classic as tc

    assert list(tc.LADDER) == KERNELS
    assert tc.BEST in tc.LADDER
    for name, fn in tc.LADDER.items():
        assert fn.__doc__ and "Changed from" in fn.__doc__ or name == "v1_naive", name


# --------------------------------------------------------------------------- validation


class FakeDeviceArray:
    """Just enough __cuda_array_interface__ for the launchers' checks; never dereferenced."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"version": 3, "shape": shape, "typestr": typestr,
                                         "strides": None, "data": (0x10000, False)}


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


def test_v6_rejects_bad_group():
    from numba_tma.kernels.transpose_v6 import _check_group

    assert _check_group(16) == 16
    with pytest.raises(ValueError, match="power of two"):
        _check_group(3)


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
