"""Command-line and input helpers of the benches: dtype names and aliases, argparse types,
kernel selection by glob, random inputs. Pure numpy: no GPU.
"""

import fnmatch

import numpy as np


#: The dtypes the benches accept, by canonical numpy name.
SUPPORTED_DTYPES = ("uint8", "int8", "float16", "float32", "float64", "int32", "int64")

DTYPE_ALIASES = {
    "u8": "uint8", "i8": "int8",
    "fp16": "float16", "f16": "float16", "half": "float16",
    "fp32": "float32", "f32": "float32", "float": "float32", "single": "float32",
    "fp64": "float64", "f64": "float64", "double": "float64",
    "i32": "int32", "int": "int32", "i64": "int64",
}


def parse_dtype(text, supported=SUPPORTED_DTYPES):
    """Canonical numpy dtype name for ``text`` (aliases such as fp32 accepted); ValueError if
    it is not one of ``supported``."""
    name = DTYPE_ALIASES.get(text.strip().lower(), text.strip().lower())
    if name not in supported:
        raise ValueError(f"unsupported dtype {text!r}; choose from {', '.join(supported)}")
    return np.dtype(name).name


def parse_dtype_list(text, supported=SUPPORTED_DTYPES):
    """``"float32,fp16"`` -> ``["float32", "float16"]`` (order kept, duplicates dropped)."""
    out = []
    for part in text.split(","):
        if part.strip():
            name = parse_dtype(part, supported)
            if name not in out:
                out.append(name)
    if not out:
        raise ValueError("empty dtype list")
    return out


def argparse_type(fn):
    """Wrap a parser raising ValueError into an argparse ``type=`` (clean usage errors)."""
    import argparse

    def parse(text):
        try:
            return fn(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = getattr(fn, "__name__", "value")
    return parse


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer, got {text}")
    return value


def nonnegative_int(text):
    value = int(text)
    if value < 0:
        raise ValueError(f"must be >= 0, got {text}")
    return value


def add_output_args(parser, json_help="write the results to this JSON file", seed_help=None):
    """The options every bench script takes: ``--json PATH`` (its result document), ``--plot
    PNG`` (drawn from the same document; needs matplotlib) and, where ``seed_help`` is given,
    ``--seed`` for its random inputs (default None: a fresh seed)."""
    parser.add_argument("--json", metavar="PATH", default=None, help=json_help)
    parser.add_argument("--plot", metavar="PNG", default=None,
                        help="draw the results to this PNG (needs matplotlib: numba_tma[plot])")
    if seed_help is not None:
        parser.add_argument("--seed", type=argparse_type(nonnegative_int), default=None,
                            help=seed_help)


def select_names(names, patterns):
    """The ``names`` (order kept) matched by a comma list of exact names or glob patterns.

    ``patterns`` None or empty selects everything. Raises ValueError naming the patterns that
    match nothing, so a typo does not silently bench nothing.
    """
    names = list(names)
    if not patterns:
        return names
    pats = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen, unmatched = set(), []
    for pat in pats:
        hits = [n for n in names if n == pat or fnmatch.fnmatchcase(n, pat)]
        if not hits:
            unmatched.append(pat)
        chosen.update(hits)
    if unmatched:
        raise ValueError(f"no kernel matches {', '.join(unmatched)}; available: "
                         f"{', '.join(names)}")
    return [n for n in names if n in chosen]


def random_array(shape, dtype, rng, chunk_elems=1 << 26):
    """A fresh random host array: standard normal (cast) for floats, uniform random bits for
    integers. Never zeros; generated in chunks to bound the temporary memory."""
    dtype = np.dtype(dtype)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(-1)
    for lo in range(0, flat.size, chunk_elems):
        hi = min(lo + chunk_elems, flat.size)
        if dtype.kind == "f":
            gen_dtype = dtype if dtype in (np.float32, np.float64) else np.float32
            flat[lo:hi] = rng.standard_normal(hi - lo, dtype=gen_dtype).astype(dtype, copy=False)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            flat[lo:hi] = rng.integers(info.min, info.max, size=hi - lo, dtype=dtype,
                                       endpoint=True)
        else:
            raise TypeError(f"no random generator for {dtype}")
    return out


def fp8_inputs(torch, gen, m, n, k):
    """An fp8 GEMM's inputs on the GPU, drawn with torch generator ``gen``: e4m3 ``a`` (M, K),
    ``b = w.t()`` of an e4m3 (N, K) weight (as ``torch._scaled_mm`` takes it), and every scale
    mode's ``(scale_a, scale_b)`` by name ("tensor", "row", "block"), all in [0.75, 1.25):
    block scales in DeepGEMM's and torch's layout (A's M-contiguous)."""
    f8 = torch.float8_e4m3fn
    a = (torch.randn((m, k), device="cuda", generator=gen) * 2).to(f8)
    w = (torch.randn((n, k), device="cuda", generator=gen) * 2).to(f8)
    kb, nb = -(-k // 128), -(-n // 128)

    def pos(*shape):
        return torch.rand(shape, device="cuda", generator=gen) * 0.5 + 0.75

    scales = {"tensor": (pos(), pos()), "row": (pos(m, 1), pos(1, n)),
              "block": (pos(kb, m).t(), pos(nb, kb))}
    return a, w.t(), scales


def uint_view_dtype(itemsize):
    """The unsigned integer dtype of ``itemsize`` bytes: compare elements bit for bit."""
    return np.dtype(f"u{itemsize}")


def wgmma_config(text):
    """``bn=128,cluster_m=2`` -> that ``WgmmaConfig`` (values: integers, or true/false); with
    ``stream_k=true`` or ``pingpong=true``, the ladders' ``StreamKConfig`` / ``PingPongConfig``
    of those fields; a bare ``pingpong``, ``PingPongConfig(128, stages=6)``. The benches'
    ``--config``; raises ValueError naming the part it cannot take."""
    from numba_tma.kernels.gemm import WgmmaConfig
    from numba_tma.kernels.gemm.stream_k import StreamKConfig
    from numba_tma.ladders.gemm_pingpong import PingPongConfig

    if text.strip() == "pingpong":
        return PingPongConfig(128, stages=6)
    fields = {}
    for part in text.split(","):
        key, sep, value = (x.strip() for x in part.partition("="))
        if not sep or not key.isidentifier() or not value:
            raise ValueError(f"{part!r} is not FIELD=VALUE (WgmmaConfig's keywords, e.g. "
                             f"bn=256,stages=4)")
        flag = {"true": True, "false": False}.get(value.lower())
        if flag is None:
            try:
                flag = int(value)
            except ValueError:
                raise ValueError(f"{key} = {value!r} is not an integer or true/false") from None
        fields[key] = flag
    cls = WgmmaConfig
    if fields.pop("stream_k", False):
        cls = StreamKConfig
    if fields.pop("pingpong", False):
        cls = PingPongConfig
    try:
        return cls(**fields)
    except TypeError as exc:            # an unknown keyword
        raise ValueError(str(exc)) from None
