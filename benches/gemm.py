"""GEMM throughput: numba_tma's GEMMs against cuBLAS (torch.matmul) and a tuned Triton matmul.

Run from the repository root on an sm_90 GPU, after ``pip install .`` (torch needed, Triton
optional):

    # the issue's table: fp16 and bf16, cubes 1024..8192 plus non-square and odd shapes
    python benches/gemm.py --json benches/results/gemm-h100.json
    # one shape, one dtype, a few kernels
    python benches/gemm.py --size 4096 --dtype bfloat16 --kernels 'matmul*,wgmma*'
    # a WgmmaConfig of your own beside matmul() (fields as WgmmaConfig's keywords)
    python benches/gemm.py --size 8192 --kernels 'matmul()' \
        --config 'w256_l2none=bn=256,stages=4,mma_pipe=0,l2_promotion=0'

Per shape (M, N, K) the script makes fresh random inputs (standard normal, rounded to each
``--dtype``: float16 and bfloat16 by default) and for each dtype:

1. checks first: the output is poisoned with NaN, the kernel runs once and its result is compared
   with a float32 reference (cuBLAS in fp32 with TF32 off, of the rounded inputs):
   ``max|C - ref| / max|ref|`` must stay under the bound of the output dtype (fp16/bf16
   rounding plus fp32 accumulation; TF32-free fp32 for the SIMT kernel). A failed check is
   reported FAILED and the kernel is not timed. The Triton baseline is checked the same way;
2. times it: ``--rounds`` rounds, each timing cuBLAS, then Triton, then every kernel
   (``--warmup`` untimed runs, then ``--iters`` runs each between its own pair of CUDA events
   on the default stream; the median is the round's figure); a time is the median of its
   rounds. Rounds interleave the kernels with the baselines because the H100's clock moves
   with its power draw over a long run (cuBLAS itself was seen at 614-729 TFLOP/s in three
   back-to-back 8192^3 timings). The timed launches are queued behind a GPU-side wait
   (``torch.cuda._sleep``), so ``us`` is the GEMM kernel alone (the launcher already planned,
   device time), not the Python launch path's. The host side is reported apart:
   ``host us`` is the Python cost of one call (argument checks, launcher lookup, the launch),
   measured while the GPU is held; ``wall us`` is what a caller sees: ``--iters`` calls back to
   back between two events with no GPU wait, per call (the larger of host and device cost).

Baselines, for each (input, output) dtype pair some kernel runs: cuBLAS through
``torch.matmul(a, b, out=)`` (fp32 output from 16-bit inputs: torch.matmul's 16-bit result, cast
after; the row's ``config`` names the kernels one call launched, from torch.profiler), and
Triton: the tutorial-structured matmul of ``numba_tma.bench.baselines`` (grouped tile raster,
``tl.dot`` over K into fp32; told that rows are 16-byte aligned where N, K and the row strides
are multiples of 8, as it infers that only from multiples of 16), autotuned over its
``TRITON_CONFIGS`` per (M, N, K) and dtypes at its first call, which is the untimed check, each
config timed as these benches time kernels (operands warm in L2, not Triton's L2-flushing
``do_bench``); the timed calls go straight to the chosen config. Without Triton its column
shows ``-``. The seed-004 SIMT GEMM is fp32 and runs once per shape against cuBLAS fp32 (TF32
off; Triton has no fp32 baseline here).

One line per kernel, shape and dtype: ``us | TFLOP/s | x cuBLAS | x Triton`` (the baseline's
time over the kernel's, same input and output dtypes; >1 means faster), then a table with the
host figures and ``x cuBLAS wall`` (cuBLAS's wall time over the kernel's), then the geometric
mean of x cuBLAS and x Triton per kernel. Exit status 1 when a numba_tma kernel FAILED.
"""

import argparse
import dataclasses
import functools
import os
import sys


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402
from numba_tma.bench.baselines import (cublas_matmul, cuda_kernels, gemm_session,  # noqa: E402
                                       triton_config_label)

