"""TMA tile-mode bulk tensor copies (sm_90) and bulk async-groups, for numba kernels.

PTX ISA: "Data Movement and Conversion Instructions: cp.async.bulk.tensor" and
"cp.async.bulk.commit_group / cp.async.bulk.wait_group".

``desc`` is a :class:`numba_tma.TensorMap` passed to the kernel as-is (it arrives as the 1-D
uint64 array holding the 128-byte descriptor in global memory). ``coords`` is a tuple of 1 to 5
integers in the array's own (numpy, outermost-first) order, like the TensorMap's ``box``: the
element index of the box's first corner. Coordinates are signed int32 and may lie outside the
tensor: loads fill the missing elements (zeros, or NaN with ``oob_fill="nan"``), stores skip them.

Pitfalls, measured on the H100, where a violation makes the TMA unit fault and the kernel die with
``CUDA_ERROR_ILLEGAL_INSTRUCTION`` (the CUDA context is lost):
- the innermost coordinate (``coords[-1]``) times the element size must be a multiple of 16 bytes,
  for loads and stores, negative coordinates included; outer coordinates are free;
- a store's coordinates must all be >= 0 (a box past the end is clipped; one starting before the
  tensor faults). Loads take negative coordinates and fill what lies outside.

The shared-memory operand is the ``cuda.shared.array`` itself (its first element): declare it
with ``alignment=128`` (the swizzle period, up to 1024, with a swizzled map) and the map's
``smem_bytes`` (with a swizzle every box row takes a whole span, also when the box is narrower).

A TMA load, issued by one thread, completing on an mbarrier::

    if tid == 0:
        mbarrier.arrive_expect_tx(bar, smem.size * smem.itemsize)
        tma.load(smem, desc, (y, x), bar)
    mbarrier.wait(bar, phase)                   # CORRECT: every reader waits on the barrier

A TMA store, issued by one thread after the writers fenced and the block synchronised::

    fence.proxy_async_shared(); cuda.syncthreads()
    if tid == 0:
        tma.store(desc, (y, x), smem)
        tma.commit_group()
        tma.wait_group_read(0)                  # before smem is written again
    # WRONG: rewriting smem before wait_group_read lets the engine read the new values.
"""

from numba import cuda, types
from numba.core import errors
from numba.cuda.extending import overload

from . import fence, mbarrier
from ._bridge import address_of, declare, host_call, literal_int, require_array, require_int

__all__ = ["load", "store", "commit_group", "wait_group", "wait_group_read",
           "load_tile", "store_async", "store_tile", "MAX_PENDING_GROUPS"]

TMA_MAX_RANK = 5
# cp.async.bulk.wait_group takes its pending count as an immediate; ptx/tma.cu has 0..7.
MAX_PENDING_GROUPS = 7

_vp, _i32 = types.voidptr, types.int32


def _declare_rank(rank):
    coords = (_i32,) * rank
    load_ = declare("tma", f"numba_tma_cp_async_bulk_tensor_{rank}d_global_to_shared",
                    types.void(_vp, _vp, _vp, *coords))
    store_ = declare("tma", f"numba_tma_cp_async_bulk_tensor_{rank}d_shared_to_global",
                     types.void(_vp, _vp, *coords))
    return load_, store_


_load1, _store1 = _declare_rank(1)
_load2, _store2 = _declare_rank(2)
_load3, _store3 = _declare_rank(3)
_load4, _store4 = _declare_rank(4)
_load5, _store5 = _declare_rank(5)
_commit_group = declare("tma", "numba_tma_cp_async_bulk_commit_group", types.void())
_wait_group = [declare("tma", f"numba_tma_cp_async_bulk_wait_group_{n}", types.void())
               for n in range(MAX_PENDING_GROUPS + 1)]
_wait_group_read = [declare("tma", f"numba_tma_cp_async_bulk_wait_group_read_{n}", types.void())
                    for n in range(MAX_PENDING_GROUPS + 1)]
_wait_group_read_0 = _wait_group_read[0]


