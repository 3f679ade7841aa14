"""Matrix-transpose bandwidth: every kernel of ``numba_tma.transpose`` against a device copy (the
ceiling) and the transposes of torch, CuPy, cuBLAS (``geam`` through CuPy, fp32/fp64) and
numba-cuda, all measured in the same process.

Numbers only mean something when measured on the GPU (an H100 for the published ones); this
script needs a CUDA GPU (the TMA kernels an sm_90 one) and prints the device and versions it ran
on. Run from the repository root, after ``pip install .``:

    # the issue's matrix: fp32, fp16, int8 (uint8) and fp64 at 32768^2, plus an odd shape
    python benches/transpose.py --dtype float32,float16,uint8,float64 \\
        --shape 32768 32768 --shape 32767 20001 --json benches/results/transpose-h100.json

    # one configuration (defaults: float32, 32768 x 32768, 50 timed runs after 5 warm-ups)
    python benches/transpose.py
    # only the TMA kernels and the public API, without torch/CuPy/numba baselines
    python benches/transpose.py --kernels 'tma_*,transpose()' --no-baselines

Per configuration (shape M x N, dtype) the script allocates a fresh random input (standard
normal cast for floats, random bits for integers) and an output, then for each kernel:

1. checks first: the output is poisoned (every byte 0xFF, a NaN for floats), the kernel runs
   once, and the result is compared bit for bit with the input, in full on the GPU (a
   four-line numba kernel counting ``out[j, i] != src[i, j]``) and on a sample on the host
   against the numpy input (``--samples`` random full rows and columns of the output plus its
   first/last rows and columns: every edge and corner). A mismatch reports the kernel FAILED,
   and it is not timed. A launcher raising TypeError/ValueError/RuntimeError (a dtype or shape
   it does not support) is reported skipped, with its reason.
2. times ``--warmup`` untimed runs, then ``--iters`` runs each bracketed by its own pair of
   CUDA events on the default stream; the median is reported (min/max/mean/stdev in JSON).

GB/s counts bytes read plus written, ``2 * M * N * itemsize / time`` (decimal GB). "% of copy"
compares with the faster of ``cuMemcpyDtoDAsync`` and torch ``copy_`` of the same bytes, measured
in the same run (always measured; ``--no-baselines`` drops only torch/CuPy/numba-cuda's
transposes); "x torch" is torch's ``x.t().contiguous()`` time over the kernel's (>1: faster).
The exit status is 1 when a numba_tma kernel or transpose() FAILED (or the CUDA context was lost,
which ends the run), else 0; skipped kernels and failed baselines do not change it.
"""

import argparse
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402
from numba_tma.bench import baselines  # noqa: E402

BENCH = "transpose"
DEFAULT_SHAPE = (32768, 32768)
COPY = baselines.COPY
TORCH = "torch"
CUPY = "cupy"
CUBLAS = "cublas geam"
NUMBA_BUNDLED = "numba.cuda.kernels.transpose"
TRITON = "triton"
API = "transpose()"
BASELINES = (COPY, TORCH, CUPY, CUBLAS, NUMBA_BUNDLED, TRITON)
POISON_BYTE = 0xFF          # all-ones: NaN for every float width, -1 / max for integers
DEFAULT_SAMPLES = 64

#: Keys every result row has (the JSON schema the tests pin down).
RESULT_KEYS = ("kernel", "role", "dtype", "shape", "status", "reason", "ms", "min_ms", "max_ms",
               "mean_ms", "stdev_ms", "iters", "GBps", "pct_of_copy", "x_torch", "copy_GBps",
               "check", "note")
#: Keys of the report's top level.
REPORT_KEYS = ("bench", "gpu", "driver", "versions", "shape", "dtype", "copy_GBps", "results",
               "configs", "env", "iters", "warmup", "seed", "timing", "command", "timestamp")
STATUSES = ("ok", "failed", "skipped")


# ---------------------------------------------------------------------------------------------
# command line

