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


# --- bank maps (seed 000's pictures) -----------------------------------------------------------

def test_bank_map_unswizzled_columns_share_a_bank():
    banks = swizzle.bank_map(32, 32, 4, 0)
    assert (banks == np.arange(32)[None, :]).all()          # every row the same: column = bank
    # 2-byte elements: two per bank
    assert (swizzle.bank_map(4, 64, 2, 0)[0] == np.arange(64) // 2).all()


def test_bank_map_128b_spreads_a_column_over_8_banks():
    banks = swizzle.bank_map(32, 32, 4, 128)
    r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    # chunk c // 4 of row r lands at chunk (c // 4) ^ (r % 8): bank 4 * that + c % 4
    np.testing.assert_array_equal(banks, (((c // 4) ^ (r % 8)) * 4) + c % 4)
    assert all(len(set(banks[:8, col])) == 8 for col in range(32))
    assert (np.sort(banks, axis=1) == np.arange(32)).all()     # each row still uses every bank
    # 64B: rows of 64 bytes (16 floats), two to a 128-byte line; the second line's chunks are
    # swapped in pairs (chunk ^ 1)
    banks = swizzle.bank_map(8, 16, 4, 64)
    assert banks[0].tolist() == list(range(16)) and banks[1].tolist() == list(range(16, 32))
    assert banks[2].tolist() == [4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11]


def test_bank_map_text_and_cli(capsys):
    assert swizzle.bank_map_text([[0, 1], [10, 31]]) == " 0  1\n10 31"
    assert swizzle.main(["--span", "128", "--itemsize", "4", "--rows", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:8] == ["4", "5", "6", "7", "0", "1", "2", "3"]
    with pytest.raises(SystemExit):
        swizzle.main(["--span", "128", "--cols", "64"])          # 256 bytes: wider than the span
    with pytest.raises(SystemExit):
        swizzle.main(["--span", "48"])


def test_bank_map_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "banks.png"
    assert swizzle.main(["--png", str(path), "--span", "64", "--itemsize", "2", "--rows", "16"]) == 0
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    size = (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"))
    assert size == swizzle.bank_map_size(16, 32)


def test_bank_map_module_runs_as_a_script(tmp_path):
    # python -m numba_tma.swizzle, as the README shows it, with no runpy warning on stderr
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "numba_tma.swizzle", "--span", "32",
                           "--itemsize", "4", "--rows", "2"], capture_output=True, text=True,
                          check=True)
    assert proc.stdout.splitlines()[1].split()[:4] == ["8", "9", "10", "11"]    # bytes 32-47
    assert "RuntimeWarning" not in proc.stderr


def test_a_span_outside_spans_is_refused_on_the_host_and_when_compiling():
    from numba_tma._frontend import cuda

    from numba_tma.offline import compile_kernel

    with pytest.raises(ValueError, match=r"span must be one of \(0, 32, 64, 128\) \(bytes\), got 48"):
        swizzle.index(0, 7, 8, 4, 48)
    with pytest.raises(ValueError, match="got 16"):
        swizzle.col(1, 2, 4, 16)
    assert swizzle.index(4, 1, 8, 4, 32) == 37 and swizzle.col(1, 2, 4, 128) == 6   # swizzled

    @cuda.jit
    def bad_index(out):
        out[0] = swizzle.index(cuda.threadIdx.x, 7, 8, 4, 48)

    @cuda.jit
    def bad_col(out):
        out[0] = swizzle.col(cuda.threadIdx.x, 2, 4, 96)

    @cuda.jit
    def good(out, span):                    # a run-time span: the caller keeps it in SPANS
        i = cuda.threadIdx.x
        out[i] = swizzle.index(i, 7, 8, 4, 128) + swizzle.col(i, 2, 4, 64) + \
            swizzle.index(i, 1, 8, 4, span)

    with pytest.raises(ValueError, match=r"swizzle.index: span must be one of .* got 48"):
        compile_kernel(bad_index, "void(int64[::1])")
    with pytest.raises(ValueError, match=r"swizzle.col: span must be one of .* got 96"):
        compile_kernel(bad_col, "void(int64[::1])")
    kb = compile_kernel(good, "void(int64[::1], int64)")
    assert kb.count("CALL") == 0 and kb.stack_bytes == 0
