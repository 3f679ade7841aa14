"""mbarrier: the 64-bit shared-memory transaction barrier (sm_80; transaction counts sm_90).

PTX ISA: "Parallel Synchronization and Communication Instructions: mbarrier".

A barrier is a ``uint64`` (or ``int64``) ``cuda.shared.array``; every function here works on the
array's first element, so barrier ``i`` of an array ``bars`` is passed as ``bars[i:]``.

A phase completes when its pending arrival count reaches zero *and* its transaction count (bytes
announced with ``expect_tx``/``arrive_expect_tx`` and delivered by TMA ``complete_tx``) is zero.
Waiters name the phase by its parity: the first phase is parity 0, then 1, 0, ...::

    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)               # every thread calls it; it synchronises
    if tid == 0:
        tma.load_tile(smem, desc, (y, x), bar) # arrive + expect the box's bytes, then load
    mbarrier.wait(bar, 0)                      # every thread waits on phase 0

Pitfalls: a barrier used before ``fence_init``/``cuda.syncthreads`` follows its ``init`` is a
race; announcing more bytes than the copies deliver (or arriving too few times) hangs ``wait``
(``wait_bounded`` returns instead); re-initialising a barrier that may still have pending
transactions needs ``inval`` first.

Debugging hangs: with the environment variable ``NUMBA_TMA_WAIT_TIMEOUT_NS`` set to a positive
number of nanoseconds when ``numba_tma`` is imported (it is read once, then; kernels compile
with the value in force), every ``wait`` -- in numba_tma's kernels and in yours -- and every
``cluster.mbarrier_wait`` becomes a bounded wait that, once the phase has not completed for that
long (``%globaltimer``), prints ``block (x, y, z) thread (x, y, z) barrier at shared 0x...
parity p`` with ``printf`` and executes ``trap``: the launch fails with a CUDA error (the
context is lost, as for any trap) instead of hanging the GPU. Unset, empty or ``0`` (the
default), ``wait`` is the plain ``try_wait`` loop: the SASS is the same as without the switch.
Kernels cached on disk (``cache=True``) keep the mode they were compiled in. Spins on other
memory can do the same with :func:`globaltimer` and :func:`trap` (the stream-K GEMM's wait for
another block's partial does).
"""

import os

import numpy as np

from ._frontend import address_int, cuda, globaltimer, overload, trap, types

from . import fence
from ._bridge import address_of, declare, host_call, require_array, require_int

__all__ = ["init", "inval", "fence_init", "arrive", "arrive_expect_tx", "expect_tx", "try_wait",
           "test_wait", "wait", "wait_bounded", "init_block", "trap", "globaltimer",
           "WAIT_TIMEOUT_NS"]

_vp, _u32, _u64 = types.voidptr, types.uint32, types.uint64
_init = declare("mbarrier", "numba_tma_mbarrier_init_shared_cta_b64", types.void(_vp, _u32))
_inval = declare("mbarrier", "numba_tma_mbarrier_inval_shared_cta_b64", types.void(_vp))
_fence_init = declare("mbarrier", "numba_tma_fence_mbarrier_init_release_cluster", types.void())
_arrive = declare("mbarrier", "numba_tma_mbarrier_arrive_shared_cta_b64", _u64(_vp, _u32))
_arrive_expect_tx = declare("mbarrier", "numba_tma_mbarrier_arrive_expect_tx_shared_cta_b64",
                            _u64(_vp, _u32))
_expect_tx = declare("mbarrier", "numba_tma_mbarrier_expect_tx_shared_cta_b64", types.void(_vp, _u32))
_try_wait = declare("mbarrier", "numba_tma_mbarrier_try_wait_parity_shared_cta_b64", _u32(_vp, _u32))
_test_wait = declare("mbarrier", "numba_tma_mbarrier_test_wait_parity_shared_cta_b64",
                     _u32(_vp, _u32))
_wait = declare("mbarrier", "numba_tma_mbarrier_wait_parity_shared_cta_b64", types.void(_vp, _u32))
_wait_bounded = declare("mbarrier", "numba_tma_mbarrier_wait_parity_bounded", _u32(_vp, _u32, _u64))


_BARRIER_DTYPES = (types.uint64, types.int64)
WAIT_TIMEOUT_ENV = "NUMBA_TMA_WAIT_TIMEOUT_NS"


def _wait_timeout_ns(environ=os.environ):
    """The ``NUMBA_TMA_WAIT_TIMEOUT_NS`` debug switch: a timeout in nanoseconds, or 0 (off)."""
    text = environ.get(WAIT_TIMEOUT_ENV, "").strip()
    if not text:
        return 0
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{WAIT_TIMEOUT_ENV} must be a whole number of nanoseconds (0 or unset "
                         f"for off), got {text!r}") from None
    if not 0 <= value < 2**64:
        raise ValueError(f"{WAIT_TIMEOUT_ENV} must be in 0 .. 2**64 - 1 nanoseconds, got {value}")
    return value


