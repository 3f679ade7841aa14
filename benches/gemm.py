"""GEMM throughput: numba_tma's GEMMs against cuBLAS (through torch, else CuPy), same process.

Run from the repository root on an sm_90 GPU, after ``pip install .``:

    # the issue's table: cubes 1024..8192 plus non-square and odd shapes, fp16 in, fp32 acc
    python benches/gemm.py --json benches/results/gemm-h100.json
    # one shape, a few kernels
    python benches/gemm.py --size 4096 --kernels 'tma_mma*'

Per shape (M, N, K) the script makes fresh random inputs (standard normal, fp16 or bf16) and
for each kernel:

1. checks first: the output is poisoned with NaN, the kernel runs once and its result is compared
   with a float32 reference (cuBLAS in fp32 with TF32 off, or numpy float64 for small shapes):
   ``max|C - ref| / max|ref|`` must stay under the kernel's bound (fp16/bf16 output rounding plus
   fp32 accumulation; TF32-free fp32 for the SIMT kernel). A failed check is reported FAILED and
   the kernel is not timed;
2. times it: ``--rounds`` rounds, each timing cuBLAS and then every kernel (``--warmup``
   untimed runs, then ``--iters`` runs each between its own pair of CUDA events on the default
   stream; the median is the round's figure); a kernel's time is the median of its rounds.
   Rounds interleave the kernels with cuBLAS because the H100's clock moves with its power
   draw over a long run (cuBLAS itself was seen at 614-729 TFLOP/s in three back-to-back
   8192^3 timings). The timed launches are queued behind a GPU-side wait
   (``torch.cuda._sleep``), so the times are the GPU's, not the Python launch path's; that
   path is reported on its own as ``host us``: the Python cost of one ``matmul()`` call
   (argument checks, launcher lookup, numba's launch), measured while the GPU is held.

One line per kernel and shape: ``us | TFLOP/s | x cuBLAS | host us`` (cuBLAS of the same input and output
dtypes over the kernel's time; >1 means faster), then the geometric mean of x cuBLAS per kernel.
The seed-004 SIMT GEMM is fp32 and is compared with cuBLAS fp32 (TF32 off). Exit status 1 when a
numba_tma kernel FAILED.
"""

import argparse
import functools
import importlib.util
import math
import os
import sys
import time


def load_common():
    """benches/common.py, loaded by path (benches/ is not a package)."""
    name = "numba_tma_benches_common"
    mod = sys.modules.get(name)
    if mod is None:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "common.py")
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


common = load_common()

BENCH = "gemm"
DEFAULT_SIZES = (1024, 2048, 4096, 8192)
#: Non-square and odd shapes (M, N, K): tall-skinny, wide, a K-heavy one and sizes that are
#: not tile multiples (K and N still multiples of 8, as TMA's 16-byte rows need).
DEFAULT_SHAPES = ((8192, 1024, 8192), (1024, 8192, 8192), (2048, 2048, 16384),
                  (4095, 4104, 4096), (3000, 5000, 2000), (1000, 1000, 1000))
SIMT_MAX = 4096                 # the SIMT GEMM runs on shapes up to this size (it is slow)
#: max|C - ref| / max|ref| allowed: output rounding (2^-8 bf16, 2^-11 f16) plus accumulation.
BOUND = {"float16": 2e-3, "bfloat16": 1e-2, "float32": 1e-4}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=common.argparse_type(common.positive_int), action="append",
                   help="a cube M = N = K (repeatable; default 1024 2048 4096 8192)")
    p.add_argument("--shape", nargs=3, type=common.argparse_type(common.positive_int),
                   action="append", metavar=("M", "N", "K"), help="an extra shape (repeatable)")
    p.add_argument("--no-default-shapes", action="store_true",
                   help="skip the built-in non-square/odd shapes")
    p.add_argument("--dtype", choices=("float16", "bfloat16"), default="float16")
    p.add_argument("--kernels", default=None, help="comma list or globs of kernel names")
    p.add_argument("--iters", type=common.argparse_type(common.positive_int), default=30)
    p.add_argument("--rounds", type=common.argparse_type(common.positive_int), default=3,
                   help="timing rounds, each over cuBLAS and every kernel (default 3)")
    p.add_argument("--warmup", type=common.argparse_type(common.nonnegative_int), default=5)
    p.add_argument("--seed", type=common.argparse_type(common.nonnegative_int), default=None)
    p.add_argument("--json", metavar="PATH", default=None)
    args = p.parse_args(argv)
    shapes = [(s, s, s) for s in (args.size or DEFAULT_SIZES)]
    if not args.no_default_shapes and not args.size:
        shapes += list(DEFAULT_SHAPES)
    shapes += [tuple(s) for s in (args.shape or [])]
    args.shapes = shapes
    return args


