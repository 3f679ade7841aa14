"""Non-tensor bulk copies on the GPU: global -> shared -> global round trips of many sizes (odd
multiples of 16 bytes included) at several 16-byte-aligned offsets, shared -> global after
ordinary shared writes, every bulk reduction (op, type) of the ISA against
numba_tma.bulk.reduce_reference (exact), many blocks reducing into one range, the L2 prefetch;
and gmem.copy_async's 4-, 8- and 16-byte copies completing on an mbarrier."""

import functools

import numpy as np
import pytest

from gpu_helpers import TIMEOUT_NS, random_array, rng
from numba_tma import bulk, fence, gmem, mbarrier
from numba_tma._frontend import cuda
from numba_tma.warp import bf16_bits

BUF_BYTES = 16384
THREADS = 128


@functools.cache
def roundtrip_kernel(dtype):
    """src[src_off:] -> shared (bulk.load) -> dst[dst_off:] (bulk.copy_shared_to_global); the
    shared buffer is also copied to ``seen`` with ordinary loads, to check each direction."""
    n_buf = BUF_BYTES // np.dtype(dtype).itemsize

    @cuda.jit
    def kernel(src, src_off, dst, dst_off, nbytes, seen, ok):
        buf = cuda.shared.array(n_buf, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        if cuda.threadIdx.x == 0:
            bulk.load(buf, src[src_off:], nbytes, bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        n = nbytes // buf.itemsize
        for i in range(cuda.threadIdx.x, n, cuda.blockDim.x):
            seen[i] = buf[i]
        if cuda.threadIdx.x == 0:
            bulk.copy_shared_to_global(dst[dst_off:], buf, nbytes)
            bulk.commit_group()
            bulk.wait_group(0)

    return kernel


N_F32 = 8256
# (nbytes, src element offset, dst element offset) for float32: one 16-byte unit, odd numbers
# of units (3, 13, 1023), a whole 16 KB buffer; offsets of 0, 4, 12, 1000 elements (16-byte
# multiples); ranges ending exactly at the end of dst (4164 + 4092) and of src (8204 + 52).
F32_CASES = [(16, 0, 0), (48, 4, 12), (208, 12, 4), (4096, 1000, 0), (16368, 0, 4164),
             (16384, 4, 4), (208, 8204, 4)]


@pytest.mark.parametrize("nbytes,src_off,dst_off", F32_CASES)
def test_roundtrip_float32(nbytes, src_off, dst_off):
    n = nbytes // 4
    src = random_array(N_F32, np.float32)
    before = random_array(N_F32, np.float32)
    d_dst = cuda.to_device(before)
    seen = cuda.to_device(random_array(BUF_BYTES // 4, np.float32))
    ok = cuda.to_device(np.ones(1, np.int32))
    bulk.check_operand(d_dst, nbytes, offset=dst_off, name="dst")
    roundtrip_kernel(np.dtype(np.float32))[1, THREADS](
        cuda.to_device(src), src_off, d_dst, dst_off, nbytes, seen, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    np.testing.assert_array_equal(seen.copy_to_host()[:n], src[src_off:src_off + n])
    want = before.copy()
    want[dst_off:dst_off + n] = src[src_off:src_off + n]
    np.testing.assert_array_equal(d_dst.copy_to_host(), want)   # nothing else touched


@pytest.mark.parametrize("nbytes,src_off,dst_off", [(16, 0, 0), (80, 48, 16), (1232, 16, 4000),
                                                    (16384, 4000, 32)])
def test_roundtrip_uint8(nbytes, src_off, dst_off):
    src = random_array(20496, np.uint8)
    before = random_array(20496, np.uint8)
    d_dst = cuda.to_device(before)
    seen = cuda.to_device(random_array(BUF_BYTES, np.uint8))
    ok = cuda.to_device(np.ones(1, np.int32))
    roundtrip_kernel(np.dtype(np.uint8))[1, THREADS](
        cuda.to_device(src), src_off, d_dst, dst_off, nbytes, seen, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    np.testing.assert_array_equal(seen.copy_to_host()[:nbytes], src[src_off:src_off + nbytes])
    want = before.copy()
    want[dst_off:dst_off + nbytes] = src[src_off:src_off + nbytes]
    np.testing.assert_array_equal(d_dst.copy_to_host(), want)


@cuda.jit
def constant_size_kernel(src, dst, ok):
    # Compile-time sizes (checked when the kernel compiles) and two copies on two barriers.
    buf = cuda.shared.array(256, np.float64, alignment=128)
    bars = cuda.shared.array(2, np.uint64)
    mbarrier.init_block(bars, 1)
    if cuda.threadIdx.x == 0:
        bulk.load(buf, src, 1024, bars)
        mbarrier.arrive_expect_tx(bars[1:], 1008)
        bulk.copy_global_to_shared(buf[128:], src[130:], 1008, bars[1:])
    if not mbarrier.wait_bounded(bars, 0, TIMEOUT_NS):
        ok[0] = 0
    if not mbarrier.wait_bounded(bars[1:], 0, TIMEOUT_NS):
        ok[0] = 0
    if cuda.threadIdx.x == 0:
        bulk.copy_shared_to_global(dst[2:], buf, 2048 - 16)
        bulk.commit_group()
        bulk.wait_group(0)


def test_constant_sizes_and_two_barriers():
    src = random_array(512, np.float64)
    before = random_array(512, np.float64)
    d_dst = cuda.to_device(before)
    ok = cuda.to_device(np.ones(1, np.int32))
    constant_size_kernel[1, THREADS](cuda.to_device(src), d_dst, ok)
    assert ok.copy_to_host()[0] == 1, "mbarrier wait timed out"
    buf = np.concatenate([src[:128], src[130:256]])                 # 128 + 126 doubles
    want = before.copy()
    want[2:2 + 254] = buf
    np.testing.assert_array_equal(d_dst.copy_to_host(), want)


@cuda.jit
def store_kernel(vals, dst, dst_off, nbytes):
    # Ordinary shared writes, fenced to the async proxy, then one bulk store.
    buf = cuda.shared.array(4096, np.int32, alignment=128)
    for i in range(cuda.threadIdx.x, 4096, cuda.blockDim.x):
        buf[i] = vals[i]
    fence.proxy_async_shared()
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        bulk.copy_shared_to_global(dst[dst_off:], buf, nbytes)
        bulk.commit_group()
        bulk.wait_group_read(0)
    cuda.syncthreads()


@pytest.mark.parametrize("nbytes,dst_off", [(16, 0), (112, 8), (16384, 4), (4080, 4096)])
def test_store_after_ordinary_writes(nbytes, dst_off):
    vals = random_array(4096, np.int32)
    before = random_array(8192, np.int32)
    d_dst = cuda.to_device(before)
    store_kernel[1, THREADS](cuda.to_device(vals), d_dst, dst_off, nbytes)
    want = before.copy()
    want[dst_off:dst_off + nbytes // 4] = vals[:nbytes // 4]
    np.testing.assert_array_equal(d_dst.copy_to_host(), want)


@functools.cache
def reduce_kernel(dtype, op, ptx_type):
    n_buf = 1024

    @cuda.jit
    def kernel(vals, dst, dst_off, nbytes):
        # Block b reduces row b of vals into dst[dst_off:].
        buf = cuda.shared.array(n_buf, dtype, alignment=128)
        for i in range(cuda.threadIdx.x, n_buf, cuda.blockDim.x):
            buf[i] = vals[cuda.blockIdx.x, i]
        fence.proxy_async_shared()
        cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            bulk.reduce(dst[dst_off:], buf, nbytes, op, ptx_type)
            bulk.commit_group()
            bulk.wait_group(0)
        cuda.syncthreads()

    return kernel


def reduce_values(shape, dtype, ptx_type, op, contended):
    """Fresh values: halves as multiples of 1/8 in [-8, 8] (exact, and so are sums of two), or
    integers in [-2, 2] when many blocks add into one element (sums stay exact either way);
    small unsigned values for inc/dec so every branch of their rule occurs."""
    if ptx_type in ("bf16", "f16") or dtype == np.float16:
        lo, hi, scale = (-2, 2, 1) if contended else (-64, 64, 8)
        v = (rng.integers(lo, hi, size=shape, endpoint=True) / scale).astype(np.float32)
        return bf16_bits(v) if ptx_type == "bf16" else v.astype(np.float16)
    if op in ("inc", "dec"):
        return rng.integers(0, 12, size=shape, endpoint=True).astype(dtype)
    if np.dtype(dtype).kind == "f" and contended:
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return random_array(shape, dtype)


# Every (op, type) of the ISA's table for a .global destination, by the dtype that selects it.
BULK_REDUCE_CASES = [
    ("add", "uint32", None), ("add", "int32", None), ("add", "uint64", None),
    ("add", "int64", None), ("add", "float32", None), ("add", "float64", None),
    ("add", "float16", None), ("add", "uint16", "bf16"),
    ("min", "uint32", None), ("min", "int32", None), ("min", "uint64", None),
    ("min", "int64", None), ("min", "float16", None), ("min", "uint16", "bf16"),
    ("max", "uint32", None), ("max", "int32", None), ("max", "uint64", None),
    ("max", "int64", None), ("max", "float16", None), ("max", "uint16", "bf16"),
    ("inc", "uint32", None), ("dec", "uint32", None),
    ("and", "int32", None), ("and", "uint64", None), ("or", "uint32", None),
    ("or", "int64", None), ("xor", "int32", None), ("xor", "uint64", None),
]


def run_bulk_reduce(op, dtype_name, ptx_type, nbytes, dst_off, blocks):
    dtype = np.dtype(dtype_name)
    n = nbytes // dtype.itemsize
    contended = blocks > 1
    before = reduce_values(2048, dtype, ptx_type, op, contended)
    vals = reduce_values((blocks, 1024), dtype, ptx_type, op, contended)
    d_dst = cuda.to_device(before)
    reduce_kernel(dtype, op, ptx_type)[blocks, THREADS](cuda.to_device(vals), d_dst, dst_off,
                                                        nbytes)
    want = before.copy()
    for b in range(blocks):
        want[dst_off:dst_off + n] = bulk.reduce_reference(op, want[dst_off:dst_off + n],
                                                          vals[b, :n], ptx_type)
    return d_dst.copy_to_host(), want


@pytest.mark.parametrize("op,dtype_name,ptx_type", BULK_REDUCE_CASES)
def test_bulk_reduce_every_op_and_type(op, dtype_name, ptx_type):
    itemsize = np.dtype(dtype_name).itemsize
    for nbytes, byte_off in [(16, 0), (48, 16), (1024 * itemsize - 16, 16 * 5)]:
        got, want = run_bulk_reduce(op, dtype_name, ptx_type, nbytes, byte_off // itemsize, 1)
        np.testing.assert_array_equal(got, want, err_msg=f"nbytes {nbytes}, offset {byte_off} B")


@pytest.mark.parametrize("op,dtype_name,ptx_type", [
    ("add", "float32", None), ("add", "float64", None), ("add", "int64", None),
    ("add", "uint16", "bf16"), ("add", "float16", None), ("min", "int32", None),
    ("max", "uint64", None), ("xor", "uint32", None), ("or", "int64", None)])
def test_bulk_reduce_many_blocks(op, dtype_name, ptx_type):
    # 64 blocks reduce into the same range at once; the values make every order give one result.
    itemsize = np.dtype(dtype_name).itemsize
    got, want = run_bulk_reduce(op, dtype_name, ptx_type, 1024 * itemsize - 48, 48 // itemsize, 64)
    np.testing.assert_array_equal(got, want)


@cuda.jit
def prefetch_kernel(src, off, nbytes, out):
    if cuda.threadIdx.x == 0:
        bulk.prefetch(src[off:], nbytes)
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, out.shape[0], cuda.blockDim.x):
        out[i] = src[i]


def test_prefetch_is_a_harmless_hint():
    src = random_array(8192, np.float32)
    d_src = cuda.to_device(src)
    out = cuda.to_device(random_array(8192, np.float32))
    for off, nbytes in [(0, 16), (4, 4096), (1000, 28768)]:
        prefetch_kernel[1, THREADS](d_src, off, nbytes, out)
        np.testing.assert_array_equal(out.copy_to_host(), src)
    np.testing.assert_array_equal(d_src.copy_to_host(), src)


def test_check_operand_on_device_arrays():
    a = cuda.device_array(1000, np.float32)
    assert bulk.check_operand(a, 4000) == a.__cuda_array_interface__["data"][0]
    bulk.check_operand(a[4:], 3984)
    with pytest.raises(ValueError, match="not 16-byte aligned"):
        bulk.check_operand(a[1:], 16)
    with pytest.raises(ValueError, match="must be C-contiguous"):
        bulk.check_operand(cuda.device_array((8, 8), np.float32)[:, :4], 16)


@functools.cache
def copy_async_kernel(nbytes):
    """Each of 64 threads copies nbytes of src (from word off + t * nbytes / 4) into its part of
    a shared buffer with gmem.copy_async, ties it to the barrier and arrives; once the phase
    completes each thread reads another thread's part (so only the barrier orders the read)."""
    words = nbytes // 4

    @cuda.jit
    def kernel(src, off, out, ok):
        buf = cuda.shared.array(64 * 4, np.float32, alignment=16)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 64)
        t = cuda.threadIdx.x
        gmem.copy_async(buf[t * words:], src[off + t * words:], nbytes)
        gmem.copy_async_arrive(bar)
        mbarrier.arrive(bar)
        if not mbarrier.wait_bounded(bar, 0, TIMEOUT_NS):
            ok[0] = 0
        u = (t + 17) % 64
        for w in range(words):
            out[u * words + w] = buf[u * words + w]

    return kernel


@pytest.mark.parametrize("nbytes,off", [(4, 0), (4, 3), (8, 2), (8, 6), (16, 4), (16, 100)])
def test_copy_async_completes_on_the_barrier(nbytes, off):
    src = random_array(512, np.float32)
    n = 64 * nbytes // 4
    out = cuda.to_device(random_array(n, np.float32))
    ok = cuda.to_device(np.ones(1, np.int32))
    copy_async_kernel(nbytes)[1, 64](cuda.to_device(src), off, out, ok)
    assert ok.copy_to_host()[0] == 1, "the barrier's phase never completed"
    np.testing.assert_array_equal(out.copy_to_host(), src[off:off + n])
