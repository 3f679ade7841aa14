"""Fill the on-disk kernel cache with the kernels ``matmul()`` and ``transpose()`` can launch,
offline (no GPU) and in parallel processes::

    python -m numba_tma.precompile [--jobs N] [--arch sm_90a] [--only matmul|transpose]
                                   [--configs wide,narrow64,...] [--dtypes f16,bf16]
                                   [--out-dtypes f16,bf16,f32] [--no-beta] [--list]

A Docker image, a CI runner or a cluster's shared cache directory (``NUMBA_CACHE_DIR``) is then
warm before any GPU sees it: a launch on an sm_90 GPU loads the cubin built here (the same
cache key, :func:`numba_tma.kernel_cache.kernel_key`, and the same link,
:func:`numba_tma.offline.link_kernel`) and compiles nothing. Entries already in the cache are
left as they are. By default every GEMM config ``matmul()`` chooses, for both input dtypes,
all three output dtypes, the four operand layouts, with and without ``beta`` (576 kernels),
and the raw-pointer transposes for 1-, 2-, 4- and 8-byte elements (16); the filters narrow
that down. The exit status is 1 when a kernel failed to build.
"""

import argparse
import concurrent.futures
import multiprocessing
import os
import sys
import time

__all__ = ["targets", "precompile", "main"]


def targets(only=None, configs=None, dtypes=None, out_dtypes=None, betas=(False, True)):
    """``[(family, name, variant)]`` to build: ``family`` "matmul" or "transpose"; ``name`` the
    GEMM config's (``kernels.gemm.choose.SHIPPED_CONFIGS``) or the transpose's; ``variant``
    what that family's ``kernel_for`` takes."""
    from . import transpose_api
    from .kernels.gemm import plan

    out = []
    if only in (None, "matmul"):
        out += [("matmul", name, variant) for name, variant in plan.kernel_variants(
            configs, dtypes or plan.IN_KINDS, out_dtypes or plan.OUT_KINDS, betas=betas)]
    if only in (None, "transpose"):
        out += [("transpose", name, variant)
                for name, variant in transpose_api.kernel_variants()]
    return out


def describe(target):
    """One line naming a target: ``matmul cluster_ov f16->f16 A:MxK B:KxN`` and the like."""
    family, name, variant = target
    if family == "matmul":
        _, spec = variant
        return (f"matmul {name} {spec.in_kind}->{spec.out_kind} "
                f"A:{'MxK' if spec.a_kmajor else 'KxM'} B:{'NxK' if spec.b_kmajor else 'KxN'}"
                f"{' beta' if spec.has_beta else ''}")
    itemsize, row_offset = variant
    return f"transpose {name} {itemsize}-byte{' row-offset' if row_offset else ''}"


def kernel_of(target):
    """The :class:`numba_tma.launch.DirectKernel` of a target."""
    family, name, variant = target
    if family == "matmul":
        from .kernels.gemm import plan

        return plan.kernel_for(variant)
    from . import transpose_api

    return transpose_api.kernel_for(name, variant)


def _build(target, arch):
    """Worker: (target, "built" | "cached" | "failed: ...", seconds)."""
    t0 = time.perf_counter()
    try:
        status = kernel_of(target).precompile(arch)
    except Exception as e:          # reported, and the run goes on with the other kernels
        status = f"failed: {type(e).__name__}: {e}"
    return target, status, time.perf_counter() - t0


def precompile(todo, *, jobs=None, arch="sm_90a", report=None):
    """Build ``todo`` (from :func:`targets`) into the kernel cache in ``jobs`` processes (the
    machine's cores by default); ``report(target, status, seconds)`` after each. Returns
    ``{status: count}`` with ``"failed"`` for every failure."""
    from . import kernel_cache, offline

    offline.toolchain._parse_arch(arch)            # a bad arch fails here, not in every worker
    if not kernel_cache.enabled():
        raise ValueError("precompile: NUMBA_TMA_DISABLE_CACHE is set: nothing would be kept")
    jobs = max(1, int(jobs or os.cpu_count() or 1))
    counts = {"built": 0, "cached": 0, "failed": 0}
    # spawn, not fork: numba's compiler state and locks are not fork-safe once imported
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_build, t, arch) for t in todo]
        for fut in concurrent.futures.as_completed(futures):
            target, status, seconds = fut.result()
            counts["failed" if status.startswith("failed") else status] += 1
            if report is not None:
                report(target, status, seconds)
    return counts


def _csv(text):
    return [x for x in text.split(",") if x] if text else None


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m numba_tma.precompile", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=None, help="processes (default: the CPUs)")
    p.add_argument("--arch", default="sm_90a", help="target, e.g. sm_90a (default)")
    p.add_argument("--only", choices=("matmul", "transpose"), help="one family only")
    p.add_argument("--configs", help="comma-separated GEMM config names (default: all)")
    p.add_argument("--dtypes", help="GEMM input dtypes: f16,bf16 (default: both)")
    p.add_argument("--out-dtypes", help="GEMM output dtypes: f16,bf16,f32 (default: all)")
    p.add_argument("--no-beta", action="store_true", help="skip the beta * C kernels")
    p.add_argument("--list", action="store_true", help="print the kernels and build nothing")
    args = p.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        p.error(f"--jobs must be >= 1, got {args.jobs}")
    from . import offline

    try:
        offline.toolchain._parse_arch(args.arch)
    except ValueError as e:
        p.error(f"--arch: {e}")
    for opt, allowed in (("dtypes", ("f16", "bf16")), ("out_dtypes", ("f16", "bf16", "f32"))):
        for x in _csv(getattr(args, opt)) or ():
            if x not in allowed:
                p.error(f"--{opt.replace('_', '-')}: {x!r} is not one of {', '.join(allowed)}")
    try:
        todo = targets(args.only, _csv(args.configs), _csv(args.dtypes), _csv(args.out_dtypes),
                       (False,) if args.no_beta else (False, True))
    except ValueError as e:
        p.error(str(e))
    if args.list:
        for t in todo:
            print(describe(t))
        return 0
    from . import kernel_cache

    print(f"precompile: {len(todo)} kernels for {args.arch} into {kernel_cache.cache_dir()}",
          flush=True)
    t0 = time.perf_counter()

    def report(target, status, seconds):
        print(f"{status:>8} {seconds:6.1f} s  {describe(target)}", flush=True)

    try:
        counts = precompile(todo, jobs=args.jobs, arch=args.arch, report=report)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    print(f"precompile: {counts['built']} built, {counts['cached']} already cached, "
          f"{counts['failed']} failed in {time.perf_counter() - t0:.1f} s", flush=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