def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="benches/transpose.py",
        description="Transpose bandwidth of numba_tma's kernels vs copy/torch/CuPy/numba-cuda "
                    "(run on the GPU).")
    p.add_argument("--shape", nargs=2, action="append", metavar=("M", "N"),
                   type=bench.argparse_type(bench.positive_int),
                   help="input shape (M, N); repeat for several (default: 32768 32768)")
    p.add_argument("--dtype", default=["float32"], type=bench.argparse_type(bench.parse_dtype_list),
                   help="comma list of " + ", ".join(bench.SUPPORTED_DTYPES) +
                        " (aliases fp16/fp32/fp64 ok; default float32)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=50,
                   help="timed runs per kernel (default 50); the median is reported")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before timing (default 5)")
    p.add_argument("--kernels", default=None,
                   help="comma list of kernel names or glob patterns among numba_tma's kernels "
                        "and 'transpose()' (default: all); baselines are governed by "
                        "--no-baselines")
    p.add_argument("--no-baselines", action="store_true",
                   help="skip torch, CuPy and numba-cuda's transpose (the copy ceiling stays)")
    p.add_argument("--samples", type=bench.argparse_type(bench.positive_int),
                   default=DEFAULT_SAMPLES,
                   help="random full rows and columns checked on the host (default 64), plus "
                        "the first and last of each")
    bench.add_output_args(p, "also write every result to this JSON file (rewritten after each "
                             "config)",
                          seed_help="seed for the inputs (default: fresh, printed and recorded)")
    args = p.parse_args(argv)
    args.shapes = [tuple(s) for s in args.shape] if args.shape else [DEFAULT_SHAPE]
    args.dtypes = args.dtype
    return args


def configs_of(args):
    """[(shape, dtype name)] in run order: shapes outer, dtypes inner."""
    return [(tuple(shape), dtype) for shape in args.shapes for dtype in args.dtypes]


# ---------------------------------------------------------------------------------------------
# arithmetic, results, report

def transpose_bytes(shape, itemsize):
    """Bytes a transpose of ``shape`` moves: every element read once and written once."""
    m, n = shape
    return 2 * m * n * itemsize


def make_result(kernel, role, dtype, shape, status, *, reason=None, times=None, check=None,
                note=None):
    """One result row; ``times`` (ms samples) only for status "ok". Derived columns (GB/s, % of
    copy, x torch) are filled by ``finalize_config`` once the config's baselines are known."""
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    row = {k: None for k in RESULT_KEYS}
    row.update(kernel=kernel, role=role, dtype=str(dtype), shape=[int(x) for x in shape],
               status=status, reason=reason, check=check, note=note)
    if status == "ok":
        if not times:
            raise ValueError("an ok result needs its times")
        s = bench.summarize(times)
        row.update(ms=s["median"], min_ms=s["min"], max_ms=s["max"], mean_ms=s["mean"],
                   stdev_ms=s["stdev"], iters=s["n"])
    return row


def finalize_config(rows):
    """Fill GBps, copy_GBps, pct_of_copy and x_torch of one config's rows (in place); returns
    the config's copy GB/s (None without a working copy row)."""
    if not rows:
        return None
    by_name = {r["kernel"]: r for r in rows if r["status"] == "ok"}
    itemsize = np.dtype(rows[0]["dtype"]).itemsize
    nbytes = transpose_bytes(rows[0]["shape"], itemsize)
    copy_gbps = bench.gbps(nbytes, by_name[COPY]["ms"]) if COPY in by_name else None
    torch_ms = by_name[TORCH]["ms"] if TORCH in by_name else None
    for r in rows:
        r["copy_GBps"] = copy_gbps
        if r["status"] != "ok":
            continue
        r["GBps"] = bench.gbps(nbytes, r["ms"])
        r["pct_of_copy"] = bench.pct_of(r["GBps"], copy_gbps)
        r["x_torch"] = bench.speedup(torch_ms, r["ms"])
    return copy_gbps


def best_result(rows):
    """The fastest ok row among numba_tma's kernels and transpose() (baselines excluded)."""
    ok = [r for r in rows if r["status"] == "ok" and r["role"] in ("kernel", "api")]
    return min(ok, key=lambda r: r["ms"]) if ok else None


TABLE_HEADERS = ("kernel", "ms", "GB/s", "% of copy", "x torch", "status")


def table_row(r):
    status = r["status"] if r["status"] == "ok" else (
        r["status"].upper() + (": " + bench.one_line(r["reason"]) if r["reason"] else ""))
    return [r["kernel"], bench.fmt(r["ms"], ".3f"), bench.fmt(r["GBps"], ".1f"),
            bench.fmt(r["pct_of_copy"], ".1f"), bench.fmt(r["x_torch"], ".2f"), status]


