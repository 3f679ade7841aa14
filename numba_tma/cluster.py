"""Thread-block clusters (sm_90): cluster coordinates, the cluster barrier, distributed shared
memory (DSMEM) and mbarriers shared across the CTAs of a cluster.

PTX ISA: "Special Registers" (``%cluster_ctarank`` ...), "barrier.cluster", "mapa",
"ld"/"st" with ``.shared::cluster``, "mbarrier.arrive" with ``.shared::cluster``.

A kernel runs in clusters only when launched with a cluster shape
(:func:`numba_tma.launch.launch_cluster`); otherwise every CTA is a cluster of one (rank 0 of 1).
The CTAs of a cluster run at the same time on one GPC and can read, write and arrive on each
other's shared memory. Every CTA of a cluster has the same shared-memory layout, so the same
variable sits at the same offset in each; :func:`map_shared` gives its address in CTA ``rank``.

The rule for remote shared memory: a CTA must not exit (nor reuse a buffer) while a peer may still
access its shared memory, and must not touch a peer's memory before the peer has initialised it.
Both are what :func:`sync` (all threads of every CTA of the cluster) is for::

    bar = cuda.shared.array(1, np.uint64)
    box = cuda.shared.array(32, np.uint32)
    if tid == 0:
        mbarrier.init(bar, 1)
        mbarrier.fence_init()              # release.cluster: peers may now use the barrier
    cluster.sync()                          # CORRECT: nobody touches a peer before this
    peer = (cluster.cta_rank() + 1) % cluster.num_ctas()
    cluster.store_u32(cluster.map_shared(box, peer) + 4 * tid, value)
    cluster.sync()                          # the peer's writes into `box` are now visible
    ... read box ...
    cluster.sync()                          # CORRECT: no CTA exits while a peer may write to it
    # WRONG: returning without the last sync: a peer's remote store into an exited CTA's shared
    # memory is undefined (on the H100 it may fault or hang the cluster).

Values are uint32; coordinates come as (x, y, z) tuples, x first, like ``cuda.blockIdx``.
"""

from ._frontend import overload, types

from . import mbarrier as _mbarrier
from ._bridge import address_of, declare, host_call, require_array, require_int

__all__ = ["cta_rank", "num_ctas", "cta_id", "dim", "cluster_id", "grid_dim",
           "arrive", "arrive_release", "arrive_relaxed", "wait", "wait_acquire", "sync",
           "map_shared", "load_u32", "store_u32",
           "mbarrier_arrive", "mbarrier_arrive_cta", "mbarrier_try_wait", "mbarrier_wait", "mbarrier_wait_bounded",
           "MAX_PORTABLE_CLUSTER_SIZE", "MAX_CLUSTER_SIZE", "MULTICAST_MASK_BITS"]

#: CTAs per cluster every sm_90 GPU launches (``cudaOccupancyMaxPotentialClusterSize``'s floor).
MAX_PORTABLE_CLUSTER_SIZE = 8
#: CTAs per cluster an H100 accepts after the non-portable opt-in.
MAX_CLUSTER_SIZE = 16
#: Bits of a TMA multicast ``ctaMask``: one per cluster rank.
MULTICAST_MASK_BITS = 16

_vp, _u32, _u64 = types.voidptr, types.uint32, types.uint64


def _sreg(name):
    return declare("cluster", f"numba_tma_sreg_{name}", _u32())


_ctarank = _sreg("cluster_ctarank")
_nctarank = _sreg("cluster_nctarank")
_ctaid = tuple(_sreg(f"cluster_ctaid_{a}") for a in "xyz")
_nctaid = tuple(_sreg(f"cluster_nctaid_{a}") for a in "xyz")
_clusterid = tuple(_sreg(f"clusterid_{a}") for a in "xyz")
_nclusterid = tuple(_sreg(f"nclusterid_{a}") for a in "xyz")

