"""Device-side modification of TMA descriptors (``tensormap.replace``) and the tensormap-proxy
fences that publish a modified descriptor (sm_90a).

PTX ISA: "Data Movement and Conversion Instructions: tensormap.replace", "membar/fence"
(``fence.proxy.tensormap::generic``) and "tensormap.cp_fenceproxy". CUDA Programming Guide:
"Encoding a Tensor Map on Device" / "Usage of a Modified Tensor Map".

The device half of :mod:`numba_tma.tensormap` (whose other modules encode maps on the host),
the twin of ``ptx/tensormap.cu``; import it as ``from numba_tma.tensormap import device as tmd``.

``desc`` is a 16-word ``uint64`` array holding a tile-mode descriptor: a ``TensorMap`` (global
memory) or a ``cuda.shared.array(16, np.uint64, alignment=128)`` copy of one. Only tile-mode
descriptors may be modified on the device (not im2col ones), and a modified descriptor must be
128-byte aligned (a ``TensorMap``'s device copy is a ``cudaMalloc`` allocation of its own: 256-byte
aligned). ``space`` picks the PTX address form: ``"generic"`` (default; works for both),
``"global"`` (``.global``) or ``"shared"`` (``.shared::cta``); it is a compile-time string.

Dimensions, ordinals and strides here are the descriptor's own: innermost first (``dim=0`` is the
contiguous dimension), unlike the array-order coordinates of ``numba_tma.tma``.

The protocol (CUTLASS ``cute/arch/copy_sm90_desc.hpp``; CUDA Programming Guide):

1. In shared memory (the CUTLASS and CUDA-guide pattern)::

       sdesc = cuda.shared.array(16, np.uint64, alignment=128)
       if lane < 16: sdesc[lane] = template[lane]          # ordinary copy of a valid descriptor
       cuda.syncwarp()
       if lane == 0:
           tmd.replace_global_address(sdesc, ptr, space="shared")
           tmd.replace_global_dim(sdesc, 0, cols, space="shared")
       cuda.syncwarp()
       tmd.cp_fence_release(gdesc, sdesc)       # the whole warp: copy + release

2. In global memory directly: one thread writes the fields (``tensormap.replace``, or ordinary
   stores of a template first), then ``fence_release()``.

Then, in *every* thread block that uses the modified descriptor (also in a later kernel: stream
order alone is not enough), one thread runs ``fence_acquire(gdesc)`` before its first
``cp.async.bulk.tensor`` on it; other threads of that block may use it after a block barrier.
No fence is needed again until the descriptor is modified again.

    # WRONG: modify, then tma.load with the same descriptor without fence_release/fence_acquire:
    # the TMA unit may use a stale copy of the descriptor (its own cache, the tensormap proxy).
"""

from .._frontend import address_int, as_u32, as_u64, errors, overload, types

from .._bridge import address_of, declare, host_call, literal_int, require_array, require_int

__all__ = ["replace_global_address", "replace_rank", "replace_box_dim", "replace_global_dim",
           "replace_global_stride", "replace_element_stride", "replace_elemtype",
           "replace_interleave_layout", "replace_swizzle_mode", "replace_fill_mode",
           "fence_release", "fence_acquire", "cp_fence_release",
           "ELEMTYPE", "INTERLEAVE_LAYOUT", "SWIZZLE_MODE", "FILL_MODE", "SCOPES", "SPACES",
           "DESC_ALIGN", "MAX_RANK"]

MAX_RANK = 5
DESC_ALIGN = 128  # bytes: a descriptor modified in place (global or shared) is 128-byte aligned
SPACES = {"generic": "generic", "global": "global", "shared": "shared_cta"}
SCOPES = ("cta", "cluster", "gpu", "sys")
# PTX ISA table "Tensormap new_val validity"; not the driver's CUtensorMapDataType values.
ELEMTYPE = {"uint8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4, "int64": 5,
            "float16": 6, "float32": 7, "float32_ftz": 8, "float64": 9, "bfloat16": 10,
            "tfloat32": 11, "tfloat32_ftz": 12}
INTERLEAVE_LAYOUT = {0: 0, 16: 1, 32: 2}   # bytes -> new_val
SWIZZLE_MODE = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> new_val
FILL_MODE = {"zero": 0, "nan": 1}

_vp, _u32, _u64 = types.voidptr, types.uint32, types.uint64
_DESC_DTYPES = (types.uint64, types.int64)
_PREFIX = "numba_tma_tensormap_replace_tile_"


def _decl(name, sig):
    return declare("tensormap", name, sig)