# Read once, at import: every kernel compiled in this process uses it (0: plain waits).
WAIT_TIMEOUT_NS = _wait_timeout_ns()


def wait_or_trap(bounded, what):
    """The ``NUMBA_TMA_WAIT_TIMEOUT_NS`` form of a wait: ``bounded(addr, parity, timeout)`` (a
    C bounded wait, 1 when the phase completed), then on timeout a report and a trap. ``what``
    ("mbarrier.wait", "cluster.mbarrier_wait") names the wait in the report."""
    timeout = WAIT_TIMEOUT_NS
    # Every integer printed as int64: numba-cuda-mlir formats each as %lld but passes the 32-bit
    # indices in 4 bytes, and vprintf then reads the next string's pointer from the wrong place
    # (an illegal address instead of the report).
    if what == "mbarrier.wait":
        @cuda.jit(device=True, inline=True)
        def report(addr, parity):
            print("numba_tma: mbarrier.wait timed out (NUMBA_TMA_WAIT_TIMEOUT_NS", timeout,
                  "ns): block",
                  np.int64(cuda.blockIdx.x), np.int64(cuda.blockIdx.y), np.int64(cuda.blockIdx.z),
                  "thread", np.int64(cuda.threadIdx.x), np.int64(cuda.threadIdx.y),
                  np.int64(cuda.threadIdx.z), "barrier at address", addr, "parity", parity)
    else:
        @cuda.jit(device=True, inline=True)
        def report(addr, parity):
            print("numba_tma: cluster.mbarrier_wait timed out (NUMBA_TMA_WAIT_TIMEOUT_NS",
                  timeout, "ns): block",
                  np.int64(cuda.blockIdx.x), np.int64(cuda.blockIdx.y), np.int64(cuda.blockIdx.z),
                  "thread", np.int64(cuda.threadIdx.x), np.int64(cuda.threadIdx.y),
                  np.int64(cuda.threadIdx.z), "barrier at address", addr, "parity", parity)

    def impl(bar, parity):
        p = parity & 1
        if bounded(address_of(bar), p, timeout) == 0:
            report(address_int(address_of(bar)), np.int64(p))
            trap()

    return impl


def _check_bar(fname, bar):
    require_array(f"mbarrier.{fname}", "bar", bar, dtypes=_BARRIER_DTYPES)


def init(bar, count):
    """Initialise the barrier for ``count`` arrivals per phase (1..2**20-1); its phase parity is 0.

    PTX: ``mbarrier.init.shared::cta.b64 [bar], count;`` SASS: ``SYNCS.EXCH.64``.
    Issued by: one thread. Follow it with ``fence_init()`` and a ``cuda.syncthreads()`` before any
    other thread or the TMA unit touches the barrier (``init_block`` does all three).
    """
    host_call("mbarrier.init")


def inval(bar):
    """Invalidate the barrier so its shared memory can be reused (or the barrier re-initialised).

    PTX: ``mbarrier.inval.shared::cta.b64 [bar];`` Issued by: one thread, once no thread waits on
    it and no transaction is pending.
    """
    host_call("mbarrier.inval")


def fence_init():
    """Make prior ``mbarrier.init``s visible to the async proxy and the cluster.

    PTX: ``fence.mbarrier_init.release.cluster;`` (sm_90). Issued by: the initialising thread,
    before the barrier (``cuda.syncthreads`` / cluster barrier) that publishes the barriers.
    """
    host_call("mbarrier.fence_init")


def arrive(bar, count=1):
    """Arrive ``count`` times (default 1) on the current phase; returns the phase state (uint64).

    PTX: ``mbarrier.arrive.shared::cta.b64 state, [bar], count;`` (release, CTA scope; the count
    operand is sm_90). Issued by: any thread, as many arrivals as ``init`` promised per phase.
    """
    host_call("mbarrier.arrive")


def arrive_expect_tx(bar, tx_bytes):
    """Announce ``tx_bytes`` more bytes for the current phase, then arrive once. Returns the state.

    PTX: ``mbarrier.arrive.expect_tx.shared::cta.b64 state, [bar], tx_bytes;`` (sm_90).
    Issued by: the thread that issues the TMA loads of this phase, with the exact sum of their box
    bytes (OOB-filled elements count). Too many bytes hang the waiters; too few let them read
    data still in flight. It may come before or after the loads it covers.
    """
    host_call("mbarrier.arrive_expect_tx")


def expect_tx(bar, tx_bytes):
    """Announce ``tx_bytes`` more bytes for the current phase without arriving.

    PTX: ``mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [bar], tx_bytes;`` (sm_90).
    Issued by: one thread, before the phase can complete (i.e. before its own or the last arrival).
    """
    host_call("mbarrier.expect_tx")


def try_wait(bar, parity):
    """True once the phase with this parity (0 or 1) has completed; may suspend briefly first.

    PTX: ``mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity;`` (sm_90). Acquire, CTA scope.
    Issued by: any thread; loop on it, or call ``wait``.
    """
    host_call("mbarrier.try_wait")


