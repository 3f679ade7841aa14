"""TMA multicast bandwidth: N CTAs of a cluster stream the same operand panel (the B-tile sharing of
a GEMM cluster), with multicast (each CTA loads 1/N of every tile and multicasts it to all N) and
without (each CTA loads every tile itself), measured in the same process.

Needs an sm_90 GPU. Run from the repository root, after ``pip install .``:

    python benches/multicast.py                                     # K=16384, W=8192 uint32, N=2,4
    python benches/multicast.py --clusters 2,4,8 --json benches/results/multicast-h100.json

The kernel is ``numba_tma.kernels.multicast_copy.stream_panels`` (its docstring has the pipeline
and the barrier accounting): ``b`` (K x W uint32) in panels of 64 words; N CTAs per panel; 8 KB
tiles through a 4-stage ring; each consumer thread XORs what it reads. Variants per N:

- ``multicast``: cluster launch, ``tma.load_multicast`` of 1/N of each tile into all N CTAs;
- ``unicast_cluster``: the same cluster launch, every CTA ``tma.load``s every tile itself;
- ``unicast``: a plain numba launch of that kernel (no cluster, so no co-scheduling).

Each variant is checked first (the output is poisoned with fresh random words, the kernel runs once
and ``out`` must equal the numpy model bit for bit, every wait bounded), then timed: ``--warmup``
runs, then ``--iters`` runs each between its own pair of CUDA events; the median is reported.
Columns: ``smem GB/s`` = bytes landing in shared memory (N x K x W x 4) / time;
``L2->SM GB/s`` = bytes the L2 serves (K x W x 4 with multicast, N times that without) / time;
``x unicast`` = the ``unicast_cluster`` time over this variant's. Exit status 1 if a check failed.
"""

import argparse
import os
import sys

import numpy as np


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402

BENCH = "multicast"
DEFAULT_K, DEFAULT_W = 16384, 8192
DEFAULT_CLUSTERS = (2, 4)
#: numba_tma.kernels.multicast_copy.CLUSTER_SIZES (repeated so that --help needs no numba).
VALID_CLUSTERS = (1, 2, 4, 8)
WORD_BYTES = 4
#: (name, multicast, cluster launch)
VARIANTS = (("multicast", True, True), ("unicast_cluster", False, True), ("unicast", False, False))
REFERENCE_VARIANT = "unicast_cluster"
RESULT_KEYS = ("cluster", "variant", "status", "reason", "ms", "min_ms", "max_ms", "mean_ms",
               "stdev_ms", "iters", "smem_GBps", "l2_GBps", "x_unicast", "smem_bytes", "l2_bytes")


def parse_clusters(text):
    out = []
    for part in text.split(","):
        if part.strip():
            n = int(part)
            if n not in VALID_CLUSTERS:
                raise ValueError(f"cluster size {n} is not one of {VALID_CLUSTERS}")
            if n not in out:
                out.append(n)
    if not out:
        raise ValueError("empty cluster list")
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--k", type=bench.argparse_type(bench.positive_int), default=DEFAULT_K,
                   help=f"rows of b (default {DEFAULT_K})")
    p.add_argument("--w", type=bench.argparse_type(bench.positive_int), default=DEFAULT_W,
                   help=f"columns of b, uint32 words, a multiple of 4 (default {DEFAULT_W})")
    p.add_argument("--clusters", type=bench.argparse_type(parse_clusters),
                   default=list(DEFAULT_CLUSTERS), help="comma list of cluster sizes (2,4)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=50,
                   help="timed runs per variant (default 50); the median is reported")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before timing (default 5)")
    bench.add_output_args(p, seed_help="seed for the inputs (default: fresh)")
    args = p.parse_args(argv)
    if args.w % 4:
        p.error(f"--w {args.w}: rows must be a multiple of 16 bytes (4 words) for TMA")
    return args


def traffic(k, w, n, multicast):
    """(bytes landing in shared memory, bytes the L2 serves) for one run."""
    data = k * w * WORD_BYTES
    return n * data, (data if multicast else n * data)


