"""Shared pieces of the GPU tests: fresh random inputs, the numpy model of a TMA box, launch helpers."""

import math

import numpy as np

from numba_tma._frontend import cuda

# Every wait in the test kernels is bounded, so a lost transaction fails a test instead of hanging.
TIMEOUT_NS = 2_000_000_000

rng = np.random.default_rng()


def random_array(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


def smem_shape(box, element_strides=None):
    es = element_strides or (1,) * len(box)
    return tuple(math.ceil(b / e) for b, e in zip(box, es))


def box_model(a, coords, box, element_strides=None, fill=0):
    """What a TMA load of ``box`` at ``coords`` reads from ``a`` (numpy), OOB filled with ``fill``."""
    es = element_strides or (1,) * a.ndim
    shape = smem_shape(box, es)
    out = np.full(shape, fill, dtype=a.dtype)
    idx = [coords[d] + es[d] * np.arange(shape[d]) for d in range(a.ndim)]
    ok = [(i >= 0) & (i < a.shape[d]) for d, i in enumerate(idx)]
    src = np.ix_(*[i[m] for i, m in zip(idx, ok)])
    dst = np.ix_(*[np.nonzero(m)[0] for m in ok])
    out[dst] = a[src]
    return out


def store_model(before, tile, coords):
    """``before`` after a TMA store of ``tile`` at ``coords`` (elements outside the tensor skipped)."""
    out = before.copy()
    idx = [coords[d] + np.arange(tile.shape[d]) for d in range(before.ndim)]
    ok = [(i >= 0) & (i < before.shape[d]) for d, i in enumerate(idx)]
    out[np.ix_(*[i[m] for i, m in zip(idx, ok)])] = tile[np.ix_(*[np.nonzero(m)[0] for m in ok])]
    return out


def coords_fn(rank):
    """A device function turning an int32 array into the coords tuple of ``rank``."""
    fns = {
        1: lambda c: (c[0],),
        2: lambda c: (c[0], c[1]),
        3: lambda c: (c[0], c[1], c[2]),
        4: lambda c: (c[0], c[1], c[2], c[3]),
        5: lambda c: (c[0], c[1], c[2], c[3], c[4]),
    }
    return cuda.jit(device=True)(fns[rank])


