"""Offline (no GPU) checks of transpose()'s host side: validation straight from the array
interface (errors name the argument before anything reaches the driver), the kernel choice for
every element size and shape class, and the argument words of the direct launch."""

import ctypes
import importlib
import os

import numpy as np
import pytest

from numba_tma import front_end
from numba_tma._frontend import types
from numba_tma.kernels import transpose_vec
from numba_tma.launch import DirectKernel

# The module (the package's `transpose` attribute is the function).
api = importlib.import_module("numba_tma.transpose_api")

pytestmark = pytest.mark.skipif(os.environ.get("NUMBA_ENABLE_CUDASIM") == "1",
                                reason="the simulator's arrays take the numba-view path")


@pytest.fixture(autouse=True)
def no_launch_device(monkeypatch):
    """The fake pointers below are on no device: skip the device check (tests/test_operands.py
    tests it), also on a machine with several GPUs where it would ask the driver about them."""
    from numba_tma import operands

    monkeypatch.setattr(operands, "launch_device", lambda: None)


class FakeCuda:
    """An object exporting only __cuda_array_interface__ (never dereferenced here)."""

    def __init__(self, shape, dtype, ptr, strides=None):
        self.__cuda_array_interface__ = {
            "shape": tuple(shape), "typestr": np.dtype(dtype).str, "data": (ptr, False),
            "strides": strides, "version": 3}


BASE = 1 << 40          # far apart, 256-byte aligned fake device addresses
OTHER = 2 << 40


def pair(shape, dtype, src_ptr=BASE, out_ptr=OTHER):
    out_shape = shape[:-2] + (shape[-1], shape[-2])
    return FakeCuda(shape, dtype, src_ptr), FakeCuda(out_shape, dtype, out_ptr)


def test_validate_reads_the_interface():
    s, o = api._validate(*pair((3, 40, 72), np.int16))
    assert s == api._Operand(s.array, BASE, (3, 40, 72), 2, "int16")
    assert o.shape == (3, 72, 40) and o.ptr == OTHER and o.dtype == "int16"
    s, o = api._validate(*pair((40, 72), np.float64))               # 2-D is batch 1
    assert s.shape == (1, 40, 72) and o.shape == (1, 72, 40) and s.itemsize == 8


def test_validate_names_what_is_wrong():
    src, out = pair((64, 32), np.float32)
    with pytest.raises(TypeError, match="src must be a CUDA device array"):
        api._validate(np.zeros((4, 4), np.float32), out)
    with pytest.raises(TypeError, match="out must be a CUDA device array"):
        api._validate(src, np.zeros((32, 64), np.float32))
    with pytest.raises(ValueError, match="src must be 2-D"):
        api._validate(FakeCuda((2, 2, 2, 2), np.float32, BASE), out)
    with pytest.raises(TypeError, match="1, 2, 4 or 8 bytes; complex128 is 16"):
        api._validate(*pair((4, 4), np.complex128))
    with pytest.raises(ValueError, match=r"out must have shape \(32, 64\)"):
        api._validate(src, FakeCuda((64, 32), np.float32, OTHER))
    with pytest.raises(TypeError, match="out dtype float64 differs from src dtype float32"):
        api._validate(src, FakeCuda((32, 64), np.float64, OTHER))
    with pytest.raises(ValueError, match="src must be C-contiguous"):
        api._validate(FakeCuda((64, 32), np.float32, BASE, strides=(256, 8)), out)
    with pytest.raises(ValueError, match="out must be C-contiguous"):
        api._validate(src, FakeCuda((32, 64), np.float32, OTHER, strides=(4, 128)))
    with pytest.raises(ValueError, match="overlaps"):
        api._validate(src, FakeCuda((32, 64), np.float32, BASE + 4096))
    # Strides of a C-contiguous layout (and of size-1 axes) are accepted as given.
    api._validate(FakeCuda((1, 64, 32), np.float32, BASE, strides=(0, 128, 4)),
                  FakeCuda((1, 32, 64), np.float32, OTHER, strides=(8192, 256, 4)))


# src rows x cols of v7's tile per element size (packed 1- and 2-byte elements: 4 or 2 src rows
# per word row).
V7_TILE = {1: (256, 256), 2: (128, 128), 4: (64, 64), 8: (64, 32)}


