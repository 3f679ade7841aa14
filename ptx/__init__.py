"""CUDA-C/inline-PTX sources of numba_tma's intrinsics (installed as the package numba_tma.ptx)."""