def kernels(torch):
    """``{name: (input dtype or None for the run's, output dtype, launcher(a, b, out))}``."""
    from numba_tma import matmul
    from numba_tma.kernels.gemm_tma import GemmConfig

    table = {
        "tma_mma": (None, None, lambda a, b, out: matmul(a, b, out)),
        "tma_mma_128x128": (None, None,
                            lambda a, b, out: matmul(a, b, out, config=GemmConfig(128, 128, 4))),
        "tma_mma_f32out": (None, "float32", lambda a, b, out: matmul(a, b, out)),
        "tma_mma_multicast": (None, None, lambda a, b, out: matmul(
            a, b, out, config=GemmConfig(128, 256, 4, cluster_m=2))),
    }
    try:
        from numba_tma.kernels.simt_gemm import simt_gemm

        table["simt_fp32"] = ("float32", "float32", lambda a, b, out: simt_gemm(a, b, out))
    except ImportError:
        pass
    return table


HOLD_CYCLES = 200_000_000      # ~0.1 s of GPU wait: longer than queuing any timed batch


def _matmul_cast(torch, a, b, out):
    out.copy_(torch.matmul(a, b))


def _host_us_per_call(fn, iters, hold):
    """Python cost of one call of ``fn`` (microseconds): ``iters`` calls enqueued while the GPU
    is held, so no call waits for the GPU."""
    import torch

    torch.cuda.synchronize()
    hold()
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / iters * 1e6