@pytest.mark.parametrize("itemsize", [1, 2, 4, 8])
def test_choice(itemsize):
    dtype = np.dtype(f"u{itemsize}")
    rows, cols = V7_TILE[itemsize]
    assert transpose_vec.TILES[itemsize][1] == cols

    def choose(M, N, src_ptr=BASE):
        return api._choose(*api._validate(*pair((M, N), dtype, src_ptr)))

    assert choose(rows * 3, cols * 5) == "v7_vec16"
    assert choose(rows * 3, cols * 5 + 16) == "v8_sector"           # partial tile column
    # A partial tile row: v7's edge path is cheap for 4- and 8-byte elements only.
    assert choose(rows * 3 + 16, cols * 5) == ("v7_vec16" if itemsize >= 4 else "v8_sector")
    assert choose(rows * 3 + 1, cols * 5 + 1) == "v8_sector"        # rows not 16-byte multiples
    assert choose(rows, cols, src_ptr=BASE + itemsize) == "v8_sector"    # misaligned base
    assert transpose_vec.whole_tiles(itemsize, rows, cols)


def test_direct_kernel_words_follow_numba_array_layout():
    # numba-cuda passes a 1-D C array as meminfo, parent, nitems, itemsize, data, shape, strides
    # (bytes); numba-cuda-mlir as its memref descriptor: allocated and aligned pointers, offset,
    # shape, strides (elements).
    def kernel():
        pass

    mlir = front_end() == "numba-cuda-mlir"
    u4 = types.Array(types.uint32, 1, "C")
    d = DirectKernel(kernel, (u4, types.Array(types.uint8, 1, "C"), types.int64, types.uint32))
    words = d._words([(0x1000, 10), (0x2000, 7), -3, 5])
    arrays = ([0x1000, 0x1000, 0, 10, 1, 0x2000, 0x2000, 0, 7, 1] if mlir else
              [0, 0, 10, 4, 0x1000, 10, 4, 0, 0, 7, 1, 0x2000, 7, 1])
    assert words[:len(arrays)] == arrays
    assert isinstance(words[len(arrays)], ctypes.c_int64) and words[len(arrays)].value == -3
    assert isinstance(words[-1], ctypes.c_uint32) and words[-1].value == 5
    # N-D arrays (any layout) come from their array interface: shape then strides.
    class Fake:
        __cuda_array_interface__ = {"shape": (3, 5), "strides": None, "typestr": "<f4",
                                    "data": (0x3000, False), "version": 3}

    d2 = DirectKernel(kernel, (types.Array(types.float32, 2, "C"),))
    assert d2._words([Fake()]) == ([0x3000, 0x3000, 0, 3, 5, 5, 1] if mlir else
                                   [0, 0, 15, 4, 0x3000, 3, 5, 20, 4])
    with pytest.raises(TypeError, match=r"args\[0\]: \(pointer, nitems\) stands for a 1-D"):
        d2._words([(0x3000, 15)])
    with pytest.raises(TypeError, match=r"args\[0\]: the kernel takes a 1-D array of 4-byte"):
        d._words([Fake(), (0x2000, 7), -3, 5])
    with pytest.raises(TypeError, match=r"args\[1\] must be a CUDA array"):
        d._words([(0x1000, 10), object(), -3, 5])
    with pytest.raises(TypeError, match=r"argtypes\[1\]: only arrays, integers, booleans and"):
        DirectKernel(kernel, (u4, types.complex64))
    # a signature string works as argtypes
    assert DirectKernel(kernel, "void(float32[:, ::1], int64)")._argtypes == \
        (types.Array(types.float32, 2, "C"), types.int64)
    # floats go as numba passes them: float32 as a C float, float64 as a C double
    d = DirectKernel(kernel, (types.float32, types.float64))
    f, g = d._words([0.5, -2.0])
    assert isinstance(f, ctypes.c_float) and f.value == 0.5
    assert isinstance(g, ctypes.c_double) and g.value == -2.0


def test_direct_kernel_cluster_checked_before_the_driver():
    def kernel():
        pass

    d = DirectKernel(kernel, (types.int64,))
    with pytest.raises(ValueError, match=r"grid = \(3, 1, 1\) \(in blocks\) is not a multiple"):
        d.launch((3, 1, 1), (128, 1, 1), 0, 1, cluster=(2, 1, 1))
    with pytest.raises(ValueError, match="portable"):
        d.launch((16, 1, 1), (128, 1, 1), 0, 1, cluster=(16, 1, 1))
    with pytest.raises(TypeError, match="takes 1 arguments, got 2"):
        d.launch((2, 1, 1), (128, 1, 1), 0, 1, 2, cluster=(2, 1, 1))


