"""Sweep tma_pipelined's launch parameters (supertile group, blocks per SM, L2 promotion) on the GPU.

    python benches/transpose_tune.py [--shape 32768 32768] [--dtype float32] [--iters 20]
        [--json tune.json] [--plot tune.png]

Prints GB/s and % of a device-to-device copy measured in the same run, one line per setting, so the
defaults in numba_tma/ladders/transpose_tma.py can be chosen from numbers. Each setting's output
is checked against torch first (exact compare). ``--json`` writes the rows as a result document
(bench ``transpose_tune``), ``--plot`` draws them (GB/s per setting, the copy dashed; needs
matplotlib: ``pip install "numba_tma[bench]"``).
"""

import argparse
import itertools
import os
import sys

# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402

BENCH = "transpose_tune"          # its plot: numba_tma.bench.plot.PLOTS


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", nargs=2, type=int, default=[32768, 32768], metavar=("M", "N"),
                    help="input shape (default 32768 32768)")
    ap.add_argument("--dtype", default="float32",
                    help="numpy dtype name of the input (default float32)")
    ap.add_argument("--iters", type=int, default=20,
                    help="timed runs per setting (default 20); the median is reported")
    ap.add_argument("--groups", default="8x8",
                    help="comma list of supertile groups, RxC tiles (default 8x8)")
    ap.add_argument("--blocks", default="auto",
                    help="comma list of blocks per SM, or auto (default auto)")
    ap.add_argument("--l2", default="0",
                    help="comma list of the tensor maps' L2 promotion settings (default 0: "
                         "none)")
    ap.add_argument("--sub", default="auto",
                    help="sub-tiles per tile, e.g. 1x1,2x2,4x2, or auto (default auto)")
    ap.add_argument("--stages", default="auto",
                    help="comma list of ring stages, or auto (default auto)")
    ap.add_argument("--seed-batches", action="store_true", help="also sweep tma_batched's batch")
    bench.add_output_args(ap)
    return ap.parse_args(argv)


def result_row(kernel, dtype, shape, setting, status, ms, gbps, copy, **fields):
    """One result row: ``kernel`` at ``setting`` (a label; the knobs in ``fields``), its time,
    GB/s, and the copy's GB/s of the same run (``status``: "ok", or "wrong" with no figures)."""
    ok = status == "ok"
    return {"kernel": kernel, "dtype": dtype, "shape": list(shape), "setting": setting,
            **fields, "status": status, "ms": ms if ok else None, "GBps": gbps if ok else None,
            "copy_GBps": copy, "pct_of_copy": 100 * gbps / copy if ok else None}


