"""numba_tma.ladders.simt_gemm (seed 004) without a GPU: every configuration and layout under
numba's CUDA simulator on small odd shapes, and the host wrapper's input validation.

* The simulator has to be switched on before ``numba.cuda`` is first imported, and this process
  has imported it for the real target, so the runs happen in child processes (this file is
  their script), each importing ``numba_tma.ladders.simt_gemm`` with the simulator on (the
  package imports under it; numba comes through ``numba_tma._frontend``). Inputs are small
  integers (every product and sum exact in fp32), ``out`` starts poisoned (NaN where beta == 0,
  which must never be read), and results compare exactly.
* Validation: arrays described only by ``__cuda_array_interface__`` (never dereferenced), so
  every error is raised before anything touches a device.
"""

import importlib
import json
import os
import sys
import time

import numpy as np
import pytest

from sim_workers import needs_simulator, run_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (config, (M, N, K), layout, b_layout, alpha, beta)
CASES = [
    ("seed", (37, 45, 29), "row", None, 1.0, 0.0),      # one partial tile, partial K slice
    ("seed", (65, 66, 33), "row", None, 2.0, -1.0),     # 2 x 2 tiles, 3 slices, alpha/beta
    ("seed", (70, 3, 17), "col", None, 1.0, 0.5),       # column-major, a thin N
    ("seed", (33, 70, 16), "col", "row", 1.0, 0.0),     # the seed's own NT operand set
    ("seed", (5, 64, 48), "row", "col", -1.0, 2.0),     # B column-major only; K % BK == 0
    ("seed", (1, 1, 1), "row", None, 3.0, 0.0),         # the smallest problem
    ("seed", (9, 7, 0), "col", None, 1.0, 3.0),         # K = 0: out = beta * out
    ("large", (37, 45, 29), "row", None, 1.0, 0.0),
    ("large", (130, 129, 35), "col", None, 0.5, 1.0),   # 2 x 2 tiles of 128
    ("large", (19, 140, 50), "col", "row", 1.0, 0.0),
]


def _cases():
    return [(f"{cfg}-{'x'.join(map(str, s))}-{lay}-{blay or lay}-{n}", cfg, list(s), lay, blay,
             alpha, beta) for n, (cfg, s, lay, blay, alpha, beta) in enumerate(CASES)]


# --------------------------------------------------------------------------- child process


def _load_module():
    return importlib.import_module("numba_tma.ladders.simt_gemm")