def _by_space(stem, sig):
    return {space: _decl(f"{_PREFIX}{stem}_{suffix}", sig) for space, suffix in SPACES.items()}


_global_address = _by_space("global_address", types.void(_vp, _u64))
_rank = _by_space("rank", types.void(_vp, _u32))
_box_dim = [_by_space(f"box_dim_{d}", types.void(_vp, _u32)) for d in range(MAX_RANK)]
_global_dim = [_by_space(f"global_dim_{d}", types.void(_vp, _u32)) for d in range(MAX_RANK)]
_element_stride = [_by_space(f"element_stride_{d}", types.void(_vp, _u32))
                   for d in range(MAX_RANK)]
_global_stride = [_by_space(f"global_stride_{d}", types.void(_vp, _u64))
                  for d in range(MAX_RANK - 1)]
_elemtype = [_by_space(f"elemtype_{v}", types.void(_vp)) for v in range(len(ELEMTYPE))]
_interleave = [_by_space(f"interleave_layout_{v}", types.void(_vp)) for v in range(3)]
_swizzle = [_by_space(f"swizzle_mode_{v}", types.void(_vp)) for v in range(4)]
_fill = [_by_space(f"fill_mode_{v}", types.void(_vp)) for v in range(2)]
_release = {s: _decl(f"numba_tma_fence_proxy_tensormap_generic_release_{s}", types.void())
            for s in SCOPES}
_acquire = {s: _decl(f"numba_tma_fence_proxy_tensormap_generic_acquire_{s}", types.void(_vp))
            for s in SCOPES}
_cp_release = {s: _decl(f"numba_tma_tensormap_cp_fenceproxy_global_shared_cta_release_{s}",
                        types.void(_vp, _vp)) for s in SCOPES}


# ---------------------------------------------------------------------------------------------
# Typing-time helpers
# ---------------------------------------------------------------------------------------------

def _literal_str(fname, argname, ty, choices):
    if isinstance(ty, str):  # the argument was left out: the overload sees its default
        value = ty
    elif isinstance(ty, types.StringLiteral):
        value = ty.literal_value
    elif isinstance(ty, types.Omitted) and isinstance(ty.value, str):
        value = ty.value
    else:
        raise errors.TypingError(f"{fname}: {argname} must be a compile-time string, one of "
                                 f"{', '.join(map(repr, choices))}; got {ty}")
    if value not in choices:
        raise errors.TypingError(f"{fname}: {argname} = {value!r} is not one of "
                                 f"{', '.join(map(repr, choices))}")
    return value


def _desc(fname, desc):
    require_array(fname, "desc", desc, dtypes=_DESC_DTYPES)


def _space(fname, space):
    return _literal_str(fname, "space", space, tuple(SPACES))


def _scope(fname, scope):
    return _literal_str(fname, "scope", scope, SCOPES)


# ---------------------------------------------------------------------------------------------
# Public stubs (device intrinsics)
# ---------------------------------------------------------------------------------------------

def replace_global_address(desc, address, space="generic"):
    """Point the descriptor at a new global address (a 16-byte aligned ``uint64``; 32-byte with
    32B interleave).

    PTX: ``tensormap.replace.tile.global_address{.global,.shared::cta}.b1024.b64 [desc], address;``
    (sm_90a). SASS: see ``tests/test_tensormap_device_sass.py``. Issued by: one thread.
    ``address`` may be an integer or a device array (its first element's address).
    """
    host_call("tensormap.device.replace_global_address")


def replace_rank(desc, rank, space="generic"):
    """Set the tensor rank (1..5); the instruction takes ``rank - 1``, this wrapper subtracts it.

    PTX: ``tensormap.replace.tile.rank{.ss}.b1024.b32 [desc], rank - 1;`` Issued by: one thread.
    """
    host_call("tensormap.device.replace_rank")


def replace_box_dim(desc, dim, value, space="generic"):
    """Set ``boxDim[dim]`` (1..256; ``dim`` a constant 0..4, innermost first).

    PTX: ``tensormap.replace.tile.box_dim{.ss}.b1024.b32 [desc], dim, value;``. The transaction
    count a load delivers changes with it.
    """
    host_call("tensormap.device.replace_box_dim")


def replace_global_dim(desc, dim, value, space="generic"):
    """Set ``globalDim[dim]`` (elements, 1..2^32; ``dim`` a constant 0..4, innermost first).

    PTX: ``tensormap.replace.tile.global_dim{.ss}.b1024.b32 [desc], dim, value;`` (the field is
    32 bits: 2^32 itself cannot be written).
    """
    host_call("tensormap.device.replace_global_dim")


