"""The TMA introduction kernel (seed 000): every block TMA-loads one tile, adds one to each element
in shared memory, and TMA-stores it back in place.

Seed 000 (``000_f7d683ea2d9dede3.txt``, "TMA简介": the tensor map, 2-D load and store, the
add-one kernel, the 32B swizzle). A one-rung ladder, with no figure to beat: the README's first
example.

It shows the whole round trip: an mbarrier armed with the tile's bytes, a TMA load, ordinary
shared-memory writes at swizzled addresses, the async-proxy fence, and a TMA store. Tiles that hang
off the matrix edge work unchanged: the load fills the missing elements, the store skips them.
"""

import functools

import numpy as np

from .._frontend import cuda
from .. import mbarrier, swizzle as swz, tma
from .._device import require_hopper
from ..launch import configure
from ..tensormap import TensorMap, describe_array, resolve_dtype

TILE_ROWS = 32
THREADS = 256
# Wide enough for whole 16-byte chunks and a full 128-byte line when unswizzled.
UNSWIZZLED_ROW_BYTES = 128


def tile_shape(itemsize, span):
    """(rows, cols) of the tile: one swizzle span (or 128 bytes) per row."""
    return TILE_ROWS, (span or UNSWIZZLED_ROW_BYTES) // itemsize


@functools.cache
def _kernel(dtype, span):
    rows, cols = tile_shape(dtype.itemsize, span)
    n = rows * cols
    itemsize = dtype.itemsize
    align = swz.pattern_bytes(span) if span else 128

    @cuda.jit
    def add_one_kernel(desc):
        tile = cuda.shared.array(n, dtype, alignment=align)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        y = cuda.blockIdx.y * rows
        x = cuda.blockIdx.x * cols
        if cuda.threadIdx.x == 0:
            tma.load_tile(tile, desc, (y, x), bar)
        mbarrier.wait(bar, 0)
        for i in range(cuda.threadIdx.x, n, THREADS):
            # Logical element (r, c) lives at its swizzled address.
            tile[swz.index(i // cols, i % cols, cols, itemsize, span)] += 1
        tma.store_tile(desc, (y, x), tile)

    return add_one_kernel


def add_one(array, *, swizzle=0):
    """Add one to every element of the 2-D device ``array`` in place, through TMA tiles.

    ``swizzle``: 0, 32, 64 or 128, the shared-memory swizzle of the tiles (the result is the same;
    the index math differs). ``array``: a numba, CuPy or torch 2-D CUDA array of a numeric dtype.
    """
    if swizzle not in (0, 32, 64, 128):
        raise ValueError(f"swizzle must be 0, 32, 64 or 128 (bytes), got {swizzle!r}")
    shape, _, _, natural, _ = describe_array(array)   # rejects host and foreign arrays
    if len(shape) != 2:
        raise ValueError(f"array must be 2-D, got {len(shape)}-D with shape {shape}")
    dtype, _ = resolve_dtype(natural, "array's dtype")
    if isinstance(dtype, str) or np.dtype(dtype).kind not in "iuf":
        raise TypeError(f"array's dtype must be an integer or float type numba can add to, "
                        f"got {dtype}")
    dtype = np.dtype(dtype)
    require_hopper("add_one")
    rows, cols = tile_shape(dtype.itemsize, swizzle)
    tmap = TensorMap(array, (rows, cols), swizzle=swizzle)
    grid = (-(-tmap.shape[1] // cols), -(-tmap.shape[0] // rows))
    configure(_kernel(dtype, swizzle), grid, THREADS)(tmap)
