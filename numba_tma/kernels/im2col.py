"""im2col through TMA's im2col mode: the patch matrix of an NHWC image batch for a KxK filter
(stride 1, zero padding), and a tiny implicit-GEMM convolution built on the same loads.

Each block owns ``BLOCK_PIXELS`` consecutive output pixels ``m = (n, ho, wo)``. For every filter
tap ``(r, s)`` and channel slice it issues one ``tma.load_im2col`` whose spatial coordinates are
the first pixel's filter base ``(ho - p, wo - p)`` and whose im2col offsets are ``(r, s)``: the TMA
unit walks the next ``BLOCK_PIXELS`` output pixels (wrapping rows and images itself), reads each at
base + tap, and zero-fills the padding. The block then copies the ``(pixels, channels)`` tile
into columns ``(r * K + s) * C + c`` of the patch matrix (``im2col``) or multiplies it into one
output channel (``conv2d_nhwc``, SIMT accumulation: a demonstration, not a fast convolution).

The pixel box is the CUTLASS convention for dilation 1: ``lower = -p``, ``upper = p - (K - 1)``
on H and W, so the box holds exactly the ``Ho x Wo`` output pixels.
"""

import functools

import numpy as np

from .._frontend import cuda
from .. import mbarrier, tma
from .._device import require_hopper
from ..launch import configure
from ..tensormap import describe_array, resolve_dtype
from ..tensormap.im2col import IM2COL_CORNER_RANGE, Im2colTensorMap

__all__ = ["im2col", "conv2d_nhwc", "im2col_numpy", "conv2d_numpy", "load_im2col_model",
           "BLOCK_PIXELS", "THREADS"]

BLOCK_PIXELS = 64  # pixels_per_column of every load: rows of the patch matrix per block
THREADS = 128
CONV_THREADS = BLOCK_PIXELS  # conv2d_nhwc: one thread per output pixel of the block
MAX_SLICE_BYTES = 128  # channels per load: at most one 128-byte line per pixel
SLICE_ALIGN_BYTES = 16  # TMA moves whole 16-byte chunks; the channel coordinate stays aligned
WAIT_TIMEOUT_NS = 2_000_000_000  # a lost transaction fails the call instead of hanging it
NHWC_RANK = 4


# ---------------------------------------------------------------------------------------------
# numpy models
# ---------------------------------------------------------------------------------------------

def output_size(extent, kernel_size, padding):
    """Output extent of a stride-1, dilation-1 convolution."""
    return extent + 2 * padding - kernel_size + 1


def im2col_numpy(x, kernel_size, padding):
    """The patch matrix of NHWC ``x``: ``(N * Ho * Wo, K * K * C)``; column
    ``(r * K + s) * C + c`` holds tap ``(r, s)``, channel ``c``."""
    n, h, w, c = x.shape
    k, p = kernel_size, padding
    ho, wo = output_size(h, k, p), output_size(w, k, p)
    pad = np.zeros((n, h + 2 * p, w + 2 * p, c), x.dtype)
    pad[:, p:p + h, p:p + w] = x
    cols = np.empty((n, ho, wo, k, k, c), x.dtype)
    for r in range(k):
        for s in range(k):
            cols[:, :, :, r, s] = pad[:, r:r + ho, s:s + wo]
    return cols.reshape(n * ho * wo, k * k * c)


def conv2d_numpy(x, weight, padding):
    """Stride-1 convolution of NHWC ``x`` with ``weight`` ``(K, K, C, Cout)``, in float64."""
    n, h, w, _ = x.shape
    k = weight.shape[0]
    ho, wo = output_size(h, k, padding), output_size(w, k, padding)
    cols = im2col_numpy(x, k, padding).astype(np.float64)
    out = cols @ weight.reshape(-1, weight.shape[-1]).astype(np.float64)
    return out.reshape(n, ho, wo, weight.shape[-1])


