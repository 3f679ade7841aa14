import os

import pytest


def sm90_skip_reason():
    """Why the GPU tests cannot run here, or None when an sm_90 GPU is present."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        # Under the simulator cc checks pass, but nothing here runs there.
        return "the CUDA simulator cannot run TMA/mbarrier inline PTX"
    try:
        from numba import cuda

        if not cuda.is_available():
            return "no CUDA driver or GPU on this machine"
        cc = cuda.get_current_device().compute_capability
    except Exception as exc:  # a broken driver install is also "no GPU"
        return f"CUDA is unusable here: {exc}"
    if cc < (9, 0):
        return f"TMA needs compute capability 9.0 (Hopper); this GPU is {cc[0]}.{cc[1]}"
    return None


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "gpu" in item.keywords or os.sep + "gpu" + os.sep in str(item.fspath):
            if not checked:
                reason, checked = sm90_skip_reason(), True
            item.add_marker(pytest.mark.gpu)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))
