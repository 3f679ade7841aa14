"""Column-sum bandwidth: ``numba_tma.kernels.reduce.sum_axis0`` (TMA loads in, TMA add-reductions
out) against a device copy of the same bytes (the ceiling), torch ``x.sum(dim=0)`` and CuPy
``x.sum(axis=0)``, all measured in the same process.

Numbers only mean something measured on the GPU (an H100 for published ones); the script needs an
sm_90 GPU and prints the device and versions it ran on. Run from the repository root:

    python benches/reduce.py --shape 32768 32768 --shape 4097 1024 --shape 1000000 64 \\
        --shape 1001 100 --json benches/results/reduce-h100.json
    python benches/reduce.py                        # 32768 x 32768 float32, 50 runs, 5 warm-ups

Per shape (M, N) the script makes a fresh random float32 input (standard normal) and, for each
candidate:

1. checks first: the output is poisoned (NaN), the candidate runs once, and every column sum is
   compared with the float64 sum of the host input within the bound that holds for any order of
   M float32 additions, ``(M - 1) * 2**-24 * sum(|x|)`` per column (a lost or doubled tile is
   far outside it). A candidate outside the bound is reported FAILED and not timed.
2. times ``--warmup`` untimed runs, then ``--iters`` runs, each between its own pair of CUDA
   events on the default stream; the median is reported (min/max/mean/stdev in the JSON).

Candidates: ``sum_axis0`` (the public function: checks, tensor maps, zeroing, kernel),
``sum_axis0[prepared]`` (``sum_axis0_launcher``'s ``run``: zeroing and kernel only), torch, CuPy.
GB/s counts the bytes read, ``M * N * 4 / time`` (decimal GB); "% of copy" compares with the faster
of ``cuMemcpyDtoDAsync`` and torch ``copy_`` of the input's bytes, whose GB/s counts read plus
write (``2 * M * N * 4 / time``): both are DRAM bytes per second. "x torch" is torch's time over
the candidate's (>1: faster). Exit status 1 when a numba_tma candidate FAILED, else 0.
"""

import argparse
import os
import sys

import numpy as np


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402
from numba_tma.bench import baselines  # noqa: E402

BENCH = "reduce"
DTYPE = "float32"
ITEMSIZE = 4
DEFAULT_SHAPE = (32768, 32768)
COPY = baselines.COPY
TORCH = "torch"
CUPY = "cupy"
API = "sum_axis0"
PREPARED = "sum_axis0[prepared]"
STATUSES = ("ok", "failed", "skipped")
#: Keys every result row has.
RESULT_KEYS = ("kernel", "role", "dtype", "shape", "status", "reason", "ms", "min_ms", "max_ms",
               "mean_ms", "stdev_ms", "iters", "GBps", "pct_of_copy", "x_torch", "copy_GBps",
               "check", "max_err_over_bound", "note")
#: The 1.01 covers the second-order term of the summation bound.
BOUND_SLACK = 1.01


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="benches/reduce.py",
        description="Column-sum (x.sum(axis=0)) bandwidth of numba_tma's TMA reduction kernel vs "
                    "copy/torch/CuPy (run on an sm_90 GPU).")
    p.add_argument("--shape", nargs=2, action="append", metavar=("M", "N"),
                   type=bench.argparse_type(bench.positive_int),
                   help="float32 input shape (M, N), N a multiple of 4; repeat for several "
                        "(default: 32768 32768)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=50,
                   help="timed runs per candidate (default 50); the median is reported")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before timing (default 5)")
    p.add_argument("--no-baselines", action="store_true",
                   help="skip torch and CuPy (the copy ceiling stays)")
    bench.add_output_args(p, "also write every result to this JSON file (rewritten after each "
                             "shape)", seed_help="seed for the inputs (default: fresh, printed and recorded)")
    args = p.parse_args(argv)
    args.shapes = [tuple(s) for s in args.shape] if args.shape else [DEFAULT_SHAPE]
    for m, n in args.shapes:
        if (n * ITEMSIZE) % 16:
            p.error(f"--shape {m} {n}: N must be a multiple of 4 (rows of whole 16-byte units, "
                    f"TMA's rule); {n} * 4 = {n * ITEMSIZE} bytes")
    return args