def test_wait(bar, parity):
    """True if the phase with this parity has completed; never blocks.

    PTX: ``mbarrier.test_wait.parity.shared::cta.b64 p, [bar], parity;`` Issued by: any thread.
    """
    host_call("mbarrier.test_wait")


def wait(bar, parity):
    """Block until the phase with this parity completes (a ``try_wait`` loop in PTX).

    Issued by: every thread that will read the data the phase guards. Pitfall: a phase that never
    completes (missing arrival, wrong byte count) hangs the kernel; debug with ``wait_bounded``,
    or set ``NUMBA_TMA_WAIT_TIMEOUT_NS`` before importing numba_tma: every ``wait`` then prints
    its block, thread, barrier address and parity after that many nanoseconds and traps (see
    the module docstring; off by default, when the SASS is the plain loop's).
    """
    host_call("mbarrier.wait")


def wait_bounded(bar, parity, timeout_ns):
    """Like ``wait`` but gives up after ``timeout_ns`` nanoseconds (``%globaltimer``).

    Returns True if the phase completed, False on timeout, so a lost transaction shows up as a
    flag (or a ``raise``-free early exit) instead of a hung GPU. Leave any loop on the first
    False (the phases after a lost one never complete either: each further wait costs another
    ``timeout_ns``). Not affected by ``NUMBA_TMA_WAIT_TIMEOUT_NS``.
    """
    host_call("mbarrier.wait_bounded")


def init_block(bars, count):
    """Safe composite: initialise every barrier of ``bars`` for ``count`` arrivals and publish them.

    Issued by: every thread of the block (it contains ``cuda.syncthreads``). Thread (0, 0, 0)
    runs ``init`` on each element, then ``fence_init`` and ``fence.proxy_async_shared``; the block
    then synchronises, so no thread or TMA copy can touch a barrier before it is initialised.
    """
    host_call("mbarrier.init_block")


@overload(init)
def _ov_init(bar, count):
    _check_bar("init", bar)
    require_int("mbarrier.init", "count", count)
    return lambda bar, count: _init(address_of(bar), count)


@overload(inval)
def _ov_inval(bar):
    _check_bar("inval", bar)
    return lambda bar: _inval(address_of(bar))


@overload(fence_init)
def _ov_fence_init():
    return lambda: _fence_init()


@overload(arrive)
def _ov_arrive(bar, count=1):
    _check_bar("arrive", bar)
    if not isinstance(count, (types.Integer, types.Omitted, int)):
        require_int("mbarrier.arrive", "count", count)
    return lambda bar, count=1: _arrive(address_of(bar), count)


@overload(arrive_expect_tx)
def _ov_arrive_expect_tx(bar, tx_bytes):
    _check_bar("arrive_expect_tx", bar)
    require_int("mbarrier.arrive_expect_tx", "tx_bytes", tx_bytes)
    return lambda bar, tx_bytes: _arrive_expect_tx(address_of(bar), tx_bytes)


@overload(expect_tx)
def _ov_expect_tx(bar, tx_bytes):
    _check_bar("expect_tx", bar)
    require_int("mbarrier.expect_tx", "tx_bytes", tx_bytes)
    return lambda bar, tx_bytes: _expect_tx(address_of(bar), tx_bytes)


@overload(try_wait)
def _ov_try_wait(bar, parity):
    _check_bar("try_wait", bar)
    require_int("mbarrier.try_wait", "parity", parity)
    return lambda bar, parity: _try_wait(address_of(bar), parity & 1) != 0


@overload(test_wait)
def _ov_test_wait(bar, parity):
    _check_bar("test_wait", bar)
    require_int("mbarrier.test_wait", "parity", parity)
    return lambda bar, parity: _test_wait(address_of(bar), parity & 1) != 0


@overload(wait)
def _ov_wait(bar, parity):
    _check_bar("wait", bar)
    require_int("mbarrier.wait", "parity", parity)
    if WAIT_TIMEOUT_NS:
        return wait_or_trap(_wait_bounded, "mbarrier.wait")
    return lambda bar, parity: _wait(address_of(bar), parity & 1)


@overload(wait_bounded)
def _ov_wait_bounded(bar, parity, timeout_ns):
    _check_bar("wait_bounded", bar)
    require_int("mbarrier.wait_bounded", "parity", parity)
    require_int("mbarrier.wait_bounded", "timeout_ns", timeout_ns)
    return lambda bar, parity, timeout_ns: _wait_bounded(address_of(bar), parity & 1,
                                                         timeout_ns) != 0


@overload(init_block)
def _ov_init_block(bars, count):
    require_array("mbarrier.init_block", "bars", bars, dtypes=_BARRIER_DTYPES, ndim=1)
    require_int("mbarrier.init_block", "count", count)

    def impl(bars, count):
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:
            for i in range(bars.size):
                _init(address_of(bars[i:]), count)
            _fence_init()
            fence.proxy_async_shared()
        cuda.syncthreads()

    return impl
