"""Plots of bench result documents (the JSON a bench writes): one panel per dtype where the
bench has them, one line per kernel and baseline. matplotlib is optional and imported only by
:func:`write_plot` (``pip install "numba_tma[plot]"``); everything else is pure Python.
"""

import os

from .stats import median


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


def _points_gemm_fp8(rows):
    # A panel per scale mode and accumulation; matmul(), torch._scaled_mm (and Triton's
    # unscaled fp8 GEMM beside the promoted per-tensor rows).
    for r in rows:
        if _ok(r) and r.get("TFLOPs") is not None:
            yield (f"{r['in_dtype']} {r['scale']} scales, {r['accum']} accumulation",
                   r["kernel"], _label(r["shape"]), r["TFLOPs"])


def _points_gemm_fp8_power(rows):
    # One panel: each kernel's rate at the power limit, the median of its rounds per shape.
    rates = {}
    for r in rows:
        if _ok(r) and r.get("TFLOPs") is not None:
            rates.setdefault((r["kernel"], _label(r["shape"])), []).append(r["TFLOPs"])
    for (kernel, shape), values in rates.items():
        yield ("", kernel, shape, median(values))


def _points_gemm_epilogue(rows):
    # A panel per shape and dtype: each epilogue's TFLOP/s, fused by matmul(), our plain
    # matmul(), torch unfused and fused, Triton fused.
    series = (("TFLOPs", "matmul(epilogue=)"), ("plain_TFLOPs", "matmul() plain"),
              ("torch_TFLOPs", "torch unfused"), ("torch_fused_TFLOPs", "torch fused"),
              ("triton_TFLOPs", "triton fused"))
    for r in rows:
        if _ok(r) and r["kernel"] == "matmul(epilogue=)":
            for field, name in series:
                if r.get(field) is not None:
                    yield (f"{_label(r['shape'])} {r['in_dtype']}", name, r["epilogue"],
                           r[field])


def _points_bandwidth(rows):
    for r in rows:
        if _ok(r) and r.get("GBps") is not None:
            yield r.get("dtype", ""), r["kernel"], _label(r["shape"]), r["GBps"]


def _points_host(rows):
    # Per-call costs against n; the fresh processes' first calls (seconds of compiling or
    # loading, one point each) would flatten every other line, so they stay in the table only.
    for r in rows:
        if "first call" not in r["op"]:
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


def _points_tune(rows):
    # transpose_tune: a panel per dtype and shape, a line per kernel (and the copy), GB/s
    # against the settings in run order.
    for r in rows:
        if _ok(r) and r.get("GBps") is not None:
            panel = f"{r['dtype']} {'x'.join(str(v) for v in r['shape'])}"
            yield panel, r["kernel"], r["setting"], r["GBps"]
            if r.get("copy_GBps") is not None:
                yield panel, "copy", r["setting"], r["copy_GBps"]


def _points_compile(rows):
    # benches/compile.py: a panel per family (matmul, transpose), seconds per kernel for the
    # cold build and each of its phases.
    for r in rows:
        if "cold_s" in r:
            family, _, name = r["kernel"].partition(" ")
            yield family, "cold", name, r["cold_s"]
            for phase, seconds in r.get("phase_s", {}).items():
                yield family, phase, name, seconds


def _points_compile_floor(rows):
    # benches/compile_floor.py: one panel, seconds per kernel of the link and of its two parts.
    for r in rows:
        name = r["kernel"].partition(" ")[2]
        for series, field in (("link + start", "with_start_s"), ("link", "link_s"),
                              ("nvvm", "nvvm_lto_s"), ("ptxas", "ptxas_s")):
            yield "matmul", series, name, r[field]


#: bench name -> (points(rows) yielding (panel, series, x label, y), y axis label, x axis label)
PLOTS = {
    "gemm": (_points_gemm, "TFLOP/s", "M x N x K"),
    "gemm_fp8": (_points_gemm_fp8, "TFLOP/s", "M x N x K"),
    "gemm_epilogue": (_points_gemm_epilogue, "TFLOP/s (the GEMM's 2MNK)", "epilogue"),
    "gemm_fp8_power": (_points_gemm_fp8_power, "TFLOP/s back to back, at the power limit",
                       "M x N x K"),
    "transpose": (_points_bandwidth, "GB/s", "shape"),
    "reduce": (_points_bandwidth, "GB/s", "shape"),
    "transpose_ceiling": (_points_bandwidth, "GB/s", "shape"),
    "host": (_points_host, "host us per call", "n"),
    "multicast": (_points_multicast, "GB/s into shared memory", ""),
    "warp_gemm_banks": (_points_banks, "bank conflicts (ncu)", "rung"),
    "transpose_tune": (_points_tune, "GB/s", "setting"),
    "compile": (_points_compile, "seconds, cold (cache off)", "kernel"),
    "compile_floor": (_points_compile_floor, "seconds (best of runs)", "kernel"),
}
PLOT_DPI = 100
PANEL_SIZE = (11.0, 4.5)       # inches per panel: 1100 x 450 pixels at PLOT_DPI
#: Series drawn dashed: the baselines a bench measures beside numba_tma's kernels.
BASELINES = ("copy", "torch", "cupy", "cublas", "cublas geam", "triton", "torch._scaled_mm",
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
