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
            assert swizzle.col(row, col, 4, 128) == seed_col_swizzle(row, col)


def test_known_positions():
    # 128B, float32: row 1's chunk 0 goes to chunk 1 (elements 4..7 of the row).
    assert swizzle.index(1, 0, 32, 4, 128) == 32 + 4
    assert swizzle.index(1, 5, 32, 4, 128) == 32 + 1
    # 64B, fp16: rows are 64 bytes apart, two per 128-byte line; row 2 starts line 1.
    assert swizzle.index(2, 0, 32, 2, 64) == 2 * 32 + 8
    # 32B, uint8: only bit 7 matters; row 4 starts line 1.
    assert swizzle.index(4, 0, 32, 1, 32) == 4 * 32 + 16
    assert swizzle.index(3, 7, 32, 1, 32) == 3 * 32 + 7
    # No swizzle is the identity.
    assert swizzle.index(5, 3, 10, 8, 0) == 53


def test_narrow_rows_are_padded_to_the_span():
    # A 64-byte row with the 128B swizzle still occupies 128 bytes (measured on the H100).
    assert swizzle.row_pitch(16, 4, 128) == 128
    assert swizzle.index(1, 0, 16, 4, 128) == 32 + 4
    assert swizzle.shared_bytes((8, 16), 4, 128) == 8 * 128
    assert swizzle.shared_bytes((2, 3, 16), 4, 0) == 6 * 64
    image = swizzle.shared_image(np.ones((8, 16), np.float32), 128, fill=7)
    assert image.size == 1024 and (image == 7).sum() == 512


@pytest.mark.parametrize("span", [32, 64, 128])
@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_index_permutes_chunks_within_each_row(span, itemsize):
    for row_bytes in {span, max(16, span // 2)}:
        cols, rows = row_bytes // itemsize, 32
        r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
        idx = swizzle.index(r, c, cols, itemsize, span)
        assert len(set(idx.ravel())) == rows * cols
        per_row = span // itemsize
        np.testing.assert_array_equal(idx // per_row, r)          # the swizzle never leaves a row
        chunk = 16 // itemsize                                    # 16-byte chunks move whole
        np.testing.assert_array_equal(idx % chunk, c % chunk)
        np.testing.assert_array_equal(swizzle.col(r, c, itemsize, span), idx - r * per_row)


@pytest.mark.parametrize("span", [0, 32, 64, 128])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
def test_model_agrees_with_index_and_inverts(span, dtype):
    itemsize = np.dtype(dtype).itemsize
    for cols in {(span or 128) // itemsize, max(16, (span or 128) // 2) // itemsize}:
        tile = np.arange(16 * cols).astype(dtype).reshape(16, cols)
        image = swizzle.shared_image(tile, span).view(dtype)
        r, c = np.meshgrid(np.arange(16), np.arange(cols), indexing="ij")
        np.testing.assert_array_equal(image[swizzle.index(r, c, cols, itemsize, span)], tile)
        np.testing.assert_array_equal(swizzle.logical_tile(image, tile.shape, dtype, span), tile)
        if span:
            assert not np.array_equal(image[:tile.size], tile.ravel())


def test_pattern_bytes_and_errors():
    assert [swizzle.pattern_bytes(s) for s in (32, 64, 128)] == [256, 512, 1024]
    with pytest.raises(ValueError, match="span"):
        swizzle.pattern_bytes(16)
    with pytest.raises(ValueError, match="span"):
        swizzle.shared_image(np.zeros(16, np.uint8), 256)
    with pytest.raises(ValueError, match="16-byte chunks"):
        swizzle.shared_image(np.zeros((2, 24), np.uint8), 128)
    with pytest.raises(ValueError, match="wider than the 64B swizzle span"):
        swizzle.shared_image(np.zeros((2, 32), np.float32), 64)
