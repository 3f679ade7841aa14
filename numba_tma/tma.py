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

from ._frontend import cuda, errors, overload, types

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


# ---------------------------------------------------------------------------------------------
# Multicast loads (thread-block clusters, sm_90a)

__all__ += ["load_multicast", "MULTICAST_MASK_MAX"]

#: ``cta_mask`` is a 16-bit operand: bit r selects the CTA of cluster rank r.
MULTICAST_MASK_MAX = 0xFFFF


def _declare_multicast(rank):
    return declare("tma", f"numba_tma_cp_async_bulk_tensor_{rank}d_global_to_shared_multicast",
                   types.void(_vp, _vp, _vp, types.uint32, *(_i32,) * rank))


_load_mc1, _load_mc2, _load_mc3, _load_mc4, _load_mc5 = (_declare_multicast(r) for r in range(1, 6))


def load_multicast(dst, desc, coords, bar, cta_mask):
    """Copy the box at ``coords`` into shared ``dst`` of every CTA of the cluster in ``cta_mask``.

    PTX: ``cp.async.bulk.tensor.{1-5}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
    .multicast::cluster [dst], [desc, {c0, ...}], [bar], cta_mask;`` (sm_90a; numba builds
    compute_90a on an H100). SASS: ``UTMALDG.{1-5}D.MULTICAST``.

    The box is read from global memory (L2) once and written to the same CTA-relative offset as
    ``dst`` in each CTA whose cluster rank (``cluster.cta_rank()``) has its bit set in the 16-bit
    ``cta_mask`` (the issuing CTA need not be among them); each destination's mbarrier at
    ``bar``'s offset receives ``complete_tx`` of the box's bytes. Same operand rules as
    :func:`load` (``dst`` 128-byte aligned, ``coords[-1] * itemsize`` a multiple of 16 bytes).
    Launch with a cluster (``numba_tma.launch.launch_cluster``). Pitfalls: only the low 16 bits
    of ``cta_mask`` are used; a zero mask or a bit at or past the cluster's size
    (``cluster.num_ctas()``) is undefined -- the expected bytes never arrive (``wait_bounded``
    times out) or the kernel faults.

    Byte accounting (the rule that makes it work): **every CTA's barrier expects every byte that
    lands in that CTA's shared memory, whichever CTA issued the copy.** The usual pattern: each of
    the N CTAs of a cluster loads 1/N of a tile (its slice, at its offset) and multicasts it to
    all N (``cta_mask = (1 << N) - 1``); every CTA then does, on its own barrier::

        mbarrier.arrive_expect_tx(bar, TILE_BYTES)       # the whole tile, not its 1/N slice
        tma.load_multicast(tile[rank * SLICE:], desc, (y + rank * SLICE_ROWS, x), bar, mask)
        mbarrier.wait(bar, phase)                         # complete: all N slices landed here

    A peer's ``complete_tx`` may reach this CTA's barrier before this CTA's ``expect_tx`` (the
    transaction count may go transiently negative; the pending arrival keeps the phase open).
    Ordering rules: (1) peers' barriers must be initialised before anyone multicasts into them:
    ``mbarrier.init`` + ``mbarrier.fence_init`` (release.cluster) then ``cluster.sync()``;
    (2) a CTA may only reissue into a stage once *every* destination CTA has finished reading
    it: consumers arrive on each producer CTA's "empty" barrier (``cluster.mbarrier_arrive``),
    which the producer inits with one arrival per consumer CTA; (3) no CTA exits while
    multicasts into it may be in flight or peers may still arrive on its barriers: end with
    ``cluster.sync()``.
    """
    host_call("tma.load_multicast")


