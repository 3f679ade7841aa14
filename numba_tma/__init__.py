"""numba_tma: Hopper's (sm_90) data path for numba-cuda kernels.

Device intrinsics (call them inside ``@cuda.jit`` kernels):
    ``numba_tma.mbarrier``  transaction barriers
    ``numba_tma.cluster``   thread-block clusters: ranks, cluster barrier, DSMEM, remote mbarriers
    ``numba_tma.fence``     async-proxy fences
    ``numba_tma.tma``       TMA bulk tensor copies (tile, multicast, im2col), prefetch, reductions
    ``numba_tma.bulk``      non-tensor bulk copies, reductions, L2 prefetch
    ``numba_tma.swizzle``   TMA swizzle index maps (device helpers and the numpy model)
    ``numba_tma.smem``      16-byte shared-memory loads and stores
    ``numba_tma.gmem``      16-byte global-memory loads and stores
    ``numba_tma.warp``      warp-level ldmatrix/stmatrix and mma.sync (tensor cores)
    ``numba_tma.wgmma``     warpgroup wgmma.mma_async, its descriptors and fences, setmaxnreg
    ``numba_tma.barrier``   named CTA barriers (bar.sync / bar.arrive with an id and a count)
    ``numba_tma.griddep``   programmatic dependent launch (griddepcontrol.wait / launch_dependents)
    ``numba_tma.fastmath``  the SFU's tanh (tanh.approx.f32), for activations in epilogues
    ``numba_tma.tensormap.device``  tensormap.replace: edit a descriptor in memory from a kernel
Kernels (functions; their modules are ``numba_tma.transpose_api`` and ``numba_tma.matmul_api``):
    ``numba_tma.transpose`` the fastest transpose for a 2-D or batched 3-D device array
    ``numba_tma.matmul``    alpha * a @ b + beta * out on tensor cores (TMA + wgmma)
    ``numba_tma.release_outputs``  free the blocks that dropped numba outputs left for reuse
    ``numba_tma.NoGPUError``  what every call raises where no usable sm_90 GPU or driver is
Host side:
    ``numba_tma.TensorMap`` a validated CUtensorMap (tile mode) in device memory
    ``numba_tma.Im2colTensorMap`` the same for im2col mode (NWC / NHWC / NDHWC convolutions)
    ``numba_tma.tensormap`` both, their rules and limits (``plan_tensor_map``), the device module
    ``numba_tma.launch``    >48 KB dynamic shared memory; thread-block cluster launches
    ``numba_tma.offline``   compile a kernel for sm_90a without a GPU and read its SASS
    ``numba_tma.bench``     time kernels (do_bench, interleaved rounds), baselines, results, plots
    ``numba_tma.front_end()``  the front end numba_tma compiles with ("numba-cuda" or
                               "numba-cuda-mlir": ``NUMBA_TMA_FRONT_END``, docs/front_ends.md)
Command line:
    ``python -m numba_tma.swizzle [--png PATH] --span 128 --itemsize 4``: a swizzled box's bank map
"""

import warnings

# ``python -m numba_tma.swizzle`` runs a module this package has already imported; runpy warns
# about that, harmlessly (the module's main() is all it runs).
warnings.filterwarnings("ignore", message="'numba_tma.swizzle' found in sys.modules",
                        category=RuntimeWarning)

from . import bulk, cluster, fence, gmem, griddep, mbarrier, smem, swizzle, tma, warp
from . import tensormap                      # its device module too: numba_tma.tensormap.device
from .tensormap import Im2colTensorMap, TensorMap
from . import barrier, fastmath, launch, matmul_api, transpose_api, wgmma
from .matmul_api import matmul
from .transpose_api import transpose
from ._arrays import release_outputs
from ._device import NoGPUError
from . import _address_space
from ._frontend import front_end

_address_space.install()        # intrinsic operands in the wrong address space fail to compile

# Imported on first use: neither is needed to build or launch a kernel, and the bench toolkit
# sits above the public API (docs/architecture.md).
_LAZY = ("bench", "offline")


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")   # also binds the attribute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = ["Im2colTensorMap", "NoGPUError", "TensorMap", "barrier", "bench", "bulk", "cluster",
           "fastmath", "fence", "front_end", "gmem", "griddep", "launch", "matmul", "matmul_api",
           "mbarrier", "offline", "release_outputs", "smem", "swizzle", "tensormap", "tma",
           "transpose", "transpose_api", "warp", "wgmma"]
__version__ = "0.1.0"