def format_results(rows):
    return bench.format_table(TABLE_HEADERS, [table_row(r) for r in rows], align="lrrrrl")


def config_title(shape, dtype, copy_gbps=None):
    m, n = shape
    size = m * n * np.dtype(dtype).itemsize
    title = f"{dtype} {m} x {n} ({size / 2**30:.2f} GiB per buffer)"
    if copy_gbps is not None:
        title += f", copy {copy_gbps:.1f} GB/s"
    return title


def best_line(rows):
    best = best_result(rows)
    if best is None:
        return "best: none ran"
    return ("best: " + " | ".join(str(c) for c in table_row(best)[:5]))


def build_report(env, versions, args, configs, rows, *, seed=None, command=None):
    """The JSON document: environment, the first config's shape/dtype/copy GB/s at the top level
    (the per-config values in ``configs`` and in every row), and every result row."""
    first = configs[0] if configs else {"shape": None, "dtype": None, "copy_GBps": None}
    return {
        "bench": BENCH,
        "gpu": env.get("gpu"),
        "driver": env.get("driver"),
        "versions": versions,
        "shape": first["shape"],
        "dtype": first["dtype"],
        "copy_GBps": first["copy_GBps"],
        "results": rows,
        "configs": configs,
        "env": env,
        "iters": args.iters,
        "warmup": args.warmup,
        "seed": seed,
        "timing": "CUDA events around each run on the default stream; median of iters runs "
                  "after warmup runs; GBps = 2*M*N*itemsize/time (read + write, 1e9 B)",
        "command": command,
        "timestamp": bench.timestamp(),
    }


def print_header(env, versions, args):
    print(f"numba_tma {BENCH} bench, {bench.timestamp()}")
    print(f"GPU: {env.get('gpu')} (cc {env.get('compute_capability')}, "
          f"{env.get('sm_count')} SMs, {env.get('memory_GiB')} GiB), driver {env.get('driver')}, "
          f"CUDA runtime {env.get('cuda_runtime')}")
    print("versions: " + ", ".join(f"{k} {v if v is not None else '-'}"
                                   for k, v in versions.items()))
    print("configs: " + "; ".join(f"{d} {m}x{n}" for (m, n), d in configs_of(args)))
    print(f"timing: median of {args.iters} runs after {args.warmup} warm-up runs, CUDA events; "
          f"GB/s = 2*M*N*itemsize / time")
    sys.stdout.flush()


# ---------------------------------------------------------------------------------------------
# correctness: the sampled host check (pure numpy, tested on the CPU)

def sample_lines(n, k, rng):
    """Sorted unique indices in [0, n): ``k`` random ones plus the first and the last."""
    picks = rng.choice(n, size=min(k, n), replace=False) if n else np.array([], dtype=np.int64)
    return np.unique(np.concatenate([picks.astype(np.int64), [0, n - 1]]))


def check_sampled(src, fetch_rows, fetch_cols, rows, cols):
    """Check sampled lines of ``out``, which must equal ``src.T``, bit for bit.

    ``src``: the (M, N) host input. ``fetch_rows(rows)`` returns ``out[rows, :]`` (len(rows), M);
    ``fetch_cols(cols)`` returns ``out[:, cols].T`` (len(cols), N) -- from the device or, in the
    tests, from a numpy ``out``. Returns ``(n_bad, message)``; message is None when all match.
    """
    u = bench.uint_view_dtype(src.dtype.itemsize)
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    bad, first = 0, None
    for what, idx, got, want in (
        ("row", rows, fetch_rows(rows), lambda: src[:, rows].T),
        ("column", cols, fetch_cols(cols), lambda: src[cols, :]),
    ):
        want = np.ascontiguousarray(want())
        got = np.ascontiguousarray(got)
        if got.shape != want.shape:
            return -1, f"sampled {what}s have shape {got.shape}, expected {want.shape}"
        gu, wu = got.view(u), want.view(u)
        diff = gu != wu
        if what == "column":
            fresh = diff.copy()
            fresh[:, rows] = False          # elements in sampled rows were counted already
            n = int(fresh.sum())
        else:
            n = int(diff.sum())
        if first is None and diff.any():
            k, e = np.argwhere(diff)[0]
            r, c = (idx[k], e) if what == "row" else (e, idx[k])
            first = (f"out[{r}, {c}] = {got[k, e]!r} (0x{int(gu[k, e]):x}), expected "
                     f"{want[k, e]!r} (0x{int(wu[k, e]):x})")
        bad += n
    if not bad:
        return 0, None
    return bad, (f"{bad} elements differ in {len(rows)} sampled rows and {len(cols)} sampled "
                 f"columns; first {first}")


