"""TMA transposes and the public transpose() on the GPU: every kernel, element size, odd shapes."""

import numpy as np
import pytest

from gpu_helpers import random_array
from numba_tma._frontend import cuda
from numba_tma.kernels import transpose_sector
from numba_tma.transpose_api import choose_kernel, transpose, transpose_kernels

# TMA-legal shapes (rows of src and out a multiple of 16 bytes) that are not tile multiples.
TMA_SHAPES = {
    np.uint8: [(1, 1008, 784), (2, 48, 4112)],
    np.float16: [(1, 1000, 776), (3, 40, 264)],
    np.float32: [(1, 1000, 772), (3, 36, 4100), (1, 4096, 4096)],
    np.float64: [(1, 1002, 770), (2, 34, 518)],
}
CASES = [(d, s) for d, shapes in TMA_SHAPES.items() for s in shapes]


def run(name, a):
    src = cuda.to_device(a)
    out = cuda.to_device(random_array(a.shape[:-2] + (a.shape[-1], a.shape[-2]), a.dtype))
    transpose_kernels()[name](src, out)
    return out.copy_to_host()


@pytest.mark.parametrize("dtype,shape", CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_tma_pipelined(dtype, shape):
    a = random_array(shape, dtype)
    np.testing.assert_array_equal(run("tma_pipelined", a), np.swapaxes(a, -1, -2))


@pytest.mark.parametrize("name", ["tma_naive", "tma_swizzle128", "tma_batched"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_seed_tma_kernels(name, dtype):
    for shape in TMA_SHAPES[np.float32]:
        a = random_array(shape, dtype)
        np.testing.assert_array_equal(run(name, a), np.swapaxes(a, -1, -2), err_msg=str(shape))


@pytest.mark.parametrize("name", ["tma_naive", "tma_swizzle128", "tma_batched"])
def test_seed_tma_kernels_refuse_other_sizes(name):
    with pytest.raises(TypeError, match="4-byte"):
        run(name, random_array((1, 64, 64), np.float16))


@pytest.mark.parametrize("name", ["tma_naive", "tma_swizzle128", "tma_batched"])
def test_seed_tma_kernels_refuse_grid_overflow(name):
    # 65536 tile columns go to gridDim.y (column-major raster): refused before any encode.
    src = cuda.device_array((1, 32, 65536 * 32 + 4), np.float32)
    out = cuda.device_array((1, 65536 * 32 + 4, 32), np.float32)
    with pytest.raises(ValueError, match=f"{name}: 65537 tile columns.*tma_pipelined"):
        transpose_kernels()[name](src, out)


def test_transpose_picks_v7_or_v8_sector():
    # Rows that are not 16-byte multiples: no v7; the realigning v8_sector for every size.
    for dtype in (np.uint8, np.float16, np.float32, np.float64):
        for batch in ((), (1,)):                                      # 2-D and batched 3-D
            odd = cuda.to_device(random_array(batch + (33, 45), dtype))
            out = cuda.device_array(batch + (45, 33), dtype)
            assert transpose_sector.applies(odd, out) and choose_kernel(odd, out) == "v8_sector"
    # 16-byte rows: v7 on whole tiles, v8_sector where v7's element-wise edge paths would run.
    whole = {np.uint8: (256, 512), np.float16: (128, 256), np.float32: (64, 128),
             np.float64: (64, 64), np.int64: (128, 32)}
    for dtype, (M, N) in whole.items():
        a = cuda.to_device(random_array((M, N), dtype))
        assert choose_kernel(a, cuda.device_array((N, M), dtype)) == "v7_vec16"
        a = cuda.to_device(random_array((M, N + 16), dtype))
        assert choose_kernel(a, cuda.device_array((N + 16, M), dtype)) == "v8_sector"


@pytest.mark.parametrize("name", ["v7_vec16", "v8_sector"])
@pytest.mark.parametrize("through_numba", [False, True])
def test_direct_launch(name, through_numba):
    # transpose() launches v7/v8 from raw pointers; the words it packs must be numba's own (checked
    # on first use), and the fallback through numba's launch path must give the same result.
    from numba_tma.kernels import transpose_vec

    module = transpose_vec if name == "v7_vec16" else transpose_sector
    a = random_array((2, 128, 320), np.float32)
    src = cuda.to_device(a)
    out = cuda.to_device(random_array((2, 320, 128), np.float32))
    transpose(src, out, kernel=name)
    direct = module.LAUNCHER.direct(4)
    assert direct._native is True
    if through_numba:
        direct._native = False
        try:
            out = cuda.to_device(random_array((2, 320, 128), np.float32))
            transpose(src, out, kernel=name)
        finally:
            direct._native = True
    np.testing.assert_array_equal(out.copy_to_host(), np.swapaxes(a, -1, -2))


@pytest.mark.parametrize("shape", [(37, 45), (1000, 772), (5, 33, 47), (2, 64, 4100)])
@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
def test_transpose_any_shape(shape, dtype):
    a = random_array(shape, dtype)
    got = transpose(cuda.to_device(a)).copy_to_host()
    np.testing.assert_array_equal(got, np.swapaxes(a, -1, -2))


def test_transpose_torch_cupy_and_bfloat16():
    torch = pytest.importorskip("torch")
    t = torch.randn(300, 520, device="cuda")
    assert torch.equal(transpose(t), t.t())
    tb = t.to(torch.bfloat16)
    got = transpose(tb)
    assert got.dtype == torch.bfloat16 and torch.equal(got, tb.t())
    cp = pytest.importorskip("cupy")
    c = cp.asarray(random_array((3, 40, 72), np.int64))
    assert bool((transpose(c) == cp.swapaxes(c, 1, 2)).all())


def test_transpose_into_given_out():
    a = random_array((130, 260), np.float32)
    out = cuda.to_device(random_array((260, 130), np.float32))
    assert transpose(cuda.to_device(a), out) is out
    np.testing.assert_array_equal(out.copy_to_host(), a.T)


def test_transpose_rejects_bad_input():
    a = cuda.to_device(random_array((64, 32), np.float32))
    with pytest.raises(TypeError, match="src must be a CUDA device array"):
        transpose(np.zeros((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"out must have shape \(32, 64\)"):
        transpose(a, cuda.device_array((64, 32), np.float32))
    with pytest.raises(TypeError, match="out dtype float64 differs"):
        transpose(a, cuda.device_array((32, 64), np.float64))
    with pytest.raises(ValueError, match="src must be 2-D"):
        transpose(cuda.device_array((2, 2, 2, 2), np.float32))
    with pytest.raises(ValueError, match="C-contiguous"):
        transpose(a[:, ::2])
    with pytest.raises(ValueError, match="overlaps"):
        transpose(a, a.reshape(32, 64))
    with pytest.raises(ValueError, match="kernel must be one of"):
        transpose(a, kernel="nope")
    odd = cuda.to_device(random_array((33, 45), np.float32))
    with pytest.raises(ValueError, match="multiple of 16"):
        transpose(odd, kernel="tma_pipelined")
    with pytest.raises(TypeError, match="1, 2, 4 or 8 bytes"):
        transpose(cuda.device_array((4, 4), np.complex128))


# Shapes past CUDA's 65535 limit on gridDim.y / gridDim.z (issue 18, item 3): a batch over 65535
# (the grid's z), and more tile rows than 65535 (the grid's y) for each element size, on both
# 16-byte kernels and the classic fallback; each shape exceeds the limit for every kernel named.
HUGE = [
    (np.float32, (70000, 16, 16), ("v7_vec16", "v8_sector", "v6_packed")),
    (np.float32, (5_000_000, 4), ("v7_vec16", "v8_sector")),
    (np.float16, (9_000_000, 8), ("v7_vec16", "v8_sector")),
    (np.uint8, (17_000_000, 16), ("v7_vec16", "v8_sector")),
    (np.float64, (4_200_000, 2), ("v7_vec16", "v8_sector")),
]
POISON = {1: 0xA5, 2: 0xDEAD, 4: 0x7FC0DEAD, 8: 0x7FF8DEADBEEF0001}


@pytest.mark.parametrize("dtype,shape,names", HUGE, ids=lambda v: getattr(v, "__name__", str(v)))
def test_transpose_past_grid_limits(dtype, shape, names):
    """Every shape numba can allocate runs: the launchers split grids past gridDim.y/z = 65535
    (pointer offsets per batch chunk, a tile-row offset per row chunk); v6_packed hands such
    shapes to v6_persistent. Exact compare of the bits; out is poisoned first."""
    a = random_array(shape, dtype)
    want = np.swapaxes(a, -1, -2)
    src = cuda.to_device(a)
    size = np.dtype(dtype).itemsize
    bits = np.dtype(f"u{size}")
    for name in (None,) + names:
        out = cuda.to_device(np.full(want.shape, POISON[size], bits).view(dtype))
        assert transpose(src, out, kernel=name) is out
        got = out.copy_to_host()
        np.testing.assert_array_equal(got.view(bits), want.view(bits), err_msg=str(name))