def _rank_of(fname, coords):
    if not isinstance(coords, types.BaseTuple) or not 1 <= len(coords) <= TMA_MAX_RANK:
        raise errors.TypingError(f"{fname}: coords must be a tuple of 1 to {TMA_MAX_RANK} "
                                 f"integers, got {coords}")
    for i, c in enumerate(coords):
        require_int(fname, f"coords[{i}]", c)
    return len(coords)


def load(dst, desc, coords, bar):
    """Copy the box at ``coords`` of ``desc``'s tensor into shared ``dst``; completes on ``bar``.

    PTX: ``cp.async.bulk.tensor.{1-5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    [dst], [desc, {c0, ...}], [bar];`` (sm_90; c0 is the innermost coordinate, i.e. ``coords[-1]``).
    SASS: ``UTMALDG.{1-5}D``.
    ``coords[-1] * itemsize`` must be a multiple of 16 bytes (see the module docstring).
    Issued by: one thread. The barrier's phase must expect the box's bytes (``arrive_expect_tx``
    or ``expect_tx``), or it completes early or never. ``dst`` is 128-byte aligned shared memory
    of the map's ``smem_shape``; readers wait on ``bar`` before touching it.
    """
    host_call("tma.load")


def store(desc, coords, src):
    """Copy shared ``src`` into the box at ``coords`` of ``desc``'s tensor (OOB parts skipped).

    PTX: ``cp.async.bulk.tensor.{1-5}d.global.shared::cta.tile.bulk_group [desc, {c0, ...}], [src];``
    (sm_90). SASS: ``UTMASTG.{1-5}D``.
    ``coords[-1] * itemsize`` must be a multiple of 16 bytes and every coordinate >= 0.
    Issued by: one thread, after every thread that wrote ``src`` ran ``fence.proxy_async_shared``
    and the block synchronised. Then ``commit_group`` and, before ``src`` is rewritten or the block
    exits, ``wait_group_read``.
    """
    host_call("tma.store")


def commit_group():
    """Close this thread's pending bulk stores into one bulk async-group.

    PTX: ``cp.async.bulk.commit_group;`` Issued by: the thread that issued the stores.
    """
    host_call("tma.commit_group")


def wait_group(n):
    """Wait until at most ``n`` of this thread's bulk async-groups are pending (writes done).

    PTX: ``cp.async.bulk.wait_group n;`` ``n`` is a compile-time constant 0..7.
    Issued by: the committing thread. Use it when this kernel reads back what it stored.
    """
    host_call("tma.wait_group")


def wait_group_read(n):
    """Wait until at most ``n`` bulk async-groups still *read* their shared-memory sources.

    PTX: ``cp.async.bulk.wait_group.read n;`` ``n`` is a compile-time constant 0..7.
    Issued by: the committing thread, before the source tiles are rewritten; cheaper than
    ``wait_group`` since it does not wait for the global writes.
    """
    host_call("tma.wait_group_read")


def load_tile(dst, desc, coords, bar):
    """Safe composite: ``arrive_expect_tx(bar, bytes of dst)`` then ``load``; one thread issues it.

    The announced byte count comes from ``dst`` itself, so it cannot drift from the copy as long
    as ``dst`` holds exactly the box: the map's ``smem_shape``, unswizzled or with the inner box as
    wide as the swizzle span. (A narrower swizzled box occupies ``smem_bytes`` but delivers
    ``box_bytes``: use ``arrive_expect_tx(bar, box_bytes)`` and ``load`` for it.) The barrier
    needs one arrival per phase from this thread (``init(bar, 1)`` when it is the only arriver).
    """
    host_call("tma.load_tile")


def store_async(desc, coords, src):
    """Composite: ``store`` then ``commit_group``, one thread; the writers must have fenced first."""
    host_call("tma.store_async")


