"""TMA shared-memory swizzles: where logical element (row, col) of a box lands in shared memory.

With ``swizzle=32/64/128`` a TMA copy permutes the 16-byte chunks of each 128-byte line of the
shared tile: chunk ``c`` (byte offset ``b``, ``c = b >> 4``) goes to ``c ^ ((b >> 7) & m)`` with
``m = span/16 - 1`` (CuTe's ``Swizzle<log2(span/16), 4, 3>``). The pattern repeats every
``8 * span`` bytes (256, 512, 1024), and it is computed from shared-memory *address* bits, so a
swizzled tile must start on that boundary: declare it with ``alignment=1024`` (128B), 512 or 256.

Every box row (the innermost dimension) of a swizzled copy occupies a whole span in shared memory,
even when the box's inner dimension is narrower: rows land ``span`` bytes apart (measured on the
H100; the mbarrier transaction count is still the dense box bytes). Without swizzle rows are dense.

This generalises the seed's ``calculate_col_swizzle`` (4-byte elements, 128B, 32 columns) to
any span and element size. ``byte_offset``/``index``/``col`` are plain Python *and* numba device
functions: the same code runs in a kernel and on numpy integer arrays. ``shared_image`` is the
pure-numpy model of what the TMA unit writes, which ``tests/gpu/test_swizzle_hw.py`` compares with
the hardware.
"""

import numpy as np

from ._frontend import overload, register_jitable, types

__all__ = ["SPANS", "CHUNK_BYTES", "pattern_bytes", "row_pitch", "shared_bytes", "byte_offset",
           "index", "col", "physical_offsets", "shared_image", "logical_tile", "BANKS",
           "BANK_BYTES", "bank_map", "bank_map_text", "write_bank_map"]

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
def row_pitch(row_elems, itemsize, span):
    """Bytes between consecutive box rows in shared memory: the span, or the dense row unswizzled."""
    if span == 0:
        return row_elems * itemsize
    return span


def index(row, col, row_elems, itemsize, span):
    """Flat element index in shared memory of logical ``(row, col)`` of a box.

    ``row`` counts box rows (all outer dimensions flattened), ``row_elems`` is the box's inner
    dimension, ``itemsize`` the element size in bytes, ``span`` the map's swizzle (0, 32, 64,
    128; another constant is refused when the kernel compiles, and on the host). Index a 1-D
    view of the tile with it.
    """
    _check_span(span)
    return _index(row, col, row_elems, itemsize, span)


@register_jitable
def _index(row, col, row_elems, itemsize, span):
    pitch = row_pitch(row_elems, itemsize, span)
    return byte_offset(row * pitch + col * itemsize, span) // itemsize


def col(row, col, itemsize, span):
    """Swizzled column of logical ``(row, col)`` in a 2-D tile of ``span // itemsize`` columns
    (``0 <= col < span // itemsize``; ``span`` 32, 64 or 128, or 0 for none).

    A swizzled row is exactly one span in shared memory and the swizzle never leaves it, so
    ``tile[row, swizzle.col(row, c, itemsize, span)]`` addresses a tile declared with shape
    ``(rows, span // itemsize)`` directly.
    """
    _check_span(span)
    return _col(row, col, itemsize, span)