BENCH = "gemm"
GEMM_DTYPES = ("float16", "bfloat16")          # the input dtypes a run can ask for
DEFAULT_DTYPES = GEMM_DTYPES
DTYPE_ALIASES = {"fp16": "float16", "f16": "float16", "half": "float16", "bf16": "bfloat16"}
DEFAULT_SIZES = (1024, 2048, 4096, 8192)
#: Non-square and odd shapes (M, N, K): tall-skinny, wide, and sizes that are not tile multiples
#: (K and N still multiples of 8, as TMA's 16-byte rows need).
DEFAULT_SHAPES = ((4095, 4104, 4096), (8192, 1024, 8192), (1024, 8192, 8192),
                  (3000, 5000, 2000), (1000, 1000, 1000))
#: Rows of matmul() as users call it: their config column names the configuration it chose.
CHOOSING = ("matmul()", "matmul()_f32out")
SIMT_MAX = 4096                 # the SIMT GEMM runs on shapes up to this size (it is slow)
#: max|C - ref| / max|ref| allowed: output rounding (2^-8 bf16, 2^-11 f16) plus accumulation.
BOUND = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-4}
HOLD_CYCLES = 200_000_000      # ~0.1 s of GPU wait: longer than queuing any timed batch

HEADERS = ["M x N x K", "dtype", "kernel", "us", "TFLOP/s", "x cuBLAS", "x Triton", "host us",
           "wall us", "x cuBLAS wall", "check"]
TABLE_ALIGN = "lll" + "r" * 7 + "l"


def parse_dtypes(text):
    """``"float16,bf16"`` -> ``["float16", "bfloat16"]`` (order kept, duplicates dropped)."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        if not part:
            continue
        name = DTYPE_ALIASES.get(part, part)
        if name not in GEMM_DTYPES:
            raise ValueError(f"unsupported dtype {part!r}; choose from {', '.join(GEMM_DTYPES)}")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("empty dtype list")
    return out


def parse_config(text):
    """``"NAME=field=value,field=value"`` -> ``(NAME, config)``: a kernel row named NAME forcing
    the config ``bench.wgmma_config`` reads from the rest."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec.strip():
        raise ValueError(f"--config {text!r}: write NAME=field=value,... (WgmmaConfig's "
                         f"keywords, e.g. w256=bn=256,stages=4)")
    try:
        return name, bench.wgmma_config(spec)
    except ValueError as exc:
        raise ValueError(f"--config {text!r}: {exc}") from None


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=bench.argparse_type(bench.positive_int), action="append",
                   help="a cube M = N = K (repeatable; default 1024 2048 4096 8192)")
    p.add_argument("--shape", nargs=3, type=bench.argparse_type(bench.positive_int),
                   action="append", metavar=("M", "N", "K"), help="an extra shape (repeatable)")
    p.add_argument("--no-default-shapes", action="store_true",
                   help="skip the built-in non-square/odd shapes")
    p.add_argument("--dtype", dest="dtypes", type=bench.argparse_type(parse_dtypes),
                   default=list(DEFAULT_DTYPES),
                   help="comma list of input dtypes, each run at every shape "
                        "(default float16,bfloat16)")
    p.add_argument("--kernels", default=None,
                   help="comma list or globs of kernel names (default: all)")
    p.add_argument("--config", dest="configs", type=bench.argparse_type(parse_config),
                   action="append", default=[], metavar="NAME=FIELD=VALUE,...",
                   help="an extra kernel row NAME forcing WgmmaConfig(FIELD=VALUE, ...) "
                        "(repeatable; always run)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=30,
                   help="timed runs per kernel and round (default 30); the median is the "
                        "round's figure")
    p.add_argument("--rounds", type=bench.argparse_type(bench.positive_int), default=3,
                   help="timing rounds, each over cuBLAS, Triton and every kernel (default 3)")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before each timing (default 5)")
    bench.add_output_args(p, seed_help="seed for the inputs (default: fresh)")
    args = p.parse_args(argv)
    shapes = [(s, s, s) for s in (args.size or DEFAULT_SIZES)]
    if not args.no_default_shapes and not args.size:
        shapes += list(DEFAULT_SHAPES)
    shapes += [tuple(s) for s in (args.shape or [])]
    args.shapes = shapes
    return args