@overload(load_multicast)
def _ov_load_multicast(dst, desc, coords, bar, cta_mask):
    require_array("tma.load_multicast", "dst", dst)
    _desc_check("tma.load_multicast", desc)
    require_array("tma.load_multicast", "bar", bar, dtypes=(types.uint64, types.int64))
    # A run-time value: only its type can be checked here (numba retries a literal that fails
    # typing as a plain int, so a range check on literals would not stick).
    require_int("tma.load_multicast", "cta_mask", cta_mask)
    rank = _rank_of("tma.load_multicast", coords)
    # c0 is the innermost coordinate: the tuple's last element.
    if rank == 1:
        return lambda dst, desc, coords, bar, cta_mask: _load_mc1(
            address_of(dst), address_of(desc), address_of(bar), cta_mask & MULTICAST_MASK_MAX,
            coords[0])
    if rank == 2:
        return lambda dst, desc, coords, bar, cta_mask: _load_mc2(
            address_of(dst), address_of(desc), address_of(bar), cta_mask & MULTICAST_MASK_MAX,
            coords[1], coords[0])
    if rank == 3:
        return lambda dst, desc, coords, bar, cta_mask: _load_mc3(
            address_of(dst), address_of(desc), address_of(bar), cta_mask & MULTICAST_MASK_MAX,
            coords[2], coords[1], coords[0])
    if rank == 4:
        return lambda dst, desc, coords, bar, cta_mask: _load_mc4(
            address_of(dst), address_of(desc), address_of(bar), cta_mask & MULTICAST_MASK_MAX,
            coords[3], coords[2], coords[1], coords[0])
    return lambda dst, desc, coords, bar, cta_mask: _load_mc5(
        address_of(dst), address_of(desc), address_of(bar), cta_mask & MULTICAST_MASK_MAX,
        coords[4], coords[3], coords[2], coords[1], coords[0])


# ---- L2 prefetch and reductions through a tensor map --------------------------------------
# PTX ISA: "cp.async.bulk.prefetch.tensor", "cp.reduce.async.bulk.tensor", "prefetch".

