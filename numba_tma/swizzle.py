"""TMA shared-memory swizzles: where logical element (row, col) of a box lands in shared memory.

With ``swizzle=32/64/128`` a TMA copy permutes the 16-byte chunks of each 128-byte line of the
shared tile: chunk ``c`` (byte offset ``b``, ``c = b >> 4``) goes to ``c ^ ((b >> 7) & m)`` with
``m = span/16 - 1`` (CuTe's ``Swizzle<log2(span/16), 4, 3>``). The pattern repeats every
``8 * span`` bytes (256, 512, 1024), and it is computed from shared-memory *address* bits, so a
swizzled tile must start on that boundary: declare it with ``alignment=1024`` (128B), 512 or 256.

This generalises the seed's ``calculate_col_swizzle`` (4-byte elements, 128B, 32 columns) to
any span and element size. The functions below are plain Python *and* numba device functions:
the same code runs in a kernel and on numpy integer arrays. ``shared_image`` is the pure-numpy
model of what the TMA unit writes, which tests compare against the hardware.
"""

import numpy as np
from numba.cuda.extending import register_jitable

__all__ = ["SPANS", "CHUNK_BYTES", "pattern_bytes", "byte_offset", "index", "col",
           "shared_image", "logical_tile"]

SPANS = (0, 32, 64, 128)
# The swizzle permutes 16-byte chunks; bits 7.. of the byte offset select the permutation.
CHUNK_BYTES = 16
LINE_SHIFT = 7


def pattern_bytes(span):
    """Bytes after which the swizzle pattern repeats (the tile's required alignment)."""
    _check_span(span)
    return 8 * span if span else CHUNK_BYTES


@register_jitable
def byte_offset(logical_byte, span):
    """Shared-memory byte offset of the byte at ``logical_byte`` of a box loaded with ``span``."""
    if span == 0:
        return logical_byte
    return logical_byte ^ (((logical_byte >> LINE_SHIFT) & (span // CHUNK_BYTES - 1)) << 4)


@register_jitable
def index(row, col, row_elems, itemsize, span):
    """Flat element index in shared memory of logical ``(row, col)`` of a row-major box.

    ``row_elems`` is the box's inner dimension (elements per row), ``itemsize`` the element size
    in bytes, ``span`` the map's swizzle (0, 32, 64, 128). Index a 1-D view of the tile with it.
    """
    return byte_offset((row * row_elems + col) * itemsize, span) // itemsize


@register_jitable
def col(row, col, row_elems, itemsize, span):
    """Swizzled column of logical ``(row, col)`` when a row is exactly one span wide.

    With ``row_elems * itemsize == span`` (e.g. 32 float32 at 128B) the swizzle never leaves the
    row, so ``tile[row, swizzle.col(...)]`` addresses a 2-D tile directly. Narrower rows can
    move to a neighbouring row: use ``index`` on a flat view then.
    """
    return index(row, col, row_elems, itemsize, span) - row * row_elems


def _check_span(span):
    if span not in SPANS:
        raise ValueError(f"span must be one of {SPANS} (bytes), got {span!r}")


def shared_image(tile, span):
    """The bytes a TMA load with this swizzle writes to shared memory for the logical ``tile``.

    ``tile`` is the box's logical contents (any dtype, C order, total size a multiple of 16 bytes
    when swizzled). Returns a ``uint8`` array of the same byte length.
    """
    _check_span(span)
    raw = np.ascontiguousarray(tile).reshape(-1).view(np.uint8)
    if span == 0:
        return raw.copy()
    if raw.size % CHUNK_BYTES:
        raise ValueError(f"a swizzled box is a whole number of {CHUNK_BYTES}-byte chunks; "
                         f"got {raw.size} bytes")
    chunks = raw.reshape(-1, CHUNK_BYTES)
    logical = np.arange(chunks.shape[0])
    physical = logical ^ ((logical >> (LINE_SHIFT - 4)) & (span // CHUNK_BYTES - 1))
    image = np.empty_like(chunks)
    image[physical] = chunks
    return image.reshape(-1)


def logical_tile(image, shape, dtype, span):
    """Inverse of ``shared_image``: the logical box held by raw shared-memory bytes ``image``."""
    # Each line's permutation is an XOR, hence its own inverse.
    raw = shared_image(np.ascontiguousarray(image).view(np.uint8), span)
    return raw.view(dtype).reshape(shape)
