"""Descriptors rewritten on the device (tensormap.replace + tensormap-proxy release/acquire):
retargeted address, shape and pitch, box and element strides, both publication paths (in global
memory; in shared memory then tensormap.cp_fenceproxy), across kernels, and the grouped copy."""

import functools

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, box_model, random_array
from numba_tma import TensorMap, mbarrier, tma
from numba_tma._frontend import cuda
from numba_tma.tensormap import device as tmd
from numba_tma.kernels.grouped_copy import grouped_copy

BOX = (8, 32)                       # the original map's box: 8 rows of 32 float32
TILE = BOX[0] * BOX[1]


@functools.cache
def retarget_kernel(via_shared):
    @cuda.jit
    def kernel(desc, slot, new_base, rows, cols, pitch, y, x, out, ok):
        tile = cuda.shared.array(TILE, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        sdesc = cuda.shared.array(16, np.uint64, alignment=128)
        mbarrier.init_block(bar, 1)
        tid = cuda.threadIdx.x
        if via_shared:
            if tid < 16:
                sdesc[tid] = desc[tid]
            cuda.syncthreads()
            if tid == 0:
                tmd.replace_global_address(sdesc, new_base, space="shared")
                tmd.replace_global_dim(sdesc, 0, cols, space="shared")
                tmd.replace_global_dim(sdesc, 1, rows, space="shared")
                tmd.replace_global_stride(sdesc, 0, pitch, space="shared")
            cuda.syncwarp()
            if tid < 32:
                tmd.cp_fence_release(slot, sdesc)
            used = slot
        else:
            if tid == 0:
                tmd.replace_global_address(desc, new_base)
                tmd.replace_global_dim(desc, 0, cols, space="global")
                tmd.replace_global_dim(desc, 1, rows, space="global")
                tmd.replace_global_stride(desc, 0, pitch, space="global")
                tmd.fence_release()
            used = desc
        if tid == 0:
            tmd.fence_acquire(used)
            mbarrier.arrive_expect_tx(bar, TILE * 4)
            tma.load(tile, used, (y, x), bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        for i in range(tid, TILE, cuda.blockDim.x):
            out[i] = tile[i]

    return kernel


def padded_view(rows, cols, pitch_elems, col0):
    """A (rows, cols) float32 device view whose rows are pitch_elems apart, and its host copy."""
    base = random_array((rows, pitch_elems), np.float32)
    return cuda.to_device(base)[:, col0:col0 + cols], base[:, col0:col0 + cols]


@pytest.mark.parametrize("via_shared", [False, True])
def test_retarget_address_shape_and_pitch(via_shared):
    a = cuda.to_device(random_array((16, 32), np.float32))
    desc = TensorMap(a, BOX)
    slot = cuda.to_device(np.zeros(16, np.uint64))   # 128-byte aligned: its own allocation
    b_dev, b_host = padded_view(50, 36, 48, 4)        # pitch 192 B, address + 16 B
    for y, x in [(0, 0), (45, 32), (20, 0)]:          # the second hangs off both edges of b
        out = cuda.to_device(random_array(TILE, np.float32))
        ok = cuda.to_device(np.ones(1, np.int32))
        retarget_kernel(via_shared)[1, 128](desc, slot, b_dev, 50, 36, 48 * 4, y, x, out, ok)
        assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
        np.testing.assert_array_equal(out.copy_to_host().reshape(BOX),
                                      box_model(b_host, (y, x), BOX), err_msg=f"at {(y, x)}")


@cuda.jit
def rebox_kernel(desc, y, x, out, ok):
    tile = cuda.shared.array(TILE, np.float32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    if cuda.threadIdx.x == 0:
        tmd.replace_box_dim(desc, 0, 16)              # 16 columns instead of 32
        tmd.replace_element_stride(desc, 1, 2)        # every other row: ceil(8 / 2) = 4 rows
        tmd.fence_release()
        tmd.fence_acquire(desc)
        mbarrier.arrive_expect_tx(bar, 4 * 16 * 4)
        tma.load(tile, desc, (y, x), bar)
    if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
        ok[0] = 0
    for i in range(cuda.threadIdx.x, 4 * 16, cuda.blockDim.x):
        out[i] = tile[i]


def test_replace_box_dim_and_element_stride():
    a_host = random_array((40, 64), np.float32)
    desc = TensorMap(cuda.to_device(a_host), BOX)
    y, x = 3, 48
    out = cuda.to_device(random_array(64, np.float32))
    ok = cuda.to_device(np.ones(1, np.int32))
    rebox_kernel[1, 64](desc, y, x, out, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out (transaction count mismatch?)"
    want = box_model(a_host, (y, x), (8, 16), (2, 1))
    np.testing.assert_array_equal(out.copy_to_host().reshape(4, 16), want)


@cuda.jit
def modify_kernel(desc, new_base, rows, cols, pitch):
    if cuda.threadIdx.x == 0:
        tmd.replace_global_address(desc, new_base, space="global")
        tmd.replace_global_dim(desc, 0, cols)
        tmd.replace_global_dim(desc, 1, rows)
        tmd.replace_global_stride(desc, 0, pitch)
        tmd.fence_release()


@cuda.jit
def consume_kernel(desc, out, ok):
    tile = cuda.shared.array(TILE, np.float32, alignment=128)
    bar = cuda.shared.array(1, np.uint64)
    mbarrier.init_block(bar, 1)
    y = cuda.blockIdx.x * BOX[0]
    if cuda.threadIdx.x == 0:
        tmd.fence_acquire(desc)   # every block acquires: stream order alone is not enough
        mbarrier.arrive_expect_tx(bar, TILE * 4)
        tma.load(tile, desc, (y, 0), bar)
    if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
        ok[0] = 0
    for i in range(cuda.threadIdx.x, TILE, cuda.blockDim.x):
        out[cuda.blockIdx.x * TILE + i] = tile[i]


def test_modified_in_one_kernel_used_in_the_next():
    desc = TensorMap(cuda.to_device(random_array((16, 32), np.float32)), BOX)
    b_dev, b_host = padded_view(29, 32, 40, 8)
    modify_kernel[1, 32](desc, b_dev, 29, 32, 40 * 4)
    blocks = 4                                        # rows 0..31 of a 29-row matrix
    out = cuda.to_device(random_array(blocks * TILE, np.float32))
    ok = cuda.to_device(np.ones(1, np.int32))
    consume_kernel[blocks, 128](desc, out, ok)
    assert ok.copy_to_host()[0] == 1
    got = out.copy_to_host().reshape(blocks * BOX[0], BOX[1])
    np.testing.assert_array_equal(got, box_model(b_host, (0, 0), (blocks * BOX[0], BOX[1])))


GROUP_SHAPES = [(37, 40), (128, 96), (5, 8), (300, 24), (64, 64), (1, 4)]


@pytest.mark.parametrize("via_shared", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8])
def test_grouped_copy(via_shared, dtype):
    itemsize = np.dtype(dtype).itemsize
    chunk = 16 // itemsize                            # row lengths in whole 16-byte chunks
    shapes = [(r, -(-c // chunk) * chunk) for r, c in GROUP_SHAPES]
    hosts = [random_array(s, dtype) for s in shapes]
    srcs = [cuda.to_device(h) for h in hosts]
    # One source is a padded view (row pitch != row length), one destination too.
    base = random_array((70, 3 * 16 * chunk), dtype)
    hosts.append(base[:, chunk:chunk + 16 * chunk])
    srcs.append(cuda.to_device(base)[:, chunk:chunk + 16 * chunk])
    dsts = [cuda.to_device(random_array(h.shape, dtype)) for h in hosts[:-1]]
    dst_base = cuda.to_device(random_array((70, 2 * 16 * chunk), dtype))
    dsts.append(dst_base[:, :16 * chunk])
    grouped_copy(srcs, dsts, via_shared=via_shared)
    for i, (h, d) in enumerate(zip(hosts, dsts)):
        np.testing.assert_array_equal(d.copy_to_host(), h, err_msg=f"matrix {i} {h.shape}")


def test_grouped_copy_validates_first():
    a = cuda.to_device(np.zeros((8, 8), np.float32))
    with pytest.raises(ValueError, match=r"srcs\[0\] has shape \(8, 8\) but dsts\[0\] has"):
        grouped_copy([a], [cuda.to_device(np.zeros((8, 12), np.float32))])
    with pytest.raises(TypeError, match=r"srcs\[1\]/dsts\[1\] have dtypes"):
        grouped_copy([a, a], [a, cuda.to_device(np.zeros((8, 8), np.float64))])
    with pytest.raises(ValueError, match=r"stride of axis 0 is 24 bytes"):
        b = cuda.to_device(np.zeros((8, 6), np.float32))
        grouped_copy([b], [b])
