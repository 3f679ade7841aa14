"""How fast can a tiled transpose be on this GPU? The access-pattern ceiling, measured.

A *pattern kernel* moves exactly the bytes of a tiled transpose with its global access pattern:
each block reads a TR x TC tile of ``src`` (fp32) with 16-byte loads, then writes TC out-row
segments of TR elements with 16-byte stores -- but stores its registers as they are, without
the shared-memory transpose. No kernel that stages tiles of that shape through the SM can beat
it. In ``copy`` mode the same kernel writes each tile back where it came from (a sequential
pattern, the same kernel mechanics): what the kernel itself can reach.

For shapes whose rows are not 16-byte multiples the pattern is v8_sector's: ``halo`` rows above
each tile and one more vector per row on the load side, out segments starting on a 32-byte
sector; addresses are clamped into the buffers, so an edge tile moves about the bytes of a full
one. Printed per shape, with a device copy and ``transpose()`` in the same run (median of
``--rounds`` interleaved rounds of ``--iters`` CUDA-event timings):

    python benches/transpose_ceiling.py --json benches/results/transpose-ceiling-h100.json
"""

import argparse
import functools
import os
import sys

import numpy as np


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402

VEC = 16
# (label, (TR, TC, threads, min_blocks, halo, extra, copy_mode)) per shape; the resident blocks
# keep every variant free of spills (checked offline by the tests).
PATTERNS = {
    (32768, 32768): [
        ("copy pattern 64x64", (64, 64, 256, 4, 0, 0, True)),
        ("copy pattern 128x128", (128, 128, 1024, 1, 0, 0, True)),
        ("pattern 32x32", (32, 32, 64, 16, 0, 0, False)),
        ("pattern 64x64", (64, 64, 256, 4, 0, 0, False)),
        ("pattern 64x128", (64, 128, 256, 4, 0, 0, False)),
        ("pattern 128x64", (128, 64, 256, 4, 0, 0, False)),
        ("pattern 128x128", (128, 128, 1024, 1, 0, 0, False)),
        ("pattern 128x256", (128, 256, 1024, 1, 0, 0, False)),
        ("pattern 256x128", (256, 128, 1024, 1, 0, 0, False)),
    ],
    (32768, 20032): [
        ("pattern 64x64", (64, 64, 256, 4, 0, 0, False)),
        ("pattern 64x128", (64, 128, 256, 3, 0, 0, False)),
        ("pattern 128x128", (128, 128, 1024, 1, 0, 0, False)),
        ("pattern 128x256", (128, 256, 1024, 1, 0, 0, False)),
    ],
    (32767, 20001): [
        ("pattern 64x128 halo 7 (v8_sector's)", (64, 128, 256, 3, 7, 1, False)),
        ("pattern 64x64 halo 7", (64, 64, 128, 6, 7, 1, False)),
        ("pattern 128x128 halo 7", (128, 128, 512, 2, 7, 1, False)),
        ("pattern 128x256 halo 7", (128, 256, 1024, 1, 7, 1, False)),
    ],
}