def input_bytes(shape):
    m, n = shape
    return m * n * ITEMSIZE


def check_sums(got, ref, abs_sum, m):
    """``(ok, worst err / bound, message)`` for column sums ``got`` against the float64 ``ref``;
    ``abs_sum`` is the per-column sum of |x| of the M rows."""
    got = np.asarray(got, dtype=np.float64)
    if got.shape != ref.shape:
        return False, None, f"output has shape {got.shape}, expected {ref.shape}"
    bound = BOUND_SLACK * max(m - 1, 0) * 2.0**-24 * abs_sum + np.finfo(np.float32).tiny
    err = np.abs(got - ref)
    bad = ~(err <= bound)                             # NaN (a poisoned element) counts as bad
    ratio = float(np.nanmax(err / bound)) if got.size and not np.isnan(err).all() else 0.0
    if bad.any():
        j = int(np.argmax(bad))
        return False, ratio, (f"{int(bad.sum())} of {got.size} column sums outside the float32 "
                              f"bound; first column {j}: {got[j]!r} vs {ref[j]!r} "
                              f"(bound {bound[j]:.3g})")
    return True, ratio, None


def make_result(kernel, role, shape, status, *, reason=None, times=None, check=None, ratio=None,
                note=None):
    if status not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status!r}")
    row = {k: None for k in RESULT_KEYS}
    row.update(kernel=kernel, role=role, dtype=DTYPE, shape=[int(x) for x in shape],
               status=status, reason=reason, check=check, max_err_over_bound=ratio, note=note)
    if status == "ok":
        s = bench.summarize(times)
        row.update(ms=s["median"], min_ms=s["min"], max_ms=s["max"], mean_ms=s["mean"],
                   stdev_ms=s["stdev"], iters=s["n"])
    return row


def finalize(rows):
    """Fill GBps, copy_GBps, pct_of_copy, x_torch (in place); returns the copy GB/s."""
    if not rows:
        return None
    nbytes = input_bytes(rows[0]["shape"])
    ok = {r["kernel"]: r for r in rows if r["status"] == "ok"}
    copy_gbps = bench.gbps(2 * nbytes, ok[COPY]["ms"]) if COPY in ok else None
    torch_ms = ok[TORCH]["ms"] if TORCH in ok else None
    for r in rows:
        r["copy_GBps"] = copy_gbps
        if r["status"] != "ok":
            continue
        r["GBps"] = bench.gbps(2 * nbytes if r["kernel"] == COPY else nbytes, r["ms"])
        r["pct_of_copy"] = bench.pct_of(r["GBps"], copy_gbps)
        r["x_torch"] = bench.speedup(torch_ms, r["ms"])
    return copy_gbps


TABLE_HEADERS = ("kernel", "ms", "GB/s", "% of copy", "x torch", "err/bound", "status")


def format_rows(rows):
    def status(r):
        if r["status"] == "ok":
            return "ok"
        return r["status"].upper() + (": " + bench.one_line(r["reason"]) if r["reason"] else "")
    return bench.format_table(TABLE_HEADERS, [
        [r["kernel"], bench.fmt(r["ms"], ".3f"), bench.fmt(r["GBps"], ".1f"),
         bench.fmt(r["pct_of_copy"], ".1f"), bench.fmt(r["x_torch"], ".2f"),
         bench.fmt(r["max_err_over_bound"], ".2g"), status(r)] for r in rows],
        align="lrrrrrl")


def build_report(env, versions, args, configs, rows, seed, command):
    return {
        "bench": BENCH, "gpu": env.get("gpu"), "driver": env.get("driver"), "versions": versions,
        "copy_GBps": configs[0]["copy_GBps"] if configs else None, "results": rows,
        "configs": configs, "env": env, "iters": args.iters, "warmup": args.warmup, "seed": seed,
        "timing": "CUDA events around each run on the default stream; median of iters runs after "
                  "warmup runs; GBps = M*N*4/time (bytes read, 1e9 B); copy GBps = 2*M*N*4/time",
        "command": command, "timestamp": bench.timestamp(),
    }


