"""Tile-mode tensor maps for the library's kernel launchers, cached by what they encode.

A descriptor holds only the address, shape, strides, dtype and box, not a reference to the array,
so one encoded for an (address, layout) pair stays valid for any array with that layout at that
address. Caching them keeps repeated launches free of the driver encode and of the 128-byte
host-to-device copy, which would otherwise serialise launches on the default stream.
"""

import collections
import threading
from typing import Any, NamedTuple

from .tile import TensorMap

__all__ = ["CACHE_SIZE", "Encoded", "descriptor", "descriptor_map", "retarget"]

CACHE_SIZE = 256

_cache = collections.OrderedDict()
_lock = threading.Lock()


def descriptor(array, box, swizzle=0, l2_promotion=0):
    """The 16-word device array of a tile-mode tensor map over numba device ``array``."""
    return descriptor_map(array, box, swizzle, l2_promotion).device_array


class Encoded(NamedTuple):
    """A tensor map without its array (a cache entry must not keep the caller's buffer alive):
    the 128 encoded bytes, the global address they point at, and their device copy."""
    encoded: bytes
    address: int
    device_array: Any


def descriptor_map(array, box, swizzle=0, l2_promotion=0):
    """The :class:`Encoded` map behind :func:`descriptor` (its ``encoded`` bytes feed
    :func:`retarget`)."""
    from ..launch import context_id

    cai = array.__cuda_array_interface__
    # The context is part of the key: after numba.cuda.close() a new context hands out the
    # same addresses, and a descriptor uploaded in the old one is gone with it.
    key = (context_id(), cai["data"][0], tuple(cai["shape"]), cai.get("strides"), cai["typestr"],
           tuple(box), swizzle, l2_promotion)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    tmap = TensorMap(array, box, swizzle=swizzle, l2_promotion=l2_promotion)
    desc = Encoded(tmap.encoded, tmap.address, tmap.device_array)
    with _lock:
        _cache[key] = desc
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return desc


def retarget(encoded, address):
    """A device copy of the encoded tensor map ``encoded`` (its 128 bytes) moved to global
    ``address`` by the driver (``cuTensorMapReplaceAddress``): a new buffer of a layout already
    seen costs this and the upload, not a new plan. The caller checked the address's alignment
    and extent (same layout, same alignment class as the map was planned for)."""
    import numpy as np
    from cuda.bindings import driver
    from .._frontend import cuda

    tmap = driver.CUtensorMap()
    tmap.opaque = [int(w) for w in np.frombuffer(encoded, dtype="<u8")]
    err, = driver.cuTensorMapReplaceAddress(tmap, address)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapReplaceAddress({address:#x}) failed: "
                           f"{getattr(err, 'name', err)}")
    return cuda.to_device(np.array([int(w) for w in tmap.opaque], dtype=np.uint64))