def kernels(torch, configs=()):
    """``{name: (input dtype or None for the run's, output dtype or None for the input's,
    launcher(a, b, out))}``; ``configs``: extra ``(name, WgmmaConfig)`` rows (``--config``)."""
    from numba_tma import matmul
    from numba_tma.matmul_api import plan_matmul
    from numba_tma.kernels.gemm import GemmConfig, WgmmaConfig
    from numba_tma.ladders.gemm_pingpong import PingPongConfig
    from numba_tma.ladders.gemm_stream_k import StreamKConfig

    def forced(cfg):
        return lambda a, b, out: matmul(a, b, out, config=cfg)

    chosen = {}

    def without_l2_promotion(a, b, out):
        # matmul()'s choice for these operands, its A and B maps without L2 promotion
        key = (tuple(a.shape), tuple(b.shape), a.stride(), b.stride(), a.dtype, out.dtype)
        cfg = chosen.get(key)
        if cfg is None:
            cfg = chosen[key] = plan_matmul(a, b, out).config.replace(l2_promotion=0)
        return matmul(a, b, out, config=cfg)

    table = {
        # matmul() as users call it: the persistent wgmma kernel, configuration chosen per shape
        "matmul()": (None, None, lambda a, b, out: matmul(a, b, out)),
        "matmul()_f32out": (None, "float32", lambda a, b, out: matmul(a, b, out)),
        "matmul()_l2none": (None, None, without_l2_promotion),
        # the ladder's rungs, forced
        "wgmma_persistent_c2": (None, None, forced(WgmmaConfig(256, cluster_m=2))),
        "wgmma_persistent_sk": (None, None, forced(StreamKConfig(256))),
        "wgmma_persistent_cb4": (None, None, forced(WgmmaConfig(256, c_buffers=4))),
        "wgmma_persistent_c2_cb4": (None, None, forced(WgmmaConfig(256, cluster_m=2,
                                                                   c_buffers=4))),
        # the consumers' wgmma pipeline: matmul()'s 128 x 256 choice before (3 stages, one
        # group left in flight), and each slot's group retired (mma_pipe=0) in 2-CTA clusters
        "wgmma_persistent_s3": (None, None, forced(WgmmaConfig(256, stages=3))),
        "wgmma_persistent_c2_s4_p0": (None, None, forced(WgmmaConfig(256, cluster_m=2, stages=4,
                                                                     mma_pipe=0))),
        # 256 x 128 tiles (each consumer two m64 halves): fewer waves at some shapes
        "wgmma_persistent_m256": (None, None, forced(WgmmaConfig(128, stages=4, mma_pipe=0,
                                                                 bm=256))),
        "wgmma_persistent_m256_c2": (None, None, forced(WgmmaConfig(128, stages=4, mma_pipe=0,
                                                                    bm=256, cluster_m=2))),
        # ping-pong: each consumer warpgroup its own 128 x 128 tile, epilogues under the
        # other's main loop
        "wgmma_pingpong": (None, None, forced(PingPongConfig(128, stages=6))),
        "wgmma_tile_per_block": (None, None, forced(WgmmaConfig(256, stages=4,
                                                                persistent=False))),
        "mma_sync": (None, None, forced(GemmConfig(128, 256, 4))),
        "mma_sync_multicast": (None, None, forced(GemmConfig(128, 256, 4, cluster_m=2))),
    }
    for name, cfg in configs:
        if name in table:
            raise ValueError(f"--config {name}: a kernel of that name exists")
        table[name] = (None, None, forced(cfg))
    try:
        from numba_tma.ladders.simt_gemm import simt_gemm

        table["simt_fp32"] = ("float32", "float32", lambda a, b, out: simt_gemm(a, b, out))
    except ImportError:
        pass
    return table


# --- results: pure helpers --------------------------------------------------------------------

def bound(kin, kout):
    """The check's bound on ``max|C - ref| / max|ref|`` for these input and output dtypes."""
    return BOUND[kout] if kin != "bfloat16" else max(BOUND[kout], BOUND["bfloat16"])


