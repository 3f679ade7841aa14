"""Fused-epilogue GEMM bench: matmul(..., epilogue=...) against our plain matmul(), torch's
cuBLAS GEMM with the same ops after it, torch's fused cuBLASLt paths and Triton with the
epilogue fused.

For each shape, input dtype and shipped epilogue (numba_tma.epilogues): ``matmul()`` with the
epilogue; our plain ``matmul()`` (``x_plain``: its time over the fused one's); torch unfused
(``torch.mm`` into C, then the epilogue's ops in torch); torch fused where it has one
(``torch.addmm`` for bias, ``torch._addmm_activation`` for bias + ReLU and bias + GELU-tanh:
cuBLASLt's epilogues); Triton's GEMM (tuned plain, as benches/gemm.py tunes it) with the
epilogue fused. ``x_best_torch``: the fastest torch path's time over ours. Timed as
benches/gemm.py times: interleaved rounds, each run between CUDA events behind a GPU wait,
median of the rounds' medians. Every result is compared with torch's float32 epilogue on
the float32 product.

    python benches/gemm_epilogue.py [--shape M N K ...] [--dtypes float16,bfloat16]
                                    [--epilogues bias_gelu,...] [--json F] [--plot P]
"""

import argparse
import sys

import numba_tma.bench as bench
from numba_tma.bench.baselines import gemm_session, triton_matmul_epilogue

BENCH = "gemm_epilogue"
DEFAULT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048)]
EPILOGUES = ["bias", "bias_relu", "bias_gelu", "bias_gelu_erf", "bias_silu", "row_scale",
             "col_scale", "residual", "bias_gelu_aux"]
