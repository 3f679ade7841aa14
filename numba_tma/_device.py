"""Host-side checks about the current GPU, shared by the public kernel launchers."""

from ._frontend import cuda

HOPPER_CC = (9, 0)

#: The oldest NVIDIA driver the CUDA 13 wheels (numba-cuda[cu13]) run on.
DRIVER_MINIMUM = "R580"


class NoGPUError(RuntimeError):
    """There is no GPU this call can run on: no NVIDIA driver (the CUDA 13 wheels need R580 or
    newer), no CUDA device, or none of compute capability 9.0 (Hopper) or newer. The public
    calls raise it after checking their arguments, before anything is allocated or launched."""

    __module__ = "numba_tma"


def _why_not():
    """One line saying why CUDA is unusable here (numba's own message spans several lines)."""
    try:
        if not cuda.is_available():
            return f"no NVIDIA driver ({DRIVER_MINIMUM} or newer) or CUDA device was found"
        cuda.get_current_device()
    except Exception as e:
        text = " ".join(str(e).replace("Error at driver init:", "").split()).rstrip(" :")
        return text or type(e).__name__
    return "CUDA is unusable"


def no_gpu_error(what):
    """The :class:`NoGPUError` of ``what`` where numba cannot use a CUDA GPU."""
    return NoGPUError(f"{what} needs an NVIDIA GPU; {_why_not()}")


def require_gpu(what):
    """:class:`NoGPUError` unless numba can use a CUDA GPU here (of any compute capability)."""
    try:
        cuda.get_current_device()
    except Exception:
        raise no_gpu_error(what) from None


def require_hopper(what):
    """The current device's compute capability; :class:`NoGPUError` where there is no usable
    GPU or it is older than sm_90 (TMA/mbarrier transaction code)."""
    try:
        cc = cuda.get_current_device().compute_capability
    except Exception:           # no driver or no GPU (cuda.is_available() is slower per call)
        raise NoGPUError(f"{what} needs an NVIDIA GPU of compute capability 9.0 or newer; "
                         f"{_why_not()}") from None
    if cc < HOPPER_CC:
        raise NoGPUError(f"{what} needs compute capability 9.0 or newer (Hopper TMA); the "
                         f"current device is {cc[0]}.{cc[1]}")
    return cc