def replace_global_stride(desc, dim, nbytes, space="generic"):
    """Set the byte stride of dimension ``dim + 1`` (``dim`` a constant 0..3; dimension 0 is
    contiguous). ``nbytes`` is a multiple of 16 (32 with 32B interleave), below 2^40.

    PTX: ``tensormap.replace.tile.global_stride{.ss}.b1024.b64 [desc], dim, nbytes;`` The value is
    in bytes with CUDA >= 12.5 toolchains (numba-cuda links with 13.x); CUTLASS shifts it right by
    4 only for older ones.
    """
    host_call("tensormap.device.replace_global_stride")


def replace_element_stride(desc, dim, value, space="generic"):
    """Set ``elementStrides[dim]`` (1..8; ``dim`` a constant 0..4, innermost first).

    PTX: ``tensormap.replace.tile.element_stride{.ss}.b1024.b32 [desc], dim, value;``
    """
    host_call("tensormap.device.replace_element_stride")


def replace_elemtype(desc, code, space="generic"):
    """Set the element type; ``code`` is a constant from ``ELEMTYPE`` (PTX table values 0..12,
    not the driver's enum). PTX: ``tensormap.replace.tile.elemtype{.ss}.b1024.b32 [desc], code;``
    """
    host_call("tensormap.device.replace_elemtype")


def replace_interleave_layout(desc, code, space="generic"):
    """Set the interleave: ``code`` 0 none, 1 16B, 2 32B (a constant).
    PTX: ``tensormap.replace.tile.interleave_layout{.ss}.b1024.b32 [desc], code;``"""
    host_call("tensormap.device.replace_interleave_layout")


def replace_swizzle_mode(desc, code, space="generic"):
    """Set the swizzle: ``code`` 0 none, 1 32B, 2 64B, 3 128B (a constant).
    PTX: ``tensormap.replace.tile.swizzle_mode{.ss}.b1024.b32 [desc], code;``"""
    host_call("tensormap.device.replace_swizzle_mode")


def replace_fill_mode(desc, code, space="generic"):
    """Set the out-of-bounds fill: ``code`` 0 zeros, 1 OOB-NaN (a constant).
    PTX: ``tensormap.replace.tile.fill_mode{.ss}.b1024.b32 [desc], code;``"""
    host_call("tensormap.device.replace_fill_mode")


def fence_release(scope="gpu"):
    """Release this thread's prior writes to descriptors in global memory to the tensormap proxy.

    PTX: ``fence.proxy.tensormap::generic.release.{cta,cluster,gpu,sys};`` (sm_90). Issued by: the
    thread that ran ``tensormap.replace`` (or stored the words) on a global descriptor.
    """
    host_call("tensormap.device.fence_release")


def fence_acquire(desc, scope="gpu"):
    """Acquire the 128-byte descriptor at ``desc`` in the tensormap proxy before TMA uses it.

    PTX: ``fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [desc], 128;`` (sm_90).
    Issued by: one thread of every block that uses a descriptor modified since the launch (or by
    an earlier kernel); the block's other threads may use it after a block barrier. ``scope``
    must cover the modifying thread (``"gpu"`` on one device, ``"sys"`` across devices).
    """
    host_call("tensormap.device.fence_acquire")


def cp_fence_release(gdesc, sdesc, scope="gpu"):
    """Copy a descriptor modified in shared memory to global memory and release it.

    PTX: ``tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.{scope}
    .sync.aligned [gdesc], [sdesc], 128;`` (sm_90). Issued by: a whole warp, converged, with the
    same operands (``.sync.aligned``); ``cuda.syncwarp()`` after the lane that modified ``sdesc``.
    Both descriptors 128-byte aligned. Consumers still ``fence_acquire(gdesc)``.
    """
    host_call("tensormap.device.cp_fence_release")


# ---------------------------------------------------------------------------------------------
# Overloads
# ---------------------------------------------------------------------------------------------

def _address_arg(fname, address):
    """How to turn ``address`` into a uint64: an integer, or a device array's data pointer."""
    if isinstance(address, types.Array):
        return True
    require_int(fname, "address", address)
    return False


@overload(replace_global_address, prefer_literal=True)
def _ov_global_address(desc, address, space="generic"):
    fname = "tensormap.device.replace_global_address"
    _desc(fname, desc)
    fn = _global_address[_space(fname, space)]
    if _address_arg(fname, address):
        def impl(desc, address, space="generic"):
            fn(address_of(desc), address_int(address_of(address)))
    else:
        def impl(desc, address, space="generic"):
            fn(address_of(desc), as_u64(address))
    return impl


