"""NUMBA_TMA_WAIT_TIMEOUT_NS on the GPU: a hang becomes an error with a report.

A kernel announces 16 bytes more than its TMA load delivers (a deliberately wrong expect_tx), so
its phase never completes and a plain ``mbarrier.wait`` would hang the GPU. In a subprocess with
the switch at 1 s, the launch must fail within 10 s with a CUDA error, after printing the wait's
block, thread, barrier address and parity. Before that, in the same mode, the same kernel with
the right count and the library's add_one give right answers (the bounded wait still waits).
The subprocess's own timeout guards this test against a hang (the switch not working)."""

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r'''
import sys, time
import numpy as np
from numba_tma._frontend import cuda
from numba_tma import TensorMap, mbarrier, tma
from numba_tma.ladders.add_one import add_one

assert mbarrier.WAIT_TIMEOUT_NS == 1_000_000_000, mbarrier.WAIT_TIMEOUT_NS
ROWS, COLS = 16, 16
TILE = ROWS * COLS

@cuda.jit
def load_plus(desc, out, extra):
    tile = cuda.shared.array(TILE, np.int32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    if cuda.threadIdx.x == 0:
        if extra:
            mbarrier.expect_tx(bar, extra)     # bytes no copy will deliver
        tma.load_tile(tile, desc, (0, 0), bar)
    mbarrier.wait(bar, 0)
    for i in range(cuda.threadIdx.x, TILE, cuda.blockDim.x):
        out[i] = tile[i] + 1

a = np.arange(ROWS * COLS, dtype=np.int32).reshape(ROWS, COLS)
d = cuda.to_device(a)
desc = TensorMap(d, box=(ROWS, COLS))
out = cuda.to_device(np.zeros(ROWS * COLS, np.int32))
load_plus[1, 64](desc, out, 0)                 # right count: completes in debug mode
assert (out.copy_to_host() == a.ravel() + 1).all()
b = cuda.to_device(a)
add_one(b)                                     # a library kernel compiled in debug mode
assert (b.copy_to_host() == a + 1).all()
print("CONTROLS OK", flush=True)

t0 = time.perf_counter()
try:
    load_plus[2, 64](desc, out, 16)
    cuda.synchronize()
except Exception as exc:
    print(f"FAILED after {time.perf_counter() - t0:.2f} s: {type(exc).__name__}: {exc}",
          flush=True)
    sys.exit(3)
print("NO ERROR", flush=True)
'''


def test_wrong_expect_tx_traps_with_a_report():
    env = dict(os.environ, NUMBA_TMA_WAIT_TIMEOUT_NS="1000000000")
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=180)
    text = proc.stdout + proc.stderr
    assert "CONTROLS OK" in proc.stdout, text[-4000:]
    assert proc.returncode == 3, f"the bad launch did not fail (rc {proc.returncode}):\n{text[-4000:]}"
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED after")]
    assert failed, text[-4000:]
    seconds = float(failed[0].split()[2])
    assert seconds < 10, failed[0]
    # The device report: which wait, which block and thread, which barrier and parity.
    reports = [ln for ln in text.splitlines() if "mbarrier.wait timed out" in ln]
    assert reports, f"no timeout report printed:\n{text[-4000:]}"
    assert all(s in reports[0] for s in ("block", "thread", "barrier at address", "parity 0")), \
        reports[0]
    assert "NUMBA_TMA_WAIT_TIMEOUT_NS 1000000000 ns" in reports[0], reports[0]