def store_tile(desc, coords, src):
    """Safe composite for a whole block: fence, sync, store, commit, wait for the read, sync.

    Issued by: every thread of the block (it contains two ``cuda.syncthreads``). Each thread fences
    its shared-memory writes to the async proxy; the block synchronises; thread (0, 0, 0) stores
    ``src``, commits and waits until the engine has read ``src``; the block synchronises again, so
    on return ``src`` may be rewritten. The global writes land by kernel end (``wait_group(0)``
    in the issuing thread makes them visible earlier).
    """
    host_call("tma.store_tile")


def _desc_check(fname, desc):
    require_array(fname, "desc", desc, dtypes=(types.uint64, types.int64, types.uint8))


@overload(load)
def _ov_load(dst, desc, coords, bar):
    require_array("tma.load", "dst", dst)
    _desc_check("tma.load", desc)
    require_array("tma.load", "bar", bar, dtypes=(types.uint64, types.int64))
    rank = _rank_of("tma.load", coords)
    # c0 is the innermost coordinate: the tuple's last element.
    if rank == 1:
        return lambda dst, desc, coords, bar: _load1(
            address_of(dst), address_of(desc), address_of(bar), coords[0])
    if rank == 2:
        return lambda dst, desc, coords, bar: _load2(
            address_of(dst), address_of(desc), address_of(bar), coords[1], coords[0])
    if rank == 3:
        return lambda dst, desc, coords, bar: _load3(
            address_of(dst), address_of(desc), address_of(bar), coords[2], coords[1], coords[0])
    if rank == 4:
        return lambda dst, desc, coords, bar: _load4(
            address_of(dst), address_of(desc), address_of(bar),
            coords[3], coords[2], coords[1], coords[0])
    return lambda dst, desc, coords, bar: _load5(
        address_of(dst), address_of(desc), address_of(bar),
        coords[4], coords[3], coords[2], coords[1], coords[0])


@overload(store)
def _ov_store(desc, coords, src):
    _desc_check("tma.store", desc)
    require_array("tma.store", "src", src)
    rank = _rank_of("tma.store", coords)
    if rank == 1:
        return lambda desc, coords, src: _store1(address_of(desc), address_of(src), coords[0])
    if rank == 2:
        return lambda desc, coords, src: _store2(
            address_of(desc), address_of(src), coords[1], coords[0])
    if rank == 3:
        return lambda desc, coords, src: _store3(
            address_of(desc), address_of(src), coords[2], coords[1], coords[0])
    if rank == 4:
        return lambda desc, coords, src: _store4(
            address_of(desc), address_of(src), coords[3], coords[2], coords[1], coords[0])
    return lambda desc, coords, src: _store5(
        address_of(desc), address_of(src), coords[4], coords[3], coords[2], coords[1], coords[0])


@overload(commit_group)
def _ov_commit_group():
    return lambda: _commit_group()


@overload(wait_group, prefer_literal=True)
def _ov_wait_group(n):
    fn = _wait_group[literal_int("tma.wait_group", "n", n, 0, MAX_PENDING_GROUPS)]
    return lambda n: fn()


@overload(wait_group_read, prefer_literal=True)
def _ov_wait_group_read(n):
    fn = _wait_group_read[literal_int("tma.wait_group_read", "n", n, 0, MAX_PENDING_GROUPS)]
    return lambda n: fn()


@overload(load_tile)
def _ov_load_tile(dst, desc, coords, bar):
    require_array("tma.load_tile", "dst", dst)

    def impl(dst, desc, coords, bar):
        mbarrier.arrive_expect_tx(bar, dst.size * dst.itemsize)
        load(dst, desc, coords, bar)

    return impl


@overload(store_async)
def _ov_store_async(desc, coords, src):
    def impl(desc, coords, src):
        store(desc, coords, src)
        _commit_group()

    return impl


@overload(store_tile)
def _ov_store_tile(desc, coords, src):
    def impl(desc, coords, src):
        fence.proxy_async_shared()
        cuda.syncthreads()
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:
            store(desc, coords, src)
            _commit_group()
            _wait_group_read_0()
        cuda.syncthreads()

    return impl
