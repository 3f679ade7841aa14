import os
import shutil
import subprocess

import pytest

import parallel_run


class GpuUnusable(RuntimeError):
    """nvidia-smi lists a GPU but CUDA cannot use it: the GPU tests must not skip quietly."""


def gpu_listed(which=shutil.which, run=subprocess.run):
    """Whether ``nvidia-smi -L`` lists a GPU here (the driver's view, independent of numba's)."""
    exe = which("nvidia-smi")
    if exe is None:
        return False
    try:
        proc = run([exe, "-L"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and "GPU " in proc.stdout


def skip_or_raise(problem, listed):
    """The skip reason for ``problem`` (why CUDA cannot run the GPU tests; None: it can), or
    GpuUnusable when ``listed()`` says a GPU is there: a broken CUDA install on a GPU machine
    is an error, not a reason to skip every GPU test."""
    if problem is not None and listed():
        raise GpuUnusable(f"nvidia-smi lists a GPU, but {problem}. Fix the CUDA install (or the "
                          f"wheels): on this machine every GPU test would be skipped.")
    return problem


def sm90_skip_reason(listed=gpu_listed):
    """Why the GPU tests cannot run here, or None when an sm_90 GPU is present. Raises
    GpuUnusable where nvidia-smi sees a GPU that CUDA cannot use."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        # Under the simulator cc checks pass, but nothing here runs there.
        return "the CUDA simulator cannot run TMA/mbarrier inline PTX"
    try:
        from numba_tma._frontend import cuda

        if not cuda.is_available():
            return skip_or_raise("no CUDA driver or GPU on this machine", listed)
        cc = cuda.get_current_device().compute_capability
    except GpuUnusable:
        raise
    except Exception as exc:
        return skip_or_raise(f"CUDA is unusable here: {exc}", listed)
    if cc < (9, 0):
        return f"TMA needs compute capability 9.0 (Hopper); this GPU is {cc[0]}.{cc[1]}"
    return None


def pytest_addoption(parser):
    parallel_run.add_option(parser)


def pytest_configure(config):
    config.pluginmanager.register(parallel_run.Parallel(config), "numba_tma_parallel")
    # CI (.ci/run) tests the installed package, not this checkout's sources: with
    # NUMBA_TMA_EXPECT_INSTALLED=1 an import from the checkout is an error.
    if os.environ.get("NUMBA_TMA_EXPECT_INSTALLED") == "1":
        import numba_tma

        checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if os.path.abspath(numba_tma.__file__).startswith(checkout + os.sep):
            raise pytest.UsageError(f"numba_tma was imported from the checkout "
                                    f"({numba_tma.__file__}), not from the installed package")


_gpu_skip = []          # the reason every GPU test skips for on this machine, once known


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # One line for the GPU tests' common skip under -rs (not one per test function): the
    # report's location becomes tests/gpu, which pytest's summary folds on.
    rep = (yield).get_result()
    if rep.skipped and _gpu_skip and isinstance(rep.longrepr, tuple) and \
            rep.longrepr[2] == "Skipped: " + _gpu_skip[0]:
        rep.longrepr = (os.path.join("tests", "gpu"), None, rep.longrepr[2])


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords or os.sep + "gpu" + os.sep in str(item.fspath):
            if not checked:
                try:
                    reason, checked = sm90_skip_reason(), True
                except GpuUnusable as exc:
                    pytest.exit(str(exc), returncode=3)
            item.add_marker(pytest.mark.gpu)
            if reason:
                _gpu_skip[:] = [reason]
                item.add_marker(pytest.mark.skip(reason=reason))
