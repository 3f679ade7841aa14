"""Shared pieces of the benches (transpose now, GEMM later): CUDA-event timing, statistics,
bandwidth arithmetic, environment/version collection, argument helpers, tables and JSON.

benches/ is not a package: a bench loads this file by path (``load_common()`` in the bench).
Nothing here touches the GPU at import time; ``numba.cuda`` (and torch/CuPy) are imported
lazily inside the functions that need them, so the tests can import this on a CPU-only machine.
"""

import fnmatch
import gc
import importlib
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time

import numpy as np

# ---------------------------------------------------------------------------------------------
# dtypes

#: The dtypes the benches accept, by canonical numpy name.
SUPPORTED_DTYPES = ("uint8", "int8", "float16", "float32", "float64", "int32", "int64")

DTYPE_ALIASES = {
    "u8": "uint8", "i8": "int8",
    "fp16": "float16", "f16": "float16", "half": "float16",
    "fp32": "float32", "f32": "float32", "float": "float32", "single": "float32",
    "fp64": "float64", "f64": "float64", "double": "float64",
    "i32": "int32", "int": "int32", "i64": "int64",
}


def parse_dtype(text, supported=SUPPORTED_DTYPES):
    """Canonical numpy dtype name for ``text`` (aliases such as fp32 accepted); ValueError if
    it is not one of ``supported``."""
    name = DTYPE_ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in supported:
        raise ValueError(f"unsupported dtype {text!r}; choose from {', '.join(supported)}")
    return np.dtype(name).name


def parse_dtype_list(text, supported=SUPPORTED_DTYPES):
    """``"float32,fp16"`` -> ``["float32", "float16"]`` (order kept, duplicates dropped)."""
    out = []
    for part in text.split(","):
        if part.strip():
            name = parse_dtype(part, supported)
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("empty dtype list")
    return out


def argparse_type(fn):
    """Wrap a parser raising ValueError into an argparse ``type=`` (clean usage errors)."""
    import argparse

    def parse(text):
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = getattr(fn, "__name__", "value")
    return parse


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {text}")
    return value


def select_names(names, patterns):
    """The ``names`` (order kept) matched by a comma list of exact names or glob patterns.

    ``patterns`` None or empty selects everything. Raises ValueError naming the patterns that
    match nothing, so a typo does not silently bench nothing.
    """
    names = list(names)
    if not patterns:
        return names
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen, unmatched = set(), []
    for pat in pats:
        hits = [n for n in names if n == pat or fnmatch.fnmatchcase(n, pat)]
        if not hits:
            unmatched.append(pat)
        chosen.update(hits)
    if unmatched:
        raise ValueError(f"no kernel matches {', '.join(unmatched)}; available: "
                         f"{', '.join(names)}")
    return [n for n in names if n in chosen]


# ---------------------------------------------------------------------------------------------
# statistics and bandwidth arithmetic

def median(samples):
    if not samples:
        raise ValueError("no samples")
    return float(statistics.median(samples))


def summarize(samples):
    """``{"median", "min", "max", "mean", "stdev", "n"}`` of a list of times (ms)."""
    if not samples:
        raise ValueError("no samples")
    xs = [float(x) for x in samples]
    return {
        "median": float(statistics.median(xs)),
        "min": min(xs),
        "max": max(xs),
        "mean": float(statistics.fmean(xs)),
        "stdev": float(statistics.stdev(xs)) if len(xs) > 1 else 0.0,
        "n": len(xs),
    }


def gbps(nbytes, ms):
    """Decimal GB/s moving ``nbytes`` in ``ms`` milliseconds; None if ``ms`` is not positive."""
    if ms is None or not ms > 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


def pct_of(value, reference):
    """``value`` as a percentage of ``reference`` (e.g. GB/s of the copy); None when undefined."""
    if value is None or reference is None or not reference > 0:
        return None
    return 100.0 * value / reference


def speedup(reference_ms, ms):
    """How many times faster ``ms`` is than ``reference_ms`` (>1: faster); None when undefined."""
    if reference_ms is None or ms is None or not ms > 0 or not reference_ms > 0:
        return None
    return reference_ms / ms


def geomean(values):
    """Geometric mean of positive numbers (None entries skipped); None when there are none."""
    xs = [float(x) for x in values if x is not None]
    if not xs:
        return None
    if min(xs) <= 0:
        raise ValueError("geomean of a non-positive value")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


# ---------------------------------------------------------------------------------------------
# timing