def _run(cases):
    """Runs in the simulator: one JSON line per case."""
    from numba_tma._frontend import cuda

    mod = _load_module()
    rng = np.random.default_rng()
    for cid, cfg, (M, N, K), lay, blay, alpha, beta in cases:
        t0 = time.perf_counter()
        try:
            order = {"row": "C", "col": "F"}
            b_order = order[blay or lay]
            a = np.asarray(rng.integers(-8, 9, (M, K)), np.float32, order=order[lay])
            b = np.asarray(rng.integers(-8, 9, (K, N)), np.float32, order=b_order)
            c0 = np.asarray(rng.integers(-8, 9, (M, N)), np.float32, order=order[lay])
            if beta == 0:
                c0[...] = np.nan                 # must be written, never read
            out = cuda.to_device(c0)
            ret = mod.simt_gemm(cuda.to_device(a), cuda.to_device(b), out, layout=lay,
                                b_layout=blay, alpha=alpha, beta=beta, config=cfg)
            got = out.copy_to_host()
            want = alpha * (a.astype(np.float64) @ b.astype(np.float64))
            if beta != 0:
                want += beta * c0
            err = None
            if ret is not out:
                err = "simt_gemm did not return out"
            elif not np.array_equal(got, want.astype(np.float32)):
                bad = np.argwhere(got != want)
                err = (f"{len(bad)} of {M * N} elements differ, first at {tuple(bad[0])}: "
                       f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")
            elif (got.flags.c_contiguous if lay == "row" else got.flags.f_contiguous) is False:
                err = "out lost its layout"
            if err is None and beta == 0:
                # out=None allocates in the layout and gives the same result
                fresh = mod.simt_gemm(cuda.to_device(a), cuda.to_device(b), layout=lay,
                                      b_layout=blay, alpha=alpha, config=cfg).copy_to_host()
                if not np.array_equal(fresh, got):
                    err = "out=None gave a different result"
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


@needs_simulator
@pytest.mark.parametrize("case", _cases(), ids=[c[0] for c in _cases()])
def test_simt_gemm_under_simulator(sim_results, case):
    results, errors = sim_results
    r = results.get(case[0])
    assert r is not None, f"no result for {case[0]}" + (f" ({errors[0]})" if errors else "")
    assert r["err"] is None, r["err"]


# --------------------------------------------------------------------------- validation


class FakeDeviceArray:
    """Just enough __cuda_array_interface__ for the wrapper's checks; never dereferenced."""

    def __init__(self, shape, typestr="<f4", order="C", ptr=0x10000):
        itemsize = int(typestr[2:])
        strides = None
        if order == "F":
            strides, step = [], itemsize
            for extent in shape:
                strides.append(step)
                step *= extent
            strides = tuple(strides)
        self.__cuda_array_interface__ = {"version": 3, "shape": tuple(shape),
                                         "typestr": typestr, "strides": strides,
                                         "data": (ptr, False)}


A_PTR = 1 << 40                # fake device addresses, far apart


def _fakes(M=3, K=5, N=4, order="C"):
    return (FakeDeviceArray((M, K), order=order, ptr=A_PTR),
            FakeDeviceArray((K, N), order=order, ptr=2 * A_PTR),
            FakeDeviceArray((M, N), order=order, ptr=3 * A_PTR))


@pytest.fixture(scope="module")
def simt():
    from numba_tma.ladders import simt_gemm

    return simt_gemm


@pytest.mark.parametrize("kwargs,args,exc,message", [
    ({}, ("numpy_a",), TypeError, r"a is a host numpy array"),
    ({}, ("f64_b",), TypeError, r"b must have dtype float32, got float64"),
    ({}, ("3d_a",), ValueError, r"a must be 2-D, got shape \(1, 3, 5\)"),
    ({}, ("k_mismatch",), ValueError, r"b must have shape \(K, N\) with K = a.shape\[1\] = 5"),
    ({}, ("out_shape",), ValueError, r"out must have shape \(M, N\) = \(3, 4\); got \(4, 3\)"),
    ({}, ("f_order",), ValueError, r"a must be C-contiguous for row-major layout='row'"),
    ({"layout": "col"}, (), ValueError, r"a must be F-contiguous for col-major layout='col'"),
    ({"layout": "col", "b_layout": "row"}, ("f_order_a_out",), None, None),
    ({"layout": "diag"}, (), ValueError, r"layout must be one of \('row', 'col'\)"),
    ({"b_layout": "T"}, (), ValueError, r"b_layout must be one of"),
    ({"config": "huge"}, (), ValueError, r"config must be one of \('seed', 'large'\)"),
    ({"beta": 1.0}, ("no_out",), ValueError, r"beta = 1.0 scales out, so out must be given"),
    ({"alpha": "x"}, (), TypeError, r"alpha and beta must be real numbers"),
    ({}, ("alias",), ValueError, r"out overlaps a"),
    ({}, ("tall",), ValueError, r"gridDim.y"),
    ({}, ("object",), TypeError, r"a must be a CUDA device array exposing"),
])
def test_wrapper_validates_before_launch(simt, kwargs, args, exc, message, monkeypatch):
    a, b, out = _fakes()
    what = args[0] if args else None
    if what == "numpy_a":
        a = np.zeros((3, 5), np.float32)
    elif what == "f64_b":
        b = FakeDeviceArray((5, 4), "<f8")
    elif what == "3d_a":
        a = FakeDeviceArray((1, 3, 5))
    elif what == "k_mismatch":
        b = FakeDeviceArray((6, 4))
    elif what == "out_shape":
        out = FakeDeviceArray((4, 3), ptr=3 * A_PTR)
    elif what == "f_order":
        a = FakeDeviceArray((3, 5), order="F")
    elif what == "f_order_a_out":
        a, _, out = _fakes(order="F")
    elif what == "no_out":
        out = None
    elif what == "alias":
        out = FakeDeviceArray((3, 4), ptr=A_PTR + 8)
    elif what == "tall":
        a, b, out = _fakes(M=70000 * 128, K=1, N=1)
    elif what == "object":
        a = object()
    if exc is None:
        # a valid set: the wrapper gets as far as the launch, which is stubbed out here
        launched = []

        class Kernel:
            def __getitem__(self, cfg):
                return lambda *args: launched.append((cfg, args))

        monkeypatch.setattr(simt, "gemm_kernel", lambda *flags: Kernel())
        monkeypatch.setattr(simt, "_flat", lambda x, order: (x, order))
        assert simt.simt_gemm(a, b, out, **kwargs) is out
        (grid, threads, _), args_ = launched[0]
        assert grid == (1, 1) and threads == 256
        assert [x[1] for x in args_[:3]] == ["F", "C", "F"]
        assert args_[3:9] == (3, 4, 5, 3, 4, 3)          # M, N, K, lda, ldb, ldc
        return
    with pytest.raises(exc, match=message):
        simt.simt_gemm(a, b, out, **kwargs)


def test_contiguity_ignores_unit_dimensions(simt):
    assert simt._contiguous((1, 5), (999, 4), 4, "C")
    assert simt._contiguous((5, 1), (4, 999), 4, "F")
    assert simt._contiguous((3, 5), None, 4, "C")
    assert not simt._contiguous((3, 5), None, 4, "F")
    assert simt._contiguous((3, 1), None, 4, "F")        # a column is both
    assert not simt._contiguous((3, 5), (40, 4), 4, "C")  # a padded row pitch


def test_configs_are_valid_and_bad_ones_rejected(simt):
    for name, cfg in simt.CONFIGS.items():
        th_m, th_n, nt = simt._check_config(cfg)
        assert nt == (cfg.bm // cfg.tm) * (cfg.bn // cfg.tn)
        grid, threads = simt.launch_config(1000, 300, name)
        assert threads == nt and grid == (-(-300 // cfg.bn), -(-1000 // cfg.bm))
    with pytest.raises(ValueError, match="unsupported tile configuration"):
        simt._check_config(simt.Config(96, 64, 16, 8, 8))
    with pytest.raises(ValueError, match="unsupported tile configuration"):
        simt._check_config(simt.Config(64, 64, 12, 8, 8))
    assert simt.flops(2, 3, 4) == 48
