"""CPU tests of benches/transpose_tune.py's command line and result document: it takes --plot
(and --json) like every other bench, its rows draw through numba_tma.bench's plots, and the
optional extra that installs matplotlib exists under both names, ``plot`` and ``bench``."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from numba_tma import bench

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benches" / "transpose_tune.py"


@pytest.fixture(scope="module")
def tune():
    spec = importlib.util.spec_from_file_location("bench_transpose_tune", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_transpose_tune"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_help_lists_plot_and_json():
    out = subprocess.run([sys.executable, str(SCRIPT), "--help"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "--plot PNG" in out and "--json PATH" in out


def test_arguments(tune):
    args = tune.parse_args([])
    assert args.shape == [32768, 32768] and args.plot is None and args.json is None
    args = tune.parse_args(["--plot", "t.png", "--json", "t.json", "--groups", "8x8,16x4"])
    assert (args.plot, args.json, args.groups) == ("t.png", "t.json", "8x8,16x4")


def _doc(tune):
    rows = [tune.result_row("tma_pipelined", "float32", (4096, 4096),
                            tune.setting_label((None, 2, 2, 4), (8, 8), None, 0), "ok", 0.05,
                            2700.0, 3000.0, stages=4),
            tune.result_row("tma_pipelined", "float32", (4096, 4096),
                            tune.setting_label((None, 1, 1, 3), (8, 8), 4, 1), "wrong",
                            float("nan"), float("nan"), 3000.0, stages=3),
            tune.result_row("tma_batched", "float32", (4096, 4096), "batch 8", "ok", 0.06, 2400.0,
                            3000.0, batch=8)]
    return {**bench.report_header(tune.BENCH, {"gpu": "G", "driver": "D"}, {}), "results": rows}


def test_result_rows(tune):
    ok, wrong, batched = _doc(tune)["results"]
    assert ok["setting"] == "sub 2x2 st 4 g 8x8 b auto L2 0"
    assert ok["pct_of_copy"] == pytest.approx(90.0) and ok["status"] == "ok"
    assert wrong["GBps"] is None and wrong["ms"] is None and wrong["pct_of_copy"] is None
    assert batched["batch"] == 8 and batched["shape"] == [4096, 4096]


def test_rows_plot_through_the_toolkit(tune):
    panels, ylabel, _ = bench.plot_panels(_doc(tune))
    assert ylabel == "GB/s"
    assert list(panels) == ["float32 4096x4096"]
    series = panels["float32 4096x4096"]
    assert series["tma_pipelined"] == [("sub 2x2 st 4 g 8x8 b auto L2 0", 2700.0)]  # not "wrong"
    assert series["tma_batched"] == [("batch 8", 2400.0)]
    assert [y for _, y in series["copy"]] == [3000.0, 3000.0]
    assert "copy" in bench.BASELINES                                 # drawn dashed


def test_plot_is_written(tune, tmp_path):
    pytest.importorskip("matplotlib")
    doc = _doc(tune)
    args = tune.parse_args(["--plot", str(tmp_path / "t.png"), "--json", str(tmp_path / "t.json")])
    bench.save_results(args, doc)
    with open(tmp_path / "t.png", "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    size = int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    assert size == bench.plot_size(doc)
    assert (tmp_path / "t.json").stat().st_size > 0


def test_bench_extra_is_an_alias_of_plot():
    tomllib = pytest.importorskip("tomllib")        # Python 3.11+
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert extras["bench"] == extras["plot"] and extras["plot"]
