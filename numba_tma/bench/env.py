"""The environment of a bench result: optional GPU libraries (torch, CuPy, Triton), package
versions, the GPU and its driver, and the CUDA context's health and memory. Every probe is lazy
and falls back rather than raising. :func:`require` is the benches' check of what they need
(torch, a GPU, matplotlib), made before any heavy work.
"""

import gc
import importlib
import importlib.metadata
import os
import platform
import sys

import numpy as np

from .report import one_line


def import_optional(name):
    """``(module, None)`` or ``(None, reason)`` for an optional GPU library (torch, cupy)."""
    try:
        mod = importlib.import_module(name)
    except Exception as exc:  # ImportError, or a broken CUDA install inside the import
        return None, f"{name} not importable ({type(exc).__name__}: {exc})"
    try:
        if name == "torch" and not mod.cuda.is_available():
            return None, "torch has no CUDA device (torch.cuda.is_available() is False)"
        if name == "cupy":
            mod.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return None, f"{name} cannot use the GPU ({type(exc).__name__}: {exc})"
    return mod, None


def gpu_problem(hopper=False):
    """Why no usable CUDA GPU (of compute capability 9.0 or newer where ``hopper``) is here, or
    None. None under the CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``): it stands in for the GPU
    in the benches' dry runs."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return None
    try:
        from .._frontend import cuda

        dev = cuda.get_current_device()
        cc = tuple(dev.compute_capability)
    except Exception as exc:        # no driver, no device, a broken install
        text = one_line(f"{type(exc).__name__}: {exc}")
        head, stop, _ = text.partition(". ")        # its first sentence says what is wrong
        return f"no usable CUDA GPU ({one_line(head + stop.strip() if stop else text)})"
    if hopper and cc < (9, 0):
        name = dev.name.decode() if isinstance(dev.name, bytes) else dev.name
        return f"the GPU ({name}) is sm_{cc[0]}{cc[1]}"
    return None


def unmet_needs(script, torch=None, gpu=None, hopper=False, plot=None):
    """The one line saying what ``script`` needs and lacks here, or None when all is there.

    ``torch``: what torch (with a CUDA device) is needed for; ``gpu``: what a CUDA GPU is needed
    for, an sm_90 one where ``hopper``; ``plot``: what matplotlib would draw (``--plot``'s path),
    None when nothing is drawn. Each given phrase reads after the need, e.g. "to time cuBLAS".
    """
    needs, problems = [], []
    if torch:
        mod, why = import_optional("torch")
        if mod is None:
            needs.append(f"torch with CUDA (pip install torch) {torch}")
            problems.append(why)
    if gpu:
        problem = gpu_problem(hopper)
        if problem:
            kind = "an sm_90 GPU (Hopper: H100, H200)" if hopper else "a CUDA GPU"
            needs.append(f"{kind} {gpu}")
            problems.append(problem)
    if plot:
        mod, why = import_optional("matplotlib")
        if mod is None:
            needs.append(f'matplotlib (pip install "numba_tma[plot]") to draw {plot}')
            problems.append(why)
    if not needs:
        return None
    return f"{script} needs {', and '.join(needs)}; here: {'; '.join(problems)}"


def require(script, torch=None, gpu=None, hopper=False, plot=None):
    """Exit with status 2 and :func:`unmet_needs`' one line on stderr (no traceback) when what
    ``script`` needs is missing here; call it first thing after parsing the arguments."""
    line = unmet_needs(script, torch=torch, gpu=gpu, hopper=hopper, plot=plot)
    if line:
        print(line, file=sys.stderr, flush=True)
        raise SystemExit(2)


def dist_version(*names):
    """Installed version of the first distribution found among ``names`` (or of the
    distribution that provides a top-level module ``names[0]``), else None."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        dists = importlib.metadata.packages_distributions().get(names[0], [])
    except Exception:
        dists = []
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return None


def package_versions(extra=()):
    """Versions of the packages behind a bench result (None where not installed)."""
    versions = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": dist_version("numba"),
        "numba-cuda": dist_version("numba-cuda", "numba_cuda"),
        "cuda-bindings": dist_version("cuda-bindings", "cuda_bindings"),
        "numba_tma": dist_version("numba_tma", "numba-tma"),
        "torch": dist_version("torch"),
        "cupy": dist_version("cupy"),
    }
    for name in extra:
        versions.setdefault(name, dist_version(name))
    torch = sys.modules.get("torch")
    if torch is not None:
        versions["torch_cuda"] = getattr(torch.version, "cuda", None)
    return versions


def gpu_environment():
    """GPU name, compute capability, SM count, memory, driver version, CUDA runtime version.
    Every field falls back to None rather than raising (the header must always print)."""
    env = {"gpu": None, "compute_capability": None, "sm_count": None, "memory_GiB": None,
           "driver": None, "driver_version_int": None, "cuda_runtime": None,
           "host": platform.node()}
    try:
        from .._frontend import cuda

        dev = cuda.get_current_device()
        name = dev.name
        env["gpu"] = name.decode() if isinstance(name, bytes) else str(name)
        env["compute_capability"] = "%d.%d" % tuple(dev.compute_capability)
        env["sm_count"] = int(dev.MULTIPROCESSOR_COUNT)
    except Exception:
        pass
    try:
        from .._frontend import cuda

        env["memory_GiB"] = round(cuda.current_context().get_memory_info().total / 2**30, 2)
    except Exception:
        pass
    try:
        from cuda.bindings import driver as cudrv

        err, version = cudrv.cuDriverGetVersion()
        if int(err) == 0:
            env["driver_version_int"] = int(version)
            env["driver"] = f"{version // 1000}.{(version % 1000) // 10}"
    except Exception:
        pass
    if env["driver"] is None:
        try:
            from .._frontend import driver

            env["driver"] = "%d.%d" % tuple(driver.get_version())
        except Exception:
            pass
    try:
        from .._frontend import cuda

        env["cuda_runtime"] = "%d.%d" % tuple(cuda.runtime.get_version())
    except Exception:
        pass
    return env


def context_alive():
    """False once the CUDA context is lost (a sticky error such as an illegal instruction):
    nothing more can run in this process."""
    try:
        from .._frontend import cuda

        cuda.synchronize()
        return True
    except Exception:
        return False


def free_device_memory():
    """Give back cached device memory between configurations: Python garbage, numba's pending
    deallocations, torch's caching allocator and CuPy's pool (only those already imported)."""
    gc.collect()
    try:
        from .._frontend import cuda

        ctx = cuda.current_context()
        deallocs = getattr(ctx, "deallocations", None)
        if deallocs is None:
            deallocs = ctx.memory_manager.deallocations
        deallocs.clear()
    except Exception:
        pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception:
            pass
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        try:
            cupy.get_default_memory_pool().free_all_blocks()
        except Exception:
            pass
