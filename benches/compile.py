"""Compile time: how long a kernel of matmul() or transpose() takes to build from nothing.

Run from the repository root after ``pip install .`` (a GPU is optional):

    # every GEMM config matmul() chooses in three dtype/layout families, and the 16 raw-pointer
    # transposes: the CPU machine's table (benches/results/compile-cpu.json)
    python benches/compile.py --json benches/results/compile-cpu.json
    # a few kernels only (names as numba_tma.precompile --list prints them, fnmatch patterns)
    python benches/compile.py --kernels 'matmul cluster_ov*'
    # on an sm_90 GPU: also the launch path and the first calls a user sees
    python benches/compile.py --gpu --json benches/results/compile-h100.json

Every kernel is built in a fresh Python process of its own, with the on-disk kernel cache off
(``NUMBA_TMA_DISABLE_CACHE=1``): nothing of it was compiled before, as for a new user's first
call. ``cold_s`` is ``numba_tma.offline.link_kernel`` (numba's front end, NVVM's LTO-IR of the
kernel, NVRTC on the ``ptx/*.cu`` files it links, one ``nvJitLink -lto`` to a cubin) timed
alone, after the imports (``import_s``); ``phase_s`` splits it: ``frontend`` (numba's typing and
lowering to LLVM IR: the rest), ``llvm_nvvm`` (NVVM to LTO-IR; numba-cuda's step, 0 under
numba-cuda-mlir, whose lowering to LTO-IR counts as ``frontend``), ``nvrtc`` and ``link``
(nvJitLink: link-time optimisation and ptxas). The processes run one at a time, so no two
compete for the cores.

With ``--gpu`` (an sm_90 GPU and torch), per kernel also ``gpu_cold_s``: the launch path's
first load (``DirectKernel.function()``: the same build, then the driver's module load), and
the first calls a user sees, each in a fresh process: ``matmul()`` of 4096^3 fp16 and
``transpose()`` of a 4096^2 fp32 tensor with the cache off (cold), and after ``python -m
numba_tma.precompile`` filled an empty cache directory (warm: no kernel may be compiled there,
and the row says how many were); and the peer: Triton's first call of its matmul (the benches'
kernel, one 128 x 256 x 64 config, no autotuning) at 4096^3 fp16 with an empty Triton cache.
"""

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The GEMM families timed per config: the plain a @ b (row-major operands), bf16 with B given
# as the transpose of a row-major N x K weight (a @ w.t()), and f32 output with beta and A
# column-major.
FAMILIES = ((True, False, "f16", "f16", False),
            (True, True, "bf16", "bf16", False),
            (False, False, "f16", "f32", True))


def _family_text(family):
    a_k, b_k, i, o, beta = family
    return (f"{i}->{o} A:{'MxK' if a_k else 'KxM'} B:{'NxK' if b_k else 'KxN'}"
            f"{' beta' if beta else ''}")


def bench_targets():
    """``[target]`` (``numba_tma.precompile`` targets): each shipped GEMM config in each of
    :data:`FAMILIES`, then every raw-pointer transpose. A child process finds its target by
    ``precompile.describe``'s line (the same in a ``--baseline`` checkout's code)."""
    from numba_tma import precompile

    wanted = {_family_text(f) for f in FAMILIES}
    return ([t for t in precompile.targets(only="matmul")
             if precompile.describe(t).split(" ", 2)[2] in wanted]
            + precompile.targets(only="transpose"))


def _target(line):
    from numba_tma import precompile

    return next(t for t in precompile.targets() if precompile.describe(t) == line)


# ------------------------------------------------------------------------ in a fresh process


class _Phases:
    """Wall time spent inside the compile's phases, by wrapping the functions that run them."""

    def __init__(self):
        self.seconds = {"llvm_nvvm": 0.0, "nvrtc": 0.0, "link": 0.0}

    def wrap(self, owner, name, phase):
        inner = getattr(owner, name)

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - t0

        setattr(owner, name, timed)

    def install(self):
        from numba_tma import offline
        from numba_tma._frontend import codegen, nvrtc

        # numba-cuda's LLVM IR to LTO-IR (NVVM); numba-cuda-mlir has no such step of its own
        # (its lowering counts as frontend)
        if hasattr(codegen, "CUDACodeLibrary"):
            self.wrap(codegen.CUDACodeLibrary, "get_ltoir", "llvm_nvvm")
        self.wrap(nvrtc, "compile", "nvrtc")
        self.wrap(offline.link, "_nvjitlink", "link")
        return self

    def split(self, total):
        out = {"frontend": total - sum(self.seconds.values())}
        out.update(self.seconds)
        return {k: round(v, 3) for k, v in out.items()}