def dtype_label(kin, kout):
    return kin if kin == kout else f"{kin}->{kout}"


def new_row(kernel, shape, kin, kout):
    return {"kernel": kernel, "shape": list(shape), "in_dtype": kin, "out_dtype": kout,
            "x_triton": None}


def score(row, rounds_ms, flop, cublas_ms=None, triton_ms=None, wall_ms=(),
          cublas_wall_ms=None):
    """Fill a timed row from its per-round device times (ms) and wall times per call (ms),
    given its baselines' (median ms, None where there is none): ``us``, ``TFLOPs``,
    ``x_cublas``, ``x_triton``, ``wall_us``, ``x_cublas_wall``, ``rounds_us``. Returns it."""
    ms = bench.median(rounds_ms)
    wall = bench.median(wall_ms) if wall_ms else None
    row.update(status="ok", us=ms * 1e3, TFLOPs=flop / (ms * 1e-3) / 1e12,
               x_cublas=bench.speedup(cublas_ms, ms), x_triton=bench.speedup(triton_ms, ms),
               wall_us=None if wall is None else wall * 1e3,
               x_cublas_wall=bench.speedup(cublas_wall_ms, wall),
               rounds_us=[t * 1e3 for t in rounds_ms])
    return row


def _x(value):
    return f"{bench.fmt(value)}x"


def perf_line(row):
    """The progress line of one timed row."""
    m, n, k = row["shape"]
    flop = 2 * m * n * k
    rounds = ", ".join(f"{flop / (t * 1e-6) / 1e12:.0f}" for t in row["rounds_us"])
    label = dtype_label(row["in_dtype"], row["out_dtype"]) + ":"
    return (f"Perf ({m}, {n}, {k}) {label:18s} {row['kernel']:18s} {row['us']:9.1f} us | "
            f"{row['TFLOPs']:6.1f} TFLOP/s | {_x(row['x_cublas'])} cuBLAS | "
            f"{_x(row['x_triton'])} Triton | wall {bench.fmt(row.get('wall_us'), '.1f')} us | "
            f"rounds {rounds} TFLOP/s")


def _check_text(row):
    status = row.get("status")
    if status == "skipped":
        return "skipped: " + row["reason"]
    text = "" if row.get("rel_err") is None else f"rel err {row['rel_err']:.1e}"
    if status == "FAILED":
        return "FAILED " + text
    if row.get("config"):
        text += f" ({row['config']})"
    return text


def table_row(row):
    """The cells of one result row under ``HEADERS``."""
    m, n, k = row["shape"]
    cells = [f"{m}x{n}x{k}", dtype_label(row["in_dtype"], row["out_dtype"]), row["kernel"]]
    if row.get("status") != "ok":
        return cells + ["-"] * 7 + [_check_text(row)]
    return cells + [f"{row['us']:.1f}", f"{row['TFLOPs']:.1f}", bench.fmt(row["x_cublas"]),
                    bench.fmt(row["x_triton"]), bench.fmt(row.get("host_us"), ".0f"),
                    bench.fmt(row.get("wall_us"), ".1f"), bench.fmt(row.get("x_cublas_wall")),
                    _check_text(row)]


def geomeans(results, field, skip=None):
    """``{kernel: (geometric mean, count)}`` of ``field`` over the rows timed ok (kernels in
    order of first appearance; ``skip``, the field's own baseline, left out)."""
    values = {}
    for row in results:
        if row["kernel"] != skip and row.get("status") == "ok" and row.get(field) is not None:
            values.setdefault(row["kernel"], []).append(row[field])
    return {name: (bench.geomean(xs), len(xs)) for name, xs in values.items()}


def geomean_line(name, x_cublas, x_triton):
    """``geomean tma_mma: 0.631x cuBLAS over 18 runs, 1.050x Triton over 16 runs`` from two
    ``geomeans`` results; None when neither has ``name``."""
    parts = []
    for label, means in (("cuBLAS", x_cublas), ("Triton", x_triton)):
        if name in means:
            mean, count = means[name]
            parts.append(f"{mean:.3f}x {label} over {count} runs")
    return f"geomean {name}: {', '.join(parts)}" if parts else None


