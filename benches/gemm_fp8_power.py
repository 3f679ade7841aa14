"""fp8 GEMM at the board's power limit: matmul() and torch._scaled_mm, each run back to back.

benches/gemm_fp8.py times short interleaved batches, between which the GPU idles; run back to
back for seconds, an fp8 GEMM holds the board at its power limit, and then its rate is what it
does per joule. Here each kernel (per-tensor e4m3 scales, bf16 out, ``--accum``), in turn,
runs ``--warm`` seconds untimed and ``--seconds`` timed, in batches of 20 between CUDA events
(median batch), while ``nvidia-smi`` samples the SM clock, the board's power and whether the
power cap is holding the clock down. Rounds alternate the kernels; ``x_scaled_mm`` is
torch's median time over this row's, both of the same round.

    python benches/gemm_fp8_power.py [--shape M N K ...] [--config FIELD=VALUE,...] [--json F]
"""

import argparse
import subprocess
import sys
import threading
import time

import numba_tma.bench as bench

BENCH = "gemm_fp8_power"
DEFAULT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 4096),
                  (4096, 7168, 16384)]
BATCH = 20
QUERY = ("clocks.sm,power.draw,power.limit,clocks_event_reasons.sw_power_cap,"
         "temperature.gpu")
HEADERS = ["shape", "round", "kernel", "TFLOP/s", "x_scaled_mm", "SM MHz", "W",
           "power-capped", "TFLOP/s per kW"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", nargs=3, type=bench.argparse_type(bench.positive_int),
                   action="append", metavar=("M", "N", "K"),
                   help="a shape to run instead of the defaults (repeatable; K a multiple of 16)")
    p.add_argument("--accum", choices=("fast", "promoted"), default="fast",
                   help="accumulation: the tensor cores' fp8 sums (fast, default) or promoted "
                        "per 128-deep K block")
    p.add_argument("--seconds", type=float, default=2.5,
                   help="timed seconds per kernel and round (default 2.5)")
    p.add_argument("--warm", type=float, default=1.0,
                   help="untimed seconds before each (default 1)")
    p.add_argument("--rounds", type=bench.argparse_type(bench.positive_int), default=2,
                   help="rounds, each running every kernel in turn (default 2)")
    p.add_argument("--config", dest="configs", type=bench.argparse_type(bench.wgmma_config),
                   action="append", default=[], metavar="FIELD=VALUE,...",
                   help="also run matmul() forced to WgmmaConfig(FIELD=VALUE, ...) (repeatable)")
    bench.add_output_args(p, seed_help="seed for the inputs (default: fresh)")
    args = p.parse_args(argv)
    if not (args.seconds > 0 and args.warm >= 0):
        p.error(f"--seconds must be > 0 and --warm >= 0; got {args.seconds}, {args.warm}")
    args.shapes = [tuple(s) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    return args


def smi_device(torch):
    """This process's GPU as nvidia-smi names it: its PCI bus id (CUDA_VISIBLE_DEVICES may
    renumber devices), else its CUDA index."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if hasattr(props, "pci_bus_id"):
        return (f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:"
                f"{getattr(props, 'pci_device_id', 0):02x}.0")
    return str(torch.cuda.current_device())


def sample_power(device, stop, rows):
    """Append nvidia-smi's ``QUERY`` of ``device`` to ``rows`` until ``stop`` is set (none
    where nvidia-smi cannot run: the rows' clock and power are then left blank)."""
    while not stop.is_set():
        try:
            out = subprocess.run(["nvidia-smi", "-i", device, f"--query-gpu={QUERY}",
                                  "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, check=False).stdout
        except OSError as exc:
            bench.log(f"no power samples: {bench.why(exc)}")
            return
        fields = [f.strip() for f in out.strip().split(",")]
        if len(fields) == 5:
            rows.append(fields)
        time.sleep(0.1)


def sustained(torch, fn, device, seconds, warm):
    """``fn`` back to back: ``(median ms per run, samples)`` over ``seconds``, after ``warm``."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < warm:
        fn()
    torch.cuda.synchronize()
    stop, samples = threading.Event(), []
    sampler = threading.Thread(target=sample_power, args=(device, stop, samples))
    sampler.start()
    batches = []
    t0 = time.perf_counter()
    try:
        while time.perf_counter() - t0 < seconds:
            batches.append(bench.time_cuda_batch(
                fn, BATCH, event=lambda: torch.cuda.Event(enable_timing=True),
                synchronize=torch.cuda.synchronize))
    finally:
        stop.set()
        sampler.join()
    return bench.median(batches), samples


def power_summary(samples):
    """Median SM MHz and watts, the power limit, and the fraction of samples power-capped."""
    if not samples:
        return {"sm_MHz": None, "watts": None, "power_limit_W": None, "power_capped": None,
                "temperature_C": None}
    num = lambda i: bench.median([float(s[i]) for s in samples])   # noqa: E731
    return {"sm_MHz": num(0), "watts": num(1), "power_limit_W": num(2),
            "power_capped": sum(s[3] == "Active" for s in samples) / len(samples),
            "temperature_C": num(4)}


def run_shape(torch, args, gen, shape, device):
    from numba_tma import matmul

    m, n, k = shape
    a, b, scales = bench.fp8_inputs(torch, gen, m, n, k)
    sa, sb = scales["tensor"]
    fast = args.accum == "fast"
    ours_out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    torch_out = torch.empty_like(ours_out)

    def ours(cfg=None):
        return lambda: matmul(a, b, ours_out, scale_a=sa, scale_b=sb, fast_accum=fast,
                              config=cfg)

    kernels = [("matmul()", ours()), *((f"matmul({c!r})", ours(c)) for c in args.configs),
               ("torch._scaled_mm", lambda: torch._scaled_mm(
                   a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast,
                   out=torch_out))]
    # every kernel's product against torch's before any is timed
    kernels[-1][1]()
    for name, fn in kernels[:-1]:
        ours_out.fill_(float("nan"))
        fn()
        err = ((ours_out.float() - torch_out.float()).abs().max()
               / torch_out.float().abs().max()).item()
        if not err < 2.0 ** -5:
            raise SystemExit(f"{name} at {m}x{n}x{k}: off torch._scaled_mm by {err:.1e}")
    flop = 2.0 * m * n * k
    rows = []
    for rnd in range(args.rounds):
        timed = []
        for name, fn in kernels:
            ms, samples = sustained(torch, fn, device, args.seconds, args.warm)
            timed.append((name, ms, power_summary(samples)))
        their_ms = timed[-1][1]
        for name, ms, power in timed:
            row = {"in_dtype": "e4m3", "out_dtype": "bfloat16", "scale": "tensor",
                   "accum": args.accum, "shape": [m, n, k], "round": rnd, "kernel": name,
                   "us": ms * 1e3, "TFLOPs": flop / ms / 1e9, "x_scaled_mm": their_ms / ms,
                   **power, "status": "ok"}
            rows.append(row)
            bench.log(f"{m}x{n}x{k} round {rnd} {name}: {row['TFLOPs']:.1f} TFLOP/s "
                      f"x{row['x_scaled_mm']:.3f}, {power['sm_MHz']} MHz, {power['watts']} W")
    return rows


def table_row(r):
    per_kw = (None if not r["watts"] else 1e3 * r["TFLOPs"] / r["watts"])
    return ["x".join(map(str, r["shape"])), str(r["round"]), r["kernel"], f"{r['TFLOPs']:.1f}",
            f"{r['x_scaled_mm']:.3f}", bench.fmt(r["sm_MHz"], ".0f"),
            bench.fmt(r["watts"], ".1f"), bench.fmt(r["power_capped"], ".2f"),
            bench.fmt(per_kw, ".0f")]


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/gemm_fp8_power.py", torch="to time torch._scaled_mm and make the "
                  "inputs", gpu="to run its GEMMs", hopper=True, plot=args.plot)
    import torch

    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed if args.seed is not None else int(time.time()))
    env = bench.gpu_environment()
    device = smi_device(torch)
    print(f"# {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), driver "
          f"{env['driver']}; e4m3 inputs, per-tensor scales, {args.accum} accumulation, bf16 "
          f"out; each kernel back to back for {args.seconds} s after {args.warm} s, "
          f"{args.rounds} rounds")
    results = []
    for shape in args.shapes:
        results += run_shape(torch, args, gen, shape, device)
        bench.free_device_memory()
    print()
    print(bench.format_table(HEADERS, [table_row(r) for r in results]))
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions()),
            "seconds": args.seconds, "warm": args.warm, "rounds": args.rounds,
            "batch": BATCH, "timing": "us: median of batches of back-to-back runs",
            "results": results, "command": " ".join(sys.argv),
            "timestamp": bench.timestamp()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
