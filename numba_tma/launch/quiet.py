"""The library's own kernel launches through numba's launch syntax, kept quiet about grid sizes
the library chose (importable under the CUDA simulator: no driver API here)."""

__all__ = ["configure"]


def configure(kernel, grid, block, *stream_and_shared_mem):
    """``kernel[grid, block, ...]`` (the same 2 to 4 values) without numba's low-occupancy warning: the
    library sizes its own grids (a small problem gets a small grid by design), and a
    ``NumbaPerformanceWarning`` about them would tell the user nothing they can change. Other
    warnings (a host array copied in and back, say) pass through."""
    import warnings

    from .._frontend import NumbaPerformanceWarning   # numba-cuda's own class

    with warnings.catch_warnings():
        # numba may wrap the message in terminal colour codes: match past them
        warnings.filterwarnings("ignore", message=r"(\x1b\[[0-9;]*m)*Grid size",
                                category=NumbaPerformanceWarning)
        return kernel[(grid, block) + stream_and_shared_mem]
