"""The swizzle index helpers and the numpy model, on the CPU (the GPU test checks the hardware)."""

import numpy as np
import pytest

from numba_tma import swizzle


def seed_col_swizzle(row, col, block=32):
    """Seed 000's calculate_col_swizzle: 4-byte elements, 128B swizzle, 32 columns."""
    i16 = (row * block + col) * 4 >> 4
    y16 = i16 >> 3
    x16 = i16 & 7
    return ((y16 ^ x16) * 4 & (block - 1)) + (col & 3)


def test_matches_seed_formula():
    for row in range(64):
        for col in range(32):
            assert swizzle.col(row, col, 32, 4, 128) == seed_col_swizzle(row, col)


def test_known_positions():
    # 128B, float32: row 1's chunk 0 goes to chunk 1 (elements 4..7 of the row).
    assert swizzle.index(1, 0, 32, 4, 128) == 32 + 4
    assert swizzle.index(1, 5, 32, 4, 128) == 32 + 1
    # 64B: the line index (bits 7..8) picks the XOR; 64-byte rows of fp16 pair up in 128B lines.
    assert swizzle.index(2, 0, 32, 2, 64) == 2 * 32 + 8
    # 32B: only bit 7 matters; 32-byte rows of uint8, row 4 starts line 1.
    assert swizzle.index(4, 0, 32, 1, 32) == 4 * 32 + 16
    assert swizzle.index(3, 7, 32, 1, 32) == 3 * 32 + 7
    # No swizzle is the identity.
    assert swizzle.index(5, 3, 10, 8, 0) == 53


@pytest.mark.parametrize("span", [32, 64, 128])
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_index_permutes_within_128_byte_lines(span, itemsize):
    for row_bytes in {span, max(16, span // 2)}:
        cols, rows = row_bytes // itemsize, 32
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        idx = swizzle.index(r, c, cols, itemsize, span)
        assert sorted(idx.ravel()) == list(range(rows * cols))
        line = 128 // itemsize
        np.testing.assert_array_equal(idx // line, (r * cols + c) // line)
        # 16-byte chunks move whole: elements of one chunk stay adjacent.
        chunk = 16 // itemsize
        np.testing.assert_array_equal(idx % chunk, (r * cols + c) % chunk)


@pytest.mark.parametrize("span", [0, 32, 64, 128])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
def test_model_agrees_with_index_and_inverts(span, dtype):
    itemsize = np.dtype(dtype).itemsize
    cols = (span or 128) // itemsize
    tile = np.arange(16 * cols).astype(dtype).reshape(16, cols)
    image = swizzle.shared_image(tile, span).view(dtype)
    r, c = np.meshgrid(np.arange(16), np.arange(cols), indexing="ij")
    np.testing.assert_array_equal(image[swizzle.index(r, c, cols, itemsize, span)], tile)
    np.testing.assert_array_equal(swizzle.logical_tile(image, tile.shape, dtype, span), tile)
    if span:
        assert not np.array_equal(image, tile.ravel())


def test_pattern_bytes_and_errors():
    assert [swizzle.pattern_bytes(s) for s in (32, 64, 128)] == [256, 512, 1024]
    with pytest.raises(ValueError, match="span"):
        swizzle.pattern_bytes(16)
    with pytest.raises(ValueError, match="span"):
        swizzle.shared_image(np.zeros(16, np.uint8), 256)
    with pytest.raises(ValueError, match="16-byte chunks"):
        swizzle.shared_image(np.zeros(24, np.uint8), 128)
