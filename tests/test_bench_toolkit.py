"""CPU tests of numba_tma.bench, the bench toolkit in the package: do_bench and interleaved
rounds on fake CUDA events, the copy merge, the result header and JSON writer, the table printer,
and the plot written (non-empty) or refused with a clear error without matplotlib. The GPU parts
(real events, copy_bandwidth, the baselines' launchers) run in the benches themselves."""

import json
import sys

import numpy as np
import pytest

from numba_tma import bench
from numba_tma.bench import baselines


class Clock:
    """Fake CUDA events: each run of a timed function advances a clock by its own cost (ms)."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def event_class(self):
        clock = self

        class Event:
            def record(self, stream=0):
                self.t = clock.now

            def synchronize(self):
                pass

            def elapsed_time(self, end):
                return end.t - self.t

        return Event

    def fn(self, name, costs):
        """A function costing ``costs[i]`` ms on its i-th call (the last one repeats)."""
        calls = []

        def run():
            calls.append(1)
            self.log.append(name)
            self.now += costs[min(len(calls), len(costs)) - 1]
        return run

    def sync(self):
        self.log.append("sync")


def test_do_bench_is_the_median_of_round_medians_after_warmup():
    clock = Clock()
    # Two warm-up calls cost 100 ms (compilation, say) and are never timed.
    fn = clock.fn("k", [100.0, 100.0, 1.0, 3.0, 2.0, 9.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0])
    ms = bench.do_bench(fn, iters=3, warmup=2, rounds=1, event=clock.event_class(),
                        synchronize=clock.sync)
    assert ms == 2.0                                      # median of 1, 3, 2
    assert clock.log[:3] == ["k", "k", "sync"]            # warm-up, then a synchronize
    clock = Clock()
    fn = clock.fn("k", [1.0, 2.0, 3.0, 10.0, 10.0, 10.0, 4.0, 4.0, 4.0])
    ms = bench.do_bench(fn, iters=3, warmup=0, rounds=3, event=clock.event_class(),
                        synchronize=clock.sync)
    assert ms == 4.0                                      # rounds: 2, 10, 4 -> median 4
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        bench.do_bench(fn, rounds=0, event=clock.event_class(), synchronize=clock.sync)
    with pytest.raises(ValueError, match="iters must be >= 1"):
        bench.do_bench(fn, iters=0, event=clock.event_class(), synchronize=clock.sync)


def test_interleaved_rounds_alternate_the_functions():
    clock = Clock()
    a, b = clock.fn("a", [1.0]), clock.fn("b", [2.0])
    out = bench.interleaved_rounds([a, b], 3, 2, 0, wall=True, event=clock.event_class(),
                                   synchronize=clock.sync)
    assert out == [([1.0] * 3, [1.0] * 3), ([2.0] * 3, [2.0] * 3)]
    runs = [x for x in clock.log if x != "sync"]
    # Per round: a's 2 event-timed runs, a's 2 batch runs, then b's: a, b, a, b, ...
    assert runs == (["a"] * 4 + ["b"] * 4) * 3
    out = bench.interleaved_rounds([a], 2, 1, 0, event=clock.event_class(),
                                   synchronize=clock.sync)
    assert out == [([1.0, 1.0], [])]                      # no wall times unless asked


def test_hold_comes_before_the_timed_runs():
    clock = Clock()
    seen = []
    bench.do_bench(clock.fn("k", [1.0]), iters=2, warmup=1, hold=lambda: seen.append(
        list(clock.log)), event=clock.event_class(), synchronize=clock.sync)
    assert seen == [["k", "sync"]]                        # after warm-up, before any timed run


def test_merge_copies_keeps_the_faster_and_notes_both():
    rows = [{"kernel": "copy[cuMemcpyDtoDAsync]", "status": "ok", "ms": 2.0, "note": None},
            {"kernel": "copy[torch copy_]", "status": "ok", "ms": 1.5, "note": None}]
    best = baselines.merge_copies(rows)
    assert best["kernel"] == "copy" and best["ms"] == 1.5
    assert best["note"] == "faster of: cuMemcpyDtoDAsync 2.0000 ms; torch copy_ 1.5000 ms"
    rows[1]["status"] = "failed"
    assert baselines.merge_copies(rows)["ms"] == 2.0


def test_result_json_carries_gpu_driver_and_versions(tmp_path):
    env = {"gpu": "NVIDIA H100 80GB HBM3", "driver": "13.0", "sm_count": 132}
    versions = bench.package_versions()
    assert {"python", "numpy", "numba", "numba-cuda", "numba_tma"} <= set(versions)
    doc = bench.report_header("mine", env, versions, iters=5, results=[{"ms": np.float32(0.5),
                                                                        "GBps": float("inf")}])
    assert list(doc)[:7] == ["bench", "gpu", "driver", "env", "versions", "iters", "results"]
    path = tmp_path / "sub" / "r.json"
    bench.write_json(path, doc)
    back = json.loads(path.read_text())
    assert back["gpu"] == "NVIDIA H100 80GB HBM3" and back["driver"] == "13.0"
    assert back["versions"]["numpy"] == np.__version__ and back["env"]["sm_count"] == 132
    assert back["results"] == [{"ms": 0.5, "GBps": None}]       # numpy scalars, inf made safe
    assert not list(path.parent.glob("*.tmp*"))                  # written atomically


def test_table_printer_aligns_and_checks_rows():
    text = bench.format_table(["kernel", "ms"], [["copy", "1.000"], ["v7_vec16", "12.5"]])
    assert text.splitlines() == ["kernel   |    ms", "---------+------",
                                 "copy     | 1.000", "v7_vec16 |  12.5"]
    assert bench.format_table(["a", "b"], [["x", "y"]], align="rl").splitlines()[2] == "x | y"
    with pytest.raises(ValueError, match="row has 1 cells, expected 2"):
        bench.format_table(["a", "b"], [["x"]])


def test_statistics():
    assert bench.summarize([1.0, 3.0])["mean"] == 2.0
    assert bench.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert bench.pct_of(bench.gbps(2e9, 1.0), bench.gbps(4e9, 1.0)) == pytest.approx(50.0)


HOST_DOC = {"bench": "host", "gpu": "G", "results": [
    {"op": "matmul(a, b)", "n": 256, "host_us": 40.0},
    {"op": "matmul(a, b)", "n": 1024, "host_us": 30.0}]}


def test_plot_file_is_written_non_empty(tmp_path):
    pytest.importorskip("matplotlib")
    path = bench.write_plot(HOST_DOC, tmp_path / "deep" / "p.png")
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib fails
    with pytest.raises(RuntimeError, match=r"plots need matplotlib: pip install 'numba_tma\[plot"):
        bench.write_plot(HOST_DOC, tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


def test_copy_bandwidth_counts_read_and_write(monkeypatch):
    # Without a GPU: the copy's time comes from do_bench, the GB/s counts 2 * nbytes.
    from numba_tma.bench import timing

    class FakeArray:
        def copy_to_device(self, src, stream=0):
            pass

    fake_cuda = type("cuda", (), {"device_array": staticmethod(lambda n, dt: FakeArray()),
                                  "default_stream": staticmethod(lambda: 0)})
    from numba_tma import _frontend

    monkeypatch.setattr(_frontend, "cuda", fake_cuda)     # (the toolkit's numba: the front end's)
    monkeypatch.setattr(timing, "do_bench", lambda fn, iters, warmup: (fn(), 2.0)[1])
    assert bench.copy_bandwidth(1 << 30) == pytest.approx(2 * 2**30 / 2e-3 / 1e9)


def test_triton_transpose_baseline_tiles_and_missing_triton(monkeypatch):
    from numba_tma.bench import baselines

    # 256-byte tile rows for every element size, as v7's tiles
    for itemsize, (rows, cols) in baselines.TRITON_TRANSPOSE_TILES.items():
        assert cols * itemsize == 256 and rows == cols
    monkeypatch.setattr(baselines, "import_optional", lambda name: (None, f"{name} missing"))
    with pytest.raises(ImportError, match="triton missing"):
        baselines.triton_transpose(None, None)


def test_kernel_label_drops_return_type_templates_and_parameters():
    from numba_tma.bench.baselines import kernel_label

    assert kernel_label("nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT") == \
        "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT"
    assert kernel_label("void at::native::unrolled_elementwise_kernel<at::native::f<1>, "
                        "std::array<char*, 2ul> >(int, float)") == \
        "at::native::unrolled_elementwise_kernel"
    assert kernel_label("void k(int)") == "k"