def test_matmul_argtypes_are_the_gemm_signature():
    from numba_tma._frontend import sigutils

    from numba_tma.kernels.gemm import GemmConfig, WgmmaConfig, plan

    for cfg in (GemmConfig(), WgmmaConfig()):
        args, _ = sigutils.normalize_signature(cfg.signature)
        assert tuple(args) == plan.ARGTYPES


class RecordingKernel:
    """Stands in for a DirectKernel: records each launch's grid and arguments."""

    def __init__(self):
        self.launches = []

    def launch(self, grid, block, stream, *args):
        self.launches.append((grid, args))


def test_grid_chunks():
    from numba_tma.kernels._grid import grid_chunks

    assert grid_chunks(65535, 65535) == ((0, 65535, 0, 65535),)
    assert grid_chunks(78126, 1) == ((0, 65535, 0, 1), (65535, 12591, 0, 1))
    assert grid_chunks(1, 70000) == ((0, 1, 0, 65535), (0, 1, 65535, 4465))
    chunks = grid_chunks(131071, 65536)
    assert len(chunks) == 6 and sum(ny * nz for _, ny, _, nz in chunks) == 131071 * 65536


@pytest.mark.parametrize("module, B, M, N, itemsize, launches", [
    ("vec", 70000, 16, 16, 4, 2),          # batch over 65535: two launches, pointer offsets
    ("sector", 70000, 16, 16, 4, 2),
    ("sector", 1, 5_000_000, 4, 4, 2),     # 78126 tile rows: two launches, tile_y0 offsets
    ("vec", 1, 5_000_000, 64, 4, 2),
    ("vec", 3, 64, 64, 4, 1),              # within the limits: one launch of the plain kernel
    ("sector", 3, 100, 37, 2, 1),
])
def test_launch_splits_the_grid(monkeypatch, module, B, M, N, itemsize, launches):
    """transpose()'s v7/v8 launchers split grids past gridDim.y/z = 65535 into launches that
    cover every tile row of every matrix once; one launch, of the plain kernel, otherwise."""
    from numba_tma.kernels import transpose_sector as ts
    from numba_tma.kernels._grid import MAX_GRID_YZ

    mod = transpose_vec if module == "vec" else ts
    rec, variants = RecordingKernel(), []

    def fake_direct(itemsize_, row_offset=False):
        variants.append(row_offset)
        return rec

    monkeypatch.setattr(mod.LAUNCHER, "direct", fake_direct)
    mod.LAUNCHER.launch(BASE, OTHER, B, M, N, itemsize)
    assert len(rec.launches) == launches
    tall = len({args[-1] for _, args in rec.launches}) > 1        # several tile_y0
    assert variants == [tall]
    per = M * N
    if module == "vec":
        trows, cols = V7_TILE[itemsize]
        tiles_y = -(-M // trows)
    else:
        trows, cols = ts.TILES[itemsize][:2]
        tiles_y = -(-(M + 32 // itemsize - 1) // trows)
    covered = set()
    for (gx, ny, nz), args in rec.launches:
        assert gx == -(-N // cols) and ny <= MAX_GRID_YZ and nz <= MAX_GRID_YZ
        (s_ptr, s_n), (o_ptr, o_n) = args[0], args[1]
        z0, r = divmod(s_ptr - BASE, per * itemsize)
        assert r == 0 and o_ptr - OTHER == s_ptr - BASE
        y0 = args[-1]
        if module == "vec":
            assert args[2] == (s_ptr, nz * per) and args[3] == (o_ptr, nz * per)
            assert s_n == nz * per * itemsize // (8 if itemsize == 8 else 4)
            assert args[4:6] == (M, N)
        else:
            assert s_n == o_n == nz * per
            assert args[2:6] == (M, N, s_ptr % 128, o_ptr % 128)
        for z in range(z0, z0 + nz):
            for y in range(y0, y0 + ny):
                assert (z, y) not in covered
                covered.add((z, y))
    assert len(covered) == B * tiles_y
