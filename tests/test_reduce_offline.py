"""numba_tma.kernels.reduce without a GPU: sum_axis0's argument checks (on stand-in arrays that
only carry a __cuda_array_interface__), the grid plan, and the kernel's sm_90a SASS (TMA loads in,
one TMA add-reduction out, no CALL, no local memory)."""

import os

import numpy as np
import pytest

from numba_tma.kernels import reduce as red
from sim_workers import needs_simulator

BASE = 0x7F0000000000


class FakeDeviceArray:
    def __init__(self, shape, typestr="<f4", address=BASE, strides=None):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr,
                                         "strides": strides, "data": (address, False),
                                         "version": 3}


def test_check_accepts_and_returns_the_shape():
    assert red.check_sum_axis0(FakeDeviceArray((1001, 100))) == (1001, 100)
    out = FakeDeviceArray((100,), address=BASE + (1 << 30))
    assert red.check_sum_axis0(FakeDeviceArray((1001, 100)), out) == (1001, 100)
    assert red.check_sum_axis0(FakeDeviceArray((0, 8), address=0)) == (0, 8)


@pytest.mark.parametrize("x,out,exc,message", [
    (np.zeros((4, 4), np.float32), None, TypeError, r"host numpy.ndarray"),
    (FakeDeviceArray((4, 4), "<f8"), None, TypeError, r"x must have dtype float32, got float64"),
    (FakeDeviceArray((4, 4), "<f2"), None, TypeError, r"x must have dtype float32, got float16"),
    (FakeDeviceArray((16,)), None, ValueError, r"x must be 2-D \(M, N\), got 1-D"),
    (FakeDeviceArray((2, 4, 4)), None, ValueError, r"x must be 2-D"),
    (FakeDeviceArray((8, 37)), None, ValueError,
     r"x's rows must be a multiple of 16 bytes for TMA: N \* 4 = 37 \* 4 = 148 bytes; pad N to a "
     r"multiple of 4"),
    (FakeDeviceArray((8, 8), strides=(64, 8)), None, ValueError, r"x must be C-contiguous"),
    (FakeDeviceArray((8, 8), strides=(4, 32)), None, ValueError, r"x must be C-contiguous"),
    (FakeDeviceArray((8, 8), address=BASE + 4), None, ValueError, r"not 16-byte aligned"),
    (FakeDeviceArray((8, 8)), FakeDeviceArray((4,), address=BASE + 4096), ValueError,
     r"out must have shape \(8,\) for x of shape \(8, 8\); got \(4,\)"),
    (FakeDeviceArray((8, 8)), FakeDeviceArray((8,), "<f8", address=BASE + 4096), TypeError,
     r"out must have dtype float32, got float64"),
    (FakeDeviceArray((8, 8)), FakeDeviceArray((8,), address=BASE + 4100), ValueError,
     r"out's data at 0x7f0000001004 is not 16-byte aligned"),
    (FakeDeviceArray((8, 8)), FakeDeviceArray((8,), address=BASE + 64), ValueError,
     r"out overlaps x"),
    (FakeDeviceArray((8, 8)), FakeDeviceArray((8,), address=BASE + 4096, strides=(8,)),
     ValueError, r"out must be contiguous"),
    (FakeDeviceArray((8, 8)), np.zeros(8, np.float32), TypeError, r"host numpy.ndarray"),
])
def test_bad_arguments_are_refused_before_the_gpu(x, out, exc, message):
    with pytest.raises(exc, match=message):
        red.check_sum_axis0(x, out)
    with pytest.raises(exc, match=message):
        red.sum_axis0(x, out=out)                  # the public function checks first


def test_tile_cols():
    assert [red.tile_cols(n) for n in (4, 32, 36, 64, 68, 128, 132, 32768)] == \
        [32, 32, 64, 64, 128, 128, 128, 128]


@pytest.mark.parametrize("m,n", [(1, 4), (1001, 100), (4097, 1024), (70001, 12),
                                 (32768, 32768), (3, 8192)])