# ---------------------------------------------------------------------------------------------
# device side (the front end's cuda imported lazily)

cuda = None     # the front end's cuda, bound on first use: importing this file needs no GPU stack


def _import_cuda():
    """The front end's ``cuda`` (``numba_tma._frontend``), bound to this module's global ``cuda``
    (the helper kernels below name it as a global, which is also what the CUDA simulator swaps
    for its fake module)."""
    global cuda
    if cuda is None:
        from numba_tma._frontend import cuda as frontend_cuda

        cuda = frontend_cuda
    return cuda


def _build_tool_kernels():
    _import_cuda()

    @cuda.jit
    def fill_bytes(buf, value):
        for k in range(cuda.grid(1), buf.shape[0], cuda.gridsize(1)):
            buf[k] = value

    @cuda.jit
    def compare_transposed(src, out, count, first):
        # out (N, M) must equal src (M, N) transposed; one atomic per thread that saw a miss.
        m = src.shape[0]
        n = src.shape[1]
        i0, j0 = cuda.grid(2)
        si, sj = cuda.gridsize(2)
        bad = 0
        lowest = first[0]
        for j in range(j0, n, sj):
            for i in range(i0, m, si):
                if out[j, i] != src[i, j]:
                    bad += 1
                    lowest = min(lowest, j * m + i)
        if bad:
            cuda.atomic.add(count, 0, bad)
            cuda.atomic.min(first, 0, lowest)

    @cuda.jit
    def gather_columns(out, cols, dst):
        # dst[k, r] = out[r, cols[k]]
        r0, k0 = cuda.grid(2)
        sr, sk = cuda.gridsize(2)
        for k in range(k0, cols.shape[0], sk):
            c = cols[k]
            for r in range(r0, out.shape[0], sr):
                dst[k, r] = out[r, c]

    return fill_bytes, compare_transposed, gather_columns