# --- running ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Timed:
    """One timed launcher: its result row, ``fn()``, its baselines' key (in, out dtype) and the
    per-round device medians and wall times (ms)."""
    row: dict
    fn: object
    key: tuple
    ms: list = dataclasses.field(default_factory=list)
    wall: list = dataclasses.field(default_factory=list)


class ShapeRun:
    """The inputs of one shape (fp32 normals), their casts to each input dtype and the fp32
    references, shared by the dtypes run at that shape."""

    def __init__(self, torch, shape, gen):
        self.torch, self.shape = torch, shape
        m, n, k = shape
        self.a = torch.randn(m, k, device="cuda", dtype=torch.float32, generator=gen)
        self.b = torch.randn(k, n, device="cuda", dtype=torch.float32, generator=gen)
        self.casts, self.refs = {}, {}
        self.fixed_done = set()     # kernels of a fixed input dtype already run at this shape

    def operands(self, kin):
        if kin not in self.casts:
            dt = getattr(self.torch, kin)
            self.casts[kin] = (self.a.to(dt).contiguous(), self.b.to(dt).contiguous())
        return self.casts[kin]

    def poisoned(self, kout):
        m, n, _ = self.shape
        return self.torch.full((m, n), float("nan"), device="cuda",
                               dtype=getattr(self.torch, kout))

    def rel_err(self, out, kin):
        """``max|out - ref| / max|ref|`` against fp32 cuBLAS (TF32 off) of the rounded inputs
        (NaN when ``out`` has a NaN)."""
        if kin not in self.refs:
            ta, tb = self.operands(kin)
            ref = ta.float() @ tb.float()
            self.refs[kin] = (ref, ref.abs().max().item())
        ref, scale = self.refs[kin]
        return (out.float() - ref).abs().max().item() / scale