def child_compile(target, gpu):
    """One kernel, cold, in this (fresh) process: the row's timings."""
    t0 = time.perf_counter()
    from numba_tma import offline, precompile

    kernel = precompile.kernel_of(target)
    import_s = time.perf_counter() - t0
    phases = _Phases().install()
    t0 = time.perf_counter()
    if gpu:
        kernel.function()               # the launch path: build, then load the module
    else:
        offline.link_kernel(kernel.kernel, kernel.argtypes, arch="sm_90a")
    total = time.perf_counter() - t0
    return {"cold_s": round(total, 3), "import_s": round(import_s, 3),
            "phase_s": phases.split(total)}


def child_first_call(op):
    """The first ``matmul()`` (4096^3 fp16) or ``transpose()`` (4096^2 fp32) of this process,
    synchronized, and how many kernels it built."""
    import torch

    import numba_tma
    from numba_tma import offline

    builds = []
    link = offline.link_kernel

    def counted(*args, **kwargs):
        builds.append(1)
        return link(*args, **kwargs)

    offline.link_kernel = counted
    gen = torch.Generator(device="cuda").manual_seed(0)
    if op == "matmul":
        a = torch.randn(4096, 4096, device="cuda", dtype=torch.float16, generator=gen)
        b = torch.randn(4096, 4096, device="cuda", dtype=torch.float16, generator=gen)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        c = numba_tma.matmul(a, b)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        ref = (a.float() @ b.float())
        err = float((c.float() - ref).abs().max() / ref.abs().max())
        ok = err < 1e-2
    else:
        x = torch.randn(4096, 4096, device="cuda", dtype=torch.float32, generator=gen)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = numba_tma.transpose(x)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        ok = bool(torch.equal(y, x.t()))
    return {"first_call_s": round(first, 4), "kernels_built": len(builds), "correct": ok}