def load_im2col_model(x, coords, offsets, lower, upper, pixels, channels, element_strides=None,
                      fill=0):
    """What one ``tma.load_im2col`` leaves in shared memory: a ``(pixels, channels)`` tile.

    ``x`` is NWC/NHWC/NDHWC; ``coords = (n, [d, h,] w, c)``, ``offsets``, ``lower``, ``upper``
    and ``element_strides`` in array order (the PTX ISA's im2col traversal): the filter base walks
    W fastest from ``coords``; past ``extent - 1 + upper`` it returns to ``lower`` and carries
    into the next spatial axis, then into N. Reads outside ``x`` give ``fill``.
    """
    spatial = x.ndim - 2
    extents = x.shape[1:-1]
    steps = (element_strides or (1,) * x.ndim)[1:-1]
    n, base, c0 = coords[0], list(coords[1:-1]), coords[-1]
    out = np.full((pixels, channels), fill, x.dtype)
    lo_c, hi_c = max(c0, 0), min(c0 + channels, x.shape[-1])
    for pix in range(pixels):
        pos = [base[i] + offsets[i] for i in range(spatial)]
        inside = 0 <= n < x.shape[0] and all(0 <= pos[i] < extents[i] for i in range(spatial))
        if inside and hi_c > lo_c:
            out[pix, lo_c - c0:hi_c - c0] = x[(n, *pos)][lo_c:hi_c]
        axis = spatial - 1
        while True:
            base[axis] += steps[axis]
            if base[axis] <= extents[axis] - 1 + upper[axis]:
                break
            base[axis] = lower[axis]
            axis -= 1
            if axis < 0:
                n += 1
                break
    return out


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

