"""Host cost per call: numba_tma's public ops next to torch's own op, same process, same tensors.

Run from the repository root on an sm_90 GPU, after ``pip install .`` (torch needed):

    python benches/host.py --json benches/results/host-h100.json

For each ``n`` of ``--sizes`` (default 256, 1024, 4096) the script makes torch CUDA tensors
(``n x n`` float16 for the GEMMs, float32 for the transposes) and, for every op, makes
``--warmup`` untimed calls (compilation, planning, the launcher and descriptor caches), then
times ``--iters`` back-to-back calls with ``time.perf_counter`` while the GPU is held by a
GPU-side wait (``torch.cuda._sleep``), so no call waits for the GPU: ``host_us`` is the Python
and driver cost of one call, the allocation of a new ``out`` in torch included for the ops
without one. ``--rounds`` rounds interleave the ops; an op's figure is the median of its rounds.
A shared host drifts and stalls between rounds (one op's rounds of the same run have differed
by more than 2x), so an op with a torch counterpart (``PEERS``) also gets ``x_torch``: the
median over rounds of its time over the counterpart's in the same round.

Ops: ``matmul(a, b)``, ``matmul(a, b, out)``, ``torch.mm(a, b)``, ``torch.mm(a, b, out)``,
``transpose(x)``, ``transpose(x, out)``, ``torch x.t().contiguous()``,
``torch out.copy_(x.t())``, ``transpose(x) floor`` (torch's ``new_empty`` and the cached launch
alone: the bound on ``transpose(x)``'s host cost), and the public ops again on CuPy arrays (``... cupy``, when CuPy is
installed) and numba device arrays (``... numba``). One line per op and size; ``--json`` writes
``{"gpu": ..., "results": [{"op": ..., "n": ..., "host_us": ...}, ...]}`` with the GPU, driver
and package versions.

Cold starts (unless ``--no-cold``): two fresh processes in turn, sharing an empty kernel cache
directory (``NUMBA_CACHE_DIR``), each time their first ``transpose(x)`` and first
``matmul(a, b)`` at n = 1024 (torch tensors); rows ``transpose first call, process 1 (empty
cache)``, ``... process 2 (cache filled)``, the same for ``matmul``, ``host_us`` in microseconds.
"""

import argparse
import os
import sys


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402

BENCH = "host"
DEFAULT_SIZES = (256, 1024, 4096)
HOLD_CYCLES = 60_000_000       # ~30 ms of GPU wait: ten times one round of 100 calls' queuing
#: Each public op and the torch op it stands beside (``x_torch``: the ratio of their times).
PEERS = {"matmul(a, b)": "torch.mm(a, b)", "matmul(a, b, out)": "torch.mm(a, b, out)",
         "transpose(x)": "torch x.t().contiguous()",
         "transpose(x) floor": "torch x.t().contiguous()",
         "transpose(x, out)": "torch out.copy_(x.t())"}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=bench.argparse_type(
        lambda t: [bench.positive_int(x) for x in t.split(",")]), default=list(DEFAULT_SIZES),
        help="comma list of n (default 256,1024,4096)")
    p.add_argument("--ops", default=None, help="comma list or globs of op names")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=100,
                   help="back-to-back calls timed per op and round (default 100)")
    p.add_argument("--rounds", type=bench.argparse_type(bench.positive_int), default=21,
                   help="rounds over the ops; an op's figure is their median (default 21)")
    p.add_argument("--warmup", type=bench.argparse_type(bench.positive_int), default=3,
                   help="untimed calls per op first: compilation, planning, caches (default 3)")
    p.add_argument("--no-cold", action="store_true", help="skip the two fresh-process runs")
    bench.add_output_args(p)
    return p.parse_args(argv)


def ops(torch, n):
    """``{op name: fn()}`` on fresh ``n x n`` tensors (the public ops and torch's own)."""
    import numba_tma

    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    x = torch.randn(n, n, device="cuda", dtype=torch.float32)
    xt = torch.empty(n, n, device="cuda", dtype=torch.float32)
    return {
        "matmul(a, b)": lambda: numba_tma.matmul(a, b),
        "matmul(a, b, out)": lambda: numba_tma.matmul(a, b, c),
        "torch.mm(a, b)": lambda: torch.mm(a, b),
        "torch.mm(a, b, out)": lambda: torch.mm(a, b, out=c),
        "transpose(x)": lambda: numba_tma.transpose(x),
        "transpose(x, out)": lambda: numba_tma.transpose(x, xt),
        "torch x.t().contiguous()": lambda: x.t().contiguous(),
        "torch out.copy_(x.t())": lambda: xt.copy_(x.t()),
        "transpose(x) floor": _transpose_floor(torch, x),
    }


def _transpose_floor(torch, x):
    """What no ``transpose(x)`` written in Python on this launch path can undercut: torch's
    ``new_empty`` for ``out`` (its Python binding, where ``x.t().contiguous()`` allocates in
    C++), the two addresses, and the cached launch patched and queued (transpose_api's repeat
    path), without the keys, the stream and context lookups or the cache lookup."""
    import numba_tma
    from numba_tma import transpose_api

    numba_tma.transpose(x)                          # plans and caches this layout's launch
    hit = transpose_api._repeats.values()[-1]
    shape = (x.shape[1], x.shape[0])
    stream = torch.cuda.current_stream().cuda_stream

    def floor():
        out = x.new_empty(shape)
        transpose_api._relaunch(hit, x.data_ptr(), out.data_ptr(), stream)
        return out
    return floor


