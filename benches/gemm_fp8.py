"""fp8 GEMM bench: matmul() on e4m3 against torch._scaled_mm (cuBLASLt) and Triton, per scale mode.

For each shape and scale mode (per tensor, per row/column, 1 x 128 / 128 x 128 blocks) and
accumulation (promoted per 128-deep K block, matmul()'s default and torch._scaled_mm's
``use_fast_accum=False``; or fast, the tensor cores' own fp8 sums): matmul() and
torch._scaled_mm in the same mode and accumulation (per tensor where this torch lacks the mode:
``scaled_mm_mode`` says which ran), and Triton's fp8 ``tl.dot`` GEMM (unscaled, its default
precise accumulation) beside the per-tensor rows. Timed as benches/gemm.py times: interleaved
rounds, each run between CUDA events behind a GPU wait, median of the rounds' medians. Every
matmul() result, and torch._scaled_mm's in the row's mode, is compared with the fp32 product of
the dequantised operands (bf16 outputs, relative to the largest magnitude); a scale layout torch
takes but reads otherwise is not timed (its per-tensor mode is, as where it lacks the mode).

    python benches/gemm_fp8.py [--shape M N K ...] [--modes tensor,row,block] [--json F]
"""

import argparse
import sys

import numba_tma.bench as bench
from numba_tma.bench.baselines import gemm_session

BENCH = "gemm_fp8"
DEFAULT_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 4096),
                  (4096, 7168, 16384), (4096, 4096, 7168), (64, 7168, 16384),
                  (128, 7168, 16384), (3000, 5008, 4112)]
#: (scale mode, accumulation) pairs; block scales are always promoted
CASES = [("tensor", "promoted"), ("tensor", "fast"), ("row", "promoted"), ("row", "fast"),
         ("block", "promoted")]
HOLD_CYCLES = 20_000_000        # GPU wait queued before each timed batch
HEADERS = ["shape", "scale", "accum", "matmul() config", "TFLOP/s", "scaled_mm", "x_scaled_mm",
           "triton", "x_triton", "check"]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shape", nargs=3, type=bench.argparse_type(bench.positive_int),
                   action="append", metavar=("M", "N", "K"),
                   help="a shape to run instead of the defaults (repeatable; K a multiple of 16)")
    p.add_argument("--modes", default="tensor,row,block",
                   help="comma list of scale modes: tensor, row, block (default all)")
    p.add_argument("--iters", type=bench.argparse_type(bench.positive_int), default=20,
                   help="timed runs per kernel and round (default 20)")
    p.add_argument("--rounds", type=bench.argparse_type(bench.positive_int), default=3,
                   help="interleaved timing rounds (default 3)")
    p.add_argument("--warmup", type=bench.argparse_type(bench.nonnegative_int), default=5,
                   help="untimed runs before each timing (default 5)")
    p.add_argument("--config", dest="configs", type=bench.argparse_type(bench.wgmma_config),
                   action="append", default=[], metavar="FIELD=VALUE,...",
                   help="also time matmul() forced to WgmmaConfig(FIELD=VALUE, ...) in every "
                        "case it can run (repeatable)")
    bench.add_output_args(p, seed_help="seed for the inputs (default: fresh)")
    args = p.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    bad = [m for m in modes if m not in ("tensor", "row", "block")]
    if bad or not modes:
        p.error(f"--modes: {bad or modes} is not a comma list of tensor, row, block")
    args.cases = [c for c in CASES if c[0] in modes]
    args.shapes = [tuple(s) for s in args.shape] if args.shape else list(DEFAULT_SHAPES)
    return args


