"""Shared-memory bank conflicts of the seed-002 ladder: a 16 x 16 x 16 half GEMM four ways
(``numba_tma.ladders.warp_gemm.LADDER``: smem, padded, ldmatrix, swizzle), each one warp.

Run from the repository root on a CUDA GPU (sm_90 for stmatrix):

    python benches/warp_gemm_banks.py                      # check every rung, then profile
    python benches/warp_gemm_banks.py --json benches/results/warp-gemm-banks-h100.json
    python benches/warp_gemm_banks.py --run-only swizzle   # what ncu runs (one launch each)

1. Checks first: each rung runs on small-integer inputs (exact in fp16: ``out`` must equal
   numpy's product bit for bit, after ``out`` was poisoned with NaNs) and on standard normals
   (within one fp16 rounding of the f32 product). A failing rung is reported FAILED.
2. When Nsight Compute's ``ncu`` is on PATH (or given with ``--ncu``), profiles all rungs in one
   child run of this script,

       ncu --csv --metrics <METRICS> --kernel-name regex:warp_gemm16_ \\
           python benches/warp_gemm_banks.py --run-only smem,padded,ldmatrix,swizzle

   collecting ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum`` and
   ``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum`` (plain LDS/STS), plus the
   ldmatrix/stmatrix counters ``sm__sass_l1tex_data_{bank_conflicts,pipe_lsu_wavefronts}_
   pipe_lsu_mem_shared_op_{ldsm,stsm}.sum`` where this ncu knows them (``ncu --query-metrics``).
   Each rung is one launch of one warp, so the numbers are exact counts, printed next to the
   host bank model's prediction (``warp_gemm.bank_model``: "+extra/total" wavefronts).
   Without ncu the check lines are printed and the script says ncu is missing.

Exit status 1 when a rung FAILED its check, else 0; a missing or failing ncu (no permission for
the performance counters, say) is reported, not an error.
"""

import argparse
import csv
import os
import shutil
import subprocess
import sys

import numpy as np


# This checkout's numba_tma first (an older installed copy is never benched by mistake).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from numba_tma import bench  # noqa: E402

BENCH = "warp_gemm_banks"
RUNGS = ("smem", "padded", "ldmatrix", "swizzle")     # warp_gemm.LADDER's order
KERNEL_PREFIX = "warp_gemm16_"                        # the kernels' names: warp_gemm16_<rung>
N16 = 16
INT_RANGE = 4              # inputs in [-4, 4]: |C| <= 16 * 16 = 256, exact in fp16
NCU_TIMEOUT_S = 600

#: Counter key -> ncu metric. The first four are requested always; the rest when ncu has them.
METRICS = {
    "ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "ld_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "st_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "ldsm_conflicts": "sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_ldsm.sum",
    "ldsm_wavefronts": "sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ldsm.sum",
    "stsm_conflicts": "sm__sass_l1tex_data_bank_conflicts_pipe_lsu_mem_shared_op_stsm.sum",
    "stsm_wavefronts": "sm__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_stsm.sum",
}
REQUIRED = ("ld_conflicts", "ld_wavefronts", "st_conflicts", "st_wavefronts")
OPS = ("ld", "st", "ldsm", "stsm")


# ---------------------------------------------------------------------------------------------
# command line

def parse_rungs(text):
    names = [t.strip() for t in text.split(",") if t.strip()]
    if names == ["all"]:
        return list(RUNGS)
    bad = [n for n in names if n not in RUNGS]
    if bad or not names:
        raise ValueError(f"unknown rung(s) {', '.join(bad) or '(none)'}; choose from "
                         f"{', '.join(RUNGS)} or all")
    return [n for n in RUNGS if n in names]


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        prog="benches/warp_gemm_banks.py",
        description="Bank conflicts of the 16x16x16 half GEMM ladder (seed 002), checked, then "
                    "profiled with ncu when available (run on the GPU).")
    p.add_argument("--rungs", default=list(RUNGS), type=bench.argparse_type(parse_rungs),
                   help="comma list of " + ", ".join(RUNGS) + " (default: all)")
    p.add_argument("--run-only", default=None, type=bench.argparse_type(parse_rungs),
                   metavar="RUNGS", help="only launch these rungs once each (checked) and exit: "
                                         "the child ncu profiles")
    p.add_argument("--ncu", default=None, metavar="PATH",
                   help="the ncu executable (default: ncu on PATH)")
    p.add_argument("--no-ncu", action="store_true", help="skip profiling")
    bench.add_output_args(p, "also write the results to this JSON file",
                          seed_help="seed for the inputs (default: fresh)")
    return p.parse_args(argv)


# ---------------------------------------------------------------------------------------------
# checks (GPU)

