"""Offline (no GPU) checks of the NUMBA_TMA_WAIT_TIMEOUT_NS debug switch.

The switch is read once, when numba_tma is imported, so each mode is compiled in a subprocess
with the environment set. Off (unset, empty or 0): ``mbarrier.wait`` compiles to exactly the
SASS of the raw C wait it has always been (no trap, no printf CALL, nothing added). On: every
``mbarrier.wait`` and ``cluster.mbarrier_wait`` is a bounded wait followed by a ``vprintf``
report (its CALL is only ever present in this mode) and ``trap`` (``BPT.TRAP``)."""

import json
import os
import subprocess
import sys

import pytest

from numba_tma import mbarrier

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="offline compilation needs the real CUDA target")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Compiles three kernels in the mode the environment sets and prints their SASS mnemonics:
# one calling mbarrier.wait, the same calling the raw C wait (what wait was before the switch),
# and one calling cluster.mbarrier_wait.
SCRIPT = r'''
import json
import numpy as np
from numba_tma._frontend import cuda
from numba_tma import cluster, mbarrier
from numba_tma._bridge import address_of
from numba_tma.offline import compile_kernel

def waits(out, parity):
    bar = cuda.shared.array(2, np.uint64)
    mbarrier.init_block(bar, 1)
    if cuda.threadIdx.x == 0:
        mbarrier.arrive_expect_tx(bar, 64)
    mbarrier.wait(bar, parity)
    mbarrier.wait(bar[1:], parity + 1)
    out[cuda.threadIdx.x] = 1

def raw_waits(out, parity):
    bar = cuda.shared.array(2, np.uint64)
    mbarrier.init_block(bar, 1)
    if cuda.threadIdx.x == 0:
        mbarrier.arrive_expect_tx(bar, 64)
    mbarrier._wait(address_of(bar), parity & 1)
    mbarrier._wait(address_of(bar[1:]), (parity + 1) & 1)
    out[cuda.threadIdx.x] = 1

def cluster_wait(out, parity):
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    cluster.mbarrier_wait(bar, parity)
    out[cuda.threadIdx.x] = 1

res = {"timeout": mbarrier.WAIT_TIMEOUT_NS}
for name, k in (("wait", waits), ("raw", raw_waits), ("cluster", cluster_wait)):
    kb = compile_kernel(k, "void(int32[::1], int32)")
    res[name] = {"sass": kb.mnemonics(), "stack": kb.stack_bytes, "regs": kb.registers}
print("RESULT" + json.dumps(res))
'''


def compile_in_mode(value, script=SCRIPT, timeout=300):
    """Run ``script`` in a fresh process with the switch set to ``value`` (None: unset) and
    return the JSON it printed after ``RESULT``."""
    env = dict(os.environ)
    env.pop(mbarrier.WAIT_TIMEOUT_ENV, None)
    if value is not None:
        env[mbarrier.WAIT_TIMEOUT_ENV] = value
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + [p for p in [env.get("PYTHONPATH")] if p])
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


@pytest.fixture(scope="module")
def off():
    return compile_in_mode(None)


def test_off_is_the_plain_wait(off):
    assert off["timeout"] == 0
    # mbarrier.wait is instruction for instruction the raw C try_wait loop.
    assert off["wait"]["sass"] == off["raw"]["sass"]
    for name in ("wait", "cluster"):
        sass = off[name]["sass"]
        assert not any(op.startswith("BPT") for op in sass), name
        assert not any(op.startswith("CALL") for op in sass), name
        assert sum(op.startswith("SYNCS.PHASECHK.TRANS64.TRYWAIT") for op in sass) >= 1
        assert off[name]["stack"] == 0


@pytest.mark.parametrize("value", ["", "0"])
def test_empty_and_zero_are_off(off, value):
    res = compile_in_mode(value)
    assert res["timeout"] == 0
    assert res["wait"]["sass"] == off["wait"]["sass"]
    assert res["cluster"]["sass"] == off["cluster"]["sass"]


def test_on_traps_and_prints():
    res = compile_in_mode("2000000000")
    assert res["timeout"] == 2_000_000_000
    for name in ("wait", "cluster"):
        sass = res[name]["sass"]
        # One bounded wait, report (vprintf: the only CALL) and trap per wait call.
        calls = 2 if name == "wait" else 1
        assert sum(op.startswith("BPT.TRAP") for op in sass) == calls, name
        assert sum(op.startswith("CALL") for op in sass) == calls, name
        assert any(op.startswith("SYNCS.PHASECHK.TRANS64.TRYWAIT") for op in sass), name
    # The raw C wait is untouched by the switch (only the public wrappers change).
    assert not any(op.startswith("BPT") for op in res["raw"]["sass"])


def test_switch_parsing():
    env = mbarrier.WAIT_TIMEOUT_ENV
    assert mbarrier._wait_timeout_ns({}) == 0
    assert mbarrier._wait_timeout_ns({env: " "}) == 0
    assert mbarrier._wait_timeout_ns({env: "0"}) == 0
    assert mbarrier._wait_timeout_ns({env: "5000000000"}) == 5_000_000_000
    with pytest.raises(ValueError, match="whole number of nanoseconds.*'2s'"):
        mbarrier._wait_timeout_ns({env: "2s"})
    with pytest.raises(ValueError, match="0 .. 2\\*\\*64 - 1"):
        mbarrier._wait_timeout_ns({env: "-1"})


# The stream-K GEMM's wait for another block's partial (an atomic spin on its flag, not an
# mbarrier) follows the same switch: on, it is bounded by %globaltimer and ends in a report and
# a trap; off, no trap at all. The stream-K kernel holds the per-tile loops twice (whole tiles,
# then shares), each with its mbarrier waits, plus the flag wait and the fix-up's wait for the
# partials it copies: twice the traps of the kernel without stream-K, plus two.
GEMM_SCRIPT = r'''
import json
from numba_tma import mbarrier
from numba_tma.kernels.gemm import KernelSpec, WgmmaConfig
from numba_tma.ladders.gemm_stream_k import StreamKConfig
from numba_tma.offline import compile_kernel
res = {"timeout": mbarrier.WAIT_TIMEOUT_NS}
for sk in (False, True):
    cfg = StreamKConfig(256) if sk else WgmmaConfig(256)
    kb = compile_kernel(cfg.kernel(KernelSpec(True, True, "f16", "f16", False)), cfg.signature)
    res[str(sk)] = {"traps": sum(op.startswith("BPT.TRAP") for op in kb.mnemonics()),
                    "timer": "GLOBALTIMER" in kb.sass}
print("RESULT" + json.dumps(res))
'''


@pytest.mark.parametrize("value", [None, "2000000000"])
def test_stream_k_flag_wait_follows_the_switch(value):
    res = compile_in_mode(value, GEMM_SCRIPT, timeout=600)
    if value is None:
        assert res["False"]["traps"] == res["True"]["traps"] == 0
    else:
        assert res["False"]["traps"] > 0 and res["True"]["timer"]
        assert res["True"]["traps"] == 2 * res["False"]["traps"] + 2
