"""Tensor-map descriptors for the kernel launchers, cached by what they encode.

A descriptor holds only the address, shape, strides, dtype and box, not a reference to the array,
so one encoded for an (address, layout) pair stays valid for any array with that layout at that
address. Caching them keeps repeated launches free of the driver encode and of the 128-byte
host-to-device copy, which would otherwise serialise launches on the default stream.
"""

import collections
import threading

from ..tensormap import TensorMap

CACHE_SIZE = 256

_cache = collections.OrderedDict()
_lock = threading.Lock()


def descriptor(array, box, swizzle=0, l2_promotion=0):
    """The 16-word device array of a tile-mode tensor map over numba device ``array``."""
    cai = array.__cuda_array_interface__
    key = (cai["data"][0], tuple(cai["shape"]), cai.get("strides"), cai["typestr"],
           tuple(box), swizzle, l2_promotion)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    desc = TensorMap(array, box, swizzle=swizzle, l2_promotion=l2_promotion).device_array
    with _lock:
        _cache[key] = desc
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return desc
