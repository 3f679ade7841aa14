"""The wgmma GEMM's configuration and the compile-time description of one kernel.

:class:`WgmmaConfig` is a frozen dataclass: it is hashable and compares by value, so it is
itself the key of every cache of kernels, launch plans and compiled binaries. It knows which
kernel it builds (:meth:`WgmmaConfig.kernel`); a variant outside the shipped ones (the ladders'
stream-K and ping-pong GEMMs) is a subclass that overrides :meth:`~WgmmaConfig.kernel` and the
launch hooks.

:class:`KernelSpec` is what a kernel depends on besides the config: the operands' layouts, the
input and output element kinds, and whether ``beta * C`` is added.
"""

import dataclasses
import typing

from ... import wgmma
from .ring import ATOM, SPAN, scale_rows_bytes

__all__ = ["WgmmaConfig", "KernelSpec", "smem_bytes", "ring_bytes", "BM", "WG_ROWS", "THREADS",
           "CONSUMER_WARPS", "CONSUMER_THREADS", "SWIZZLE_ALIGN", "SLAB_ROWS", "C_BOX_BYTES",
           "PRODUCER_REGS", "CONSUMER_REGS", "MAX_DYNAMIC_SMEM", "L2_PROMOTION", "SIGNATURE",
           "FP8_KINDS", "is_fp8"]

BM = 128                     # two consumer warpgroups x 64 rows
WG_ROWS = 64                 # rows of C per consumer warpgroup (the m64 of wgmma)
THREADS = 384                # producer + 2 consumer warpgroups
CONSUMER_WARPS = 8
CONSUMER_THREADS = CONSUMER_WARPS * 32
SWIZZLE_ALIGN = 1024         # the 128B swizzle repeats every 8 rows of 128 bytes
SLAB_ROWS = 16               # each consumer warp owns 16 rows of C in the epilogue
C_BOX_BYTES = SLAB_ROWS * SPAN      # a 16 x 64 (16-bit) or 16 x 32 (f32) box of C: 2 KiB
PRODUCER_REGS = 56           # the producer's registers after setmaxnreg.dec (at 40 it spilled)
CONSUMER_REGS = 224          # a consumer's after setmaxnreg.inc: 128 accumulators and more
MAX_DYNAMIC_SMEM = 227 * 1024
#: The default L2 promotion of A's and B's tensor maps (bytes): on an L2 miss whole 128-byte
#: lines are fetched rather than the 32-byte sectors asked for (docs/gemm.md, "L2 promotion").
L2_PROMOTION = 128

#: The kernels' parameters: the A, B and C tensor maps (16 uint64 words in global memory each),
#: M, N, K, the tile rows and columns, alpha and beta.
SIGNATURE = ("void(uint64[::1], uint64[::1], uint64[::1], int64, int64, int64, int64, int64, "
             "float32, float32)")


#: fp8 kinds, A's then B's element ("e4m3_e5m2"): both operands K-major, k32 per wgmma.
FP8_KINDS = ("e4m3_e4m3", "e4m3_e5m2", "e5m2_e4m3", "e5m2_e5m2")


def is_fp8(in_kind):
    """Whether ``in_kind`` names an fp8 pair (one byte per element, 128 per slice row)."""
    return in_kind in FP8_KINDS


class KernelSpec(typing.NamedTuple):
    """What a GEMM kernel depends on besides its config. ``a_kmajor``: A is stored M x K
    row-major (else K x M); ``b_kmajor``: B is stored N x K row-major (else K x N);
    ``in_kind`` "f16"/"bf16" or an fp8 pair, A's element then B's ("e4m3_e5m2": both
    K-major); ``out_kind`` "f16"/"bf16"/"f32"; ``has_beta`` adds ``beta * C`` (C loaded by
    TMA); ``scale`` (fp8): "tensor", "row" or "block" (:mod:`.scales`), "" for none;
    ``promote`` (fp8): each slice's product is added into fp32 accumulators of their own
    (block scales always are); ``epilogue``: the user's element function and its arguments'
    types (:class:`.user_epilogue.EpilogueFn`; the kernel then takes those arguments last),
    None for none."""

    a_kmajor: bool
    b_kmajor: bool
    in_kind: str
    out_kind: str
    has_beta: bool
    scale: str = ""
    promote: bool = False
    epilogue: typing.Any = None

    @property
    def out16(self):
        """Whether C has 16-bit elements (else f32)."""
        return self.out_kind != "f32"

    @property
    def promoted(self):
        """Whether the main loop promotes each slice's product (:mod:`.scales`)."""
        return self.promote or self.scale == "block"