@register_jitable
def _col(row, col, itemsize, span):
    if span == 0:
        return col
    # Row `row` starts in 128-byte line row // (128 // span), and col < span // itemsize keeps
    # the element in it. The swizzle XORs chunk bits below the span, so it commutes with the
    # division by an itemsize that divides 16: in a kernel this is shifts and masks, no
    # 64-bit product and no signed division.
    line = (row // ((1 << LINE_SHIFT) // span)) & (span // CHUNK_BYTES - 1)
    return col ^ ((line << 4) // itemsize)


def _check_span(span):
    if span not in SPANS:
        raise ValueError(f"span must be one of {SPANS} (bytes), got {span!r}")


def _check_span_type(fname, span):
    # A ValueError, not a TypingError: numba would retry the call with the constant widened to
    # int64 and accept it. A span known only at run time is the caller's to keep in SPANS.
    if isinstance(span, types.IntegerLiteral) and span.literal_value not in SPANS:
        raise ValueError(f"{fname}: span must be one of {SPANS} (bytes), got "
                         f"{span.literal_value}")


@overload(index, prefer_literal=True)
def _ov_index(row, col, row_elems, itemsize, span):
    _check_span_type("swizzle.index", span)
    return lambda row, col, row_elems, itemsize, span: _index(row, col, row_elems, itemsize,
                                                              span)


@overload(col, prefer_literal=True)
def _ov_col(row, col, itemsize, span):
    _check_span_type("swizzle.col", span)
    return lambda row, col, itemsize, span: _col(row, col, itemsize, span)


def shared_bytes(shape, itemsize, span):
    """Bytes of shared memory a box of ``shape`` occupies (what the tile must be declared with)."""
    _check_span(span)
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    return rows * row_pitch(shape[-1], itemsize, span)


def physical_offsets(shape, itemsize, span):
    """Shared-memory byte offset of every byte of a box of ``shape`` (C order, elements of
    ``itemsize`` bytes): an integer array of shape ``shape + (itemsize,)``."""
    _check_span(span)
    if span and shape[-1] * itemsize > span:
        raise ValueError(f"the box's inner dimension is {shape[-1]} * {itemsize} bytes, wider than "
                         f"the {span}B swizzle span")
    if span and (shape[-1] * itemsize) % CHUNK_BYTES:
        raise ValueError(f"a swizzled box row is whole {CHUNK_BYTES}-byte chunks; got "
                         f"{shape[-1]} * {itemsize} bytes")
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    r = np.arange(rows).reshape(-1, 1, 1)
    c = np.arange(shape[-1]).reshape(1, -1, 1)
    b = np.arange(itemsize).reshape(1, 1, -1)
    logical = r * row_pitch(shape[-1], itemsize, span) + c * itemsize + b
    return byte_offset(logical, span).reshape(tuple(shape) + (itemsize,))


def shared_image(tile, span, fill=0):
    """The bytes a TMA load with this swizzle leaves in shared memory for the logical ``tile``.

    ``tile`` is the box's logical contents (any dtype, C order). Returns a ``uint8`` array of
    ``shared_bytes`` length; bytes the copy does not write (row padding) hold ``fill``.
    """
    tile = np.ascontiguousarray(tile)
    offsets = physical_offsets(tile.shape, tile.itemsize, span)
    image = np.full(shared_bytes(tile.shape, tile.itemsize, span), fill, np.uint8)
    image[offsets.reshape(-1)] = tile.reshape(-1).view(np.uint8)
    return image


def logical_tile(image, shape, dtype, span):
    """Inverse of ``shared_image``: the logical box held by raw shared-memory bytes ``image``."""
    dtype = np.dtype(dtype)
    offsets = physical_offsets(tuple(shape), dtype.itemsize, span)
    raw = np.ascontiguousarray(image).reshape(-1).view(np.uint8)
    return raw[offsets.reshape(-1)].view(dtype).reshape(shape)


# ------------------------------------------------------------------------- bank maps (seed 000)

BANKS = 32
BANK_BYTES = 4


def bank_map(rows, row_elems, itemsize, span):
    """The shared-memory bank of every logical element of a ``rows x row_elems`` box loaded with
    this swizzle: an int array of that shape (an element wider than a bank: its first bank).

    Seed 000's pictures: unswizzled 4-byte elements put each column in one bank, so a warp
    reading a column conflicts 32 ways; under the 128B swizzle the 8 rows of a pattern period
    spread each column over 8 banks."""
    offsets = physical_offsets((rows, row_elems), itemsize, span)[..., 0]
    return (offsets // BANK_BYTES) % BANKS


def bank_map_text(banks):
    """The map as text: one line per row, bank numbers right-aligned."""
    return "\n".join(" ".join(f"{b:2d}" for b in row) for row in np.asarray(banks))


#: Inches per cell of the picture, the margins around the cells and its resolution.
_CELL, _MARGIN, _DPI = 0.3, (1.4, 1.0), 100


def bank_map_size(rows, row_elems):
    """(width, height) in pixels of the PNG :func:`write_bank_map` draws."""
    return (round((_CELL * row_elems + _MARGIN[0]) * _DPI),
            round((_CELL * rows + _MARGIN[1]) * _DPI))


def write_bank_map(path, rows, row_elems, itemsize, span):
    """Draw :func:`bank_map` to the PNG ``path``: each cell a logical element, coloured and
    numbered by its bank. Needs matplotlib (``pip install "numba_tma[plot]"``)."""
    banks = bank_map(rows, row_elems, itemsize, span)
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError("the bank map picture needs matplotlib: pip install "
                           "'numba_tma[plot]'") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(_CELL * row_elems + _MARGIN[0], _CELL * rows + _MARGIN[1]),
                     dpi=_DPI)
    ax = fig.add_axes((0.6 / (_CELL * row_elems + _MARGIN[0]),
                       0.4 / (_CELL * rows + _MARGIN[1]),
                       _CELL * row_elems / (_CELL * row_elems + _MARGIN[0]),
                       _CELL * rows / (_CELL * rows + _MARGIN[1])))
    ax.imshow(banks, cmap="hsv", vmin=0, vmax=BANKS, aspect="auto", interpolation="nearest")
    for (r, c), b in np.ndenumerate(banks):
        ax.text(c, r, str(b), ha="center", va="center", fontsize=6)
    ax.set_xlabel("column (element)")
    ax.set_ylabel("row")
    swz = f"{span}B swizzle" if span else "no swizzle"
    ax.set_title(f"bank of each element: {rows} x {row_elems} x {itemsize}-byte box, {swz}",
                 fontsize=9)
    fig.savefig(path, dpi=_DPI)
    plt.close(fig)
    return path


def main(argv=None):
    """``python -m numba_tma.swizzle [--png PATH] --span 128 --itemsize 4``: the bank map of a
    swizzled box, printed, or drawn to a PNG."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m numba_tma.swizzle", description=main.__doc__)
    p.add_argument("--span", type=int, default=128, choices=SPANS, help="swizzle span, bytes")
    p.add_argument("--itemsize", type=int, default=4, choices=(1, 2, 4, 8))
    p.add_argument("--rows", type=int, default=32)
    p.add_argument("--cols", type=int, default=None,
                   help="elements per row (default: one 128-byte line, or the span)")
    p.add_argument("--png", default=None, help="draw to this PNG instead of printing")
    args = p.parse_args(argv)
    cols = args.cols or (args.span or 128) // args.itemsize
    if args.rows < 1 or cols < 1:
        p.error(f"rows and cols must be >= 1, got {args.rows} and {cols}")
    try:
        if args.png:
            write_bank_map(args.png, args.rows, cols, args.itemsize, args.span)
            print(f"wrote {args.png}")
        else:
            print(bank_map_text(bank_map(args.rows, cols, args.itemsize, args.span)))
    except (ValueError, RuntimeError) as exc:
        p.error(str(exc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
