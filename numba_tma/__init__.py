"""numba_tma: Hopper's (sm_90) data path for numba-cuda kernels.

Device intrinsics (call them inside ``@cuda.jit`` kernels):
    ``numba_tma.mbarrier``  transaction barriers
    ``numba_tma.fence``     async-proxy fences
    ``numba_tma.tma``       TMA bulk tensor copies and bulk async-groups
    ``numba_tma.swizzle``   TMA swizzle index maps (device helpers and the numpy model)
    ``numba_tma.smem``      16-byte shared-memory loads and stores
    ``numba_tma.warp``      warp-level ldmatrix/stmatrix and mma.sync (tensor cores)
Kernels:
    ``numba_tma.transpose`` the fastest transpose for a 2-D or batched 3-D device array
Host side:
    ``numba_tma.TensorMap`` a validated CUtensorMap (tile mode) in device memory
    ``numba_tma.offline``   compile a kernel for sm_90a without a GPU and read its SASS
"""

from . import fence, mbarrier, smem, swizzle, tma, warp
from .tensormap import TensorMap
from .transpose import transpose

__all__ = ["TensorMap", "fence", "mbarrier", "smem", "swizzle", "tma", "transpose", "warp"]
__version__ = "0.1.0"