def make_row(n, variant, status, *, reason=None, times=None, smem_bytes=None, l2_bytes=None):
    row = dict.fromkeys(RESULT_KEYS)
    row.update(cluster=n, variant=variant, status=status, reason=reason,
               smem_bytes=smem_bytes, l2_bytes=l2_bytes)
    if times:
        s = bench.summarize(times)
        row.update(ms=s["median"], min_ms=s["min"], max_ms=s["max"], mean_ms=s["mean"],
                   stdev_ms=s["stdev"], iters=s["n"], smem_GBps=bench.gbps(smem_bytes, s["median"]),
                   l2_GBps=bench.gbps(l2_bytes, s["median"]))
    return row


def finalize(rows):
    """Fill ``x_unicast``: the reference variant's time over each row's, per cluster size."""
    for n in {r["cluster"] for r in rows}:
        ref = [r["ms"] for r in rows if r["cluster"] == n and r["variant"] == REFERENCE_VARIANT]
        for r in rows:
            if r["cluster"] == n:
                r["x_unicast"] = bench.speedup(ref[0] if ref else None, r["ms"])
    return rows


def format_results(rows):
    headers = ["N", "variant", "status", "ms", "smem GB/s", "L2->SM GB/s", "x unicast"]
    body = [[r["cluster"], r["variant"], r["status"], bench.fmt(r["ms"], ".4f"),
             bench.fmt(r["smem_GBps"], ".0f"), bench.fmt(r["l2_GBps"], ".0f"),
             bench.fmt(r["x_unicast"], ".2f")] for r in rows]
    return bench.format_table(headers, body, align="rllrrrr")


def run(args):
    from numba_tma._frontend import cuda

    from numba_tma.kernels import multicast_copy as mc

    rng = np.random.default_rng(args.seed)
    bench.log(f"b: {args.k} x {args.w} uint32 ({args.k * args.w * WORD_BYTES / 2**20:.0f} MiB)")
    b_host = bench.random_array((args.k, args.w), np.uint32, rng)
    d_b = cuda.to_device(b_host)
    rows = []
    for n in args.clusters:
        want = mc.stream_panels_reference(b_host, n)
        for name, multicast, use_cluster in VARIANTS:
            smem_bytes, l2_bytes = traffic(args.k, args.w, n, multicast)
            try:
                launch, out, timed_out = mc.stream_panels_launch(d_b, n, multicast, use_cluster)
            except (TypeError, ValueError, RuntimeError) as exc:
                rows.append(make_row(n, name, "skipped", reason=bench.one_line(exc)))
                continue
            out.copy_to_device(rng.integers(0, 2**32, size=out.shape, dtype=np.uint32))
            launch()
            cuda.synchronize()
            got = out.copy_to_host()
            if timed_out.copy_to_host()[0]:
                rows.append(make_row(n, name, "FAILED", reason="an mbarrier wait timed out"))
                continue
            if not np.array_equal(got, want):
                bad = int((got != want).sum())
                rows.append(make_row(n, name, "FAILED",
                                     reason=f"{bad} of {want.size} XOR words differ"))
                continue
            times = bench.time_cuda(launch, args.iters, args.warmup)
            rows.append(make_row(n, name, "ok", times=times, smem_bytes=smem_bytes,
                                 l2_bytes=l2_bytes))
            bench.log(f"N={n} {name}: {rows[-1]['ms']:.4f} ms")
    return finalize(rows)


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/multicast.py", gpu="for TMA multicast in clusters", hopper=True,
                  plot=args.plot)
    env = bench.gpu_environment()
    print(f"# {BENCH}: {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), "
          f"driver {env['driver']}; b {args.k} x {args.w} uint32; median of {args.iters} after "
          f"{args.warmup} warm-up")
    rows = run(args)
    print(format_results(rows))
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions()),
            "k": args.k, "w": args.w,
            "clusters": args.clusters, "iters": args.iters, "warmup": args.warmup,
            "seed": args.seed, "results": rows, "command": " ".join(sys.argv),
            "timestamp": bench.timestamp()})
    return 1 if any(r["status"] == "FAILED" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