def channel_slice(channels, itemsize):
    """Channels per load: all of them rounded up to 16 bytes, at most one 128-byte line."""
    per_chunk = SLICE_ALIGN_BYTES // itemsize
    rounded = -(-channels // per_chunk) * per_chunk
    return min(rounded, MAX_SLICE_BYTES // itemsize)


@functools.cache
def _gather_kernel(dtype, slice_c):
    tile_elems = BLOCK_PIXELS * slice_c
    tx_bytes = tile_elems * dtype.itemsize

    @cuda.jit
    def im2col_kernel(desc, out, n_pixels, out_hw, out_w, channels, ksize, pad, status):
        tile = cuda.shared.array(tile_elems, dtype, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        tid = cuda.threadIdx.x
        m0 = np.int32(cuda.blockIdx.x * BLOCK_PIXELS)
        n0 = m0 // np.int32(out_hw)
        rem = m0 - n0 * np.int32(out_hw)
        ho = rem // np.int32(out_w)
        wo = rem - ho * np.int32(out_w)
        h0 = ho - np.int32(pad)
        w0 = wo - np.int32(pad)
        n_slices = (np.int32(channels) + np.int32(slice_c - 1)) // np.int32(slice_c)
        taps = np.int32(ksize) * np.int32(ksize)
        for it in range(taps * n_slices):
            tap = np.int32(it) // n_slices
            c0 = (np.int32(it) - tap * n_slices) * np.int32(slice_c)
            r = tap // np.int32(ksize)
            s = tap - r * np.int32(ksize)
            if tid == 0:
                mbarrier.arrive_expect_tx(bar, tx_bytes)
                tma.load_im2col(tile, desc, (n0, h0, w0, c0), (r, s), bar)
            if not mbarrier.wait_bounded(bar, np.int32(it) & 1, WAIT_TIMEOUT_NS):
                status[0] = 0
                break           # every later phase would time out too: one timeout, not many
            col0 = tap * np.int32(channels) + c0
            for idx in range(tid, tile_elems, THREADS):
                i = np.int32(idx) // np.int32(slice_c)
                j = np.int32(idx) - i * np.int32(slice_c)
                if m0 + i < n_pixels and c0 + j < channels:
                    out[m0 + i, col0 + j] = tile[idx]
            cuda.syncthreads()  # every read of tile is done before the next load overwrites it

    return im2col_kernel


@functools.cache
def _conv_kernel(slice_c):
    tile_elems = BLOCK_PIXELS * slice_c
    tx_bytes = tile_elems * 4

    @cuda.jit
    def conv_kernel(desc, weight, out, n_pixels, out_hw, out_w, channels, ksize, pad, status):
        tile = cuda.shared.array(tile_elems, np.float32, alignment=128)
        bar = cuda.shared.array(1, np.uint64)
        mbarrier.init_block(bar, 1)
        tid = cuda.threadIdx.x
        k_out = cuda.blockIdx.y
        m0 = np.int32(cuda.blockIdx.x * BLOCK_PIXELS)
        n0 = m0 // np.int32(out_hw)
        rem = m0 - n0 * np.int32(out_hw)
        ho = rem // np.int32(out_w)
        wo = rem - ho * np.int32(out_w)
        n_slices = (np.int32(channels) + np.int32(slice_c - 1)) // np.int32(slice_c)
        taps = np.int32(ksize) * np.int32(ksize)
        acc = np.float32(0)
        for it in range(taps * n_slices):
            tap = np.int32(it) // n_slices
            c0 = (np.int32(it) - tap * n_slices) * np.int32(slice_c)
            r = tap // np.int32(ksize)
            s = tap - r * np.int32(ksize)
            if tid == 0:
                mbarrier.arrive_expect_tx(bar, tx_bytes)
                tma.load_im2col(tile, desc, (n0, ho - np.int32(pad), wo - np.int32(pad), c0),
                                (r, s), bar)
            if not mbarrier.wait_bounded(bar, np.int32(it) & 1, WAIT_TIMEOUT_NS):
                status[0] = 0
                break           # every later phase would time out too: one timeout, not many
            for j in range(slice_c):
                if c0 + j < channels:
                    acc += tile[tid * slice_c + j] * weight[r, s, c0 + j, k_out]
            cuda.syncthreads()
        if m0 + tid < n_pixels:
            out[m0 + tid, k_out] = acc

    return conv_kernel


# ---------------------------------------------------------------------------------------------
# Host entry points
# ---------------------------------------------------------------------------------------------

def _check_args(x, kernel_size, padding, fname):
    shape, _, _, natural, _ = describe_array(x)  # rejects host and foreign arrays
    if len(shape) != NHWC_RANK:
        raise ValueError(f"{fname}: x must be 4-D NHWC, got {len(shape)}-D with shape {shape}")
    dtype, itemsize = resolve_dtype(natural, f"{fname}: x's dtype")
    if isinstance(kernel_size, bool) or not isinstance(kernel_size, int) or kernel_size < 1:
        raise ValueError(f"{fname}: kernel_size must be a positive int, got {kernel_size!r}")
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"{fname}: padding must be an int >= 0, got {padding!r}")
    lo, hi = IM2COL_CORNER_RANGE[NHWC_RANK]
    upper = padding - (kernel_size - 1)
    if -padding < lo or upper > hi or kernel_size - 1 > hi:
        raise ValueError(f"{fname}: padding = {padding} with kernel_size = {kernel_size} puts "
                         f"the pixel box corners (-{padding}, {upper}) or the filter taps "
                         f"(0..{kernel_size - 1}) outside {lo}..{hi}, the rank-4 im2col range")
    n, h, w, c = shape
    ho, wo = output_size(h, kernel_size, padding), output_size(w, kernel_size, padding)
    if ho < 1 or wo < 1:
        raise ValueError(f"{fname}: a {kernel_size}x{kernel_size} filter with padding "
                         f"{padding} gives an empty output ({ho} x {wo}) for {h} x {w} images")
    return shape, np.dtype(dtype) if not isinstance(dtype, str) else dtype, itemsize, ho, wo


def _im2col_map(x, kernel_size, padding, slice_c):
    upper = padding - (kernel_size - 1)
    return Im2colTensorMap(x, pixel_box_lower_corner=(-padding, -padding),
                           pixel_box_upper_corner=(upper, upper), channels_per_pixel=slice_c,
                           pixels_per_column=BLOCK_PIXELS)


def _raise_on_timeout(status, fname):
    if status.copy_to_host()[0] != 1:
        raise RuntimeError(f"{fname}: an mbarrier wait timed out (a TMA load never completed)")


def im2col(x, kernel_size, padding=0, out=None):
    """The patch matrix of the NHWC device array ``x`` for a ``kernel_size`` square filter,
    stride 1, ``padding`` zeros on every side: a new (or the given) C-contiguous device array
    ``(N * Ho * Wo, K * K * C)`` whose column ``(r * K + s) * C + c`` holds tap ``(r, s)``,
    channel ``c``. ``x``: numba/CuPy/torch CUDA array, 1/2/4/8-byte elements, rows of
    ``C * itemsize`` a multiple of 16 bytes (TMA's stride rule). Built from TMA im2col loads.
    """
    fname = "im2col"
    (n, _, _, c), dtype, itemsize, ho, wo = _check_args(x, kernel_size, padding, fname)
    if isinstance(dtype, str):
        raise TypeError(f"{fname}: x's dtype {dtype} has no numba equivalent; pass a uint16 view")
    require_hopper(fname)
    rows, cols = n * ho * wo, kernel_size * kernel_size * c
    if out is None:
        out = cuda.device_array((rows, cols), dtype)
    elif (tuple(out.shape) != (rows, cols) or np.dtype(out.dtype) != dtype
          or not out.is_c_contiguous()):
        raise ValueError(f"{fname}: out must be a C-contiguous {dtype} device array of shape "
                         f"{(rows, cols)}, got {out.dtype}{tuple(out.shape)}")
    slice_c = channel_slice(c, itemsize)
    desc = _im2col_map(x, kernel_size, padding, slice_c)
    status = cuda.to_device(np.ones(1, np.int32))
    grid = -(-rows // BLOCK_PIXELS)
    configure(_gather_kernel(dtype, slice_c), grid, THREADS)(
        desc, out, rows, ho * wo, wo, c, kernel_size, padding, status)
    _raise_on_timeout(status, fname)
    return out


def conv2d_nhwc(x, weight, padding=0):
    """Stride-1 convolution of float32 NHWC ``x`` with ``weight`` ``(K, K, C, Cout)`` (device
    arrays): an implicit GEMM whose A operand comes straight from TMA im2col loads; SIMT float32
    accumulation, one output channel per block column. Returns ``(N, Ho, Wo, Cout)``.
    """
    fname = "conv2d_nhwc"
    (n, _, _, c), dtype, itemsize, _, _ = _check_args(x, 1, 0, fname)
    wshape, _, _, wnatural, _ = describe_array(weight)
    if len(wshape) != NHWC_RANK or wshape[0] != wshape[1] or wshape[2] != c:
        raise ValueError(f"{fname}: weight must be (K, K, C={c}, Cout), got {wshape}")
    k = wshape[0]
    (_, _, _, _), _, _, ho, wo = _check_args(x, k, padding, fname)
    if dtype != np.float32 or np.dtype(resolve_dtype(wnatural)[0]) != np.float32:
        raise TypeError(f"{fname}: x and weight must be float32")
    require_hopper(fname)
    rows, k_out = n * ho * wo, wshape[3]
    out = cuda.device_array((rows, k_out), np.float32)
    slice_c = channel_slice(c, itemsize)
    desc = _im2col_map(x, k, padding, slice_c)
    status = cuda.to_device(np.ones(1, np.int32))
    grid = (-(-rows // BLOCK_PIXELS), k_out)
    configure(_conv_kernel(slice_c), grid, CONV_THREADS)(
        desc, weight, out, rows, ho * wo, wo, c, k, padding, status)
    _raise_on_timeout(status, fname)
    return out.reshape(n, ho, wo, k_out)
