"""Fan simulator cases out to worker processes: the CUDA simulator is chosen at import time
(NUMBA_ENABLE_CUDASIM=1), so a test module that runs kernels under it re-executes itself as a
child, reads its cases as JSON on stdin and prints one JSON line ``{"id", "err", ...}`` per case."""

import json
import os
import subprocess
import sys

import pytest

import numba_tma

WORKERS = 2
TIMEOUT_S = 600
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: For the tests that run kernels under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1): it is
#: numba-cuda's (``numba.cuda.simulator``); numba-cuda-mlir has none, and its front end would
#: compile for the GPU whatever that variable says.
needs_simulator = pytest.mark.skipif(
    numba_tma.front_end() != "numba-cuda",
    reason="the CUDA simulator (NUMBA_ENABLE_CUDASIM) is numba-cuda's; numba-cuda-mlir has none")


def run_cases(script, cases, workers=WORKERS, timeout_s=TIMEOUT_S):
    """Run ``script`` in ``workers`` simulator processes over ``cases`` (round-robin), each case's
    first item its id. Returns ``({id: result line}, [worker errors])``; the numba_tma the tests
    import (installed or this checkout) is the one the workers import."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(numba_tma.__file__)))
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1",
           "PYTHONPATH": os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")])}
    procs = []
    for w in range(workers):
        p = subprocess.Popen([sys.executable, os.path.abspath(script)], env=env, cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        procs.append((p, cases[w::workers]))
    results, errors = {}, []
    for p, mine in procs:
        try:
            stdout, stderr = p.communicate(json.dumps(mine), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            p.kill()
            stdout, stderr = p.communicate()
            errors.append(f"simulator worker timed out after {timeout_s} s")
        for line in stdout.splitlines():
            if line.startswith("{"):
                r = json.loads(line)
                results[r["id"]] = r
        if p.returncode:
            errors.append(f"simulator worker exited {p.returncode}:\n{stderr[-3000:]}")
    return results, errors
