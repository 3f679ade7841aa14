"""Host-side checks about the current GPU, shared by the public kernel launchers."""

from numba import cuda

HOPPER_CC = (9, 0)


def require_hopper(what):
    """Raise unless the current device can run TMA/mbarrier transaction code (sm_90 or newer)."""
    try:
        cc = cuda.get_current_device().compute_capability
    except Exception:           # no driver or no GPU (cuda.is_available() is slower per call)
        raise RuntimeError(f"{what} needs a CUDA GPU with compute capability >= 9.0; "
                           "no CUDA driver or GPU is available") from None
    if cc < HOPPER_CC:
        raise RuntimeError(f"{what} needs compute capability >= 9.0 (Hopper TMA); the current "
                           f"device is {cc[0]}.{cc[1]}")
    return cc