def _need(ok, message):
    if not ok:
        raise ValueError(message)


@dataclasses.dataclass(frozen=True, repr=False)
class WgmmaConfig:
    """One wgmma GEMM kernel's shape and schedule.

    - ``bn``: the block tile's columns, a wgmma N (64, 128, 192 or 256); ``bm``: its rows, 128
      (each consumer warpgroup one m64 half) or 256 (persistent, ``bn <= 128``: each consumer
      two m64 halves).
    - ``stages``: ring slots (default 3 persistent, 4 one block per tile; a power of two for
      one block per tile). ``group_m``: tile rows per raster group (L2 reuse of B).
    - ``persistent``: one block per SM walks the tiles, the producer running ahead across
      tiles (else one block per tile).
    - ``cluster_m`` (persistent): 2 makes CTA pairs along M that share B, each loading half of
      every B slice and multicasting it to both. ``cluster_n`` (one block per tile): 2 makes
      pairs along N that share A likewise.
    - ``c_buffers`` (persistent): the 16 x 128-byte boxes each consumer warp stages C through,
      1, 2 or 4 (with 1, each box waits until the store of the one before has read it).
    - ``mma_pipe``: wgmma groups a consumer leaves in flight when it moves on from a slot: 1
      (it releases the previous slot) or 0 (it waits for this slot's group and releases it at
      once: the producer's lookahead is a slot deeper).
    - ``overlap_epilogue`` (persistent, ``bm = 128``, ``mma_pipe = 0``): with 16-bit output and
      no ``beta``, a finished tile's C is packed into 16-bit pairs and stored under the next
      tile's first wgmma groups (else the plain epilogue).
    - ``consumers`` (one block per tile, ``bn <= 128``): 1 gives both m64 halves to one
      consumer warpgroup (256 threads).
    - ``l2_promotion`` (0, 64, 128 or 256 bytes): the L2 promotion of A's and B's tensor maps,
      a host-side setting the kernel never sees (:meth:`kernel_config` drops it).
    """

    bn: int = 256
    stages: typing.Optional[int] = None
    group_m: int = 8
    persistent: bool = True
    cluster_m: int = 1
    c_buffers: int = 2
    mma_pipe: int = 1
    bm: int = BM
    overlap_epilogue: bool = False
    cluster_n: int = 1
    consumers: int = 2
    l2_promotion: typing.Optional[int] = None

    def __post_init__(self):
        if self.stages is None:
            object.__setattr__(self, "stages", 3 if self.persistent else 4)
        if self.l2_promotion is None:
            object.__setattr__(self, "l2_promotion", L2_PROMOTION)
        for name in ("persistent", "overlap_epilogue"):
            object.__setattr__(self, name, bool(getattr(self, name)))
        self._check()
        need = smem_bytes(self, 4)
        _need(need <= MAX_DYNAMIC_SMEM,
              f"{self!r} needs {need} bytes of shared memory; a block may have "
              f"{MAX_DYNAMIC_SMEM}: use fewer stages or a smaller bn")

    def _check(self):
        bn, stages, persistent, cm = self.bn, self.stages, self.persistent, self.cluster_m
        _need(bn in wgmma.N_OTHER,
              f"bn = {bn} must be one of {wgmma.N_OTHER} (a wgmma N with a register-A form too)")
        _need(stages >= 2 and (persistent or not stages & (stages - 1)),
              f"stages = {stages} must be >= 2 (a power of two unless persistent)")
        _need(self.group_m >= 1, f"group_m = {self.group_m} must be >= 1")
        _need(cm in (1, 2) and (cm == 1 or persistent),
              f"cluster_m = {cm} must be 1, or 2 with persistent=True")
        _need(bn % (ATOM * cm) == 0,
              f"cluster_m = {cm} splits B's {bn} columns into {cm} parts of whole 64-column "
              f"boxes: bn = 128 or 256")
        _need(self.c_buffers in (1, 2, 4) and (self.c_buffers == 2 or persistent),
              f"c_buffers = {self.c_buffers} must be 1, 2 or 4 (persistent only: one block "
              f"per tile stages C in the ring)")
        _need(self.mma_pipe in (0, 1),
              f"mma_pipe = {self.mma_pipe} must be 0 or 1 (wgmma groups left in flight per "
              f"consumer)")
        _need(self.bm in (BM, 2 * BM), f"bm = {self.bm} must be {BM} or {2 * BM} (rows of C "
                                       f"per block)")
        _need(self.bm == BM or (persistent and bn <= 128),
              f"bm = {self.bm} (two m64 halves per consumer) needs persistent=True and "
              f"bn <= 128 (the consumers' accumulators); got persistent={persistent}, bn={bn}")
        _need(not self.overlap_epilogue or (persistent and self.bm == BM and self.mma_pipe == 0),
              f"overlap_epilogue=True (C stored under the next tile's wgmmas) needs "
              f"persistent=True, bm={BM} and mma_pipe=0; got persistent={persistent}, "
              f"bm={self.bm}, mma_pipe={self.mma_pipe}")
        _need(self.cluster_n in (1, 2) and (self.cluster_n == 1 or not persistent),
              f"cluster_n = {self.cluster_n} must be 1, or 2 with persistent=False (each CTA "
              f"of a pair loads one 64-row half of A); got persistent={persistent}")
        _need(self.consumers in (1, 2)
              and (self.consumers == 2 or (not persistent and bn <= 128)),
              f"consumers = {self.consumers} must be 2, or 1 with persistent=False and "
              f"bn <= 128 (one warpgroup holds both m64 halves' accumulators); got "
              f"persistent={persistent}, bn={bn}")
        _need(self.l2_promotion in (0, 64, 128, 256),
              f"l2_promotion = {self.l2_promotion!r} must be 0, 64, 128 or 256 (bytes an L2 "
              f"miss on A or B fetches)")

    # ---------------------------------------------------------------- what the kernel is
    @property
    def threads(self):
        """Threads per block: the producer warpgroup and the consumers."""
        return 128 * (1 + self.consumers)

    def kernel_config(self):
        """This config without its host-side fields: configs that differ only in
        ``l2_promotion`` share one kernel."""
        if self.l2_promotion == L2_PROMOTION:
            return self
        return dataclasses.replace(self, l2_promotion=L2_PROMOTION)

    def replace(self, **changes):
        """A copy of this config with ``changes`` (keyword arguments of the constructor)."""
        return dataclasses.replace(self, **changes)

    def kernel(self, spec):
        """The ``@cuda.jit`` kernel of this config for ``spec`` (a :class:`KernelSpec`), built
        once per (kernel config, spec)."""
        spec = KernelSpec(*spec)
        self.check_spec(spec)
        if not self.persistent:
            from . import tile_per_block as variant
        elif (self.overlap_epilogue and spec.out16 and not spec.has_beta
              and not spec.promoted):
            from . import persistent_overlapped as variant
        else:           # (f32 output and beta keep the plain epilogue: see overlapped's doc)
            from . import persistent as variant
        return variant.kernel(self.kernel_config(), spec)

    def check_spec(self, spec):
        """Raise ValueError where this config cannot run ``spec``: fp8 runs persistent only,
        and a promoting main loop (block scales) one m64 half per consumer, ``bn`` 64, 128 or
        192, ``mma_pipe=0``."""
        if (spec.scale or spec.promote) and not is_fp8(spec.in_kind):
            raise ValueError(f"scale={spec.scale!r}, promote={spec.promote} are for fp8 "
                             f"inputs; in_kind is {spec.in_kind!r}")
        if is_fp8(spec.in_kind) and not self.persistent:
            raise ValueError(f"{self!r}: fp8 GEMMs run persistent (persistent=True)")
        if spec.promoted and (self.bm != BM or self.bn not in (64, 128, 192)
                              or self.mma_pipe != 0):
            raise ValueError(f"{self!r}: block scales and promoted accumulation need "
                             f"bm={BM}, bn = 64, 128 (two slices' products beside the "
                             f"accumulators) or 192 (one) and mma_pipe=0 (the promoting main "
                             f"loop pipelines its own wgmma groups)")
        if spec.epilogue is not None and spec.epilogue.aux:
            _need(not self.overlap_epilogue,
                  f"{self!r}: an epilogue with an auxiliary output (aux=) needs "
                  f"overlap_epilogue=False (the overlapped epilogue holds one packed tile "
                  f"beside the accumulators; a second does not fit)")
            _need(self.c_buffers >= 2 or not self.persistent,
                  f"{self!r}: an epilogue with an auxiliary output (aux=) stages C and it in "
                  f"two boxes per warp: c_buffers must be 2 or 4")
        if spec.scale == "block":
            need = smem_bytes(self, 4, block=True)
            _need(need <= MAX_DYNAMIC_SMEM,
                  f"{self!r} needs {need} bytes of shared memory with block scales (A's of "
                  f"each slot's rows beside it); a block may have {MAX_DYNAMIC_SMEM}: use "
                  f"fewer stages")

    # ------------------------------------------------------------- what the launch takes
    #: The kernel's parameters after SIGNATURE's (a variant's workspace, ...): numba types.
    extra_argtypes = ()
    signature = SIGNATURE
    #: mbarriers a variant adds after the ring's and the epilogue's
    extra_barriers = 0
    #: whether the last round's tiles are split along K (:class:`.stream_k.StreamKConfig`)
    stream_k = False

    def launch_extras(self, tiles, grid, num_k):
        """``(args, per_stream)``: the values of ``extra_argtypes`` for a launch of ``grid``
        blocks over ``tiles`` tiles of ``num_k`` K slices, and ``per_stream(ctx, stream)``
        giving ``({i: value}, keep)`` (a device pointer where ``extra_argtypes[i]`` is an array)
        to set before a launch on another stream, ``keep`` False where the next launch on the
        same stream must ask again (or None)."""
        return (), None

    def _fields_text(self):
        more = ""
        for f in dataclasses.fields(self)[3:]:
            value = getattr(self, f.name)
            default = L2_PROMOTION if f.name == "l2_promotion" else f.default
            if f.name in ("persistent", "cluster_m") or value != default:
                more += f", {f.name}={value}"
        return f"bn={self.bn}, stages={self.stages}, group_m={self.group_m}{more}"

    def __repr__(self):
        return f"{type(self).__name__}({self._fields_text()})"


def ring_bytes(cfg):
    """Bytes of ``cfg``'s ring: ``stages`` slots of ``bm`` rows of A and ``bn`` of B, one
    128-byte K row each."""
    return cfg.stages * (cfg.bm + cfg.bn) * SPAN


def smem_bytes(cfg, out_itemsize, block=False, aux=False):
    """Dynamic shared memory of one block: barriers, alignment slack, the ring, and C's staging
    (persistent: ``c_buffers`` 16 x 128-byte boxes per consumer warp; with ``block`` scales also
    each slot's scales; one block per tile reuses the ring for C, and with ``aux`` for an
    auxiliary output's slabs after C's)."""
    ring = ring_bytes(cfg)
    bars = 8 * (2 * cfg.stages + CONSUMER_WARPS + cfg.extra_barriers) + SWIZZLE_ALIGN
    if cfg.persistent:
        return (bars + ring + (scale_rows_bytes(cfg.stages) if block else 0)
                + CONSUMER_WARPS * cfg.c_buffers * C_BOX_BYTES)
    c_slabs = CONSUMER_WARPS * SLAB_ROWS * cfg.bn * out_itemsize * (2 if aux else 1)
    return bars + max(ring, c_slabs)
