"""How fast a kernel of ``matmul()`` could compile at best: the part of a cold build that is not
numba's front end, measured on this machine (no GPU needed).

For each kernel named: nvJitLink's whole link (``-lto``: NVVM's optimisation of the linked
LTO-IR, then ptxas), the same link stopped at PTX (``-ptx``: NVVM alone), and nvJitLink on that
PTX alone (ptxas alone), each the best of ``--repeat``; and, in a fresh process, the cold build
of a one-line kernel (numba's start-up: the least any kernel's first build in a process costs).
A kernel whose link plus that start-up passes a target cannot meet it whatever its front end
takes, unless its code changes.

    python benches/compile_floor.py --kernels 'matmul wide_ov*,matmul cluster_ov f16->f16*'
"""

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

#: The compiler wheels the numbers depend on.
NVIDIA_WHEELS = ("nvidia-nvjitlink", "nvidia-cuda-nvrtc", "nvidia-cuda-nvcc")

TRIVIAL = """
import time
t0 = time.perf_counter()
from numba_tma._frontend import cuda
from numba_tma import offline
t1 = time.perf_counter()

@cuda.jit
def one(x):
    x[0] = 1.0

offline.link_kernel(one, "void(float32[::1])")
print(time.perf_counter() - t1)
"""


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def floor_of(target, repeat):
    from numba_tma import offline, precompile

    kernel = precompile.kernel_of(target)
    linked = offline.link_kernel(kernel.kernel, kernel.argtypes, arch="sm_90a")
    inputs, options = linked._link_inputs, linked._link_options
    ptx = offline.link._nvjitlink(inputs, options + ["-ptx"], ptx=True)[0]
    ptx_input = [(inputs[0][0].__class__.PTX, ptx.encode(), "kernel.ptx")]
    return {
        "kernel": precompile.describe(target),
        "link_s": round(best(lambda: offline.link._nvjitlink(inputs, options), repeat), 3),
        "nvvm_lto_s": round(best(lambda: offline.link._nvjitlink(inputs, options + ["-ptx"],
                                                            ptx=True), repeat), 3),
        "ptxas_s": round(best(lambda: offline.link._nvjitlink(ptx_input, [options[0]]), repeat), 3),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kernels", default="matmul wide_ov*,matmul cluster_ov*",
                   help="fnmatch patterns of precompile's kernel names, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="links per measurement (the best is kept)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    from numba_tma import precompile

    patterns = args.kernels.split(",")
    todo = [t for t in precompile.targets(only="matmul", betas=(False,))
            if any(fnmatch.fnmatch(precompile.describe(t), pat) for pat in patterns)]
    starts = [float(subprocess.run([sys.executable, "-c", TRIVIAL], capture_output=True,
                                   text=True, check=True).stdout) for _ in range(args.repeat)]
    start = round(min(starts), 3)
    print(f"one-line kernel, first build in a fresh process: {start} s (best of {args.repeat})")
    rows = []
    print(f"{'kernel':48s} {'link s':>7s} {'nvvm s':>7s} {'ptxas s':>7s} {'+start s':>8s}")
    for target in todo:
        row = floor_of(target, args.repeat)
        row["with_start_s"] = round(row["link_s"] + start, 3)
        rows.append(row)
        print(f"{row['kernel']:48s} {row['link_s']:7.3f} {row['nvvm_lto_s']:7.3f} "
              f"{row['ptxas_s']:7.3f} {row['with_start_s']:8.3f}")
    if args.json:
        from numba_tma.bench import env

        with open(args.json, "w") as f:
            json.dump({"bench": "compile_floor", "start_s": start, "results": rows,
                       "versions": env.package_versions(extra=NVIDIA_WHEELS), "cores": os.cpu_count()}, f,
                      indent=1)


if __name__ == "__main__":
    main()