_arrive = declare("cluster", "numba_tma_barrier_cluster_arrive", types.void())
_arrive_release = declare("cluster", "numba_tma_barrier_cluster_arrive_release", types.void())
_arrive_relaxed = declare("cluster", "numba_tma_barrier_cluster_arrive_relaxed", types.void())
_wait = declare("cluster", "numba_tma_barrier_cluster_wait", types.void())
_wait_acquire = declare("cluster", "numba_tma_barrier_cluster_wait_acquire", types.void())

_mapa = declare("cluster", "numba_tma_mapa_shared_cluster_u32", _u32(_vp, _u32))
_ld = declare("cluster", "numba_tma_ld_shared_cluster_u32", _u32(_u32))
_st = declare("cluster", "numba_tma_st_shared_cluster_u32", types.void(_u32, _u32))

_mbar_arrive = declare("cluster", "numba_tma_mbarrier_arrive_release_cluster_shared_cluster_b64",
                       types.void(_u32, _u32))
_mbar_arrive_cta = declare("cluster", "numba_tma_mbarrier_arrive_release_cta_shared_cluster_b64",
                           types.void(_u32, _u32))
_mbar_try_wait = declare(
    "cluster", "numba_tma_mbarrier_try_wait_parity_acquire_cluster_shared_cta_b64", _u32(_vp, _u32))
_mbar_wait = declare(
    "cluster", "numba_tma_mbarrier_wait_parity_acquire_cluster_shared_cta_b64",
    types.void(_vp, _u32))
_mbar_wait_bounded = declare(
    "cluster", "numba_tma_mbarrier_wait_parity_acquire_cluster_bounded", _u32(_vp, _u32, _u64))

_BARRIER_DTYPES = (types.uint64, types.int64)


# ------------------------------------------------------------------------------------------
# coordinates

def cta_rank():
    """This CTA's rank in its cluster, 0 .. ``num_ctas() - 1`` (uint32).

    PTX: ``mov.u32 r, %cluster_ctarank;`` (sm_90). SASS: ``S2R`` of ``SR_CgaCtaId``.
    The rank is x-fastest: ``x + nx * (y + ny * z)`` of ``cta_id()``. It is the bit position of
    this CTA in a TMA multicast ``cta_mask`` and the ``cta_rank`` of ``map_shared``.
    Issued by: any thread.
    """
    host_call("cluster.cta_rank")


def num_ctas():
    """CTAs in this CTA's cluster (uint32; 1 without a cluster launch).

    PTX: ``mov.u32 r, %cluster_nctarank;`` (sm_90). Issued by: any thread.
    """
    host_call("cluster.num_ctas")


def cta_id():
    """This CTA's (x, y, z) position inside its cluster (uint32 each).

    PTX: ``%cluster_ctaid.{x,y,z}`` (sm_90). Equals ``blockIdx % cluster shape`` per axis
    (ptxas computes it so, from ``SR_CTAID`` and the launch's cluster shape).
    """
    host_call("cluster.cta_id")


def dim():
    """The cluster's shape in CTAs, (x, y, z) (uint32 each): the launch's ``cluster``.

    PTX: ``%cluster_nctaid.{x,y,z}`` (sm_90).
    """
    host_call("cluster.dim")


def cluster_id():
    """This cluster's (x, y, z) position in the grid, in clusters (``blockIdx // cluster``).

    PTX: ``%clusterid.{x,y,z}`` (sm_90).
    """
    host_call("cluster.cluster_id")


def grid_dim():
    """The grid's shape in clusters, (x, y, z) (``gridDim // cluster``).

    PTX: ``%nclusterid.{x,y,z}`` (sm_90).
    """
    host_call("cluster.grid_dim")


# ------------------------------------------------------------------------------------------
# the cluster barrier