def framework_ops(n):
    """The public ops on CuPy arrays and numba device arrays (the caller's framework allocates
    ``out`` for the ops without one)."""
    import numpy as np
    from numba_tma._frontend import cuda

    import numba_tma

    rng = np.random.default_rng(0)
    table = {}
    host = {"a": rng.standard_normal((n, n)).astype(np.float16),
            "x": rng.standard_normal((n, n)).astype(np.float32)}
    libs = [("numba", cuda.to_device, lambda shape, dt: cuda.device_array(shape, dt))]
    cupy, _ = bench.import_optional("cupy")
    if cupy is not None:
        libs.insert(0, ("cupy", cupy.asarray, cupy.empty))
    for lib, put, empty in libs:
        a, b, x = put(host["a"]), put(host["a"]), put(host["x"])
        c, xt = empty((n, n), np.float16), empty((n, n), np.float32)
        table.update({
            f"matmul(a, b) {lib}": lambda a=a, b=b: numba_tma.matmul(a, b),
            f"matmul(a, b, out) {lib}": lambda a=a, b=b, c=c: numba_tma.matmul(a, b, c),
            f"transpose(x) {lib}": lambda x=x: numba_tma.transpose(x),
            f"transpose(x, out) {lib}": lambda x=x, xt=xt: numba_tma.transpose(x, xt),
        })
    return table


_COLD = """
import json, time, torch, numba_tma
x = torch.randn(1024, 1024, device="cuda")
a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
torch.cuda.synchronize()
t0 = time.perf_counter(); numba_tma.transpose(x); torch.cuda.synchronize()
t1 = time.perf_counter(); numba_tma.matmul(a, a); torch.cuda.synchronize()
t2 = time.perf_counter()
print(json.dumps({"transpose": t1 - t0, "matmul": t2 - t1}))
"""


def cold_rows():
    """First-call seconds of two fresh processes sharing a new, empty kernel cache."""
    import json
    import subprocess
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        env.pop("NUMBA_TMA_DISABLE_CACHE", None)
        for proc, what in ((1, "empty cache"), (2, "cache filled")):
            done = subprocess.run([sys.executable, "-c", _COLD], env=env, capture_output=True,
                                  text=True, timeout=600)
            if done.returncode:
                bench.log(done.stderr[-2000:])
                raise RuntimeError("a cold-start process failed")
            first = json.loads(done.stdout.strip().splitlines()[-1])
            for op in ("transpose", "matmul"):
                rows.append({"op": f"{op} first call, process {proc} ({what})", "n": 1024,
                             "host_us": first[op] * 1e6})
    return rows


def row(op, n, rounds_us, peer_rounds_us=None):
    """One result: the op, n, its median host us and the rounds; beside its torch counterpart's
    rounds, ``x_torch``, the median of the per-round ratios."""
    r = {"op": op, "n": n, "host_us": bench.median(rounds_us), "rounds_us": list(rounds_us)}
    if peer_rounds_us is not None:
        r["x_torch"] = bench.median([t / p for t, p in zip(rounds_us, peer_rounds_us)])
    return r


def line(r):
    ratio = f"  {r['x_torch']:6.3f}x torch" if "x_torch" in r else ""
    return f"{r['op']:26s} n={r['n']:5d}  {r['host_us']:8.1f} us/call{ratio}"


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/host.py", torch="for its tensors and torch's own ops",
                  gpu="for matmul() and transpose()", hopper=True, plot=args.plot)
    import torch

    if not hasattr(torch.cuda, "_sleep"):
        bench.log("torch.cuda._sleep is needed to hold the GPU while calls are queued")
        return 2
    env = bench.gpu_environment()
    print(f"# {env['gpu']}, driver {env['driver']}; host us per call, median of {args.rounds} "
          f"rounds of {args.iters} calls after {args.warmup} warm-ups, GPU held")
    hold = lambda: torch.cuda._sleep(HOLD_CYCLES)      # noqa: E731
    results = []
    for n in args.sizes:
        table = {**ops(torch, n), **framework_ops(n)}
        try:
            names = bench.select_names(table, args.ops)
        except ValueError as exc:       # an --ops pattern matching nothing: one line, no traceback
            bench.log(f"error: --ops: {exc}")
            return 2
        for name in names:
            for _ in range(args.warmup):
                table[name]()
        torch.cuda.synchronize()
        rounds = {name: [] for name in names}
        for _ in range(args.rounds):
            for name in names:
                rounds[name].append(bench.host_us_per_call(table[name], args.iters, hold,
                                                            torch.cuda.synchronize))
        for name in names:
            results.append(row(name, n, rounds[name], rounds.get(PEERS.get(name))))
            print(line(results[-1]), flush=True)
        del table
        bench.free_device_memory()
    if not args.no_cold:
        for r in cold_rows():
            results.append(r)
            print(f"{r['op']:45s} {r['host_us'] / 1e6:8.3f} s", flush=True)
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions()),
            "iters": args.iters,
            "rounds": args.rounds, "warmup": args.warmup,
            "timing": "host_us: time.perf_counter over back-to-back calls queued behind a GPU "
                      "wait, per call; median of rounds. x_torch: median over rounds of the "
                      "op's time over its torch counterpart's (PEERS) in the same round",
            "results": results, "command": " ".join(sys.argv), "timestamp": bench.timestamp()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