def _warm_up(fn, iters, warmup, event, synchronize):
    """Check ``iters``, default ``event``/``synchronize`` to numba's, run the ``warmup`` untimed
    calls and synchronize; returns ``(event, synchronize)``."""
    if iters < 1:
        raise ValueError("iters must be >= 1")
    if event is None or synchronize is None:
        from numba import cuda

        event = event or cuda.event
        synchronize = synchronize or cuda.synchronize
    for _ in range(warmup):
        fn()
    synchronize()
    return event, synchronize


def time_cuda(fn, iters, warmup=0, *, event=None, synchronize=None, hold=None):
    """Times of ``iters`` runs of ``fn()`` in ms, each bracketed by its own pair of CUDA events.

    ``fn`` enqueues asynchronous work on the default stream (where the events are recorded).
    ``warmup`` untimed runs come first, then a device synchronize; all timed runs are enqueued
    back to back (so the GPU never waits on the host for a launch that takes longer than its
    enqueue), and the host waits once at the end. ``hold``, if given, enqueues a GPU-side wait
    first (e.g. ``torch.cuda._sleep``): the host then queues every timed run while the GPU
    waits, so a run shorter than its launch's Python cost is timed on the GPU alone (device
    time, not host throughput). ``event``/``synchronize`` default to numba's ``cuda.event``
    and ``cuda.synchronize`` (overridable for tests).
    """
    event, synchronize = _warm_up(fn, iters, warmup, event, synchronize)
    pairs = [(event(), event()) for _ in range(iters)]
    if hold is not None:
        hold()
    for start, end in pairs:
        start.record()
        fn()
        end.record()
    pairs[-1][1].synchronize()
    synchronize()
    return [start.elapsed_time(end) for start, end in pairs]


def time_cuda_batch(fn, iters, warmup=0, *, event=None, synchronize=None):
    """Time per run in ms of ``iters`` back-to-back runs of ``fn()`` between one pair of CUDA
    events, with no GPU-side wait: what a caller sees, the Python launch path included wherever
    it is slower than the GPU (``time_cuda`` with ``hold`` times the GPU alone).

    ``warmup`` untimed runs and a device synchronize come first. ``event``/``synchronize`` as
    in ``time_cuda``.
    """
    event, synchronize = _warm_up(fn, iters, warmup, event, synchronize)
    start, end = event(), event()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / iters


def host_us_per_call(fn, iters, hold, synchronize):
    """Host cost of one call of ``fn`` in microseconds: ``iters`` calls timed with
    ``time.perf_counter`` after ``hold()`` (a GPU-side wait, e.g. ``torch.cuda._sleep``) so no
    call waits for the GPU; ``synchronize`` before and after."""
    synchronize()
    hold()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - start
    synchronize()
    return elapsed / iters * 1e6


# ---------------------------------------------------------------------------------------------
# inputs

def random_array(shape, dtype, rng, chunk_elems=1 << 26):
    """A fresh random host array: standard normal (cast) for floats, uniform random bits for
    integers. Never zeros; generated in chunks to bound the temporary memory."""
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    for lo in range(0, flat.size, chunk_elems):
        hi = min(lo + chunk_elems, flat.size)
        if dtype.kind == "f":
            gen_dtype = dtype if dtype in (np.float32, np.float64) else np.float32
            flat[lo:hi] = rng.standard_normal(hi - lo, dtype=gen_dtype).astype(dtype, copy=False)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            flat[lo:hi] = rng.integers(info.min, info.max, size=hi - lo, dtype=dtype,
                                       endpoint=True)
        else:
            raise TypeError(f"no random generator for {dtype}")
    return out


def uint_view_dtype(itemsize):
    """The unsigned integer dtype of ``itemsize`` bytes: compare elements bit for bit."""
    return np.dtype(f"u{itemsize}")


# ---------------------------------------------------------------------------------------------
# optional libraries and the environment

def import_optional(name):
    """``(module, None)`` or ``(None, reason)`` for an optional GPU library (torch, cupy)."""
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # ImportError, or a broken CUDA install inside the import
        return None, f"{name} not importable ({type(exc).__name__}: {exc})"
    try:
        if name == "torch" and not mod.cuda.is_available():
            return None, "torch has no CUDA device (torch.cuda.is_available() is False)"
        if name == "cupy":
            mod.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"{name} cannot use the GPU ({type(exc).__name__}: {exc})"
    return mod, None