def arrive():
    """Arrive on the cluster barrier (default semantics: release at cluster scope).

    PTX: ``barrier.cluster.arrive;`` (sm_90). SASS: ``MEMBAR.ALL.CTA``, ``MEMBAR.ALL.GPU`` (the
    release), ``UCGABAR_ARV``; ptxas adds a run-time branch on a launch constant whose other path
    (a launch without a cluster) skips the arrive and makes ``wait`` a ``BAR.SYNC``.
    Issued by: every thread of every CTA of the cluster (exited threads count as arrived), once
    per phase, then ``wait``. Work between ``arrive`` and ``wait`` overlaps the barrier.
    """
    host_call("cluster.arrive")


def arrive_release():
    """``barrier.cluster.arrive.release;``: like ``arrive``, the release spelled out (sm_90)."""
    host_call("cluster.arrive_release")


def arrive_relaxed():
    """Arrive without ordering memory: ``barrier.cluster.arrive.relaxed;`` (sm_90).

    SASS: ``UCGABAR_ARV`` alone (no ``MEMBAR``).
    For pure execution barriers (e.g. "every CTA of the cluster has started"); pair with a
    ``wait`` that needs no data from the peers. Pitfall: writes before it need not be visible to
    the peers after their wait.
    """
    host_call("cluster.arrive_relaxed")


def wait():
    """Wait until every thread of the cluster has arrived (acquire at cluster scope).

    PTX: ``barrier.cluster.wait;`` (sm_90). SASS: ``UCGABAR_WAIT``, ``CCTL.IVALL`` (the acquire
    drops stale L1 lines). Issued by: every thread that
    arrived, before its next ``arrive``. Pitfall: it cannot time out; a missing arrival hangs.
    """
    host_call("cluster.wait")


def wait_acquire():
    """``barrier.cluster.wait.acquire;``: like ``wait``, the acquire spelled out (sm_90)."""
    host_call("cluster.wait_acquire")


def sync():
    """Composite: ``arrive_release()`` then ``wait_acquire()``: a cluster-wide ``syncthreads``.

    Issued by: every thread of every CTA of the cluster. Use it after initialising barriers
    (before any peer or multicast touches them) and before exiting (so no peer still accesses
    this CTA's shared memory). Writes before it, local or remote, are visible to every thread
    of the cluster after it.
    """
    host_call("cluster.sync")


# ------------------------------------------------------------------------------------------
# distributed shared memory

def map_shared(arr, cta_rank):
    """The shared::cluster address (uint32) of ``arr``'s first element in the CTA of ``cta_rank``.

    PTX: ``mapa.shared::cluster.u32 d, cvta.to.shared(arr), cta_rank;`` (sm_90). SASS: one
    ``PRMT`` (the rank goes into the address's CTA byte; no memory access). ``arr`` is a ``cuda.shared.array`` (or a slice of one); the
    result addresses the same variable in the peer and may be offset by bytes (``+ 4 * i``).
    Use it with ``load_u32``/``store_u32``. ``cta_rank`` must be < ``num_ctas()``.
    """
    host_call("cluster.map_shared")


def load_u32(addr):
    """Load the 32-bit word at shared::cluster address ``addr`` (possibly a peer CTA's).

    PTX: ``ld.shared::cluster.u32 v, [addr];`` (sm_90). SASS: ``LD.E`` through the shared
    window (``SR_SWINHI``). ``addr`` comes from
    ``map_shared`` and is 4-byte aligned. A weak load: order it after the peer's writes with
    ``sync`` or a cluster-scope mbarrier (``mbarrier_arrive`` + ``mbarrier_wait``).
    """
    host_call("cluster.load_u32")


def store_u32(addr, value):
    """Store the 32-bit ``value`` at shared::cluster address ``addr`` (possibly a peer CTA's).

    PTX: ``st.shared::cluster.u32 [addr], value;`` (sm_90). SASS: ``ST.E`` through the shared
    window. A weak store:
    publish it with ``sync`` or a release ``mbarrier_arrive`` on the reader's barrier.
    """
    host_call("cluster.store_u32")