#: The reductions ``reduce`` takes (PTX tokens).
REDUCE_OPS = ("add", "min", "max", "inc", "dec", "and", "or", "xor")
#: The map element types each reduction takes (the ISA's table in "cp.reduce.async.bulk.tensor"),
#: by ``CUtensorMapDataType`` name. Any other pairing is undefined behaviour on the GPU.
#: and/or/xor: the ISA lists .b32/.b64, but on the H100 (sm_90a, driver 580) an INT64 map faults
#: with CUDA_ERROR_ILLEGAL_INSTRUCTION while UINT64 works (measured), so 64-bit bitwise
#: reductions take UINT64 maps only: reinterpret int64 data with ``TensorMap(a, box,
#: dtype="uint64")`` (the bits, hence the result, are the same).
REDUCE_MAP_TYPES = {
    "add": ("UINT32", "INT32", "UINT64", "FLOAT32", "FLOAT16", "BFLOAT16"),
    "min": ("UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "BFLOAT16"),
    "max": ("UINT32", "INT32", "UINT64", "INT64", "FLOAT16", "BFLOAT16"),
    "inc": ("UINT32",),
    "dec": ("UINT32",),
    "and": ("UINT32", "INT32", "UINT64"),
    "or": ("UINT32", "INT32", "UINT64"),
    "xor": ("UINT32", "INT32", "UINT64"),
}
#: Why a pairing the ISA table seems to allow is refused (op, map type) -> hint.
_REDUCE_REFUSED_HINTS = {
    (op, "INT64"): "64-bit bitwise reductions fault on an INT64 map (CUDA_ERROR_ILLEGAL_"
                   "INSTRUCTION on sm_90); use a uint64 tile and TensorMap(a, box, "
                   "dtype='uint64') over the int64 data: the bits are the same"
    for op in ("and", "or", "xor")}
# The shared tile's dtype must be one the map's element type can be; 16-bit integer tiles carry
# float16/bfloat16 bits (numba has no bfloat16 arrays: pair them with TensorMap(dtype="bfloat16")).
_HALF_BITS = (types.uint16, types.int16)
_REDUCE_TILE_DTYPES = {
    "add": (types.uint32, types.int32, types.uint64, types.float32, types.float16) + _HALF_BITS,
    "min": (types.uint32, types.int32, types.uint64, types.int64, types.float16) + _HALF_BITS,
    "max": (types.uint32, types.int32, types.uint64, types.int64, types.float16) + _HALF_BITS,
    "inc": (types.uint32,),
    "dec": (types.uint32,),
    "and": (types.uint32, types.int32, types.uint64),
    "or": (types.uint32, types.int32, types.uint64),
    "xor": (types.uint32, types.int32, types.uint64),
}
_TILE_MAP_TYPE = {types.int64: "INT64"}         # for the refusal hints above

_prefetch_tile = {rank: declare("tma", f"numba_tma_cp_async_bulk_prefetch_tensor_{rank}d_L2_global",
                                types.void(_vp, *(_i32,) * rank))
                  for rank in range(1, TMA_MAX_RANK + 1)}
_prefetch_tensormap = declare("tma", "numba_tma_prefetch_tensormap", types.void(_vp))
_reduce_tile = {(op, rank): declare(
    "tma", f"numba_tma_cp_reduce_async_bulk_tensor_{rank}d_shared_to_global_{op}",
    types.void(_vp, _vp, *(_i32,) * rank))
    for op in REDUCE_OPS for rank in range(1, TMA_MAX_RANK + 1)}

__all__ += ["prefetch", "prefetch_descriptor", "reduce", "reduce_tile", "check_reduce",
            "REDUCE_OPS", "REDUCE_MAP_TYPES"]


def prefetch(desc, coords):
    """Hint: start bringing the box at ``coords`` of ``desc``'s tensor into L2.

    PTX: ``cp.async.bulk.prefetch.tensor.{1-5}d.L2.global.tile [desc, {c0, ...}];`` (sm_90; c0 is
    ``coords[-1]``). SASS: ``UTMAPF.L2.{1-5}D``.
    Issued by: any thread; completes on nothing, changes no data, needs no barrier. Use it a few
    iterations ahead of the ``load`` of the same box. Coordinates follow ``load``'s rules (the
    innermost one times the element size a multiple of 16 bytes).
    """
    host_call("tma.prefetch")


def prefetch_descriptor(desc):
    """Hint: fetch the 128-byte tensor map itself before its first use.

    PTX: ``prefetch.tensormap [desc];`` (sm_90; a generic address of the map in global memory).
    SASS: ``UTMACCTL.PF``. Issued by: one thread, early in the kernel (CUTLASS does it in the
    producer warp before its first TMA copy).
    """
    host_call("tma.prefetch_descriptor")


def reduce(desc, coords, src, op="add"):
    """Element-wise ``box[i] = box[i] <op> src[i]`` from shared ``src`` into the box at ``coords``.

    PTX: ``cp.reduce.async.bulk.tensor.{1-5}d.global.shared::cta.<op>.tile.bulk_group
    [desc, {c0, ...}], [src];`` (sm_90). SASS: ``UTMAREDG.{1-5}D.<OP>``.
    ``op`` is a compile-time string: add, min, max, inc, dec, and, or, xor. The element type is
    the map's, read at run time; the ISA allows (``REDUCE_MAP_TYPES``): add on u32/s32/u64/f32/
    f16/bf16; min/max on u32/s32/u64/s64/f16/bf16; inc/dec on u32; and/or/xor on u32/s32/u64.
    No float64 at all, no float32 min/max, no 8/16-bit integers. and/or/xor on an INT64 map
    faults on sm_90 (CUDA_ERROR_ILLEGAL_INSTRUCTION, context lost; measured on the H100) though
    the ISA lists .b64: map int64 data as ``dtype="uint64"`` and reduce a uint64 tile (same
    bits, same result). At compile time the
    tile's dtype is checked against the same table (a 16-bit integer tile stands for f16/bf16
    bits); ``check_reduce(desc, op)`` checks the map on the host. inc: ``old >= s ? 0 : old + 1``;
    dec: ``old == 0 or old > s ? s : old - 1`` (``s`` the shared element).
    Each element update is a relaxed gpu-scope atomic, so any number of blocks may reduce into
    overlapping boxes; float adds round per element, in no fixed order between blocks.
    Issued by: one thread, with ``store``'s rules: the writers of ``src`` ran
    ``fence.proxy_async_shared`` and the block synchronised; then ``commit_group`` and
    ``wait_group_read`` before ``src`` is rewritten; ``wait_group(0)`` before this thread reads
    the result. Coordinates >= 0 and the innermost one times the element size a multiple of 16
    bytes (as for stores); elements of the box outside the tensor are skipped.
    """
    host_call("tma.reduce")


def reduce_tile(desc, coords, src, op="add"):
    """Safe composite for a whole block, like ``store_tile``: fence, sync, reduce, commit, wait
    for the read, sync. Issued by every thread; thread (0, 0, 0) issues the reduction. On return
    ``src`` may be rewritten; the global updates land by kernel end."""
    host_call("tma.reduce_tile")


def check_reduce(desc, op):
    """Host check that ``desc`` (a TensorMap) has an element type ``op`` can reduce; ValueError
    naming both otherwise. Returns the map's element type name (``"FLOAT32"``, ...).
    The kernel's typing check sees only the tile's dtype, so a uint64 tile reduced with and/or/xor
    into an INT64 map (which faults on sm_90) is caught only here: call it before the launch."""
    if op not in REDUCE_MAP_TYPES:
        raise ValueError(f"op = {op!r} is not a TMA reduction; choose from {', '.join(REDUCE_OPS)}")
    plan = getattr(desc, "plan", None)
    if plan is None:
        raise TypeError(f"desc must be a numba_tma.TensorMap, got {type(desc).__name__}")
    name = plan.data_type_name.replace("CU_TENSOR_MAP_DATA_TYPE_", "")
    if name not in REDUCE_MAP_TYPES[op]:
        hint = _REDUCE_REFUSED_HINTS.get((op, name))
        raise ValueError(f"op = {op!r} cannot reduce a map of {name} elements (dtype "
                         f"{desc.dtype}); it takes {', '.join(REDUCE_MAP_TYPES[op])}"
                         + (f" ({hint})" if hint else ""))
    return name


def _reduce_op(fname, op):
    if isinstance(op, types.StringLiteral):
        value = op.literal_value
    elif isinstance(op, types.Omitted) and isinstance(op.value, str):
        value = op.value
    elif isinstance(op, str):                   # the default, when the call leaves op out
        value = op
    else:
        raise errors.TypingError(f"{fname}: op must be a compile-time constant string (a PTX "
                                 f"token: {', '.join(REDUCE_OPS)}), got {op}")
    if value not in REDUCE_OPS:
        raise errors.TypingError(f"{fname}: op = {value!r} is not one of {', '.join(REDUCE_OPS)}")
    return value


@overload(prefetch)
def _ov_prefetch(desc, coords):
    _desc_check("tma.prefetch", desc)
    rank = _rank_of("tma.prefetch", coords)
    fn = _prefetch_tile[rank]
    if rank == 1:
        return lambda desc, coords: fn(address_of(desc), coords[0])
    if rank == 2:
        return lambda desc, coords: fn(address_of(desc), coords[1], coords[0])
    if rank == 3:
        return lambda desc, coords: fn(address_of(desc), coords[2], coords[1], coords[0])
    if rank == 4:
        return lambda desc, coords: fn(address_of(desc), coords[3], coords[2], coords[1],
                                       coords[0])
    return lambda desc, coords: fn(address_of(desc), coords[4], coords[3], coords[2], coords[1],
                                   coords[0])


@overload(prefetch_descriptor)
def _ov_prefetch_descriptor(desc):
    _desc_check("tma.prefetch_descriptor", desc)
    return lambda desc: _prefetch_tensormap(address_of(desc))


@overload(reduce, prefer_literal=True)
def _ov_reduce(desc, coords, src, op="add"):
    fname = "tma.reduce"
    _desc_check(fname, desc)
    require_array(fname, "src", src)
    rank = _rank_of(fname, coords)
    value = _reduce_op(fname, op)
    allowed = _REDUCE_TILE_DTYPES[value]
    if src.dtype not in allowed:
        hint = _REDUCE_REFUSED_HINTS.get((value, _TILE_MAP_TYPE.get(src.dtype)))
        raise errors.TypingError(
            f"{fname}: op = {value!r} cannot reduce a {src.dtype} tile; the map's element type "
            f"must be one of {', '.join(REDUCE_MAP_TYPES[value])}, so src's dtype must be one of "
            f"{', '.join(str(d) for d in allowed)}" + (f" ({hint})" if hint else ""))
    fn = _reduce_tile[value, rank]
    if rank == 1:
        return lambda desc, coords, src, op="add": fn(address_of(desc), address_of(src),
                                                      coords[0])
    if rank == 2:
        return lambda desc, coords, src, op="add": fn(address_of(desc), address_of(src),
                                                      coords[1], coords[0])
    if rank == 3:
        return lambda desc, coords, src, op="add": fn(address_of(desc), address_of(src),
                                                      coords[2], coords[1], coords[0])
    if rank == 4:
        return lambda desc, coords, src, op="add": fn(address_of(desc), address_of(src),
                                                      coords[3], coords[2], coords[1], coords[0])
    return lambda desc, coords, src, op="add": fn(address_of(desc), address_of(src), coords[4],
                                                  coords[3], coords[2], coords[1], coords[0])


@overload(reduce_tile, prefer_literal=True)
def _ov_reduce_tile(desc, coords, src, op="add"):
    _reduce_op("tma.reduce_tile", op)

    def impl(desc, coords, src, op="add"):
        fence.proxy_async_shared()
        cuda.syncthreads()
        if cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0 and cuda.threadIdx.z == 0:
            reduce(desc, coords, src, op)
            _commit_group()
            _wait_group_read_0()
        cuda.syncthreads()

    return impl


# ---- im2col loads (sm_90): cp.async.bulk.tensor.{3,4,5}d...im2col (ptx/tma.cu) --------------

__all__ += ["load_im2col", "IM2COL_MIN_RANK", "IM2COL_OFFSET_BITS"]

IM2COL_MIN_RANK = 3
#: Valid im2col offsets per rank (PTX ISA "im2col mode"): rank 3 [0, 2^16), 4 [0, 2^8), 5 [0, 2^5).
IM2COL_OFFSET_BITS = {3: 16, 4: 8, 5: 5}


def _declare_im2col(rank):
    sig = types.void(_vp, _vp, _vp, *((_i32,) * rank), *((types.uint32,) * (rank - 2)))
    return declare("tma", f"numba_tma_cp_async_bulk_tensor_{rank}d_global_to_shared_im2col", sig)


_load_im2col3 = _declare_im2col(3)
_load_im2col4 = _declare_im2col(4)
_load_im2col5 = _declare_im2col(5)


def load_im2col(dst, desc, coords, offsets, bar):
    """im2col-mode load: ``pixels_per_column`` pixels of ``channels_per_pixel`` channels each into
    shared ``dst`` (a dense ``(pixels, channels)`` tile); completes on ``bar``.

    PTX: ``cp.async.bulk.tensor.{3,4,5}d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes
    [dst], [desc, {c, w, (h), (d), n}], [bar], {ow, (oh), (od)};`` (sm_90).
    SASS: ``UTMALDG.{3-5}D.IM2COL``.
    ``desc`` is a :class:`numba_tma.Im2colTensorMap`. ``coords`` = ``(n, [d, h,] w, c)`` in the
    array's (NDHWC) order: ``n`` and ``c`` start the pixel run and the channel slice; the spatial
    coordinates are the *filter base* of the first pixel, which must lie in the map's pixel box
    (``pixel_box_lower_corner`` .. spatial extent - 1 + ``pixel_box_upper_corner``). ``offsets``
    = ``([od, oh,] ow)`` (rank - 2 of them, array order) is the filter tap added to every pixel's
    position; 16-bit operands, each in 0 .. 2^16-1 (rank 3), 2^8-1 (rank 4), 2^5-1 (rank 5).
    Pixels are walked W fastest, then H, D, N, each spatial coordinate wrapping from the pixel
    box's upper end back to its lower corner (by the map's ``element_strides``); reads outside
    the tensor are filled (zeros, or NaN). The transaction count is always the full tile:
    ``pixels_per_column * channels_per_pixel * itemsize`` (the map's ``box_bytes``).
    ``c * itemsize`` must be a multiple of 16 bytes (as the innermost tile coordinate).
    Issued by: one thread, after ``arrive_expect_tx(bar, box_bytes)``.
    """
    host_call("tma.load_im2col")


def _im2col_rank(fname, coords, offsets):
    if (not isinstance(coords, types.BaseTuple)
            or not IM2COL_MIN_RANK <= len(coords) <= TMA_MAX_RANK):
        raise errors.TypingError(f"{fname}: coords must be a tuple of {IM2COL_MIN_RANK} to "
                                 f"{TMA_MAX_RANK} integers (n, [d, h,] w, c), got {coords}")
    rank = len(coords)
    for i, c in enumerate(coords):
        require_int(fname, f"coords[{i}]", c)
    if not isinstance(offsets, types.BaseTuple) or len(offsets) != rank - 2:
        raise errors.TypingError(f"{fname}: offsets must be a tuple of rank - 2 = {rank - 2} "
                                 f"integers (one per spatial axis) for {rank}-D coords, "
                                 f"got {offsets}")
    for i, o in enumerate(offsets):
        require_int(fname, f"offsets[{i}]", o)
    return rank


@overload(load_im2col)
def _ov_load_im2col(dst, desc, coords, offsets, bar):
    fname = "tma.load_im2col"
    require_array(fname, "dst", dst)
    _desc_check(fname, desc)
    require_array(fname, "bar", bar, dtypes=(types.uint64, types.int64))
    rank = _im2col_rank(fname, coords, offsets)
    # PTX order: c0 innermost; offsets innermost (w) first; both tuples are reversed.
    if rank == 3:
        return lambda dst, desc, coords, offsets, bar: _load_im2col3(
            address_of(dst), address_of(desc), address_of(bar),
            coords[2], coords[1], coords[0], offsets[0])
    if rank == 4:
        return lambda dst, desc, coords, offsets, bar: _load_im2col4(
            address_of(dst), address_of(desc), address_of(bar),
            coords[3], coords[2], coords[1], coords[0], offsets[1], offsets[0])
    return lambda dst, desc, coords, offsets, bar: _load_im2col5(
        address_of(dst), address_of(desc), address_of(bar),
        coords[4], coords[3], coords[2], coords[1], coords[0], offsets[2], offsets[1], offsets[0])