@overload(replace_rank, prefer_literal=True)
def _ov_rank(desc, rank, space="generic"):
    fname = "tensormap.device.replace_rank"
    _desc(fname, desc)
    fn = _rank[_space(fname, space)]
    if isinstance(rank, types.IntegerLiteral):
        literal_int(fname, "rank", rank, 1, MAX_RANK)
    require_int(fname, "rank", rank)
    return lambda desc, rank, space="generic": fn(address_of(desc), as_u32(rank - 1))


def _ov_field2(fname, table, desc, dim, value, space, hi):
    _desc(fname, desc)
    d = literal_int(fname, "dim", dim, 0, hi)
    require_int(fname, "value", value)
    return table[d][_space(fname, space)]


@overload(replace_box_dim, prefer_literal=True)
def _ov_box_dim(desc, dim, value, space="generic"):
    fn = _ov_field2("tensormap.device.replace_box_dim", _box_dim, desc, dim, value, space,
                    MAX_RANK - 1)
    return lambda desc, dim, value, space="generic": fn(address_of(desc), as_u32(value))


@overload(replace_global_dim, prefer_literal=True)
def _ov_global_dim(desc, dim, value, space="generic"):
    fn = _ov_field2("tensormap.device.replace_global_dim", _global_dim, desc, dim, value, space,
                    MAX_RANK - 1)
    return lambda desc, dim, value, space="generic": fn(address_of(desc), as_u32(value))


@overload(replace_element_stride, prefer_literal=True)
def _ov_element_stride(desc, dim, value, space="generic"):
    fn = _ov_field2("tensormap.device.replace_element_stride", _element_stride, desc, dim, value,
                    space, MAX_RANK - 1)
    return lambda desc, dim, value, space="generic": fn(address_of(desc), as_u32(value))


@overload(replace_global_stride, prefer_literal=True)
def _ov_global_stride(desc, dim, nbytes, space="generic"):
    fn = _ov_field2("tensormap.device.replace_global_stride", _global_stride, desc, dim, nbytes,
                    space, MAX_RANK - 2)
    return lambda desc, dim, nbytes, space="generic": fn(address_of(desc), as_u64(nbytes))


def _ov_field3(fname, table, desc, code, space):
    _desc(fname, desc)
    value = literal_int(fname, "code", code, 0, len(table) - 1)
    fn = table[value][_space(fname, space)]
    return lambda desc, code, space="generic": fn(address_of(desc))


@overload(replace_elemtype, prefer_literal=True)
def _ov_elemtype(desc, code, space="generic"):
    return _ov_field3("tensormap.device.replace_elemtype", _elemtype, desc, code, space)


@overload(replace_interleave_layout, prefer_literal=True)
def _ov_interleave(desc, code, space="generic"):
    return _ov_field3("tensormap.device.replace_interleave_layout", _interleave, desc, code, space)


@overload(replace_swizzle_mode, prefer_literal=True)
def _ov_swizzle(desc, code, space="generic"):
    return _ov_field3("tensormap.device.replace_swizzle_mode", _swizzle, desc, code, space)


@overload(replace_fill_mode, prefer_literal=True)
def _ov_fill(desc, code, space="generic"):
    return _ov_field3("tensormap.device.replace_fill_mode", _fill, desc, code, space)


@overload(fence_release, prefer_literal=True)
def _ov_fence_release(scope="gpu"):
    fn = _release[_scope("tensormap.device.fence_release", scope)]
    return lambda scope="gpu": fn()


@overload(fence_acquire, prefer_literal=True)
def _ov_fence_acquire(desc, scope="gpu"):
    fname = "tensormap.device.fence_acquire"
    _desc(fname, desc)
    fn = _acquire[_scope(fname, scope)]
    return lambda desc, scope="gpu": fn(address_of(desc))


@overload(cp_fence_release, prefer_literal=True)
def _ov_cp_fence_release(gdesc, sdesc, scope="gpu"):
    fname = "tensormap.device.cp_fence_release"
    require_array(fname, "gdesc", gdesc, dtypes=_DESC_DTYPES)
    require_array(fname, "sdesc", sdesc, dtypes=_DESC_DTYPES)
    fn = _cp_release[_scope(fname, scope)]
    return lambda gdesc, sdesc, scope="gpu": fn(address_of(gdesc), address_of(sdesc))