def load_ladder():
    """numba_tma.ladders.warp_gemm -- the checkout's own package when this file sits in one (so
    an older installed copy is never measured by mistake)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(root, "numba_tma", "__init__.py")) and root not in sys.path:
        sys.path.insert(0, root)
    from numba_tma.ladders import warp_gemm

    return warp_gemm


def check_rung(name, rng, normals=True):
    """Run rung ``name`` on integer inputs (exact) and, if ``normals``, on standard normals
    (fp16 rounding of the f32 product); returns {"ok", "int_exact", "normal_max_rel_err"}."""
    from numba_tma._frontend import cuda

    fn = load_ladder().LADDER[name]
    out = cuda.to_device(np.full((N16, N16), np.nan, np.float16))
    a = rng.integers(-INT_RANGE, INT_RANGE, (N16, N16), endpoint=True).astype(np.float16)
    b = rng.integers(-INT_RANGE, INT_RANGE, (N16, N16), endpoint=True).astype(np.float16)
    fn(a, b, out)
    got = out.copy_to_host()
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    result = {"int_exact": bool(np.array_equal(got.view(np.uint16), want.view(np.uint16))),
              "normal_max_rel_err": None}
    ok = result["int_exact"]
    if normals:
        a = rng.standard_normal((N16, N16)).astype(np.float16)
        b = rng.standard_normal((N16, N16)).astype(np.float16)
        got = fn(a, b).copy_to_host().astype(np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        # one fp16 rounding of an f32-accumulated sum: half an ulp (2^-11 relative) plus the
        # f32 accumulation's ~16 * 2^-24 relative to the terms' magnitude
        scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
        err = np.abs(got - ref) / np.maximum(np.abs(ref), scale * 2.0**-10)
        result["normal_max_rel_err"] = float(err.max())
        ok = ok and bool(np.all(np.abs(got - ref) <= 2.0**-10 * np.abs(ref) + 2.0**-14 * scale))
    result["ok"] = bool(ok)
    return result


def run_only(names, seed=None):
    """The profiled child: one launch per rung (integer check only); exit status 1 on a
    mismatch. Prints to stderr only (stdout carries ncu's CSV)."""
    rng = np.random.default_rng(seed)
    failed = []
    for name in names:
        r = check_rung(name, rng, normals=False)
        bench.log(f"{name}: {'ok' if r['ok'] else 'FAILED'}")
        if not r["ok"]:
            failed.append(name)
    return 1 if failed else 0


# ---------------------------------------------------------------------------------------------
# ncu

def find_ncu(explicit=None):
    """Path of ncu (``explicit`` if given and executable, else PATH), or None."""
    if explicit:
        return explicit if os.path.isfile(explicit) and os.access(explicit, os.X_OK) else None
    return shutil.which("ncu")


def ncu_version(ncu):
    try:
        out = subprocess.run([ncu, "--version"], capture_output=True, text=True, timeout=60)
        lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
        return lines[-1].strip() if lines else None
    except Exception:
        return None


def available_metrics(ncu, keys=tuple(METRICS)):
    """The ``keys`` whose metric this ncu lists in ``--query-metrics`` (the required ones
    always); only the required ones when the query fails."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True,
                             timeout=120)
        listed = out.stdout if out.returncode == 0 else ""
    except Exception:
        listed = ""
    names = set(listed.replace(",", " ").split())
    return [k for k in keys if k in REQUIRED or METRICS[k].rsplit(".", 1)[0] in names]


def _number(text):
    text = str(text).strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text):
    """ncu ``--csv`` output (details page: one row per metric, or raw page: one row per
    kernel) -> [(kernel name, {metric name: value})] in launch order. Lines that are not CSV
    rows (the application's output, ``==PROF==`` messages) are skipped."""
    rows = list(csv.reader(ln for ln in text.splitlines() if ln.startswith('"')))
    header, out, index = None, [], {}
    for row in rows:
        if "Kernel Name" in row:
            header = row
            continue
        if header is None or len(row) != len(header):
            continue
        rec = dict(zip(header, row))
        if "Metric Name" in header:                      # details page
            key = (rec.get("ID"), rec["Kernel Name"])
            if key not in index:
                index[key] = len(out)
                out.append((rec["Kernel Name"], {}))
            value = _number(rec.get("Metric Value", ""))
            out[index[key]][1][rec["Metric Name"]] = value
        else:                                            # raw page: skip the units row
            if _number(rec.get("ID", "")) is None:
                continue
            out.append((rec["Kernel Name"],
                        {k: _number(v) for k, v in rec.items() if "__" in k}))
    return out


def rung_of(kernel_name):
    """The rung whose kernel ``kernel_name`` is (ncu prints mangled or demangled names)."""
    hits = [r for r in RUNGS if KERNEL_PREFIX + r in kernel_name]
    return max(hits, key=len) if hits else None


def counters_by_rung(parsed, keys):
    """{rung: {key: value}} from ``parse_ncu_csv`` output (the last launch of each rung)."""
    out = {}
    for kernel, metrics in parsed:
        rung = rung_of(kernel)
        if rung is not None:
            out[rung] = {k: metrics.get(METRICS[k]) for k in keys}
    return out


def ncu_command(ncu, rungs, keys, seed=None):
    cmd = [ncu, "--csv", "--metrics", ",".join(METRICS[k] for k in keys),
           "--kernel-name", f"regex:{KERNEL_PREFIX}",
           sys.executable, os.path.abspath(__file__), "--run-only", ",".join(rungs)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    return cmd


def profile(ncu, rungs, seed=None):
    """({rung: {key: value}}, keys, error or None, command)."""
    keys = available_metrics(ncu)
    cmd = ncu_command(ncu, rungs, keys, seed)
    bench.log("profiling:", " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=NCU_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {}, keys, f"ncu timed out after {NCU_TIMEOUT_S} s", cmd
    counters = counters_by_rung(parse_ncu_csv(proc.stdout), keys)
    error = None
    if proc.returncode != 0 or not counters:
        tail = bench.one_line((proc.stderr or "") + " " + (proc.stdout or "")[-2000:], 600)
        error = f"ncu exited {proc.returncode} with {len(counters)} kernels profiled: {tail}"
    return counters, keys, error, cmd


# ---------------------------------------------------------------------------------------------
# report

def model_of(rung):
    return {op: {"wavefronts": w, "conflicts": w - ideal}
            for op, (w, ideal) in load_ladder().bank_model(rung).items()}


def _pair(conflicts, wavefronts):
    if conflicts is None and wavefronts is None:
        return "-"
    return f"{bench.fmt(conflicts, '.0f')}/{bench.fmt(wavefronts, '.0f')}"


HEADERS = ("rung", "check", "ld c/w", "st c/w", "ldsm c/w", "stsm c/w", "model ld", "model st",
           "model ldsm", "model stsm")


def table_row(row):
    c = row.get("ncu") or {}
    m = row["model"]
    cells = [row["rung"], "ok" if row["check"]["ok"] else "FAILED"]
    cells += [_pair(c.get(f"{op}_conflicts"), c.get(f"{op}_wavefronts")) for op in OPS]
    cells += [_pair(m[op]["conflicts"], m[op]["wavefronts"]) if op in m else "-" for op in OPS]
    return cells


def main(argv=None):
    args = parse_args(argv)
    bench.require("benches/warp_gemm_banks.py", gpu="to run the rungs (sm_90 for stmatrix)",
                  plot=args.plot)
    if args.run_only is not None:
        return run_only(args.run_only, args.seed)
    env = bench.gpu_environment()
    print(f"# {BENCH}: {env['gpu']} (cc {env['compute_capability']}), driver {env['driver']}, "
          f"CUDA runtime {env['cuda_runtime']}")
    print("# c/w = bank conflicts / wavefronts of one run (one warp); model = "
          "warp_gemm.bank_model")
    rng = np.random.default_rng(args.seed)
    rows = []
    for rung in args.rungs:
        try:
            check = check_rung(rung, rng)
        except Exception as exc:
            check = {"ok": False, "error": bench.one_line(f"{type(exc).__name__}: {exc}")}
        rows.append({"rung": rung, "check": check, "model": model_of(rung), "ncu": None})
        line = f"{rung}: {'ok' if check['ok'] else 'FAILED'}"
        if "error" in check:
            line += f" ({check['error']})"
        elif check.get("normal_max_rel_err") is not None:
            line += (f" (integers exact: {check['int_exact']}, normals max rel err "
                     f"{check['normal_max_rel_err']:.2e})")
        bench.log(line)
    failed = [r["rung"] for r in rows if not r["check"]["ok"]]

    ncu = None if args.no_ncu else find_ncu(args.ncu)
    ncu_info = {"path": ncu, "version": None, "metrics": None, "error": None, "command": None}
    if args.no_ncu:
        ncu_info["error"] = "skipped (--no-ncu)"
    elif ncu is None:
        ncu_info["error"] = ("ncu not found" + (f" at {args.ncu}" if args.ncu else " on PATH") +
                             ": bank-conflict counters skipped (install Nsight Compute or pass "
                             "--ncu PATH)")
    else:
        ncu_info["version"] = ncu_version(ncu)
        ok_rungs = [r["rung"] for r in rows if r["check"]["ok"]]
        if ok_rungs:
            counters, keys, error, cmd = profile(ncu, ok_rungs, args.seed)
            ncu_info.update(metrics=[METRICS[k] for k in keys], error=error,
                            command=" ".join(cmd))
            for r in rows:
                r["ncu"] = counters.get(r["rung"])
    print(bench.format_table(HEADERS, [table_row(r) for r in rows], align="ll" + "r" * 8))
    if ncu_info["error"]:
        print(f"# ncu: {ncu_info['error']}")
    elif ncu_info["version"]:
        print(f"# {ncu_info['version']}")
    if args.json or args.plot:
        bench.save_results(args, {
            "bench": BENCH, "gpu": env.get("gpu"), "driver": env.get("driver"), "env": env,
            "versions": bench.package_versions(), "ncu": ncu_info, "results": rows,
            "seed": args.seed, "command": " ".join([sys.executable] + sys.argv),
            "timestamp": bench.timestamp()})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