def main(argv=None):
    args = parse_args(argv)
    torch, why = common.import_optional("torch")
    if torch is None:
        common.log(f"torch is needed for the cuBLAS baseline and inputs: {why}")
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    gen = torch.Generator(device="cuda")
    gen.manual_seed(args.seed if args.seed is not None else int(time.time()))
    env = common.gpu_environment()
    print(f"# {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), driver "
          f"{env['driver']}; {args.dtype} inputs; median of {args.iters} runs after "
          f"{args.warmup} warm-ups")
    table = kernels(torch)
    names = common.select_names(table, args.kernels)
    hold = (lambda: torch.cuda._sleep(HOLD_CYCLES)) if hasattr(torch.cuda, "_sleep") else None
    rows, results, failed = [], [], False
    for (m, n, k) in args.shapes:
        a = torch.randn(m, k, device="cuda", dtype=torch.float32, generator=gen)
        b = torch.randn(k, n, device="cuda", dtype=torch.float32, generator=gen)
        refs = {}                       # per input dtype: fp32 cuBLAS of the rounded inputs
        timed = []                      # (name, row, launcher, (kin, kout)) that passed
        cublas = {}                     # (kin, kout) -> launcher
        for name in names:
            kin, kout, fn = table[name]
            kin = kin or args.dtype
            kout = kout or kin
            if kin == "float32" and max(m, n, k) > SIMT_MAX:
                continue
            ta = a.to(getattr(torch, kin)).contiguous()
            tb = b.to(getattr(torch, kin)).contiguous()
            out = torch.full((m, n), float("nan"), device="cuda", dtype=getattr(torch, kout))
            row = {"kernel": name, "shape": [m, n, k], "in_dtype": kin, "out_dtype": kout}
            try:
                fn(ta, tb, out)
                torch.cuda.synchronize()
            except (TypeError, ValueError, RuntimeError) as exc:
                row.update(status="skipped", reason=common.one_line(exc))
                results.append(row)
                rows.append([f"{m}x{n}x{k}", name, "-", "-", "-", "-",
                             "skipped: " + row["reason"]])
                continue
            if kin not in refs:
                ref = ta.float() @ tb.float()                  # TF32 off
                refs[kin] = (ref, ref.abs().max().item())
            ref, scale = refs[kin]
            rel = (out.float() - ref).abs().max().item() / scale
            bound = BOUND[kout] if kin != "bfloat16" else max(BOUND[kout], BOUND["bfloat16"])
            if not rel <= bound:
                failed = True
                row.update(status="FAILED", rel_err=rel)
                results.append(row)
                rows.append([f"{m}x{n}x{k}", name, "-", "-", "-", "-", f"FAILED rel err {rel:.2e}"])
                continue
            row["rel_err"] = rel
            key = (kin, kout)
            if key not in cublas:
                cout = torch.empty((m, n), device="cuda", dtype=getattr(torch, kout))
                if kout == kin:
                    cublas[key] = functools.partial(torch.matmul, ta, tb, out=cout)
                else:   # fp32 output from 16-bit inputs: cuBLAS's fp32-accumulate, cast after
                    cublas[key] = functools.partial(_matmul_cast, torch, ta, tb, cout)
            timed.append((name, row, functools.partial(fn, ta, tb, out), key))
        # Rounds: cuBLAS and then each kernel, again and again (the clock drifts with power).
        samples = {key: [] for key in cublas}
        samples.update({name: [] for name, _, _, _ in timed})
        for _ in range(args.rounds):
            for key, fn in cublas.items():
                samples[key].append(common.median(
                    common.time_cuda(fn, args.iters, args.warmup, hold=hold)))
            for name, _, fn, _ in timed:
                samples[name].append(common.median(
                    common.time_cuda(fn, args.iters, args.warmup, hold=hold)))
        cublas_ms = {key: common.median(samples[key]) for key in cublas}
        flop = 2 * m * n * k
        for (kin, kout), ms in cublas_ms.items():
            tf = flop / (ms * 1e-3) / 1e12
            results.append({"kernel": "cublas", "shape": [m, n, k], "in_dtype": kin,
                            "out_dtype": kout, "status": "ok", "us": ms * 1e3, "TFLOPs": tf,
                            "x_cublas": 1.0, "rounds_us": [t * 1e3 for t in samples[(kin, kout)]]})
            rows.append([f"{m}x{n}x{k}", f"cublas {kin}->{kout}", f"{ms * 1e3:.1f}", f"{tf:.1f}",
                         "1.00", "-", ""])
        for name, row, fn, key in timed:
            ms = common.median(samples[name])
            tf = flop / (ms * 1e-3) / 1e12
            x = cublas_ms[key] / ms
            host_us = _host_us_per_call(fn, args.iters, hold) if hold else None
            row.update(status="ok", us=ms * 1e3, TFLOPs=tf, x_cublas=x, host_us=host_us,
                       rounds_us=[t * 1e3 for t in samples[name]])
            results.append(row)
            rows.append([f"{m}x{n}x{k}", name, f"{ms * 1e3:.1f}", f"{tf:.1f}", f"{x:.2f}",
                         common.fmt(host_us, ".0f"), f"rel err {row['rel_err']:.1e}"])
            print(f"Perf ({m}, {n}, {k}): {name:16s} {ms * 1e3:9.1f} us | {tf:6.1f} TFLOP/s | "
                  f"{x:.2f}x cuBLAS | rounds "
                  f"{', '.join(f'{flop / t / 1e9:.0f}' for t in samples[name])} TFLOP/s", flush=True)
        del a, b, refs, timed, cublas
        common.free_device_memory()
    print()
    print(common.format_table(["M x N x K", "kernel", "us", "TFLOP/s", "x cuBLAS", "host us",
                               "check"], rows))
    means = {}
    for name in names:
        xs = [r["x_cublas"] for r in results if r["kernel"] == name and r.get("status") == "ok"]
        if xs:
            means[name] = math.exp(sum(math.log(x) for x in xs) / len(xs))
            print(f"geomean x cuBLAS {name}: {means[name]:.3f} over {len(xs)} shapes")
    if args.json:
        common.write_json(args.json, {
            "bench": BENCH, "gpu": env["gpu"], "driver": env["driver"], "env": env,
            "versions": common.package_versions(), "dtype": args.dtype, "iters": args.iters,
            "rounds": args.rounds, "timing": "device time: launches queued behind a GPU wait",
            "warmup": args.warmup, "results": results, "geomean_x_cublas": means,
            "command": " ".join(sys.argv), "timestamp": common.timestamp()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