def _cdiv(a, b):
    return -(-a // b)


@functools.cache
def pattern_kernel(TR, TC, threads, min_blocks, halo, extra, copy_mode, clamp):
    """The pattern kernel for one tile (see the module docstring); ``clamp`` keeps addresses
    inside the buffers (needed where the shape is not a tile multiple)."""
    from numba_tma._frontend import cuda

    from numba_tma import gmem

    cpr = TC * 4 // VEC + extra              # 16-byte loads per src row segment
    nq = (TR + halo) * cpr
    loads = _cdiv(nq, threads)
    ocpr = TR * 4 // VEC                     # 16-byte stores per out row segment
    stores = TC * ocpr // threads
    assert stores * threads == TC * ocpr and stores <= loads
    sector = 32 if halo else VEC             # where an out segment starts
    nregs = loads * 4

    @cuda.jit(launch_bounds=(threads, min_blocks))
    def transpose_pattern(src, out, M, N, last):
        # src/out: the buffers as uint32 words; last: index of the last 16-byte chunk.
        tid = cuda.threadIdx.x
        R0 = cuda.blockIdx.y * TR
        C0 = cuda.blockIdx.x * TC
        regs = cuda.local.array(nregs, np.uint32)
        for i in range(loads):
            q = i * threads + tid
            r = R0 - halo + q // cpr
            if clamp:
                r = min(max(r, 0), M - 1)
            chunk = ((r * N + C0) * 4 >> 4) + q % cpr
            if clamp:
                chunk = min(chunk, last)
            if q < nq:
                gmem.load_v4(regs[i * 4:], src, chunk * VEC)
            else:
                for j in range(4):
                    regs[i * 4 + j] = 0
        for i in range(stores, loads):       # halo and extra loads feed the stored values
            for j in range(4):
                regs[(i - stores) % stores * 4 + j] ^= regs[i * 4 + j]
        for i in range(stores):
            q = i * threads + tid
            if copy_mode:                    # back where the tile came from
                chunk = (((R0 + q // (TC // 4)) * N + C0) * 4 >> 4) + q % (TC // 4)
            else:                            # out row C0 + j, from column R0
                c = C0 + q // ocpr
                if clamp:
                    c = min(c, N - 1)
                chunk = ((((c * M + R0) * 4) & ~(sector - 1)) >> 4) + q % ocpr
            if clamp:
                chunk = min(chunk, last)
            gmem.store_v4(out, chunk * VEC, regs[i * 4:])

    return transpose_pattern


def pattern_launch(d_src, d_out, M, N, spec):
    """A zero-argument launcher of the pattern ``spec`` on flat uint32 views of the buffers."""
    TR, TC, threads, min_blocks, halo, extra, copy_mode = spec
    clamp = bool(halo or extra or M % TR or N % TC)
    kern = pattern_kernel(TR, TC, threads, min_blocks, halo, extra, copy_mode, clamp)
    src = d_src.reshape(M * N).view(np.uint32)
    out = d_out.reshape(M * N).view(np.uint32)
    grid = (_cdiv(N, TC), _cdiv(M + halo, TR))
    last = M * N * 4 // VEC - 1
    return lambda: kern[grid, threads](src, out, M, N, last)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iters", type=bench.positive_int, default=20,
                   help="timed runs per kernel and round (default 20)")
    p.add_argument("--warmup", type=bench.nonnegative_int, default=3,
                   help="untimed runs before each timing (default 3)")
    p.add_argument("--rounds", type=bench.positive_int, default=3,
                   help="interleaved rounds; the median of their medians is reported "
                        "(default 3)")
    bench.add_output_args(p)
    return p.parse_args(argv)


def measure(shape, args, rng):
    """Rows ``{"kernel", "shape", "ms", "GBps", "pct_of_copy"}`` of one shape."""
    from numba_tma._frontend import cuda, driver_module as driver

    from numba_tma import transpose

    M, N = shape
    d_src = cuda.to_device(bench.random_array(shape, "float32", rng))
    d_out = cuda.device_array((N, M), np.float32)
    flat_src, flat_out = d_src.reshape(M * N), d_out.reshape(M * N)
    cands = {"copy": lambda: flat_out.copy_to_device(flat_src),
             "transpose()": lambda: transpose(d_src, d_out)}
    host = d_src.copy_to_host()
    cols = rng.choice(N, 16, replace=False)
    transpose(d_src, d_out)                   # transpose() checked on 16 random out rows
    got = d_out.copy_to_host()
    if not all(np.array_equal(got[j], host[:, j]) for j in cols):
        raise RuntimeError(f"transpose() is wrong at {shape}")
    for label, spec in PATTERNS[shape]:
        cands[label] = pattern_launch(d_src, d_out, M, N, spec)
        if spec[-1]:                          # copy mode must put every tile back exactly
            driver.device_memset(d_out, 0xFF, M * N * 4)
            cands[label]()
            if not np.array_equal(d_out.copy_to_host().reshape(M * N), host.reshape(M * N)):
                raise RuntimeError(f"{label} did not move the tiles exactly at {shape}")
    times = {k: [] for k in cands}
    for _ in range(args.rounds):
        for k, fn in cands.items():
            times[k].append(bench.median(bench.time_cuda(fn, args.iters, args.warmup)))
    nbytes = 2 * M * N * 4
    copy_ms = bench.median(times["copy"])
    rows = []
    for k, t in times.items():
        ms = bench.median(t)
        rows.append({"kernel": k, "shape": list(shape), "ms": ms,
                     "GBps": bench.gbps(nbytes, ms), "pct_of_copy": 100 * copy_ms / ms})
    return rows


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/transpose_ceiling.py", gpu="to run the pattern kernels",
                  plot=args.plot)
    env = bench.gpu_environment()
    versions = bench.package_versions()
    print(f"GPU: {env.get('gpu')}, driver {env.get('driver')}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    rng = np.random.default_rng(0)
    results = []
    for shape in PATTERNS:
        rows = measure(shape, args, rng)
        results += rows
        print(f"== float32 {shape[0]} x {shape[1]}, copy {rows[0]['GBps']:.1f} GB/s ==")
        print(bench.format_table(
            ["kernel", "ms", "GB/s", "% of copy"],
            [[r["kernel"], f"{r['ms']:.3f}", f"{r['GBps']:.1f}", f"{r['pct_of_copy']:.1f}"]
             for r in rows]))
        bench.free_device_memory()
    if args.json or args.plot:
        bench.save_results(args, {"bench": "transpose_ceiling", "gpu": env.get("gpu"),
                                   "driver": env.get("driver"), "versions": versions,
                                   "iters": args.iters, "warmup": args.warmup,
                                   "rounds": args.rounds, "results": results,
                                   "timestamp": bench.timestamp()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