def load_library():
    """numba_tma.kernels.reduce from this checkout when the bench sits in one (the sys.path line
    at the top)."""
    from numba_tma.kernels import reduce as red

    return red


def run_candidate(name, role, launch, output, shape, ref, abs_sum, args, note=None):
    """Check ``launch()`` (its output via ``output(ret)``), then time it."""
    from numba_tma._frontend import cuda

    bench.log(f"  {name}: check")
    try:
        ret = launch()
        cuda.synchronize()
        ok, ratio, why = (True, None, None) if output is None else \
            check_sums(output(ret), ref, abs_sum, shape[0])
    except Exception as exc:
        if not bench.context_alive():
            raise RuntimeError(f"CUDA context lost under {name}: {bench.why(exc)}") from exc
        return make_result(name, role, shape, "failed", reason=f"check run: {bench.why(exc)}", note=note)
    how = None if output is None else "every column vs float64 host sums, float32 bound"
    if not ok:
        return make_result(name, role, shape, "failed", reason=why, check=how, ratio=ratio,
                           note=note)
    bench.log(f"  {name}: timing")
    try:
        times = bench.time_cuda(launch, args.iters, args.warmup)
    except Exception as exc:
        return make_result(name, role, shape, "failed", reason=f"timing: {bench.why(exc)}", note=note)
    return make_result(name, role, shape, "ok", times=times, check=how, ratio=ratio, note=note)


def measure_copy(d_x, shape, args, torch, ref, abs_sum):
    """The copy ceiling: the faster of cuMemcpyDtoDAsync and torch ``copy_`` of x's bytes (its
    destination is freed on return)."""
    from numba_tma._frontend import cuda

    d_copy = cuda.device_array(d_x.size, np.float32)
    return baselines.merge_copies([
        run_candidate(name, "baseline", launch, None, shape, ref, abs_sum, args)
        for name, launch in baselines.copy_launchers(d_x, d_copy, torch).items()])


def run_shape(shape, args, red, torch, cupy, reasons, rng):
    from numba_tma._frontend import cuda

    m, n = shape
    bench.log(f"float32 {m} x {n}: generating the input")
    x = bench.random_array(shape, np.float32, rng)
    ref = x.sum(axis=0, dtype=np.float64)
    abs_sum = np.abs(x).sum(axis=0, dtype=np.float64)
    d_x = cuda.to_device(x)
    del x
    out = cuda.device_array(n, np.float32)
    poison = np.full(n, np.nan, np.float32)
    rows = [measure_copy(d_x, shape, args, torch, ref, abs_sum)]
    bench.free_device_memory()                     # the copy's destination is gone
    t_x = torch.as_tensor(d_x, device="cuda") if torch is not None else None

    # The output is poisoned before each candidate's check run (which is its first run).
    out.copy_to_device(poison)
    rows.append(run_candidate(API, "api", lambda: red.sum_axis0(d_x, out=out),
                              lambda ret: ret.copy_to_host(), shape, ref, abs_sum, args,
                              note="checks, tensor-map encoding, zeroing, kernel"))
    run, _ = red.sum_axis0_launcher(d_x, out=out)
    out.copy_to_device(poison)
    rows.append(run_candidate(PREPARED, "kernel", run, lambda ret: out.copy_to_host(), shape, ref,
                              abs_sum, args, note="zero out + kernel"))
    if torch is not None and not args.no_baselines:
        rows.append(run_candidate(TORCH, "baseline", lambda: t_x.sum(dim=0),
                                  lambda ret: ret.cpu().numpy(), shape, ref, abs_sum, args,
                                  note="x.sum(dim=0)"))
    else:
        rows.append(make_result(TORCH, "baseline", shape, "skipped",
                                reason=reasons["torch"] or "--no-baselines"))
    if cupy is not None and not args.no_baselines:
        c_x = cupy.asarray(d_x)
        rows.append(run_candidate(CUPY, "baseline", lambda: c_x.sum(axis=0),
                                  lambda ret: cupy.asnumpy(ret), shape, ref, abs_sum, args,
                                  note="x.sum(axis=0)"))
    else:
        rows.append(make_result(CUPY, "baseline", shape, "skipped",
                                reason=reasons["cupy"] or "--no-baselines"))
    finalize(rows)
    return rows