def setting_label(cfg, group, blocks_per_sm, l2):
    """A tma_pipelined setting as a plot's x label: ``sub 2x2 st 4 g 8x8 b auto L2 0``."""
    return (f"sub {cfg[1]}x{cfg[2]} st {cfg[3]} g {group[0]}x{group[1]} "
            f"b {blocks_per_sm or 'auto'} L2 {l2}")


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/transpose_tune.py", torch="for the inputs and the check",
                  gpu="for tma_pipelined", hopper=True, plot=args.plot)

    import numpy as np
    import torch
    from numba_tma._frontend import cuda

    from numba_tma.ladders import transpose_tma as tt

    M, N = args.shape
    dtype = np.dtype(args.dtype)
    t = torch.randn(M, N, device="cuda").to(getattr(torch, dtype.name)) if dtype.kind == "f" \
        else torch.randint(-100, 100, (M, N), device="cuda").to(getattr(torch, dtype.name))
    src = cuda.as_cuda_array(t).reshape(1, M, N)
    out_t = torch.empty(N, M, device="cuda", dtype=t.dtype)
    out = cuda.as_cuda_array(out_t).reshape(1, N, M)
    ref = t.t().contiguous()
    nbytes = 2 * M * N * dtype.itemsize
    flat_in, flat_out = cuda.as_cuda_array(t.view(-1)), cuda.as_cuda_array(out_t.view(-1))
    copy_ms = bench.median(bench.time_cuda(lambda: flat_out.copy_to_device(flat_in),
                                             args.iters, 3))
    copy = bench.gbps(nbytes, copy_ms)
    print(f"{torch.cuda.get_device_name()} {dtype.name} {M}x{N}: copy {copy:.1f} GB/s")
    groups = [tuple(int(v) for v in g.split("x")) for g in args.groups.split(",")]
    blocks = [None if b == "auto" else int(b) for b in args.blocks.split(",")]
    l2s = [int(v) for v in args.l2.split(",")]
    subs = [None if v == "auto" else tuple(int(x) for x in v.split("x")) for v in args.sub.split(",")]
    stages = [None if v == "auto" else int(v) for v in args.stages.split(",")]
    rows, results = [], []
    for sub, st, group, bps, l2 in itertools.product(subs, stages, groups, blocks, l2s):
        def run():
            tt.tma_pipelined(src, out, group=group, blocks_per_sm=bps, l2_promotion=l2,
                             sub_tiles=sub, stages=st)
        out_t.fill_(0)
        try:
            run()
        except ValueError as exc:          # a ring too big for this GPU's shared memory
            print(f"  sub={sub} stages={st}: skipped: {exc}")
            continue
        ok = torch.equal(out_t, ref)
        ms = bench.median(bench.time_cuda(run, args.iters, 3)) if ok else float("nan")
        g = bench.gbps(nbytes, ms) if ok else float("nan")
        cfg = tt.pipelined_config(dtype.itemsize, sub, st)
        rows.append([f"{cfg[1]}x{cfg[2]}", str(cfg[3]), f"{group[0]}x{group[1]}", str(bps or "auto"),
                     str(l2), "ok" if ok else "WRONG",
                     bench.fmt(ms, ".3f"), bench.fmt(g, ".1f"), bench.fmt(100 * g / copy, ".1f")])
        results.append(result_row(
            "tma_pipelined", dtype.name, (M, N), setting_label(cfg, group, bps, l2),
            "ok" if ok else "wrong",
            ms, g, copy, sub_tiles=[cfg[1], cfg[2]], stages=cfg[3], group=list(group),
            blocks_per_sm=bps, l2_promotion=l2))
        print("  " + " | ".join(rows[-1]), flush=True)
    print(bench.format_table(["sub", "stages", "group", "blocks/SM", "L2 promo", "check", "ms",
                               "GB/s", "% copy"], rows))
    if dtype.itemsize == 4 and args.seed_batches:
        # Seed 000's batched kernel: elements per thread.
        rows = []
        box = (1, tt.SEED_TILE, tt.SEED_TILE)
        maps = (tt.descriptor(src, box, 128), tt.descriptor(out, box, 128))
        grid = (-(-N // tt.SEED_TILE), -(-M // tt.SEED_TILE), 1)
        for batch in (2, 4, 8, 16, 32):
            kernel = tt._swizzled_kernel(batch)

            def run():
                kernel[grid, tt.SEED_TILE * tt.SEED_TILE // batch](*maps)
            out_t.fill_(0)
            run()
            ok = torch.equal(out_t, ref)
            ms = bench.median(bench.time_cuda(run, args.iters, 3))
            g = bench.gbps(nbytes, ms)
            rows.append([str(batch), "ok" if ok else "WRONG", bench.fmt(ms, ".3f"),
                         bench.fmt(g, ".1f"), bench.fmt(100 * g / copy, ".1f")])
            results.append(result_row("tma_batched", dtype.name, (M, N), f"batch {batch}",
                                      "ok" if ok else "wrong", ms, g, copy, batch=batch))
        print(bench.format_table(["batch", "check", "ms", "GB/s", "% copy"], rows))
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, bench.gpu_environment(), bench.package_versions()),
            "iters": args.iters, "copy_GBps": copy, "results": results,
            "command": " ".join(sys.argv), "timestamp": bench.timestamp()})
        for path in (args.json, args.plot):
            if path:
                print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