def test_plan_grid_covers_every_row_tile_once(m, n):
    bn, (col_tiles, slabs), tiles_per_slab, n_row_tiles = red.plan_grid(m, n, 132)
    br = red.TILE_ELEMS // bn
    assert bn * br * red.ITEMSIZE == red.TILE_BYTES
    assert col_tiles * bn >= n > (col_tiles - 1) * bn
    assert n_row_tiles * br >= m > (n_row_tiles - 1) * br
    # Slabs partition the row tiles; none is empty, so every block adds a real partial.
    assert (slabs - 1) * tiles_per_slab < n_row_tiles <= slabs * tiles_per_slab
    assert slabs <= n_row_tiles
    assert slabs <= max(1, -(-132 * red.BLOCKS_PER_SM // col_tiles))   # about one wave


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="offline compilation needs the real CUDA target")
@pytest.mark.parametrize("bn", red.TILE_COLS)
def test_kernel_sass(bn):
    from numba_tma.offline import compile_kernel

    kb = compile_kernel(red._kernel(bn), "void(uint64[::1], uint64[::1], int64, int64)")
    assert kb.count("CALL") == 0
    assert kb.local_bytes == 0 and kb.stack_bytes == 0 and kb.spill_stores == 0
    ops = kb.opcodes()
    assert ops["UTMALDG.2D"] >= 2                  # the ring's first loads and the refill
    assert ops["UTMAREDG.1D.ADD"] == 1             # one reduction per block
    assert ops["UTMACCTL.PF"] == 1                 # the descriptor prefetch
    assert kb.count("LDS") >= 16                   # 16 rows of the tile per thread, unrolled
    # Two 16 KB stages plus the partials: several blocks fit on an SM.
    assert red.RING_ELEMS * red.ITEMSIZE <= kb.shared_bytes <= 40 * 1024
    assert kb.registers <= 64


# --- benches/reduce.py: its pure parts, and one whole run under the CUDA simulator ------------

import importlib.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import textwrap  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
BENCH_PATH = ROOT / "benches" / "reduce.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_reduce", BENCH_PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = load_bench()


def test_bench_import_does_not_load_numba_cuda():
    # The bench is a command line over numba_tma.bench, so importing it loads numba_tma (and
    # numba.cuda, which needs no GPU); the optional GPU libraries stay unloaded.
    code = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("b", {str(BENCH_PATH)!r})
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        loaded = [m for m in sys.modules
                  if m.split(".")[0] in ("torch", "cupy", "triton", "matplotlib")]
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_bench_args():
    a = bench.parse_args([])
    assert a.shapes == [(32768, 32768)] and (a.iters, a.warmup) == (50, 5) and a.json is None
    a = bench.parse_args(["--shape", "1001", "100", "--shape", "4097", "1024", "--iters", "3",
                          "--json", "r.json", "--no-baselines", "--seed", "7"])
    assert a.shapes == [(1001, 100), (4097, 1024)] and a.seed == 7 and a.no_baselines
    for argv in (["--shape", "8", "37"], ["--shape", "0", "4"], ["--iters", "0"]):
        with pytest.raises(SystemExit) as exc:
            bench.parse_args(argv)
        assert exc.value.code == 2


def test_bench_check_sums():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1000, 12)).astype(np.float32)
    ref, abs_sum = x.sum(axis=0, dtype=np.float64), np.abs(x).sum(axis=0, dtype=np.float64)
    ok, ratio, why = bench.check_sums(x.sum(axis=0), ref, abs_sum, 1000)       # float32 numpy
    assert ok and why is None and ratio < 1
    lost_tile = x[32:].sum(axis=0)
    ok, ratio, why = bench.check_sums(lost_tile, ref, abs_sum, 1000)
    assert not ok and ratio > 1 and "outside the float32 bound" in why
    poisoned = x.sum(axis=0)
    poisoned[3] = np.nan
    ok, _, why = bench.check_sums(poisoned, ref, abs_sum, 1000)
    assert not ok and "1 of 12 column sums" in why and "first column 3" in why
    ok, _, why = bench.check_sums(np.zeros(11), ref, abs_sum, 1000)
    assert not ok and "shape" in why
    one = x[:1]
    assert bench.check_sums(one[0], one[0].astype(np.float64), np.abs(one[0]), 1)[0]


def test_bench_finalize_and_table():
    rows = [bench.make_result("copy", "baseline", (1000, 1000), "ok", times=[1.0, 1.0]),
            bench.make_result("sum_axis0", "api", (1000, 1000), "ok", times=[0.5, 0.5]),
            bench.make_result("torch", "baseline", (1000, 1000), "ok", times=[1.0]),
            bench.make_result("cupy", "baseline", (1000, 1000), "skipped", reason="absent")]
    copy = bench.finalize(rows)
    assert copy == pytest.approx(8.0)              # 2 * 4e6 bytes in 1 ms: 8 GB/s
    assert rows[1]["GBps"] == pytest.approx(8.0) and rows[1]["pct_of_copy"] == pytest.approx(100)
    assert rows[1]["x_torch"] == pytest.approx(2.0)
    table = bench.format_rows(rows)
    assert "SKIPPED: absent" in table and table.splitlines()[0].startswith("kernel")
    assert set(rows[0]) == set(bench.RESULT_KEYS)


SIM_SCRIPT = """
import importlib.util, sys
from types import SimpleNamespace
import numpy as np
spec = importlib.util.spec_from_file_location("bench_reduce", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from numba_tma._frontend import cuda

@cuda.jit
def colsum(x, out, skip_last):
    j = cuda.grid(1)
    if j < x.shape[1]:
        s = 0.0
        for i in range(x.shape[0] - skip_last):
            s += x[i, j]
        out[j] = s

def launch(x, out, skip_last):
    colsum[-(-x.shape[1] // 32), 32](x, out, skip_last)

def sum_axis0(x, out=None):
    launch(x, out, 0)
    return out

def sum_axis0_launcher(x, out=None):
    return (lambda: launch(x, out, 1)), out            # loses the last row: must FAIL

library = SimpleNamespace(sum_axis0=sum_axis0, sum_axis0_launcher=sum_axis0_launcher)
sys.exit(bench.main(sys.argv[2:], library=library))
"""


@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="starts its own simulator process")
@needs_simulator
def test_bench_whole_run_under_simulator(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SIM_SCRIPT)
    out_json = tmp_path / "res.json"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run(
        [sys.executable, str(script), str(BENCH_PATH), "--shape", "40", "8", "--iters", "2",
         "--warmup", "1", "--seed", "3", "--json", str(out_json)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr     # the prepared run FAILED
    doc = json.loads(out_json.read_text())
    status = {r["kernel"]: r["status"] for r in doc["results"]}
    assert status == {"copy": "ok", "sum_axis0": "ok", "sum_axis0[prepared]": "failed",
                      "torch": "skipped", "cupy": "skipped"}
    by = {r["kernel"]: r for r in doc["results"]}
    assert "outside the float32 bound" in by["sum_axis0[prepared]"]["reason"]
    assert by["sum_axis0"]["iters"] == 2 and by["sum_axis0"]["ms"] is not None
    # (the simulator's events may time 0 ms, so GB/s can be None here)
    assert doc["seed"] == 3 and doc["results"][0]["shape"] == [40, 8] and "gpu" in doc
    assert "FAILED: sum_axis0[prepared] 40x8" in proc.stdout