# ------------------------------------------------------------------------------------------
# mbarriers across the cluster

def mbarrier_arrive(bar, cta_rank, count=1):
    """Arrive ``count`` times on barrier ``bar`` of the CTA with rank ``cta_rank`` (release, cluster).

    PTX: ``mapa.shared::cluster.u32 a, bar, cta_rank;``
    ``mbarrier.arrive.release.cluster.shared::cluster.b64 _, [a], count;`` (sm_90).
    SASS: ``PRMT`` (mapa with a run-time rank), ``MEMBAR.ALL.CTA``, ``MEMBAR.ALL.GPU`` (the
    cluster-scope release), ``SYNCS.ARRIVE.TRANS64.RED``. Returns nothing (a remote arrive has no
    state). Use it when the arrival publishes data (``store_u32`` into the target CTA); to hand
    back a stage of shared memory, the cheaper ``mbarrier_arrive_cta`` suffices.
    ``bar`` is the local barrier array: the same variable is addressed in the target CTA
    (``cta_rank == cta_rank()`` arrives locally, with cluster-scope release).
    Issued by: any thread; typically one thread per consumer CTA after the CTA finished reading a
    stage (``cuda.syncthreads()`` first), arriving on the producer CTA's "empty" barrier so it
    may overwrite the stage (multicast writes into every CTA of the mask).
    """
    host_call("cluster.mbarrier_arrive")


def mbarrier_arrive_cta(bar, cta_rank, count=1):
    """Arrive on barrier ``bar`` of CTA ``cta_rank`` with CTA-scope release (no fence).

    PTX: ``mapa.shared::cluster.u32 a, bar, cta_rank;``
    ``mbarrier.arrive.release.cta.shared::cluster.b64 _, [a], count;`` (sm_90; the PTX default
    semantics, as CUTLASS's ``ClusterBarrier::arrive(cta_id)``). SASS: ``SYNCS.ARRIVE.TRANS64.RED``
    with no ``MEMBAR``. For the consumer-release of a multicast pipeline: after the consumer CTA's
    threads finished reading a stage (``cuda.syncthreads()``), one thread arrives on the "empty"
    barrier of each CTA that multicasts into that stage. Pitfall: it does not publish this
    thread's writes to other CTAs (use ``mbarrier_arrive`` for that).
    """
    host_call("cluster.mbarrier_arrive_cta")


def mbarrier_try_wait(bar, parity):
    """Like ``mbarrier.try_wait`` with cluster-scope acquire: True once the phase completed.

    PTX: ``mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [bar], parity;`` (sm_90).
    Use it (or ``mbarrier_wait``) when the phase was completed by remote arrivals that release
    data written with ``store_u32`` (the default CTA-scope acquire does not cover peers).
    """
    host_call("cluster.mbarrier_try_wait")


def mbarrier_wait(bar, parity):
    """Block until the phase with this parity completes, acquiring at cluster scope.

    With ``NUMBA_TMA_WAIT_TIMEOUT_NS`` set at import it prints and traps after that long, as
    ``mbarrier.wait`` does (see :mod:`numba_tma.mbarrier`).
    """
    host_call("cluster.mbarrier_wait")


def mbarrier_wait_bounded(bar, parity, timeout_ns):
    """``mbarrier_wait`` that gives up after ``timeout_ns`` (``%globaltimer``); True if completed."""
    host_call("cluster.mbarrier_wait_bounded")


# ------------------------------------------------------------------------------------------
# implementations

@overload(cta_rank)
def _ov_cta_rank():
    return lambda: _ctarank()


@overload(num_ctas)
def _ov_num_ctas():
    return lambda: _nctarank()


def _xyz(fns):
    fx, fy, fz = fns
    return lambda: (fx(), fy(), fz())


@overload(cta_id)
def _ov_cta_id():
    return _xyz(_ctaid)


@overload(dim)
def _ov_dim():
    return _xyz(_nctaid)