def dist_version(*names):
    """Installed version of the first distribution found among ``names`` (or of the
    distribution that provides a top-level module ``names[0]``), else None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        dists = importlib.metadata.packages_distributions().get(names[0], [])
    except Exception:
        dists = []
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def package_versions(extra=()):
    """Versions of the packages behind a bench result (None where not installed)."""
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": dist_version("numba"),
        "numba-cuda": dist_version("numba-cuda", "numba_cuda"),
        "cuda-bindings": dist_version("cuda-bindings", "cuda_bindings"),
        "numba_tma": dist_version("numba_tma", "numba-tma"),
        "torch": dist_version("torch"),
        "cupy": dist_version("cupy"),
    }
    for name in extra:
        versions.setdefault(name, dist_version(name))
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch_cuda"] = getattr(torch.version, "cuda", None)
    return versions


def gpu_environment():
    """GPU name, compute capability, SM count, memory, driver version, CUDA runtime version.
    Every field falls back to None rather than raising (the header must always print)."""
    env = {"gpu": None, "compute_capability": None, "sm_count": None, "memory_GiB": None,
           "driver": None, "driver_version_int": None, "cuda_runtime": None,
           "host": platform.node()}
    try:
        from numba import cuda

        dev = cuda.get_current_device()
        name = dev.name
        env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        env["compute_capability"] = "%d.%d" % tuple(dev.compute_capability)
        env["sm_count"] = int(dev.MULTIPROCESSOR_COUNT)
    except Exception:
        pass
    try:
        from numba import cuda

        env["memory_GiB"] = round(cuda.current_context().get_memory_info().total / 2**30, 2)
    except Exception:
        pass
    try:
        from cuda.bindings import driver as cudrv

        err, version = cudrv.cuDriverGetVersion()
        if int(err) == 0:
            env["driver_version_int"] = int(version)
            env["driver"] = f"{version // 1000}.{(version % 1000) // 10}"
    except Exception:
        pass
    if env["driver"] is None:
        try:
            from numba.cuda.cudadrv.driver import driver

            env["driver"] = "%d.%d" % tuple(driver.get_version())
        except Exception:
            pass
    try:
        from numba import cuda

        env["cuda_runtime"] = "%d.%d" % tuple(cuda.runtime.get_version())
    except Exception:
        pass
    return env


def context_alive():
    """False once the CUDA context is lost (a sticky error such as an illegal instruction):
    nothing more can run in this process."""
    try:
        from numba import cuda

        cuda.synchronize()
        return True
    except Exception:
        return False


def free_device_memory():
    """Give back cached device memory between configurations: Python garbage, numba's pending
    deallocations, torch's caching allocator and CuPy's pool (only those already imported)."""
    gc.collect()
    try:
        from numba import cuda

        ctx = cuda.current_context()
        deallocs = getattr(ctx, "deallocations", None)
        if deallocs is None:
            deallocs = ctx.memory_manager.deallocations
        deallocs.clear()
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass


# ---------------------------------------------------------------------------------------------
# formatting and output

def fmt(value, spec=".2f", missing="-"):
    """``format(value, spec)``, or ``missing`` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec)