def bench_dtype(torch, args, table, names, run, dtype, tune_triton, hold):
    """Check and time, in interleaved rounds, cuBLAS, Triton and the kernels ``names`` on one
    shape with ``dtype`` inputs. Returns (result rows, whether a numba_tma kernel FAILED)."""
    from numba_tma.matmul_api import plan_matmul

    shape = run.shape
    m, n, k = shape
    cublas, triton_ = {}, {}        # (kin, kout) -> Timed
    base_rows, kernel_rows, timed = [], [], []
    failed = False

    def add_baselines(kin, kout):
        key = (kin, kout)
        ta, tb = run.operands(kin)
        cout = torch.empty((m, n), device="cuda", dtype=getattr(torch, kout))
        fn = cublas_matmul(torch, ta, tb, cout)     # fp32 out: the 16-bit result, cast after
        cublas[key] = Timed(new_row("cublas", shape, kin, kout), fn, key)
        base_rows.append(cublas[key].row)
        try:                                        # which kernel cuBLAS picked, untimed
            cublas[key].row["config"] = " + ".join(cuda_kernels(torch, fn))
        except Exception as exc:    # (a profiler that cannot start leaves the name out)
            bench.log(f"cuBLAS kernel name not recorded: {bench.one_line(exc)}")
        if tune_triton is None or kin not in GEMM_DTYPES:
            return
        row = new_row("triton", shape, kin, kout)
        base_rows.append(row)
        tout = run.poisoned(kout)
        try:
            launch, config = tune_triton(ta, tb, tout)      # autotunes here, untimed
            torch.cuda.synchronize()
            tout.fill_(float("nan"))                        # the chosen config alone must
            launch()                                        # write all of out
            torch.cuda.synchronize()
        except Exception as exc:    # Triton's compile and launch errors share no base class
            row.update(status="skipped", reason=bench.one_line(exc))
            return
        row.update(rel_err=run.rel_err(tout, kin), config=triton_config_label(config))
        if not row["rel_err"] <= bound(kin, kout):
            row["status"] = "FAILED"
            return
        triton_[key] = Timed(row, launch, key)

    for name in names:
        kin, kout, fn = table[name]
        fixed = kin is not None
        kin = kin or dtype
        kout = kout or kin
        if kin == "float32" and max(shape) > SIMT_MAX:
            continue
        if fixed:   # its input dtype is not --dtype's: run it once per shape, not per dtype
            if name in run.fixed_done:
                continue
            run.fixed_done.add(name)
        ta, tb = run.operands(kin)
        out = run.poisoned(kout)
        row = new_row(name, shape, kin, kout)
        kernel_rows.append(row)
        try:
            fn(ta, tb, out)
            torch.cuda.synchronize()
        except (TypeError, ValueError, RuntimeError) as exc:
            row.update(status="skipped", reason=bench.one_line(exc))
            continue
        row["rel_err"] = run.rel_err(out, kin)
        if name in CHOOSING:            # the configuration matmul() chose
            row["config"] = repr(plan_matmul(ta, tb, out).config)
        if not row["rel_err"] <= bound(kin, kout):
            failed = True
            row["status"] = "FAILED"
            continue
        if (kin, kout) not in cublas:
            add_baselines(kin, kout)
        timed.append(Timed(row, functools.partial(fn, ta, tb, out), (kin, kout)))

    # Rounds: cuBLAS, Triton, then each kernel, again and again (the clock drifts with power).
    entries = list(cublas.values()) + list(triton_.values()) + timed
    rounds = bench.interleaved_rounds([t.fn for t in entries], args.rounds, args.iters,
                                      args.warmup, hold=hold, wall=True)
    for t, (ms, wall) in zip(entries, rounds):
        t.ms, t.wall = ms, wall
    cublas_ms = {key: bench.median(t.ms) for key, t in cublas.items()}
    cublas_wall = {key: bench.median(t.wall) for key, t in cublas.items()}
    triton_ms = {key: bench.median(t.ms) for key, t in triton_.items()}
    for t in entries:
        score(t.row, t.ms, 2 * m * n * k, cublas_ms.get(t.key), triton_ms.get(t.key), t.wall,
              cublas_wall.get(t.key))
        t.row["host_us"] = (bench.host_us_per_call(t.fn, args.iters, hold,
                                                    torch.cuda.synchronize) if hold else None)
        print(perf_line(t.row), flush=True)
    return base_rows + kernel_rows, failed


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/gemm.py", torch="to time cuBLAS and make the inputs",
                  gpu="to run its GEMMs", hopper=True, plot=args.plot)
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    gen, tune_triton, env, hold = gemm_session(torch, args.seed, HOLD_CYCLES)
    print(f"# {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), driver "
          f"{env['driver']}; {', '.join(args.dtypes)} inputs; median of {args.iters} runs after "
          f"{args.warmup} warm-ups, {args.rounds} rounds")
    try:
        table = kernels(torch, args.configs)
        names = bench.select_names(table, args.kernels)
    except ValueError as exc:           # a --config name taken, a --kernels pattern unmatched
        bench.log(str(exc))
        return 2
    names += [name for name, _ in args.configs if name not in names]
    results, failed = [], False
    for shape in args.shapes:
        run = ShapeRun(torch, shape, gen)
        for dtype in args.dtypes:
            rows, bad = bench_dtype(torch, args, table, names, run, dtype, tune_triton, hold)
            results += rows
            failed |= bad
        del run
        bench.free_device_memory()
    print()
    print(bench.format_table(HEADERS, [table_row(r) for r in results], align=TABLE_ALIGN))
    x_cublas = geomeans(results, "x_cublas", skip="cublas")
    x_triton = geomeans(results, "x_triton", skip="triton")
    for name in ["cublas", "triton"] + names:
        line = geomean_line(name, x_cublas, x_triton)
        if line:
            print(line)
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions(extra=("triton",))),
            "dtype": args.dtypes,
            "iters": args.iters, "rounds": args.rounds,
            "timing": "us: device time, launches queued behind a GPU wait; wall_us: "
                      "back-to-back calls without the wait, per call",
            "warmup": args.warmup, "results": results,
            "geomean_x_cublas": {name: mean for name, (mean, _) in x_cublas.items()},
            "geomean_x_triton": {name: mean for name, (mean, _) in x_triton.items()},
            "command": " ".join(sys.argv), "timestamp": bench.timestamp()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