#: The epilogues with an (M, N) array in the input dtype: an argument (the residual, which numba
#: reads in float16 only), or the pre-activation torch writes (ours: the auxiliary output).
MATRIX_ARGS = ("residual", "bias_gelu_aux")
HOLD_CYCLES = 20_000_000        # GPU wait queued before each timed batch
HEADERS = ["shape", "dtype", "epilogue", "TFLOP/s", "plain", "x_plain", "torch", "torch fused",
           "x_best_torch", "triton", "x_triton", "check"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", nargs=3, type=bench.argparse_type(bench.positive_int),
                   action="append", metavar=("M", "N", "K"),
                   help="a shape to run instead of the defaults (repeatable)")
    p.add_argument("--dtypes", default="float16,bfloat16",
                   help="comma list of input dtypes (default float16,bfloat16)")
    p.add_argument("--epilogues", default=",".join(EPILOGUES),
                   help="comma list of numba_tma.epilogues names (default all)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=20,
                   help="timed runs per kernel and round (default 20)")
    p.add_argument("--rounds", type=bench.argparse_type(bench.positive_int), default=3,
                   help="interleaved timing rounds (default 3)")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before each timing (default 5)")
    p.add_argument("--config", dest="configs", type=bench.argparse_type(bench.wgmma_config),
                   action="append", default=[], metavar="FIELD=VALUE,...|pingpong",
                   help="also time matmul() with the epilogue forced to WgmmaConfig(FIELD=VALUE, "
                        "...), or to the ping-pong ladder's config (repeatable)")
    bench.add_output_args(p, seed_help="seed for the inputs (default: fresh)")
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    if not args.dtypes or any(d not in ("float16", "bfloat16") for d in args.dtypes):
        p.error(f"--dtypes: {args.dtypes} is not a comma list of float16, bfloat16")
    args.epilogues = [e for e in args.epilogues.split(",") if e]
    if not args.epilogues or any(e not in EPILOGUES for e in args.epilogues):
        p.error(f"--epilogues: {args.epilogues} is not a comma list of {', '.join(EPILOGUES)}")
    args.shapes = [tuple(s) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    return args


def torch_paths(torch, name, a, b, c, vec, mat):
    """``(unfused, fused or None, reference(product f32) -> f32)`` of epilogue ``name``."""
    F = torch.nn.functional
    mm = lambda: torch.mm(a, b, out=c)          # noqa: E731
    gelu = lambda x: F.gelu(x, approximate="tanh")          # noqa: E731
    table = {
        "bias": (lambda: mm().add_(vec), lambda: torch.addmm(vec, a, b, out=c),
                 lambda p: p + vec.float()),
        "bias_relu": (lambda: F.relu(mm().add_(vec), inplace=True),
                      lambda: torch._addmm_activation(vec, a, b, use_gelu=False),
                      lambda p: F.relu(p + vec.float())),
        "bias_gelu": (lambda: gelu(mm().add_(vec)),
                      lambda: torch._addmm_activation(vec, a, b, use_gelu=True),
                      lambda p: gelu(p + vec.float())),
        "bias_gelu_erf": (lambda: F.gelu(mm().add_(vec)), None,
                          lambda p: F.gelu(p + vec.float())),
        "bias_silu": (lambda: F.silu(mm().add_(vec), inplace=True), None,
                      lambda p: F.silu(p + vec.float())),
        "row_scale": (lambda: mm().mul_(vec[:, None]), None,
                      lambda p: p * vec.float()[:, None]),
        "col_scale": (lambda: mm().mul_(vec), None, lambda p: p * vec.float()),
        "residual": (lambda: mm().add_(mat), None, lambda p: p + mat.float()),
        "bias_gelu_aux": (lambda: gelu(torch.add(mm(), vec, out=mat)), None,
                          lambda p: gelu(p + vec.float())),
    }
    return table[name]


def run_case(torch, args, gen, shape, dtype_name, hold, tune_triton):
    from numba_tma import epilogues, matmul

    m, n, k = shape
    dtype = getattr(torch, dtype_name)
    a = torch.randn((m, k), device="cuda", dtype=dtype, generator=gen)
    b = torch.randn((k, n), device="cuda", dtype=dtype, generator=gen)
    ours_out = torch.empty((m, n), device="cuda", dtype=dtype)
    plain_out = torch.empty_like(ours_out)
    torch_out = torch.empty_like(ours_out)
    flop = 2.0 * m * n * k
    product = (a.float() @ b.float())
    config = None
    if tune_triton is not None:
        try:
            _, config = tune_triton(a, b, torch.empty_like(ours_out))
        except Exception as exc:                        # noqa: BLE001 (a baseline may fail)
            bench.log(f"triton at {shape}: {bench.why(exc)}")

    def plain():
        return matmul(a, b, plain_out)

    rows = []
    for name in args.epilogues:
        if name == "residual" and dtype_name == "bfloat16":
            bench.log(f"{name} with bfloat16: numba reads no bfloat16 arrays (its matrix); "
                      f"left out")
            continue
        rows_m = name == "row_scale"
        vec = torch.rand((m if rows_m else n,), device="cuda", generator=gen) + 0.5   # fp32
        mat = (torch.randn((m, n), device="cuda", dtype=dtype, generator=gen)
               if name in MATRIX_ARGS else None)
        fn = epilogues.SHIPPED[name]
        ep_args = (mat,) if name == "residual" else (vec,)
        aux = torch.empty_like(ours_out) if name == "bias_gelu_aux" else None

        def ours():
            return matmul(a, b, ours_out, epilogue=fn, epilogue_args=ep_args, aux=aux)

        ours_out.fill_(float("nan"))
        ours()
        unfused, fused, reference = torch_paths(torch, name, a, b, torch_out, vec.to(dtype),
                                                mat)
        want = reference(product)
        err = ((ours_out.float() - want).abs().max() / want.abs().max()).item()
        if aux is not None:                     # (the pre-activation too)
            pre = product + vec.float()
            err = max(err, ((aux.float() - pre).abs().max() / pre.abs().max()).item())
        ok = err < 2.0 ** -6
        triton_fn = None
        if config is not None:
            try:
                tri_out = torch.empty_like(ours_out)
                tri_mat = None if mat is None else mat.clone()
                triton_fn = triton_matmul_epilogue(config, name, a, b, tri_out, vec, tri_mat)
                triton_fn()
            except Exception as exc:                    # noqa: BLE001
                bench.log(f"triton {name} at {shape}: {bench.why(exc)}")
                triton_fn = None
        forced = [(lambda cfg: lambda: matmul(a, b, ours_out, epilogue=fn, epilogue_args=ep_args,
                                              aux=aux, config=cfg))(cfg) for cfg in args.configs]
        fns = [ours, plain, unfused] + [f for f in (fused, triton_fn) if f is not None] + forced
        timed = [bench.median(r) for r, _ in bench.interleaved_rounds(
            fns, args.rounds, args.iters, args.warmup, hold=hold)]
        our_ms, plain_ms, unfused_ms = timed[:3]
        rest = iter(timed[3:])
        fused_ms = next(rest) if fused is not None else None
        triton_ms = next(rest) if triton_fn is not None else None
        for cfg in args.configs:
            f_ms = next(rest)
            rows.append({"shape": [m, n, k], "in_dtype": dtype_name, "epilogue": name,
                         "kernel": f"matmul(epilogue=, config={cfg!r})", "us": f_ms * 1e3,
                         "TFLOPs": flop / f_ms / 1e9, "x_plain": plain_ms / f_ms,
                         "status": "ok"})
            bench.log(f"{m}x{n}x{k} {dtype_name} {name:14s} {cfg!r} {flop / f_ms / 1e9:7.1f} "
                      f"TFLOP/s x_plain {plain_ms / f_ms:.3f}")
        best_torch = min(t for t in (unfused_ms, fused_ms) if t is not None)
        row = {"shape": [m, n, k], "in_dtype": dtype_name, "epilogue": name,
               "kernel": "matmul(epilogue=)", "us": our_ms * 1e3, "TFLOPs": flop / our_ms / 1e9,
               "plain_TFLOPs": flop / plain_ms / 1e9, "x_plain": plain_ms / our_ms,
               "torch_TFLOPs": flop / unfused_ms / 1e9,
               "torch_fused_TFLOPs": None if fused_ms is None else flop / fused_ms / 1e9,
               "x_best_torch": best_torch / our_ms,
               "triton_TFLOPs": None if triton_ms is None else flop / triton_ms / 1e9,
               "x_triton": None if triton_ms is None else triton_ms / our_ms,
               "triton_config": None if config is None else str(config),
               "check": f"{err:.1e}", "status": "ok" if ok else "mismatch"}
        row["tflops"] = row["TFLOPs"]
        rows.append(row)
        bench.log(f"{m}x{n}x{k} {dtype_name} {name:14s} {row['TFLOPs']:7.1f} TFLOP/s "
                  f"x_plain {row['x_plain']:.3f} x_best_torch {row['x_best_torch']:.3f} "
                  f"check {err:.1e}")
    return rows


def table_row(r):
    def f(v, spec=".1f"):
        return "-" if v is None else format(v, spec)
    return ["x".join(map(str, r["shape"])), r["in_dtype"], r["epilogue"], f(r["TFLOPs"]),
            f(r["plain_TFLOPs"]), f(r["x_plain"], ".3f"), f(r["torch_TFLOPs"]),
            f(r["torch_fused_TFLOPs"]), f(r["x_best_torch"], ".3f"), f(r["triton_TFLOPs"]),
            f(r["x_triton"], ".3f"), r["check"]]


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/gemm_epilogue.py", torch="to time torch's GEMM and its ops",
                  gpu="to run its GEMMs", hopper=True, plot=args.plot)
    import torch

    gen, tune_triton, env, hold = gemm_session(torch, args.seed, HOLD_CYCLES)
    print(f"# {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), driver "
          f"{env['driver']}; median of {args.iters} runs after {args.warmup} warm-ups, "
          f"{args.rounds} rounds; TFLOP/s of the GEMM's 2MNK")
    results = []
    for shape in args.shapes:
        for dtype_name in args.dtypes:
            results += run_case(torch, args, gen, shape, dtype_name, hold, tune_triton)
            bench.free_device_memory()
    print()
    print(bench.format_table(HEADERS, [table_row(r) for r in results
                                       if r["kernel"] == "matmul(epilogue=)"]))
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions(extra=("triton",))),
            "iters": args.iters, "rounds": args.rounds, "warmup": args.warmup,
            "timing": "us: device time, launches queued behind a GPU wait",
            "results": results, "command": " ".join(sys.argv),
            "timestamp": bench.timestamp()})
    return 1 if any(r["status"] != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
