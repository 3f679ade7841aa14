"""CPU tests of the benches' pure parts: argument parsing, statistics, bandwidth arithmetic, tables,
the sampled transpose check, the JSON schema, and (under the CUDA simulator) one whole run of
benches/transpose.py on fake kernels. The shared tools are the package's numba_tma.bench
(tests/test_bench_toolkit.py tests more of it); the scripts, command lines over it, are loaded
by path (benches/ is not a package)."""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from numba_tma import bench as toolkit
from numba_tma.bench import baselines
from sim_workers import needs_simulator

ROOT = Path(__file__).resolve().parents[1]
BENCHES = ROOT / "benches"


def load(name, filename):
    spec = importlib.util.spec_from_file_location(name, BENCHES / filename)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


bench = load("bench_transpose", "transpose.py")


# --- importing needs no GPU stack ------------------------------------------------------------

#: What importing the benches and numba_tma.bench must not load: the optional GPU libraries (and
#: matplotlib) are imported by the functions that use them. numba_tma itself (and with it
#: numba.cuda, which imports without a GPU) is the toolkit's package and is loaded.
OPTIONAL = ("torch", "cupy", "triton", "matplotlib")


def _import_loads_no_optional_library(*scripts):
    code = textwrap.dedent(f"""
        import importlib.util, sys
        import numba_tma.bench
        for name, path in {[(n, str(BENCHES / n)) for n in scripts]!r}:
            spec = importlib.util.spec_from_file_location(name[:-3], path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
        loaded = [m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r}]
        assert not loaded, loaded
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_import_does_not_load_numba_cuda():
    # Renamed in spirit: the toolkit lives in numba_tma now, whose import loads numba.cuda (no
    # GPU needed); what importing must still not load are the optional libraries.
    _import_loads_no_optional_library("transpose.py")


def test_toolkit_modules_import_no_gpu_library_at_module_level():
    # numba.cuda, torch, CuPy, Triton and matplotlib are imported inside functions only.
    import ast

    for path in (ROOT / "numba_tma" / "bench").glob("*.py"):
        for node in ast.parse(path.read_text()).body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in ("numba", "cuda") + OPTIONAL, (path.name, name)


# --- arguments --------------------------------------------------------------------------------

def test_parse_args_defaults():
    a = bench.parse_args([])
    assert a.shapes == [(32768, 32768)]
    assert a.dtypes == ["float32"]
    assert (a.iters, a.warmup, a.samples) == (50, 5, 64)
    assert a.kernels is None and a.json is None and a.no_baselines is False
    assert bench.configs_of(a) == [((32768, 32768), "float32")]


def test_parse_args_matrix():
    a = bench.parse_args(["--dtype", "float32,fp16,uint8,float64,fp32", "--shape", "32768",
                          "32768", "--shape", "32767", "20001", "--iters", "7", "--warmup", "0",
                          "--kernels", "tma_*,transpose()", "--json", "x.json",
                          "--no-baselines", "--seed", "3"])
    assert a.dtypes == ["float32", "float16", "uint8", "float64"]      # duplicates dropped
    assert a.shapes == [(32768, 32768), (32767, 20001)]
    assert (a.iters, a.warmup, a.seed, a.json, a.no_baselines) == (7, 0, 3, "x.json", True)
    cfgs = bench.configs_of(a)
    assert len(cfgs) == 8 and cfgs[0] == ((32768, 32768), "float32")
    assert cfgs[4] == ((32767, 20001), "float32")


@pytest.mark.parametrize("argv", [
    ["--dtype", "bfloat16"], ["--dtype", "complex64"], ["--dtype", ","],
    ["--shape", "0", "4"], ["--shape", "4"], ["--shape", "-1", "4"],
    ["--iters", "0"], ["--warmup", "-1"], ["--shape", "a", "4"],
])
def test_parse_args_rejects(argv):
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(argv)
    assert exc.value.code == 2


@pytest.mark.parametrize("text,name", [
    ("float32", "float32"), ("fp16", "float16"), ("U8", "uint8"), ("int8", "int8"),
    ("double", "float64"), ("int32", "int32"), ("i64", "int64"),
])
def test_parse_dtype(text, name):
    assert toolkit.parse_dtype(text) == name


def test_select_names():
    names = ["v1_naive", "v2_smem", "tma_naive", "tma_swizzle128", "tma_pipelined", "transpose()"]
    assert toolkit.select_names(names, None) == names
    assert toolkit.select_names(names, "") == names
    assert toolkit.select_names(names, "tma_*") == ["tma_naive", "tma_swizzle128", "tma_pipelined"]
    assert toolkit.select_names(names, "transpose(),v1_naive") == ["v1_naive", "transpose()"]
    assert toolkit.select_names(names, "*naive, tma_p*") == ["v1_naive", "tma_naive",
                                                            "tma_pipelined"]
    with pytest.raises(ValueError, match="tma_nope"):
        toolkit.select_names(names, "tma_*,tma_nope")


# --- statistics and arithmetic ------------------------------------------------------------------

def test_summarize_and_median():
    s = toolkit.summarize([3.0, 1.0, 2.0, 10.0])
    assert s == {"median": 2.5, "min": 1.0, "max": 10.0, "mean": 4.0,
                 "stdev": pytest.approx(np.std([3, 1, 2, 10], ddof=1)), "n": 4}
    assert toolkit.median([5.0, 1.0, 3.0]) == 3.0
    assert toolkit.summarize([2.0])["stdev"] == 0.0
    with pytest.raises(ValueError):
        toolkit.summarize([])


def test_bandwidth_arithmetic():
    nbytes = bench.transpose_bytes((32768, 32768), 4)
    assert nbytes == 2 * 32768 * 32768 * 4 == 8 * 2**30
    assert toolkit.gbps(nbytes, 4.0) == pytest.approx(nbytes / 4e-3 / 1e9)     # 2147.5 GB/s
    assert toolkit.gbps(2e9, 1000.0) == pytest.approx(2.0)
    assert toolkit.gbps(nbytes, 0) is None and toolkit.gbps(nbytes, -1.0) is None
    assert toolkit.gbps(nbytes, None) is None
    assert toolkit.pct_of(1500.0, 3000.0) == pytest.approx(50.0)
    assert toolkit.pct_of(1.0, None) is None and toolkit.pct_of(None, 3.0) is None
    assert toolkit.speedup(6.0, 3.0) == pytest.approx(2.0)      # torch 6 ms, kernel 3 ms: 2x
    assert toolkit.speedup(None, 3.0) is None and toolkit.speedup(6.0, 0.0) is None


def fake_event(log):
    """A CUDA-event stand-in class: ``record`` notes its position in ``log``, ``elapsed_time``
    is the number of log entries between two records; instances are counted."""

    class Event:
        count = 0

        def __init__(self):
            Event.count += 1
            self.t = None

        def record(self, stream=0):
            self.t = len(log)
            log.append("record")

        def synchronize(self):
            log.append("event-sync")

        def elapsed_time(self, end):
            return float(end.t - self.t)

    return Event


def test_time_cuda_brackets_each_run():
    log = []
    Event = fake_event(log)
    times = toolkit.time_cuda(lambda: log.append("run"), 4, warmup=2, event=Event,
                             synchronize=lambda: log.append("sync"))
    assert log[:3] == ["run", "run", "sync"]                   # warm-up, then a synchronize
    assert log[3:15] == ["record", "run", "record"] * 4        # each timed run bracketed
    assert log.count("run") == 6 and Event.count == 8
    assert times == [2.0] * 4
    with pytest.raises(ValueError):
        toolkit.time_cuda(lambda: None, 0, event=Event, synchronize=lambda: None)
    log.clear()
    toolkit.time_cuda(lambda: log.append("run"), 2, event=Event, synchronize=lambda: None,
                     hold=lambda: log.append("hold"))
    assert log[:4] == ["hold", "record", "run", "record"]      # the GPU wait goes first


def test_random_array():
    rng = np.random.default_rng(0)
    for dtype in toolkit.SUPPORTED_DTYPES:
        a = toolkit.random_array((37, 53), dtype, rng, chunk_elems=100)
        assert a.dtype == np.dtype(dtype) and a.shape == (37, 53)
        assert np.count_nonzero(a) > 0.9 * a.size
        assert len(np.unique(a)) > 50
    f = toolkit.random_array((1000,), "float16", rng)
    assert np.isfinite(f).all() and 0.5 < f.std() < 1.5


# --- formatting and results ---------------------------------------------------------------------

def test_format_table():
    text = toolkit.format_table(["kernel", "ms", "GB/s"], [["copy", "1.000", "2000.0"],
                                                        ["tma_pipelined", "12.5", "-"]])
    lines = text.splitlines()
    assert lines[0] == "kernel        |    ms |   GB/s"
    assert lines[1] == "--------------+-------+-------"
    assert lines[2] == "copy          | 1.000 | 2000.0"
    assert lines[3] == "tma_pipelined |  12.5 |      -"
    with pytest.raises(ValueError):
        toolkit.format_table(["a", "b"], [["only one"]])
    assert toolkit.fmt(None) == "-" and toolkit.fmt(float("nan")) == "-"
    assert toolkit.fmt(2.0, ".1f") == "2.0"


def fake_rows(shape=(1024, 512), dtype="float32"):
    mk = bench.make_result
    return [
        mk("copy", "baseline", dtype, shape, "ok", times=[1.0, 1.1, 0.9]),
        mk("torch", "baseline", dtype, shape, "ok", times=[4.0, 4.0, 4.2]),
        mk("cupy", "baseline", dtype, shape, "skipped", reason="cupy not importable"),
        mk("v1_naive", "kernel", dtype, shape, "ok", times=[8.0] * 5),
        mk("tma_pipelined", "kernel", dtype, shape, "ok", times=[1.25, 1.3, 1.2]),
        mk("tma_naive", "kernel", dtype, shape, "failed", reason="3 of 524288 elements differ"),
        mk("transpose()", "api", dtype, shape, "ok", times=[1.3]),
    ]


def test_finalize_config_derived_columns():
    rows = fake_rows()
    copy_gbps = bench.finalize_config(rows)
    nbytes = 2 * 1024 * 512 * 4
    assert copy_gbps == pytest.approx(nbytes / 1e-3 / 1e9)
    by = {r["kernel"]: r for r in rows}
    assert by["copy"]["pct_of_copy"] == pytest.approx(100.0)
    assert by["torch"]["x_torch"] == pytest.approx(1.0)
    p = by["tma_pipelined"]
    assert (p["ms"], p["min_ms"], p["max_ms"], p["iters"]) == (1.25, 1.2, 1.3, 3)
    assert p["GBps"] == pytest.approx(nbytes / 1.25e-3 / 1e9)
    assert p["pct_of_copy"] == pytest.approx(80.0)
    assert p["x_torch"] == pytest.approx(3.2)
    assert by["v1_naive"]["x_torch"] == pytest.approx(0.5)
    for name in ("cupy", "tma_naive"):
        assert by[name]["ms"] is None and by[name]["GBps"] is None
    assert all(r["copy_GBps"] == copy_gbps for r in rows)
    assert bench.best_result(rows)["kernel"] == "tma_pipelined"   # baselines never "best"
    assert "tma_pipelined | 1.250 |" in bench.best_line(rows)


def test_finalize_without_copy_or_torch():
    rows = [bench.make_result("copy", "baseline", "uint8", (8, 8), "failed", reason="x"),
            bench.make_result("k", "kernel", "uint8", (8, 8), "ok", times=[1.0])]
    assert bench.finalize_config(rows) is None
    assert rows[1]["GBps"] == pytest.approx(128 / 1e-3 / 1e9)
    assert rows[1]["pct_of_copy"] is None and rows[1]["x_torch"] is None
    with pytest.raises(ValueError):
        bench.make_result("k", "kernel", "uint8", (8, 8), "ok")          # ok needs times
    with pytest.raises(ValueError):
        bench.make_result("k", "kernel", "uint8", (8, 8), "broken")


def test_merge_copies_keeps_the_faster():
    rows = [bench.make_result("copy[cuMemcpyDtoDAsync]", "baseline", "float32", (4, 4), "ok",
                              times=[2.0]),
            bench.make_result("copy[torch copy_]", "baseline", "float32", (4, 4), "ok",
                              times=[1.5])]
    best = bench.merge_copies(rows)
    assert best["kernel"] == "copy" and best["ms"] == 1.5
    assert "cuMemcpyDtoDAsync 2.0000 ms" in best["note"] and "torch copy_ 1.5000 ms" in best["note"]


def test_table_shows_status_and_reason():
    rows = fake_rows()
    bench.finalize_config(rows)
    text = bench.format_results(rows)
    header = [c.strip() for c in text.splitlines()[0].split(" | ")]
    assert header == ["kernel", "ms", "GB/s", "% of copy", "x torch", "status"]
    ok = [line for line in text.splitlines() if line.startswith("tma_pipelined ")][0]
    assert [c.strip() for c in ok.split(" | ")] == ["tma_pipelined", "1.250", "3.4", "80.0",
                                                     "3.20", "ok"]
    failed = [line for line in text.splitlines() if line.startswith("tma_naive ")][0]
    assert "FAILED: 3 of 524288 elements differ" in failed
    assert "SKIPPED: cupy not importable" in text


def test_json_schema(tmp_path):
    rows_a = fake_rows()
    rows_b = fake_rows((33, 17), "uint8")
    configs = []
    for rows in (rows_a, rows_b):
        configs.append({"shape": rows[0]["shape"], "dtype": rows[0]["dtype"],
                        "copy_GBps": bench.finalize_config(rows)})
    args = bench.parse_args(["--shape", "1024", "512", "--shape", "33", "17",
                             "--dtype", "float32,uint8"])
    env = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "13.0", "compute_capability": "9.0"}
    versions = {"numba": "0.68.1", "numba-cuda": "0.30.4", "numpy": "2.4.6", "torch": None,
                "cupy": None}
    report = bench.build_report(env, versions, args, configs, rows_a + rows_b, seed=1,
                                command="benches/transpose.py")
    path = tmp_path / "sub" / "transpose.json"
    toolkit.write_json(path, report)
    doc = json.loads(path.read_text())
    assert set(bench.REPORT_KEYS) <= set(doc)
    assert doc["gpu"] == "NVIDIA H100 80GB HBM3" and doc["driver"] == "13.0"
    assert doc["versions"]["numba-cuda"] == "0.30.4"
    assert doc["shape"] == [1024, 512] and doc["dtype"] == "float32"
    assert doc["copy_GBps"] == pytest.approx(configs[0]["copy_GBps"])
    assert [c["dtype"] for c in doc["configs"]] == ["float32", "uint8"]
    assert len(doc["results"]) == 14
    for r in doc["results"]:
        assert set(bench.RESULT_KEYS) <= set(r)
        assert r["status"] in ("ok", "failed", "skipped")
        assert isinstance(r["shape"], list) and len(r["shape"]) == 2
        if r["status"] == "ok":
            assert all(isinstance(r[k], float) for k in ("ms", "min_ms", "max_ms", "GBps"))
            assert r["min_ms"] <= r["ms"] <= r["max_ms"]
        else:
            assert r["ms"] is None and r["reason"]
    uint8_copy = [r for r in doc["results"] if r["dtype"] == "uint8" and r["kernel"] == "copy"]
    assert uint8_copy[0]["copy_GBps"] == pytest.approx(configs[1]["copy_GBps"])
    toolkit.write_json(path, {"x": float("nan"), "y": np.float32(1.5), "z": (1, 2)})
    assert json.loads(path.read_text()) == {"x": None, "y": 1.5, "z": [1, 2]}


# --- the sampled correctness check --------------------------------------------------------------

def host_fetchers(out):
    return (lambda rows: out[rows, :]), (lambda cols: out[:, cols].T)


def sampled(src, out, rows, cols):
    return bench.check_sampled(src, *host_fetchers(out), rows, cols)


@pytest.fixture
def case():
    rng = np.random.default_rng(7)
    src = toolkit.random_array((300, 170), "float32", rng)           # (M, N); out is (N, M)
    rows = bench.sample_lines(170, 8, rng)
    cols = bench.sample_lines(300, 8, rng)
    return src, np.ascontiguousarray(src.T), rows, cols


def test_sample_lines():
    rng = np.random.default_rng(1)
    s = bench.sample_lines(1000, 64, rng)
    assert s[0] == 0 and s[-1] == 999 and len(s) >= 64
    assert np.all(np.diff(s) > 0)
    assert list(bench.sample_lines(5, 64, rng)) == [0, 1, 2, 3, 4]
    assert list(bench.sample_lines(1, 64, rng)) == [0]


def test_sampled_check_passes_a_correct_transpose(case):
    src, out, rows, cols = case
    assert sampled(src, out, rows, cols) == (0, None)


@pytest.mark.parametrize("corner", [(0, 0), (0, -1), (-1, 0), (-1, -1)])
def test_sampled_check_catches_a_corner(case, corner):
    src, out, rows, cols = case
    out[corner] += 1
    bad, msg = sampled(src, out, rows, cols)
    assert bad >= 1 and "differ" in msg


def test_sampled_check_catches_an_edge(case):
    src, out, rows, cols = case
    out[-1, 123] = np.nan               # last row of out, any column: an edge, always sampled
    bad, msg = sampled(src, out, rows, cols)
    assert bad == 1 and "out[169, 123] = " in msg and "nan" in msg


def test_sampled_check_catches_a_sampled_row(case):
    src, out, rows, cols = case
    r = rows[len(rows) // 2]
    c = next(c for c in range(1, 299) if c not in set(cols))
    out[r, c] = -out[r, c]
    bad, msg = sampled(src, out, rows, cols)
    assert bad == 1 and f"out[{r}, {c}]" in msg


def test_sampled_check_catches_a_sampled_column(case):
    src, out, rows, cols = case
    c = cols[len(cols) // 2]
    r = next(r for r in range(1, 169) if r not in set(rows))
    out[r, c] = 0.0
    bad, msg = sampled(src, out, rows, cols)
    assert bad == 1 and f"out[{r}, {c}]" in msg


def test_sampled_check_is_bitwise(case):
    src, out, rows, cols = case
    src[0, 0], out[0, 0] = 0.0, -0.0           # equal as floats, different bits
    assert sampled(src, out, rows, cols)[0] == 1
    src[0, 0], out[0, 0] = np.nan, np.nan      # same NaN bits: equal
    assert sampled(src, out, rows, cols) == (0, None)


def test_sampled_check_misses_what_it_does_not_sample(case):
    # The sample is a sample: the full on-GPU compare is what covers the rest.
    src, out, rows, cols = case
    r = next(r for r in range(170) if r not in set(rows))
    c = next(c for c in range(300) if c not in set(cols))
    out[r, c] += 1
    assert sampled(src, out, rows, cols) == (0, None)


def test_sampled_check_shape_mismatch(case):
    src, out, rows, cols = case
    bad, msg = bench.check_sampled(src, lambda r: out[r, :-1], lambda c: out[:, c].T, rows, cols)
    assert bad == -1 and "shape" in msg


@pytest.mark.parametrize("dtype", ["uint8", "int8", "float16", "float64", "int64"])
def test_sampled_check_dtypes(dtype):
    rng = np.random.default_rng(3)
    src = toolkit.random_array((40, 24), dtype, rng)
    out = np.ascontiguousarray(src.T)
    rows, cols = bench.sample_lines(24, 4, rng), bench.sample_lines(40, 4, rng)
    assert sampled(src, out, rows, cols) == (0, None)
    out.view(np.uint8)[-1, -1] ^= 1                        # one flipped bit in the last corner
    assert sampled(src, out, rows, cols)[0] == 1


def test_launcher_errors_skip_or_fail():
    from numba_tma._frontend import CudaAPIError, errors

    assert toolkit.skippable(TypeError("float64 unsupported"))
    assert toolkit.skippable(ValueError("rows must be 16-byte multiples"))
    assert toolkit.skippable(RuntimeError("no sm_90"))
    assert not toolkit.skippable(CudaAPIError(700, "illegal address"))
    assert not toolkit.skippable(errors.TypingError("bad kernel"))
    assert not toolkit.skippable(KeyError("x"))


# --- one whole run under the CUDA simulator -------------------------------------------------------

SIM_SCRIPT = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("bench_transpose", sys.argv[1])
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
from numba_tma._frontend import cuda

@cuda.jit
def naive(src, out):
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        out[j, i] = src[i, j]

@cuda.jit
def misses_last_row(src, out):
    i, j = cuda.grid(2)
    if i < src.shape[0] - 1 and j < src.shape[1]:
        out[j, i] = src[i, j]

def grid(src):
    return (-(-src.shape[0] // 8), -(-src.shape[1] // 8)), (8, 8)

def good(src, out):
    naive[grid(src)](src, out)

def bad(src, out):
    misses_last_row[grid(src)](src, out)

def four_bytes_only(src, out):
    if src.dtype.itemsize != 4:
        raise TypeError(f"4-byte elements only; got {src.dtype}")
    good(src, out)

def transpose(src, out=None):
    good(src, out)
    return out

library = ({"v1_good": good, "v2_bad": bad, "v3_fp32": four_bytes_only}, transpose)
sys.exit(bench.main(sys.argv[2:], library=library))
"""


@needs_simulator
def test_whole_run_under_simulator(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SIM_SCRIPT)
    out_json = tmp_path / "res.json"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run(
        [sys.executable, str(script), str(BENCHES / "transpose.py"), "--shape", "12", "20",
         "--dtype", "float32,uint8", "--iters", "2", "--warmup", "1", "--samples", "3",
         "--no-baselines", "--seed", "5", "--json", str(out_json)],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr        # v2_bad FAILED
    doc = json.loads(out_json.read_text())
    status = {(r["kernel"], r["dtype"]): r["status"] for r in doc["results"]}
    assert status == {
        ("copy", "float32"): "ok", ("v1_good", "float32"): "ok",
        ("v2_bad", "float32"): "failed", ("v3_fp32", "float32"): "ok",
        ("transpose()", "float32"): "ok",
        ("copy", "uint8"): "ok", ("v1_good", "uint8"): "ok", ("v2_bad", "uint8"): "failed",
        ("v3_fp32", "uint8"): "skipped", ("transpose()", "uint8"): "ok",
    }
    by = {(r["kernel"], r["dtype"]): r for r in doc["results"]}
    assert "20 of 240 elements differ" in by[("v2_bad", "float32")]["reason"]
    assert "out[0, 11]" in by[("v2_bad", "uint8")]["reason"]
    assert "4-byte elements only" in by[("v3_fp32", "uint8")]["reason"]
    assert by[("v1_good", "float32")]["iters"] == 2
    assert doc["shape"] == [12, 20] and doc["dtype"] == "float32" and doc["seed"] == 5
    assert "FAILED: 20 of 240 elements differ" in proc.stdout
    assert "best: v1_good" in proc.stdout


# --- benches/gemm.py ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def gemm():
    return load("bench_gemm", "gemm.py")


def test_gemm_import_needs_no_gpu_stack():
    _import_loads_no_optional_library("gemm.py")


def test_gemm_bench_arguments(gemm):
    args = gemm.parse_args([])
    assert args.shapes[:4] == [(s, s, s) for s in gemm.DEFAULT_SIZES]
    assert args.shapes[4:] == list(gemm.DEFAULT_SHAPES)
    assert gemm.DEFAULT_SIZES == (1024, 2048, 4096, 8192)
    for shape in ((4095, 4104, 4096), (8192, 1024, 8192), (1024, 8192, 8192), (1000, 1000, 1000)):
        assert shape in args.shapes
    assert args.dtypes == ["float16", "bfloat16"]
    # every default odd shape keeps the 16-byte rows TMA needs (K and N multiples of 8)
    assert all(k % 8 == 0 and n % 8 == 0 for _, n, k in gemm.DEFAULT_SHAPES)
    args = gemm.parse_args(["--size", "512", "--shape", "100", "72", "40", "--dtype", "bfloat16"])
    assert args.shapes == [(512, 512, 512), (100, 72, 40)] and args.dtypes == ["bfloat16"]
    args = gemm.parse_args(["--dtype", "float16,bfloat16", "--no-default-shapes"])
    assert args.dtypes == ["float16", "bfloat16"]
    assert args.shapes == [(s, s, s) for s in gemm.DEFAULT_SIZES]
    assert gemm.parse_args(["--dtype", " bf16, fp16,half,"]).dtypes == ["bfloat16", "float16"]
    with pytest.raises(SystemExit):
        gemm.parse_args(["--size", "0"])


def test_gemm_bench_config_rows(gemm):
    from numba_tma.kernels.gemm import WgmmaConfig
    from numba_tma.ladders.gemm_pingpong import PingPongConfig

    args = gemm.parse_args(["--config", "w=bn=256, stages=4,mma_pipe=0,l2_promotion=0",
                            "--config", "pp=bn=128,stages=6,pingpong=true"])
    (n1, c1), (n2, c2) = args.configs
    assert n1 == "w" and c1 == WgmmaConfig(256, stages=4, mma_pipe=0, l2_promotion=0)
    assert n2 == "pp" and c2 == PingPongConfig(128, stages=6)
    table = gemm.kernels(None, args.configs)
    assert table["w"][:2] == (None, None) and callable(table["w"][2])
    with pytest.raises(ValueError, match="exists"):
        gemm.kernels(None, [("matmul()", c1)])


@pytest.mark.parametrize("text", ["w", "w=", "=bn=256", "w=bn", "w=bn=2x", "w=bn=96",
                                  "w=bogus=1", "w=bn=256,,stages=4"])
def test_gemm_bench_rejects_configs(gemm, text, capsys):
    with pytest.raises(SystemExit) as exc:
        gemm.parse_args(["--config", text])
    assert exc.value.code == 2 and "--config" in capsys.readouterr().err


def test_wgmma_config_reads_every_bench_config():
    # The one parser of every bench's --config (gemm.py's rows add a NAME= before it).
    from numba_tma.kernels.gemm import WgmmaConfig
    from numba_tma.kernels.gemm.stream_k import StreamKConfig
    from numba_tma.ladders.gemm_pingpong import PingPongConfig

    read = toolkit.wgmma_config
    assert read("bn=256, stages=4,mma_pipe=0,overlap_epilogue=TRUE") == WgmmaConfig(
        256, stages=4, mma_pipe=0, overlap_epilogue=True)
    assert read("bn=192,stages=5,mma_pipe=0,c_buffers=1,stream_k=true") == StreamKConfig(
        192, stages=5, mma_pipe=0, c_buffers=1)
    assert read("bn=128,stages=6,pingpong=true") == read(" pingpong ") == PingPongConfig(
        128, stages=6)
    for text, match in [("bn", "'bn' is not FIELD=VALUE"), ("bn=2x", "not an integer"),
                        ("bn=256,,stages=4", "'' is not FIELD=VALUE"), ("bogus=1", "bogus"),
                        ("bn=96", "bn = 96 must be one of")]:
        with pytest.raises(ValueError, match=match):
            read(text)


@pytest.mark.parametrize("text", ["float32", "int8", ",", "", "float16,fp64"])
def test_gemm_bench_rejects_dtypes(gemm, text):
    with pytest.raises(SystemExit) as exc:
        gemm.parse_args(["--dtype", text])
    assert exc.value.code == 2


def test_geomean():
    assert toolkit.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert toolkit.geomean([0.5, None, 2.0]) == pytest.approx(1.0)
    assert toolkit.geomean([]) is None and toolkit.geomean([None]) is None
    with pytest.raises(ValueError):
        toolkit.geomean([1.0, 0.0])


def test_time_cuda_batch_brackets_all_runs():
    log = []
    Event = fake_event(log)
    per_run = toolkit.time_cuda_batch(lambda: log.append("run"), 4, warmup=2, event=Event,
                                     synchronize=lambda: log.append("sync"))
    assert log == ["run", "run", "sync", "record"] + ["run"] * 4 + ["record", "event-sync"]
    assert per_run == pytest.approx(5.0 / 4)       # one pair of events around all four runs
    with pytest.raises(ValueError):
        toolkit.time_cuda_batch(lambda: None, 0, event=Event, synchronize=lambda: None)


def test_gemm_bench_bounds_and_labels(gemm):
    assert gemm.bound("float16", "float16") == 2e-3
    assert gemm.bound("float16", "float32") == 1e-4
    assert gemm.bound("bfloat16", "float32") == 1e-2        # bf16 inputs: the bf16 bound
    assert gemm.bound("float32", "float32") == 1e-4
    assert gemm.dtype_label("float16", "float16") == "float16"
    assert gemm.dtype_label("bfloat16", "float32") == "bfloat16->float32"
    cfg = types.SimpleNamespace(kwargs={"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64,
                                        "GROUP_M": 8}, num_stages=3, num_warps=8)
    assert baselines.triton_config_label(cfg) == "128x256x64 s3 w8"
    # the autotuning space stays within Hopper's shared memory (16-bit inputs)
    for bm, bn, bk, stages, warps in baselines.TRITON_CONFIGS:
        assert (bm * bk + bk * bn) * 2 * stages <= 192 * 1024 and warps in (4, 8)


def gemm_rows(gemm, shape=(4096, 4096, 4096), dtype="float16"):
    """cuBLAS, Triton and two kernels at one shape, scored as main() does (times in ms)."""
    flop = 2 * shape[0] * shape[1] * shape[2]
    cub, tri = [0.20, 0.18, 0.19], [0.25, 0.24, 0.26]
    rows = [gemm.score(gemm.new_row("cublas", shape, dtype, dtype), cub, flop, 0.19, 0.25,
                       [0.21, 0.20, 0.22], 0.21),
            gemm.score(gemm.new_row("triton", shape, dtype, dtype), tri, flop, 0.19, 0.25,
                       [0.30, 0.29, 0.31], 0.21),
            gemm.score(gemm.new_row("tma_mma", shape, dtype, dtype), [0.19, 0.17, 0.18], flop,
                       0.19, 0.25, [0.22, 0.21, 0.20], 0.21),
            gemm.score(gemm.new_row("simt_fp32", shape, "float32", "float32"), [2.0], flop,
                       1.0, None, [2.5], 1.25)]
    rows[1]["config"] = "128x256x64 s3 w8"
    for row in rows:
        row["rel_err"], row["host_us"] = 3e-4, 40.0
    return rows


def test_gemm_bench_score(gemm):
    cublas, triton, tma, simt = gemm_rows(gemm)
    assert cublas["x_cublas"] == 1.0 and triton["x_triton"] == 1.0
    assert cublas["x_triton"] == pytest.approx(0.25 / 0.19)
    assert triton["x_cublas"] == pytest.approx(0.19 / 0.25)
    assert tma["us"] == pytest.approx(180.0) and tma["rounds_us"] == pytest.approx([190, 170, 180])
    assert tma["TFLOPs"] == pytest.approx(2 * 4096**3 / 0.18e-3 / 1e12)
    assert tma["x_cublas"] == pytest.approx(0.19 / 0.18)
    assert tma["x_triton"] == pytest.approx(0.25 / 0.18)
    assert tma["wall_us"] == pytest.approx(210.0)
    assert tma["x_cublas_wall"] == pytest.approx(0.21 / 0.21)
    assert simt["x_triton"] is None and simt["x_cublas"] == pytest.approx(0.5)
    assert simt["x_cublas_wall"] == pytest.approx(0.5)
    assert all(r["status"] == "ok" for r in (cublas, triton, tma, simt))


def test_gemm_bench_lines_and_table(gemm):
    rows = gemm_rows(gemm)
    line = gemm.perf_line(rows[2])
    assert line.startswith("Perf (4096, 4096, 4096) float16:           tma_mma ")
    assert "180.0 us | " in line and "1.06x cuBLAS | 1.39x Triton | wall 210.0 us" in line
    assert "rounds 723, 808, 764 TFLOP/s" in line
    assert "-x Triton" in gemm.perf_line(rows[3])
    skipped = dict(gemm.new_row("tma_mma_f32out", (8, 8, 8), "float16", "float32"),
                   status="skipped", reason="no sm_90")
    failed = dict(gemm.new_row("tma_mma", (8, 8, 8), "bfloat16", "bfloat16"), status="FAILED",
                  rel_err=0.5)
    text = toolkit.format_table(gemm.HEADERS, [gemm.table_row(r) for r in rows + [skipped, failed]],
                               align=gemm.TABLE_ALIGN)
    lines = text.splitlines()
    assert [c.strip() for c in lines[0].split(" | ")] == [
        "M x N x K", "dtype", "kernel", "us", "TFLOP/s", "x cuBLAS", "x Triton", "host us",
        "wall us", "x cuBLAS wall", "check"]
    cells = [[c.strip() for c in line.split(" | ")] for line in lines[2:]]
    assert cells[1] == ["4096x4096x4096", "float16", "triton", "250.0", "549.8", "0.76", "1.00",
                        "40", "300.0", "0.70", "rel err 3.0e-04 (128x256x64 s3 w8)"]
    assert cells[2][:7] == ["4096x4096x4096", "float16", "tma_mma", "180.0", "763.5", "1.06",
                            "1.39"]
    assert cells[3][2:7] == ["simt_fp32", "2000.0", "68.7", "0.50", "-"]
    assert cells[4][1:4] == ["float16->float32", "tma_mma_f32out", "-"]
    assert cells[4][-1] == "skipped: no sm_90" and cells[5][-1] == "FAILED rel err 5.0e-01"


def test_gemm_bench_geomeans(gemm):
    rows = gemm_rows(gemm) + gemm_rows(gemm, (1024, 1024, 1024), "bfloat16")
    rows.append(dict(gemm.new_row("tma_mma", (8, 8, 8), "float16", "float16"), status="FAILED",
                     x_cublas=100.0))                          # not timed: left out
    x_cublas = gemm.geomeans(rows, "x_cublas", skip="cublas")
    x_triton = gemm.geomeans(rows, "x_triton", skip="triton")
    assert list(x_cublas) == ["triton", "tma_mma", "simt_fp32"]
    assert x_cublas["tma_mma"] == (pytest.approx(0.19 / 0.18), 2)
    assert list(x_triton) == ["cublas", "tma_mma"]              # no Triton baseline for fp32
    assert x_triton["tma_mma"] == (pytest.approx(0.25 / 0.18), 2)
    assert gemm.geomean_line("tma_mma", x_cublas, x_triton) == (
        "geomean tma_mma: 1.056x cuBLAS over 2 runs, 1.389x Triton over 2 runs")
    assert gemm.geomean_line("simt_fp32", x_cublas, x_triton) == (
        "geomean simt_fp32: 0.500x cuBLAS over 2 runs")
    assert gemm.geomean_line("nope", x_cublas, x_triton) is None


def test_gemm_bench_without_triton(gemm, monkeypatch):
    monkeypatch.setattr(baselines, "import_optional",
                        lambda name: (None, f"{name} not importable"))
    # (the GEMM benches take Triton's tuner through gemm_session, which logs its absence)
    assert gemm.gemm_session is baselines.gemm_session
    assert baselines.triton_matmul.__wrapped__() == (None, "triton not importable")


# --- transpose_ceiling: the pattern kernels --------------------------------------------------

@pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                    reason="offline compilation needs the real CUDA target")
def test_transpose_ceiling_pattern_kernels_compile_clean():
    # Each pattern runs at its shape's clamp setting with 16-byte loads and stores only, all in
    # registers (a spill would add local-memory traffic the real kernels do not have).
    from numba_tma._frontend import types

    from numba_tma.offline import compile_kernel
    from sass_checks import check_clean

    ceiling = load("bench_transpose_ceiling", "transpose_ceiling.py")
    sig = (types.uint32[::1], types.uint32[::1], types.int64, types.int64, types.int64)
    assert ceiling.parse_args([]).rounds == 3
    done = set()
    for (M, N), patterns in ceiling.PATTERNS.items():
        for label, (TR, TC, threads, blocks, halo, extra, copy_mode) in patterns:
            clamp = bool(halo or extra or M % TR or N % TC)
            key = (TR, TC, threads, blocks, halo, extra, copy_mode, clamp)
            if key in done:
                continue
            done.add(key)
            kb = compile_kernel(ceiling.pattern_kernel(*key), sig)
            check_clean(kb)
            loads = -(-(TR + halo) * (TC // 4 + extra) // threads)
            assert kb.count("LDG.E.128") == loads, (label, kb)
            assert kb.count("STG.E.128") == TC * TR // 4 // threads, (label, kb)


# --- benches/host.py ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def host():
    return load("bench_host", "host.py")


def test_host_bench_arguments_and_rows(host):
    args = host.parse_args([])
    assert args.sizes == [256, 1024, 4096] and args.iters == 100 and args.rounds == 21
    assert host.parse_args(["--sizes", "64,128"]).sizes == [64, 128]
    with pytest.raises(SystemExit):
        host.parse_args(["--sizes", "0"])
    r = host.row("torch.mm(a, b, out)", 1024, [30.0, 20.0, 25.0])
    assert r == {"op": "torch.mm(a, b, out)", "n": 1024, "host_us": 25.0,
                 "rounds_us": [30.0, 20.0, 25.0]}
    assert host.line(r) == "torch.mm(a, b, out)        n= 1024      25.0 us/call"
    # beside its torch counterpart, the median of the per-round ratios: a round where the host
    # stalled both (the second) moves the medians of the times, not the ratio
    r = host.row("matmul(a, b, out)", 1024, [12.0, 40.0, 11.0], [10.0, 40.0, 10.0])
    assert r["host_us"] == 12.0 and r["x_torch"] == 1.1
    assert host.line(r) == "matmul(a, b, out)          n= 1024      12.0 us/call   1.100x torch"
    ops = ("matmul(a, b)", "matmul(a, b, out)", "torch.mm(a, b)", "torch.mm(a, b, out)",
           "transpose(x)", "transpose(x, out)", "torch x.t().contiguous()",
           "torch out.copy_(x.t())", "transpose(x) floor")
    assert set(host.PEERS) | set(host.PEERS.values()) <= set(ops)


def test_host_bench_import_needs_no_gpu_stack():
    _import_loads_no_optional_library("host.py")


def test_every_script_imports_without_an_optional_library():
    _import_loads_no_optional_library(*(f"{name}.py" for name in SCRIPTS + ("plot",)))


# --- plots -------------------------------------------------------------------------------------

SCRIPTS = ("gemm", "gemm_epilogue", "gemm_fp8", "gemm_fp8_power", "host", "multicast", "reduce",
           "transpose", "transpose_ceiling", "transpose_tune", "warp_gemm_banks")


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_bench_takes_plot(script):
    out = subprocess.run([sys.executable, str(BENCHES / f"{script}.py"), "--help"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert "--plot PNG" in out


def test_host_plot_leaves_out_first_calls():
    doc = {"bench": "host", "results": [
        {"op": "matmul(a, b)", "n": 256, "host_us": 13.8},
        {"op": "matmul(a, b)", "n": 1024, "host_us": 14.3},
        {"op": "matmul first call, process 1 (empty cache)", "n": 1024, "host_us": 3.06e6}]}
    panels, ylabel, _ = toolkit.plot_panels(doc)
    assert panels == {"": {"matmul(a, b)": [("256", 13.8), ("1024", 14.3)]}}
    assert ylabel == "host us per call"


def test_plot_panels_group_by_dtype_and_kernel():
    doc = {"bench": "gemm", "gpu": "G", "results": [
        dict(kernel="cublas", shape=[8, 8, 8], in_dtype="float16", out_dtype="float16",
             status="ok", TFLOPs=1.0),
        dict(kernel="matmul()", shape=[8, 8, 8], in_dtype="float16", out_dtype="float16",
             status="ok", TFLOPs=2.0),
        dict(kernel="matmul()", shape=[16, 8, 8], in_dtype="float16", out_dtype="float32",
             status="ok", TFLOPs=3.0),
        dict(kernel="matmul()", shape=[16, 8, 8], in_dtype="float16", out_dtype="float16",
             status="FAILED", TFLOPs=None),
    ]}
    panels, ylabel, xlabel = toolkit.plot_panels(doc)
    assert list(panels) == ["float16", "float16->float32"] and ylabel == "TFLOP/s"
    assert panels["float16"] == {"cublas": [("8x8x8", 1.0)], "matmul()": [("8x8x8", 2.0)]}
    with pytest.raises(ValueError, match="no plot for bench 'nope'"):
        toolkit.plot_panels({"bench": "nope", "results": []})
    with pytest.raises(ValueError, match="no result to plot"):
        toolkit.plot_panels({"bench": "host", "results": []})


@pytest.mark.parametrize("name", sorted(p.name for p in (BENCHES / "results").glob("*.json")))
def test_committed_results_plot(name, tmp_path):
    # Every committed result draws: a PNG of one panel per dtype at the planned size.
    pytest.importorskip("matplotlib")
    doc = json.loads((BENCHES / "results" / name).read_text())
    path = toolkit.write_plot(doc, tmp_path / "out.png")
    assert os.path.getsize(path) > 10_000
    assert png_size(path) == toolkit.plot_size(doc)


def test_save_results_writes_json_and_png(tmp_path):
    pytest.importorskip("matplotlib")
    doc = {"bench": "host", "gpu": "G", "results": [
        {"op": "matmul(a, b)", "n": 256, "host_us": 40.0},
        {"op": "matmul(a, b)", "n": 1024, "host_us": 30.0}]}
    args = argparse.Namespace(json=str(tmp_path / "r.json"), plot=str(tmp_path / "r.png"))
    toolkit.save_results(args, doc)
    assert json.loads((tmp_path / "r.json").read_text())["results"][1]["host_us"] == 30.0
    assert png_size(tmp_path / "r.png") == toolkit.plot_size(doc) == (1100, 450)
    subprocess.run([sys.executable, str(BENCHES / "plot.py"), str(tmp_path / "r.json"), "--png",
                    str(tmp_path / "again.png")], cwd=ROOT, check=True, capture_output=True)
    assert png_size(tmp_path / "again.png") == (1100, 450)


def test_host_us_per_call_holds_the_gpu_first():
    log = []
    us = toolkit.host_us_per_call(lambda: log.append("call"), 3, lambda: log.append("hold"),
                                 lambda: log.append("sync"))
    assert log == ["sync", "hold", "call", "call", "call", "sync"] and us >= 0


# --- what the benches need: help text, one clear line where torch or the GPU is missing -------

#: Every script in benches/ (a new one is checked as soon as it exists).
ALL_SCRIPTS = sorted(p.stem for p in BENCHES.glob("*.py"))

#: The scripts that need neither torch nor a GPU: plot.py draws (matplotlib), compile_floor.py
#: times offline links.
CPU_SCRIPTS = ("compile_floor", "plot")

#: (script, argv, the needs its one line must name) on a machine without torch or a GPU;
#: compile.py needs them only with --gpu (it compiles offline).
NEEDS = [
    ("compile", ["--gpu"], ("torch", "an sm_90 GPU")),
    ("gemm", [], ("torch", "an sm_90 GPU")),
    ("gemm_epilogue", [], ("torch", "an sm_90 GPU")),
    ("gemm_fp8", [], ("torch", "an sm_90 GPU")),
    ("gemm_fp8_power", [], ("torch", "an sm_90 GPU")),
    ("host", [], ("torch", "an sm_90 GPU")),
    ("multicast", [], ("an sm_90 GPU",)),
    ("reduce", [], ("an sm_90 GPU",)),
    ("transpose", [], ("a CUDA GPU",)),
    ("transpose_ceiling", [], ("a CUDA GPU",)),
    ("transpose_tune", [], ("torch", "an sm_90 GPU")),
    ("warp_gemm_banks", [], ("a CUDA GPU",)),
]

#: ``python -c`` this, MODULES, SCRIPT, ARGS...: runs SCRIPT as ``python SCRIPT ARGS`` would,
#: with each of the comma list MODULES unimportable (None in sys.modules).
WITHOUT = ("import runpy, sys; [sys.modules.__setitem__(m, None) for m in sys.argv[1].split(',')]; "
           "sys.argv = sys.argv[2:]; runpy.run_path(sys.argv[0], run_name='__main__')")


def run_without(script, *args, modules=("torch", "triton", "cupy"), cwd=ROOT):
    """Run benches/``script``.py where ``modules`` cannot be imported and no GPU is visible
    (CUDA_VISIBLE_DEVICES empty, no simulator): a CPU machine's view, also on a GPU machine."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    return subprocess.run([sys.executable, "-c", WITHOUT, ",".join(modules),
                           str(BENCHES / f"{script}.py"), *map(str, args)],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def undocumented(help_text):
    """The arguments an argparse ``--help`` lists without help text."""
    bare, entry, sections = [], None, False
    for line in help_text.splitlines() + [""]:
        if line in ("positional arguments:", "options:", "optional arguments:"):
            sections = True
        if not sections:
            continue
        if line.startswith("   ") and entry:            # its help, on the lines below
            entry[1] = True
            continue
        if entry and not entry[1]:
            bare.append(entry[0])
        entry = None
        if line.startswith("  "):                       # an argument: invocation  help
            invocation, _, text = line.strip().partition("  ")
            entry = [invocation, bool(text.strip())]
    return bare


def test_undocumented_finds_arguments_without_help():
    p = argparse.ArgumentParser(description="ends with a colon:")
    p.add_argument("path")
    p.add_argument("--documented", help="it says")
    p.add_argument("--bare", type=int)
    p.add_argument("--a-very-long-option-name", metavar="AN_EVEN_LONGER_METAVAR",
                   help="help on the next line")
    p.add_argument("--last")
    assert undocumented(p.format_help()) == ["path", "--bare BARE", "--last LAST"]


@pytest.mark.parametrize("script", ALL_SCRIPTS)
def test_help_works_without_torch_or_gpu_and_documents_every_option(script):
    proc = run_without(script, "--help", modules=("torch", "triton", "cupy", "matplotlib"))
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "usage:" in proc.stdout and undocumented(proc.stdout) == []


def test_every_bench_states_its_needs():
    # A new bench joins NEEDS (and calls numba_tma.bench.require) or CPU_SCRIPTS.
    assert set(ALL_SCRIPTS) <= {script for script, _, _ in NEEDS} | set(CPU_SCRIPTS)
    assert {"plot", "gemm", "transpose"} <= set(ALL_SCRIPTS)        # the glob found them


@pytest.mark.parametrize("script,argv,needs", NEEDS, ids=[s for s, _, _ in NEEDS])
def test_bench_without_torch_or_gpu_exits_with_one_line(script, argv, needs):
    proc = run_without(script, *argv)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr     # no traceback, no noise
    assert proc.stdout == ""                                         # nothing ran
    line = lines[0]
    assert line.startswith(f"benches/{script}.py")
    wants, _, why = line.partition("; here: ")
    assert why and "no usable CUDA GPU" in why
    for need in needs:
        assert need in wants
    assert ("pip install torch" in wants) == ("torch" in needs)      # torch only where needed


def test_bench_without_matplotlib_says_so_before_running():
    proc = run_without("transpose_ceiling", "--plot", "c.png",
                       modules=("torch", "triton", "cupy", "matplotlib"))
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert 'matplotlib (pip install "numba_tma[plot]") to draw c.png' in proc.stderr


def test_unmet_needs(monkeypatch):
    from numba_tma._frontend import cuda

    from numba_tma.bench import env

    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    monkeypatch.setattr(env, "import_optional", lambda name: (None, f"{name} absent"))
    device = types.SimpleNamespace(name=b"GPU 8", compute_capability=(8, 0))
    monkeypatch.setattr(cuda, "get_current_device", lambda: device)
    assert env.unmet_needs("b.py", gpu="to run") is None                  # any GPU will do
    assert env.unmet_needs("b.py", gpu="to run", hopper=True) == (
        "b.py needs an sm_90 GPU (Hopper: H100, H200) to run; here: the GPU (GPU 8) is sm_80")
    assert env.unmet_needs("b.py", torch="for x", plot="p.png") == (
        'b.py needs torch with CUDA (pip install torch) for x, and matplotlib (pip install '
        '"numba_tma[plot]") to draw p.png; here: torch absent; matplotlib absent')
    device.compute_capability = (9, 0)
    monkeypatch.setattr(env, "import_optional", lambda name: (object(), None))
    assert env.unmet_needs("b.py", torch="x", gpu="y", hopper=True, plot="p.png") is None
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")                 # the simulator's dry runs
    monkeypatch.setattr(cuda, "get_current_device", lambda: 1 / 0)
    assert env.gpu_problem(hopper=True) is None


# --- plot.py writes only what its command line names ------------------------------------------

def files_under(path):
    return {p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file()}


def test_plot_writes_only_the_named_pngs(tmp_path):
    pytest.importorskip("matplotlib")
    doc = {"bench": "host", "gpu": "G", "results": [
        {"op": "matmul(a, b)", "n": 256, "host_us": 40.0},
        {"op": "matmul(a, b)", "n": 1024, "host_us": 30.0}]}
    for name in ("in/a.json", "in/b.json", "other/a.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(json.dumps(doc))
    (tmp_path / "in/bad.json").write_text(json.dumps({"bench": "nope", "results": []}))
    inputs = files_under(tmp_path)

    def plot(*args):
        return subprocess.run([sys.executable, str(BENCHES / "plot.py"), *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=600)

    # Without an output named, or with one PNG for two inputs, or two inputs of one name for
    # one folder: a usage error, nothing written (never a PNG beside the JSON).
    for args in (["in/a.json"], ["in/a.json", "in/b.json", "--png", "x.png"],
                 ["in/a.json", "other/a.json", "--out-dir", "out"]):
        proc = plot(*args)
        assert proc.returncode == 2 and "--png" in proc.stderr, proc.stderr
        assert files_under(tmp_path) == inputs
    assert plot("in/a.json", "--png", "png/x.png").returncode == 0
    assert files_under(tmp_path) == inputs | {"png/x.png"}
    assert png_size(tmp_path / "png/x.png") == (1100, 450)
    proc = plot("in/a.json", "in/bad.json", "in/b.json", "--out-dir", "out")
    assert proc.returncode == 1 and proc.stderr.splitlines() == [
        "in/bad.json: not drawn: no plot for bench 'nope'; plotted: " + ", ".join(toolkit.PLOTS)]
    assert files_under(tmp_path) == inputs | {"png/x.png", "out/a.png", "out/b.png"}


def test_plot_without_matplotlib_exits_with_one_line(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"bench": "host", "results": []}))
    proc = run_without("plot", "a.json", "--png", "a.png", modules=("matplotlib",),
                       cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(
        'benches/plot.py needs matplotlib (pip install "numba_tma[plot]") to draw the PNGs; '
        'here: matplotlib not importable'), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and files_under(tmp_path) == {"a.json"}