@overload(cluster_id)
def _ov_cluster_id():
    return _xyz(_clusterid)


@overload(grid_dim)
def _ov_grid_dim():
    return _xyz(_nclusterid)


@overload(arrive)
def _ov_arrive():
    return lambda: _arrive()


@overload(arrive_release)
def _ov_arrive_release():
    return lambda: _arrive_release()


@overload(arrive_relaxed)
def _ov_arrive_relaxed():
    return lambda: _arrive_relaxed()


@overload(wait)
def _ov_wait():
    return lambda: _wait()


@overload(wait_acquire)
def _ov_wait_acquire():
    return lambda: _wait_acquire()


@overload(sync)
def _ov_sync():
    def impl():
        _arrive_release()
        _wait_acquire()

    return impl


@overload(map_shared)
def _ov_map_shared(arr, cta_rank):
    require_array("cluster.map_shared", "arr", arr)
    require_int("cluster.map_shared", "cta_rank", cta_rank)
    return lambda arr, cta_rank: _mapa(address_of(arr), cta_rank)


@overload(load_u32)
def _ov_load_u32(addr):
    require_int("cluster.load_u32", "addr", addr)
    return lambda addr: _ld(addr)


@overload(store_u32)
def _ov_store_u32(addr, value):
    require_int("cluster.store_u32", "addr", addr)
    require_int("cluster.store_u32", "value", value)
    return lambda addr, value: _st(addr, value)


def _check_bar(fname, bar):
    require_array(f"cluster.{fname}", "bar", bar, dtypes=_BARRIER_DTYPES)


@overload(mbarrier_arrive)
def _ov_mbarrier_arrive(bar, cta_rank, count=1):
    _check_bar("mbarrier_arrive", bar)
    require_int("cluster.mbarrier_arrive", "cta_rank", cta_rank)
    if not isinstance(count, (types.Omitted, int)):
        require_int("cluster.mbarrier_arrive", "count", count)
    return lambda bar, cta_rank, count=1: _mbar_arrive(_mapa(address_of(bar), cta_rank), count)


@overload(mbarrier_arrive_cta)
def _ov_mbarrier_arrive_cta(bar, cta_rank, count=1):
    _check_bar("mbarrier_arrive_cta", bar)
    require_int("cluster.mbarrier_arrive_cta", "cta_rank", cta_rank)
    if not isinstance(count, (types.Omitted, int)):
        require_int("cluster.mbarrier_arrive_cta", "count", count)
    return lambda bar, cta_rank, count=1: _mbar_arrive_cta(_mapa(address_of(bar), cta_rank),
                                                           count)


@overload(mbarrier_try_wait)
def _ov_mbarrier_try_wait(bar, parity):
    _check_bar("mbarrier_try_wait", bar)
    require_int("cluster.mbarrier_try_wait", "parity", parity)
    return lambda bar, parity: _mbar_try_wait(address_of(bar), parity & 1) != 0


@overload(mbarrier_wait)
def _ov_mbarrier_wait(bar, parity):
    _check_bar("mbarrier_wait", bar)
    require_int("cluster.mbarrier_wait", "parity", parity)
    if _mbarrier.WAIT_TIMEOUT_NS:       # debug switch: bounded, then report and trap
        return _mbarrier.wait_or_trap(_mbar_wait_bounded, "cluster.mbarrier_wait")
    return lambda bar, parity: _mbar_wait(address_of(bar), parity & 1)


@overload(mbarrier_wait_bounded)
def _ov_mbarrier_wait_bounded(bar, parity, timeout_ns):
    _check_bar("mbarrier_wait_bounded", bar)
    require_int("cluster.mbarrier_wait_bounded", "parity", parity)
    require_int("cluster.mbarrier_wait_bounded", "timeout_ns", timeout_ns)
    return lambda bar, parity, timeout_ns: _mbar_wait_bounded(address_of(bar), parity & 1,
                                                              timeout_ns) != 0