def one_line(text, limit=160):
    """An exception message on one line, cut at ``limit`` characters (tables)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_table(headers, rows, align=None):
    """A plain-text table, columns separated by `` | ``; ``align`` is a string of 'l'/'r' per
    column (default: first column left, the rest right). Cells are converted with str()."""
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    for row in cells:
        if len(row) != ncol:
            raise ValueError(f"row has {len(row)} cells, expected {ncol}: {row}")
    widths = [max(len(row[i]) for row in cells) for i in range(ncol)]

    def line(row):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        return " | ".join(parts).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def jsonable(obj):
    """``obj`` with numpy scalars/arrays, tuples and NaN/inf made JSON-safe (NaN/inf -> None)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path, obj):
    """Write ``obj`` (made JSON-safe) to ``path`` atomically, creating parent directories."""
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(jsonable(obj), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def timestamp():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def log(*args):
    """Progress to stderr (the results table goes to stdout)."""
    print(*args, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# results: saving and plots

def save_results(args, doc):
    """Write ``doc`` as JSON to ``args.json`` and draw it to ``args.plot`` (a PNG), each if given."""
    if getattr(args, "json", None):
        write_json(args.json, doc)
    if getattr(args, "plot", None):
        write_plot(doc, args.plot)


def _label(value):
    """``[4096, 4096]`` -> ``4096x4096``; anything else as text."""
    if isinstance(value, (list, tuple)):
        return "x".join(str(v) for v in value)
    return str(value)


def _ok(row):
    return row.get("status", "ok") == "ok"


def _points_gemm(rows):
    for r in rows:
        if _ok(r) and r.get("TFLOPs") is not None:
            kin, kout = r["in_dtype"], r["out_dtype"]
            yield (kin if kin == kout else f"{kin}->{kout}", r["kernel"], _label(r["shape"]),
                   r["TFLOPs"])


def _points_bandwidth(rows):
    for r in rows:
        if _ok(r) and r.get("GBps") is not None:
            yield r.get("dtype", ""), r["kernel"], _label(r["shape"]), r["GBps"]


def _points_host(rows):
    for r in rows:
        yield "", r["op"], str(r["n"]), r["host_us"]


def _points_multicast(rows):
    for r in rows:
        if _ok(r) and r.get("smem_GBps") is not None:
            yield "", r["variant"], f"cluster {r['cluster']}", r["smem_GBps"]


def _points_banks(rows):
    for r in rows:
        for counter, value in sorted((r.get("ncu") or {}).items()):
            if counter.endswith("_conflicts") and value is not None:
                yield "", counter, r["rung"], value


#: bench name -> (points(rows) yielding (panel, series, x label, y), y axis label, x axis label)
PLOTS = {
    "gemm": (_points_gemm, "TFLOP/s", "M x N x K"),
    "transpose": (_points_bandwidth, "GB/s", "shape"),
    "reduce": (_points_bandwidth, "GB/s", "shape"),
    "transpose_ceiling": (_points_bandwidth, "GB/s", "shape"),
    "host": (_points_host, "host us per call", "n"),
    "multicast": (_points_multicast, "GB/s into shared memory", ""),
    "warp_gemm_banks": (_points_banks, "bank conflicts (ncu)", "rung"),
}
PLOT_DPI = 100
PANEL_SIZE = (11.0, 4.5)       # inches per panel: 1100 x 450 pixels at PLOT_DPI
#: Series drawn dashed: the baselines a bench measures beside numba_tma's kernels.
BASELINES = ("copy", "torch", "cupy", "cublas", "cublas geam", "triton",
             "numba.cuda.kernels.transpose")
_MARKERS = "os^vD<>ph*"


def plot_panels(doc):
    """``{panel: {series: [(x label, y), ...]}}`` of a bench result document (panels and series
    in order of first appearance), the y axis label and the x axis label. Raises ValueError
    for a bench with no plot."""
    bench = doc.get("bench")
    if bench not in PLOTS:
        raise ValueError(f"no plot for bench {bench!r}; plotted: {', '.join(PLOTS)}")
    points, ylabel, xlabel = PLOTS[bench]
    panels = {}
    for panel, series, x, y in points(doc.get("results") or []):
        panels.setdefault(panel, {}).setdefault(series, []).append((x, float(y)))
    if not panels:
        raise ValueError(f"{bench}: no result to plot")
    return panels, ylabel, xlabel


def plot_size(doc):
    """(width, height) in pixels of the PNG ``write_plot`` makes for ``doc``."""
    panels, _, _ = plot_panels(doc)
    return (round(PANEL_SIZE[0] * PLOT_DPI), round(PANEL_SIZE[1] * PLOT_DPI) * len(panels))


def write_plot(doc, path):
    """Draw a bench result document to the PNG ``path``: one panel per dtype (where the bench
    has them), one line per kernel and baseline, y against the configurations in run order.
    Needs matplotlib (``pip install "numba_tma[plot]"``), imported only here."""
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError("plots need matplotlib: pip install 'numba_tma[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels, ylabel, xlabel = plot_panels(doc)
    fig, axes = plt.subplots(len(panels), 1, squeeze=False, dpi=PLOT_DPI,
                             figsize=(PANEL_SIZE[0], PANEL_SIZE[1] * len(panels)))
    for ax, (panel, series) in zip(axes[:, 0], panels.items()):
        xs = []
        for points in series.values():
            xs += [x for x, _ in points if x not in xs]
        colors = plt.get_cmap("tab20").colors
        for i, (name, points) in enumerate(series.items()):
            style = "--" if name in BASELINES or name.startswith("torch") else "-"
            ax.plot([xs.index(x) for x, _ in points], [y for _, y in points], style,
                    marker=_MARKERS[i % len(_MARKERS)], color=colors[i % len(colors)],
                    linewidth=1.2, markersize=4, label=name)
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, rotation=20, ha="right", fontsize=7)
        ax.set_ylabel(ylabel)
        ax.set_xlabel(xlabel)
        ax.grid(alpha=0.3)
        title = f"{doc.get('bench')} on {doc.get('gpu', '?')}"
        ax.set_title(f"{title}, {panel}" if panel else title, fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout(rect=(0, 0, 0.8, 1))           # the right fifth holds the legends
    path = os.fspath(path)
    if os.path.dirname(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
    fig.savefig(path, dpi=PLOT_DPI)
    plt.close(fig)
    return path