def child_triton():
    """Triton's first call (compile and run) of the benches' matmul at 4096^3 fp16, one config."""
    import torch

    from numba_tma.bench import baselines

    kernel, why = baselines.triton_matmul_kernel()
    if kernel is None:
        return {"skipped": why}
    M = N = K = 4096
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    bm, bn, bk, stages, warps = baselines.TRITON_CONFIGS[0]
    grid = ((M // bm) * (N // bn),)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    kernel[grid](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride(), BLOCK_M=bm,
                 BLOCK_N=bn, BLOCK_K=bk, GROUP_M=baselines.TRITON_GROUP_M, ALIGN=8,
                 num_stages=stages, num_warps=warps)
    torch.cuda.synchronize()
    return {"first_call_s": round(time.perf_counter() - t0, 4),
            "config": f"{bm}x{bn}x{bk} s{stages} w{warps}"}


# --------------------------------------------------------------------------------- the parent


def run_child(args, env=None):
    """Run this script as a child with ``args``; its last stdout line is JSON."""
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args],
                          capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, **(env or {})))
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-3:]}
    return json.loads(lines[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", default="*", help="fnmatch patterns of kernel names, "
                   "comma-separated (default: all)")
    p.add_argument("--gpu", action="store_true", help="also the launch path and first calls "
                   "(needs an sm_90 GPU and torch)")
    p.add_argument("--baseline", help="a checkout of other numba_tma code (a directory put first "
                   "on PYTHONPATH) whose kernels are timed in turn with these, each right before "
                   "this code's, into the result's 'before' section; it must have "
                   "offline.link_kernel and precompile's names")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        what = json.loads(args.child)
        if what["kind"] == "compile":
            row = child_compile(_target(what["target"]), what["gpu"])
        elif what["kind"] == "first_call":
            row = child_first_call(what["op"])
        else:
            row = child_triton()
        print(json.dumps(row))
        return 0

    from numba_tma import precompile
    from numba_tma.bench.env import gpu_environment, package_versions, require

    if args.gpu:                        # without --gpu it compiles offline: no GPU needed
        require("benches/compile.py --gpu", torch="for the first calls",
                gpu="for the launch path and first calls", hopper=True)

    patterns = [x.strip() for x in args.kernels.split(",") if x.strip()]
    todo = [t for t in bench_targets()
            if any(fnmatch.fnmatch(precompile.describe(t), pat) for pat in patterns)]
    if not todo:
        p.error(f"--kernels {args.kernels!r} matches none of the kernels")
    off = {"NUMBA_TMA_DISABLE_CACHE": "1"}
    base_env = None
    if args.baseline:
        base_env = dict(off, PYTHONPATH=os.pathsep.join(
            [os.path.abspath(args.baseline), os.environ.get("PYTHONPATH", "")]))
    rows, before = [], []
    print(f"{'kernel':<52} {'cold s':>7} {'front':>6} {'nvvm':>6} {'nvrtc':>6} {'link':>6}"
          f" {'import':>6}" + ("  gpu cold s" if args.gpu else ""), flush=True)
    for target in todo:
        spec = {"kind": "compile", "target": precompile.describe(target), "gpu": False}
        if base_env is not None:         # (the same minute as this code's: the machine drifts)
            before.append({"kernel": precompile.describe(target), "config": target[1],
                           **run_child(["--child", json.dumps(spec)], base_env)})
        row = {"kernel": precompile.describe(target), "config": target[1],
               **run_child(["--child", json.dumps(spec)], off)}
        if args.gpu and "error" not in row:
            gpu_row = run_child(["--child", json.dumps(dict(spec, gpu=True))], off)
            row["gpu_cold_s"] = gpu_row.get("cold_s", gpu_row)
        rows.append(row)
        if "error" in row:
            print(f"{row['kernel']:<52} FAILED {row['error']}", flush=True)
            continue
        ph = row["phase_s"]
        print(f"{row['kernel']:<52} {row['cold_s']:7.2f} {ph['frontend']:6.2f} "
              f"{ph['llvm_nvvm']:6.2f} {ph['nvrtc']:6.2f} {ph['link']:6.2f} "
              f"{row['import_s']:6.2f}" + (f"  {row['gpu_cold_s']}" if args.gpu else "")
              + (f"  (baseline {before[-1].get('cold_s', 'FAILED')})" if before else ""),
              flush=True)
    doc = {"bench": "compile", "results": rows,
           "versions": package_versions(), "cpu": _cpu_name(), "cores": os.cpu_count()}
    if before:
        doc["before"] = {"code": os.path.abspath(args.baseline), "results": before}
    good = [r for r in rows if "cold_s" in r]
    if good:
        slow = max(good, key=lambda r: r["cold_s"])
        print(f"slowest: {slow['kernel']} {slow['cold_s']:.2f} s; "
              f"{sum(r['cold_s'] <= 3.0 for r in good)} of {len(good)} kernels <= 3 s cold")
    if args.gpu:
        doc["gpu"] = gpu_environment()
        doc["first_calls"] = first_calls()
        for r in doc["first_calls"]:
            print(json.dumps(r))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 0 if all("error" not in r for r in rows) else 1


def first_calls():
    """The first matmul() and transpose() of fresh processes: cold (cache off), then warm
    (after ``numba_tma.precompile`` of the kernels they choose into an empty cache), and
    Triton's first call with an empty cache."""
    rows = []
    for op in ("matmul", "transpose"):
        spec = json.dumps({"kind": "first_call", "op": op})
        rows.append({"op": op, "cache": "off",
                     **run_child(["--child", spec], {"NUMBA_TMA_DISABLE_CACHE": "1"})})
    with tempfile.TemporaryDirectory(prefix="numba_tma_compile_bench_") as cache:
        env = {"NUMBA_CACHE_DIR": cache}
        t0 = time.perf_counter()
        # what 4096^3 fp16 a @ b and a 4096^2 fp32 transpose choose (matmul's config as
        # choose_config picks it on this GPU; the others come along in the same run)
        pre = subprocess.run([sys.executable, "-m", "numba_tma.precompile", "--dtypes", "f16",
                              "--out-dtypes", "f16", "--no-beta", "--configs",
                              _chosen_config()], capture_output=True, text=True, cwd=ROOT,
                             env=dict(os.environ, **env))
        rows.append({"op": "precompile", "seconds": round(time.perf_counter() - t0, 2),
                     "summary": pre.stdout.strip().splitlines()[-1:]})
        for op in ("matmul", "transpose"):
            spec = json.dumps({"kind": "first_call", "op": op})
            rows.append({"op": op, "cache": "precompiled", **run_child(["--child", spec], env)})
    with tempfile.TemporaryDirectory(prefix="triton_cache_") as cache:
        rows.append({"op": "triton matmul", "cache": "empty",
                     **run_child(["--child", json.dumps({"kind": "triton"})],
                                 {"TRITON_CACHE_DIR": cache})})
    return rows


def _chosen_config():
    from numba_tma import matmul_api
    from numba_tma.kernels.gemm.choose import SHIPPED_CONFIGS

    cfg = matmul_api.choose_config(4096, 4096, 4096)
    return next(name for name, c in SHIPPED_CONFIGS.items() if c == cfg)


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


if __name__ == "__main__":
    sys.exit(main())