def main(argv=None, library=None):
    """Run the bench; ``library`` stands in for numba_tma.kernels.reduce (the tests pass fakes:
    anything with ``sum_axis0(x, out=)`` and ``sum_axis0_launcher(x, out=)``)."""
    args = parse_args(argv)
    bench.require("benches/reduce.py", gpu="for TMA add-reductions", hopper=True,
                  plot=args.plot)
    red = library
    if red is None:
        try:
            red = load_library()
        except Exception as exc:
            print(f"error: numba_tma.kernels.reduce is not importable ({bench.why(exc)})",
                  file=sys.stderr)
            return 2
    torch = cupy = None
    reasons = {"torch": "--no-baselines", "cupy": "--no-baselines"}
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":          # the tests' dry run
        reasons = {"torch": "CUDA simulator", "cupy": "CUDA simulator"}
    else:
        torch, reasons["torch"] = bench.import_optional("torch")   # also a copy variant
        if not args.no_baselines:
            cupy, reasons["cupy"] = bench.import_optional("cupy")
    env = bench.gpu_environment()
    versions = bench.package_versions()
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**63)
    rng = np.random.default_rng(seed)
    command = " ".join([os.path.basename(sys.executable), *sys.argv]) if argv is None else \
        "benches/reduce.py " + " ".join(argv)
    print(f"numba_tma {BENCH} bench, {bench.timestamp()}")
    print(f"GPU: {env.get('gpu')} (cc {env.get('compute_capability')}, {env.get('sm_count')} "
          f"SMs), driver {env.get('driver')}, CUDA runtime {env.get('cuda_runtime')}")
    print("versions: " + ", ".join(f"{k} {v if v is not None else '-'}"
                                   for k, v in versions.items()))
    print(f"timing: median of {args.iters} runs after {args.warmup} warm-ups, CUDA events; "
          f"GB/s = M*N*4 / time (copy: 2*M*N*4 / time); seed {seed}")
    all_rows, configs = [], []
    for shape in args.shapes:
        try:
            rows = run_shape(shape, args, red, torch, cupy, reasons, rng)
        except Exception as exc:                        # allocation failure, lost context
            rows = [make_result("*", "config", shape, "failed", reason=bench.why(exc))]
        bench.free_device_memory()
        copy_gbps = rows[0]["copy_GBps"] if rows else None
        configs.append({"shape": [int(x) for x in shape], "dtype": DTYPE, "copy_GBps": copy_gbps})
        all_rows.extend(rows)
        size = input_bytes(shape)
        print()
        print(f"== float32 {shape[0]} x {shape[1]} ({size / 2**30:.3f} GiB), copy "
              f"{bench.fmt(copy_gbps, '.1f')} GB/s ==")
        print(format_rows(rows))
        sys.stdout.flush()
        if args.json:
            bench.write_json(args.json, build_report(env, versions, args, configs, all_rows,
                                                      seed, command))
        if not bench.context_alive():
            print("error: the CUDA context was lost; stopping", file=sys.stderr)
            break
    if args.json:
        print(f"wrote {args.json}")
    if args.plot:
        bench.write_plot(build_report(env, versions, args, configs, all_rows, seed, command),
                          args.plot)
        print(f"wrote {args.plot}")
    ours = [r for r in all_rows if r["status"] == "failed" and r["role"] in ("api", "kernel",
                                                                              "config")]
    for r in ours:
        print(f"FAILED: {r['kernel']} {r['shape'][0]}x{r['shape'][1]}: {r['reason']}")
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main())