class DeviceTools:
    """Trusted helper kernels (compiled on first use): poison fill, the full bitwise compare
    and the column gather of the sampled check."""

    BLOCK_2D = (32, 8)
    MAX_GRID = 64           # blocks per grid axis for the grid-stride kernels

    def __init__(self):
        self.cuda = _import_cuda()
        self._fill, self._compare, self._gather = _build_tool_kernels()

    def _grid2(self, nx, ny):
        bx, by = self.BLOCK_2D
        return (min(-(-nx // bx), self.MAX_GRID) or 1, min(-(-ny // by), self.MAX_GRID) or 1)

    def poison(self, arr):
        """Set every byte of the C-contiguous device array ``arr`` to POISON_BYTE."""
        flat = arr.reshape(arr.size).view(np.uint8)
        threads = 256
        blocks = min(-(-flat.shape[0] // threads), 4096) or 1
        self._fill[blocks, threads](flat, POISON_BYTE)
        self.cuda.synchronize()

    def _uint(self, arr):
        return arr.view(bench.uint_view_dtype(arr.dtype.itemsize))

    def compare(self, src, out):
        """(number of elements where out != src.T bitwise, flat index in out of the first)."""
        cuda = self.cuda
        m, n = src.shape
        count = cuda.to_device(np.zeros(1, np.int64))
        first = cuda.to_device(np.full(1, np.iinfo(np.int64).max, np.int64))
        self._compare[self._grid2(m, n), self.BLOCK_2D](self._uint(src), self._uint(out),
                                                        count, first)
        return int(count.copy_to_host()[0]), int(first.copy_to_host()[0])

    def fetch_rows(self, out, rows):
        return np.stack([self._uint(out[int(r)]).copy_to_host() for r in rows])

    def fetch_cols(self, out, cols):
        cuda = self.cuda
        d_cols = cuda.to_device(np.asarray(cols, dtype=np.int64))
        dst = cuda.device_array((len(cols), out.shape[0]), dtype=self._uint(out).dtype)
        self._gather[self._grid2(out.shape[0], len(cols)), self.BLOCK_2D](
            self._uint(out), d_cols, dst)
        return dst.copy_to_host()

    def verify(self, src_host, d_src, out, rng, samples):
        """``(ok, reason, how)``: the full GPU compare and the sampled host check of ``out``."""
        m, n = src_host.shape
        if tuple(out.shape) != (n, m) or out.dtype != src_host.dtype:
            return False, (f"output is {tuple(out.shape)} {out.dtype}, expected ({n}, {m}) "
                           f"{src_host.dtype}"), None
        rows = sample_lines(n, samples, rng)       # rows of out = columns of src
        cols = sample_lines(m, samples, rng)       # columns of out = rows of src
        how = (f"bitwise: all {m * n} elements on the GPU; {len(rows)} rows + {len(cols)} "
               f"columns (incl. first/last) on the host vs numpy")
        count, first = self.compare(d_src, out)
        if count:
            r, c = divmod(first, m)
            got = out[r].copy_to_host()[c]
            want = src_host[c, r]
            return False, (f"{count} of {m * n} elements differ (full GPU compare); first "
                           f"out[{r}, {c}] = {got!r}, expected {want!r}"), how
        bad, msg = check_sampled(src_host, lambda idx: self.fetch_rows(out, idx),
                                 lambda idx: self.fetch_cols(out, idx), rows, cols)
        if bad:
            return False, msg + " (host sample; the GPU compare saw none)", how
        return True, None, how


# ---------------------------------------------------------------------------------------------
# candidates

@dataclass
class Candidate:
    name: str
    role: str                                   # "baseline", "kernel" or "api"
    launch: Callable[[], Any]                   # enqueue one run (asynchronous)
    output: Optional[Callable[[Any], Any]]      # launch's return -> array to check; None: none
    poison: bool = True                         # poison the shared output before the check
    note: Optional[str] = None


class ContextLost(RuntimeError):
    pass


def run_candidate(cand, cfg, tools, args, rng):
    """Check, then time one candidate; returns its result row. Raises ContextLost when the CUDA
    context died under it."""
    cuda = tools.cuda
    shape, dtype = cfg["shape"], cfg["dtype"]

    def result(status, **kw):
        return make_result(cand.name, cand.role, dtype, shape, status, note=cand.note, **kw)

    def failed(stage, exc, how=None):
        row = result("failed", reason=f"{stage}: {bench.why(exc)}", check=how)
        if not bench.context_alive():
            raise ContextLost(f"CUDA context lost after {cand.name} ({bench.why(exc)})") from exc
        return row

    bench.log(f"  {cand.name}: check")
    if cand.poison:
        tools.poison(cfg["d_out"])
    try:
        ret = cand.launch()
    except Exception as exc:
        if bench.skippable(exc):
            if not bench.context_alive():
                raise ContextLost(f"CUDA context lost after {cand.name} ({bench.why(exc)})") from exc
            return result("skipped", reason=bench.why(exc))
        return failed("launch", exc)
    how = "none (a plain copy)"
    try:
        cuda.synchronize()
        if cand.output is not None:
            ok, reason, how = tools.verify(cfg["src_host"], cfg["d_src"], cand.output(ret), rng,
                                           args.samples)
            if not ok:
                return result("failed", reason=reason, check=how)
    except Exception as exc:
        return failed("check run", exc, how)
    finally:
        del ret
    bench.log(f"  {cand.name}: timing")
    try:
        times = bench.time_cuda(cand.launch, args.iters, args.warmup)
    except Exception as exc:
        return failed("timing", exc, how)
    return result("ok", times=times, check=how)


def baseline_candidates(cfg, torch, cupy, want_baselines):
    """(copy candidates, other baseline candidates, skipped rows), over
    :mod:`numba_tma.bench.baselines`."""
    from numba_tma._frontend import cuda

    d_src, d_out = cfg["d_src"], cfg["d_out"]
    copies = [Candidate(name, "baseline", launch, None)
              for name, launch in baselines.copy_launchers(d_src, d_out, torch).items()]
    others, skipped = [], []
    if not want_baselines:
        return copies, others, skipped
    if torch is not None:
        others.append(Candidate(TORCH, "baseline", baselines.torch_transpose(torch, d_src),
                                cuda.as_cuda_array, poison=False, note="x.t().contiguous()"))
    else:
        skipped.append((TORCH, cfg["torch_reason"]))
    if cupy is not None:
        others.append(Candidate(CUPY, "baseline", baselines.cupy_transpose(cupy, d_src),
                                cuda.as_cuda_array, poison=False,
                                note="cupy.ascontiguousarray(a.T)"))
    else:
        skipped.append((CUPY, cfg["cupy_reason"]))
    try:
        others.append(Candidate(CUBLAS, "baseline",
                                baselines.cublas_geam_transpose(cupy, d_src, d_out),
                                lambda ret: d_out, note="C = A^T by cublas<s|d>geam"))
    except Exception as exc:
        skipped.append((CUBLAS, bench.why(exc) if cupy is not None else cfg["cupy_reason"]))
    try:
        others.append(Candidate(NUMBA_BUNDLED, "baseline",
                                baselines.numba_bundled_transpose(d_src, d_out),
                                lambda ret: d_out, note="transpose(a, b), compiled once"))
    except Exception as exc:
        skipped.append((NUMBA_BUNDLED, f"not importable ({bench.why(exc)})"))
    if torch is None:
        skipped.append((TRITON, cfg["torch_reason"]))
    else:
        try:
            tile = baselines.TRITON_TRANSPOSE_TILES[np.dtype(d_src.dtype).itemsize]
            others.append(Candidate(TRITON, "baseline", baselines.triton_transpose(d_src, d_out),
                                    lambda ret: d_out,
                                    note=f"tl.trans of {tile[0]} x {tile[1]} tiles"))
        except Exception as exc:
            skipped.append((TRITON, f"not importable ({bench.why(exc)})"))
    return copies, others, skipped


merge_copies = baselines.merge_copies


def library_candidates(cfg, library, selected):
    d_src, d_out = cfg["d_src"], cfg["d_out"]
    kernels, transpose = library
    cands = []
    for name in selected:
        if name == API:
            note = "transpose(src, out=out)"
            try:                                # which kernel the public API picks, if it says
                choose = sys.modules["numba_tma.transpose_api"].choose_kernel
                note += f" runs {choose(d_src, d_out)}"
            except Exception:
                pass
            cands.append(Candidate(API, "api", lambda: transpose(d_src, out=d_out),
                                   lambda ret: d_out, note=note))
        else:
            fn = kernels[name]
            cands.append(Candidate(name, "kernel", lambda fn=fn: fn(d_src, d_out),
                                   lambda ret: d_out))
    return cands


def load_library():
    """``({name: launcher}, transpose)`` from numba_tma.transpose_api (the checkout's own package
    when this file sits in one: see the sys.path line at the top)."""
    from numba_tma.transpose_api import transpose, transpose_kernels

    kernels = transpose_kernels() if callable(transpose_kernels) else transpose_kernels
    return dict(kernels), transpose


# ---------------------------------------------------------------------------------------------
# driver

def run_config(shape, dtype, args, library, selected, torch, cupy, reasons, tools, rng):
    """Every candidate of one (shape, dtype); returns its rows (finalized)."""
    from numba_tma._frontend import cuda

    m, n = shape
    rows = []
    bench.log(f"{config_title(shape, dtype)}: generating the input")
    src_host = bench.random_array(shape, dtype, rng)
    cfg = {"shape": shape, "dtype": dtype, "src_host": src_host, **reasons}
    try:
        cfg["d_src"] = cuda.to_device(src_host)
        cfg["d_out"] = cuda.device_array((n, m), dtype=np.dtype(dtype))
    except Exception as exc:
        cfg.clear()
        return [make_result("*", "config", dtype, shape, "skipped",
                            reason=f"allocation failed: {bench.why(exc)}")]
    try:
        copies, others, skipped = baseline_candidates(cfg, torch, cupy, not args.no_baselines)
        copy_rows = [run_candidate(c, cfg, tools, args, rng) for c in copies]
        rows.append(merge_copies(copy_rows))
        for name, reason in skipped:
            rows.append(make_result(name, "baseline", dtype, shape, "skipped", reason=reason))
        for cand in others:
            rows.append(run_candidate(cand, cfg, tools, args, rng))
            bench.free_device_memory()
        if isinstance(library, BaseException):
            rows.append(make_result("numba_tma.transpose", "kernel", dtype, shape, "skipped",
                                    reason=f"not importable ({bench.why(library)})"))
        else:
            for cand in library_candidates(cfg, library, selected):
                rows.append(run_candidate(cand, cfg, tools, args, rng))
    finally:
        finalize_config(rows)
        cfg.clear()
    return rows


def main(argv=None, library=None):
    """Run the bench; ``library`` overrides ``load_library()`` (tests pass fakes)."""
    args = parse_args(argv)
    bench.require("benches/transpose.py", gpu="to run the kernels (sm_90 for the TMA ones)",
                  plot=args.plot)
    if library is None:
        try:
            library = load_library()
        except Exception as exc:             # reported as a skipped row in every config
            library = exc
            bench.log(f"numba_tma.transpose not importable: {bench.why(exc)}")
    selected = []
    if not isinstance(library, BaseException):
        try:
            selected = bench.select_names(list(library[0]) + [API], args.kernels)
        except ValueError as exc:
            print(f"error: --kernels: {exc}", file=sys.stderr)
            return 2

    from numba_tma._frontend import cuda

    torch = cupy = None
    reasons = {"torch_reason": "--no-baselines", "cupy_reason": "--no-baselines"}
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":      # the tests' dry run: no real arrays
        reasons = {"torch_reason": "CUDA simulator", "cupy_reason": "CUDA simulator"}
    else:
        torch, reasons["torch_reason"] = bench.import_optional("torch")
        if not args.no_baselines:
            cupy, reasons["cupy_reason"] = bench.import_optional("cupy")
    for name in ("torch", "cupy"):
        if reasons[f"{name}_reason"] and not args.no_baselines:
            bench.log(f"baseline {name} skipped: {reasons[name + '_reason']}")

    try:
        cuda.current_context()               # create the context before reading the device
    except Exception as exc:
        print(f"error: no usable CUDA GPU ({bench.one_line(bench.why(exc))}); this bench only "
              f"runs on the GPU", file=sys.stderr)
        return 2
    env = bench.gpu_environment()
    versions = bench.package_versions()
    if "numba_tma" in sys.modules:
        pkg = sys.modules["numba_tma"]
        versions["numba_tma"] = getattr(pkg, "__version__", None) or versions.get("numba_tma")
        versions["numba_tma_path"] = os.path.dirname(getattr(pkg, "__file__", "") or "") or None
    print_header(env, versions, args)

    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**63)
    rng = np.random.default_rng(seed)
    print(f"seed: {seed}")
    tools = DeviceTools()
    all_rows, configs, lost = [], [], None
    command = " ".join([os.path.basename(sys.executable), *sys.argv]) if argv is None else \
        "benches/transpose.py " + " ".join(argv)

    def save():
        if args.json:
            bench.write_json(args.json, build_report(env, versions, args, configs, all_rows,
                                                      seed=seed, command=command))

    try:
        for shape, dtype in configs_of(args):
            if lost is not None:
                rows = [make_result("*", "config", dtype, shape, "skipped", reason=str(lost))]
            else:
                try:
                    rows = run_config(shape, dtype, args, library, selected, torch, cupy,
                                      reasons, tools, rng)
                except ContextLost as exc:
                    lost = exc
                    rows = [make_result("*", "config", dtype, shape, "failed", reason=str(exc))]
                bench.free_device_memory()      # the config's arrays are unreferenced by now
            copy_gbps = finalize_config(rows)
            configs.append({"shape": [int(x) for x in shape], "dtype": dtype,
                            "copy_GBps": copy_gbps})
            all_rows.extend(rows)
            print()
            print("== " + config_title(shape, dtype, copy_gbps) + " ==")
            print(format_results(rows))
            print(best_line(rows))
            sys.stdout.flush()
            save()
    finally:
        save()

    print()
    print("summary (best numba_tma kernel per config):")
    for c in configs:
        rows = [r for r in all_rows if r["shape"] == c["shape"] and r["dtype"] == c["dtype"]]
        print(f"  {c['dtype']} {c['shape'][0]}x{c['shape'][1]}: {best_line(rows)}")
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        bench.write_plot(build_report(env, versions, args, configs, all_rows, seed=seed,
                                       command=command), args.plot)
        print(f"wrote {args.plot}")
    failed = [r for r in all_rows if r["status"] == "failed"]
    if failed:
        # Baselines' failures are reported but only numba_tma's decide the exit status.
        print(f"{len(failed)} FAILED: " + ", ".join(f"{r['kernel']} ({r['dtype']} "
                                                      f"{r['shape'][0]}x{r['shape'][1]})"
                                                      for r in failed))
    ours = [r for r in failed if r["role"] in ("kernel", "api", "config")]
    return 1 if ours or lost is not None else 0


if __name__ == "__main__":
    sys.exit(main())