def torch_block_scales(torch, sb):
    """B's block scales ``sb`` (nb, kb) as torch._scaled_mm takes them for ``b = w.t()``: the
    transpose, (kb, nb) with unit stride along K blocks; and, where 4 does not divide kb, the
    same with each N block's kb padded to a multiple of 4 (a layout newer torch versions ask
    for; where 4 divides kb it is the plain one, not tried twice)."""
    nb, kb = sb.shape
    if kb % 4 == 0:
        return [sb.t()]
    padded = torch.empty((nb, -(-kb // 4) * 4), device=sb.device, dtype=sb.dtype)
    padded[:, :kb] = sb
    return [sb.t(), padded[:, :kb].t()]


def scaled_mm(torch, a, b, sa, sb, out, mode, fast, verify):
    """``(launch, mode run, its check)``: torch._scaled_mm in ``mode`` where this torch takes it,
    else per tensor. Block mode is DeepSeek's recipe (1 x 128 for A, 128 x 128 for B) in torch's
    layouts: ``sa`` as matmul() takes it, (M, kb) with M contiguous; ``sb`` transposed
    (:func:`torch_block_scales`). ``verify(out)`` -> ``(text, ok)`` checks a layout torch takes
    before it is timed: torch 2.11 took B's unpadded block scales at a kb that 4 does not divide
    and gave a wrong product (measured on the H200, 2026-11-28)."""
    def call(sa_, sb_):
        return lambda: torch._scaled_mm(a, b, sa_, sb_, out_dtype=torch.bfloat16,
                                        use_fast_accum=fast, out=out)
    if mode == "tensor":
        fn = call(sa, sb)
        fn()
        return fn, mode, verify(out)[0]
    why = None
    for sb_ in (torch_block_scales(torch, sb) if mode == "block" else [sb]):
        fn = call(sa, sb_)
        try:
            fn()
            torch.cuda.synchronize()
        except (RuntimeError, TypeError, ValueError, NotImplementedError) as exc:
            why = why or bench.why(exc)
            continue
        text, ok = verify(out)
        if ok:
            return fn, mode, text
        why = f"a wrong product, off by {text}, with B's scales of strides {sb_.stride()}"
    bench.log(f"torch._scaled_mm has no {mode} mode here ({why}); timing its per-tensor mode")
    one = torch.ones((), device="cuda")
    return call(one, one), "tensor", None


def dequantized_product(torch, a, b, sa, sb, mode):
    """fp32 ``(sa * a) @ (sb * b)`` of the dequantised operands (b = w.t(): scales per N)."""
    A, B = a.float(), b.float()
    m, k = A.shape
    n = B.shape[1]
    if mode == "block":
        A = A * sa.repeat_interleave(128, 1)[:, :k]
        B = B * sb.repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k].t()
    else:
        A, B = A * sa, B * sb
    return A @ B


def check(got, want, fast):
    """max |got - want| / max |want|, as text, and whether it is within bf16's rounding and
    the accumulation's error: 2^-7 promoted, 2^-5 with the tensor cores' fp8 sums (fast)."""
    err = ((got.float() - want).abs().max() / want.abs().max()).item()
    return f"{err:.1e}", err < 2.0 ** (-5 if fast else -7)


def run_shape(torch, args, gen, shape, hold, tune_triton):
    from numba_tma import matmul
    from numba_tma.kernels.gemm import KernelSpec
    from numba_tma.kernels.gemm.choose import choose_fp8_config
    from numba_tma.kernels.gemm.plan import sm_count

    m, n, k = shape
    a, b, scales = bench.fp8_inputs(torch, gen, m, n, k)
    ours_out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)
    torch_out = torch.empty_like(ours_out)
    flop = 2.0 * m * n * k
    triton_ms = triton_label = None
    if tune_triton is not None:
        try:
            tri_out = torch.empty_like(ours_out)
            launch, config = tune_triton(a, b, tri_out)
            (tri_rounds, _), = bench.interleaved_rounds([launch], args.rounds, args.iters,
                                                        args.warmup, hold=hold)
            triton_ms = bench.median(tri_rounds)
            triton_label = str(config)
        except Exception as exc:                        # noqa: BLE001 (a baseline may fail)
            bench.log(f"triton at {shape}: {bench.why(exc)}")
    rows = []
    for mode, accum in args.cases:
        fast = accum == "fast"
        sa, sb = scales[mode]

        def ours():
            return matmul(a, b, ours_out, scale_a=sa, scale_b=sb, fast_accum=fast)

        want = dequantized_product(torch, a, b, sa, sb, mode)
        # (a per-tensor stand-in for a mode torch lacks runs with unit scales: no check)
        theirs, their_mode, their_check = scaled_mm(torch, a, b, sa, sb, torch_out, mode, fast,
                                                    lambda got: check(got, want, fast))
        ours()
        text, ok = check(ours_out, want, fast)
        forced = []
        for cfg in args.configs:
            spec = KernelSpec(True, True, "e4m3_e4m3", "bf16", False, mode, not fast)
            try:
                cfg.check_spec(spec)
            except ValueError:
                continue
            fn = (lambda cfg: lambda: matmul(a, b, ours_out, scale_a=sa, scale_b=sb,
                                             fast_accum=fast, config=cfg))(cfg)
            fn()
            forced.append((cfg, fn, check(ours_out, want, fast)))
        timed = bench.interleaved_rounds([ours, theirs] + [f for _, f, _ in forced],
                                         args.rounds, args.iters, args.warmup, hold=hold)
        our_ms, their_ms = (bench.median(r) for r, _ in timed[:2])
        for (cfg, _, (ftext, fok)), (f_rounds, _) in zip(forced, timed[2:]):
            f_ms = bench.median(f_rounds)
            rows.append({"in_dtype": "e4m3", "out_dtype": "bfloat16", "scale": mode,
                         "accum": accum, "shape": [m, n, k], "kernel": f"matmul({cfg!r})",
                         "config": repr(cfg), "us": f_ms * 1e3, "TFLOPs": flop / f_ms / 1e9,
                         "x_scaled_mm": their_ms / f_ms, "check": ftext,
                         "status": "ok" if fok else "mismatch"})
            bench.log(f"{m}x{n}x{k} {mode:6s} {accum:8s} {cfg!r} {flop / f_ms / 1e9:7.1f} "
                      f"TFLOP/s: x{their_ms / f_ms:.3f} check {ftext}")
        cfg = choose_fp8_config(m, n, k, sm_count(), mode, not fast)
        row = {"in_dtype": "e4m3", "out_dtype": "bfloat16", "scale": mode, "accum": accum,
               "shape": [m, n, k], "kernel": "matmul()", "config": repr(cfg),
               "us": our_ms * 1e3, "TFLOPs": flop / our_ms / 1e9,
               "scaled_mm_mode": their_mode, "scaled_mm_TFLOPs": flop / their_ms / 1e9,
               "x_scaled_mm": their_ms / our_ms,
               "triton_TFLOPs": None if triton_ms is None else flop / triton_ms / 1e9,
               "x_triton": (triton_ms / our_ms if triton_ms is not None and mode == "tensor"
                            and not fast else None),
               "triton_config": triton_label, "check": text,
               "status": "ok" if ok else "mismatch"}
        row["tflops"] = row["TFLOPs"]
        rows.append(row)
        rows.append({"in_dtype": "e4m3", "out_dtype": "bfloat16", "scale": mode,
                     "accum": accum, "shape": [m, n, k], "kernel": "torch._scaled_mm",
                     "scaled_mm_mode": their_mode, "TFLOPs": flop / their_ms / 1e9,
                     "us": their_ms * 1e3, "check": their_check, "status": "ok"})
        bench.log(f"{m}x{n}x{k} {mode:6s} {accum:8s} matmul() {row['TFLOPs']:7.1f} TFLOP/s, "
                  f"torch._scaled_mm ({their_mode}) {row['scaled_mm_TFLOPs']:7.1f}: "
                  f"x{row['x_scaled_mm']:.3f}  check {text}")
    if triton_ms is not None:
        rows.append({"in_dtype": "e4m3", "out_dtype": "bfloat16", "scale": "tensor",
                     "accum": "promoted", "shape": [m, n, k], "kernel": "triton",
                     "TFLOPs": flop / triton_ms / 1e9, "us": triton_ms * 1e3,
                     "config": triton_label, "status": "ok"})
    return rows


def table_row(r):
    return ["x".join(map(str, r["shape"])), r["scale"], r["accum"], r["config"],
            f"{r['TFLOPs']:.1f}", f"{r['scaled_mm_TFLOPs']:.1f} ({r['scaled_mm_mode']})",
            f"{r['x_scaled_mm']:.3f}",
            "-" if r["triton_TFLOPs"] is None else f"{r['triton_TFLOPs']:.1f}",
            "-" if r["x_triton"] is None else f"{r['x_triton']:.3f}", r["check"]]


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/gemm_fp8.py", torch="to time torch._scaled_mm and make the inputs",
                  gpu="to run its GEMMs", hopper=True, plot=args.plot)
    import torch

    gen, tune_triton, env, hold = gemm_session(torch, args.seed, HOLD_CYCLES)
    print(f"# {env['gpu']} (cc {env['compute_capability']}, {env['sm_count']} SMs), driver "
          f"{env['driver']}; e4m3 inputs, bf16 out; median of {args.iters} runs after "
          f"{args.warmup} warm-ups, {args.rounds} rounds")
    results = []
    for shape in args.shapes:
        results += run_shape(torch, args, gen, shape, hold, tune_triton)
        bench.free_device_memory()
    ours = [r for r in results if r["kernel"] == "matmul()"]
    failed = any(r["status"] != "ok" for r in results if r["kernel"].startswith("matmul("))
    print()
    print(bench.format_table(HEADERS, [table_row(r) for r in ours]))
    if args.json or args.plot:
        bench.save_results(args, {
            **bench.report_header(BENCH, env, bench.package_versions(extra=("triton",))),
            "iters": args.iters, "rounds": args.rounds, "warmup": args.warmup,
            "timing": "us: device time, launches queued behind a GPU wait",
            "results": results, "command": " ".join(sys.argv),
            "timestamp": bench.timestamp()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
