"""The driver side of tensor maps: the device check, ``cuTensorMapEncode*``, and the upload.

What runs only once :mod:`numba_tma.tensormap.rules` has accepted every argument: the array's
address is asked for its device (it must be numba's current one), the plan is encoded by the
driver, and its 128 bytes are copied into a device allocation (``cudaMalloc``'d, so at least
64-byte aligned, as TMA requires), which is what a kernel receives. :class:`Descriptor` is the
base of both map classes (:class:`numba_tma.TensorMap`, :class:`numba_tma.Im2colTensorMap`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from cuda.bindings import driver

from .rules import _OOB_FILL, TMA_DESC_ALIGN

__all__ = ["Descriptor", "check_device", "encode_tiled", "encode_im2col", "upload",
           "store_descriptor"]


def current_device_id() -> int:
    from .._frontend import cuda  # deferred: importing numba.cuda is slow

    return cuda.get_current_device().id


def check_device(address: int) -> None:
    """The array must be device memory on numba's current device."""
    try:
        current = current_device_id()
    except Exception:  # no driver or device: NoGPUError, in one line
        from .._device import no_gpu_error

        raise no_gpu_error("a TensorMap") from None
    try:
        from ..operands import device_ordinal  # libcuda's answer (the bindings' is wrong)

        err, ordinal = device_ordinal(address)
        err = driver.CUresult(err)
    except Exception as exc:  # the driver failed after it initialised
        raise RuntimeError(
            f"cannot encode a tensor map: {type(exc).__name__}: "
            f"{' '.join(str(exc).split())}"
        ) from exc
    if err != driver.CUresult.CUDA_SUCCESS:
        raise ValueError(
            f"the array's address {address:#x} is not CUDA device memory "
            f"(cuPointerGetAttribute: {getattr(err, 'name', err)})"
        )
    if int(ordinal) != current:
        raise ValueError(
            f"the array lives on device {int(ordinal)} but numba's current device is {current}; "
            f"build the TensorMap inside `with numba.cuda.gpus[{int(ordinal)}]:`"
        )


def _encode(encoder, name: str, plan) -> list[int]:
    err, tmap = encoder(*plan.encode_args())
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(
            f"{name} failed with {getattr(err, 'name', err)}; plan: {plan.describe()}"
        )
    return [int(word) for word in tmap.opaque]


def encode_tiled(plan) -> list[int]:
    """The 16 words ``cuTensorMapEncodeTiled`` makes of a :class:`~numba_tma.tensormap.TensorMapPlan`."""
    return _encode(driver.cuTensorMapEncodeTiled, "cuTensorMapEncodeTiled", plan)


def encode_im2col(plan) -> list[int]:
    """The 16 words ``cuTensorMapEncodeIm2col`` makes of an
    :class:`~numba_tma.tensormap.im2col.Im2colPlan`."""
    return _encode(driver.cuTensorMapEncodeIm2col, "cuTensorMapEncodeIm2col", plan)


def upload(words: list[int]):
    from .._frontend import cuda

    return cuda.to_device(np.array(words, dtype=np.uint64))


def store_descriptor(words: list[int]) -> tuple[bytes, Any]:
    """The encoded descriptor's 128 bytes and its device copy, checked to be TMA-aligned."""
    device_array = upload(words)
    desc_address = device_array.__cuda_array_interface__["data"][0]
    if desc_address % TMA_DESC_ALIGN:
        raise RuntimeError(
            f"the descriptor's device copy at {desc_address:#x} is not "
            f"{TMA_DESC_ALIGN}-byte aligned (is an allocator suballocating?)"
        )
    return np.array(words, dtype="<u8").tobytes(), device_array


def _from_plan(field: str, doc: str | None = None) -> property:
    """A read-only attribute of a map that is its plan's ``field``."""
    return property(lambda self: getattr(self._plan, field), doc=doc)


class Descriptor:
    """What every map class holds and answers the same way: the array (kept alive while the map
    is), its plan, the encoded descriptor and its device copy (which is what a kernel receives)."""

    def _hold(self, array, plan, address, encode):
        self._array = array  # keeps the data alive while the map does
        self._plan = plan
        check_device(address)
        self._encoded, self._device_array = store_descriptor(encode(plan))

    @property
    def array(self):
        return self._array

    @property
    def plan(self):
        return self._plan

    rank = _from_plan("rank")
    shape = _from_plan("shape")
    strides = _from_plan("strides", "Array strides in bytes, array order.")
    box_bytes = _from_plan(
        "box_bytes", "Bytes one load delivers to shared memory (the mbarrier transaction count).")
    smem_bytes = _from_plan(
        "smem_bytes", "Shared memory one box occupies: ``box_bytes``, or with a swizzle ``span`` "
        "bytes per box row even when the inner dimension is narrower (declare the tile this "
        "large).")
    dtype = _from_plan("dtype")
    itemsize = _from_plan("itemsize")
    swizzle = _from_plan("swizzle_bytes", "The swizzle span in bytes (0: none).")
    interleave = _from_plan("interleave_bytes", "The interleave slice in bytes (0: none).")
    l2_promotion = _from_plan("l2_promotion_bytes", "The L2 promotion in bytes (0: none).")
    address = _from_plan("address", "The array's global address.")

    @property
    def oob_fill(self) -> str:
        return "nan" if self._plan.oob_fill == _OOB_FILL["nan"] else "zero"

    @property
    def encoded(self) -> bytes:
        return self._encoded

    @property
    def device_array(self):
        return self._device_array

    @property
    def __cuda_array_interface__(self) -> dict:
        return self._device_array.__cuda_array_interface__
