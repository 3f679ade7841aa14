"""Bench output: the table printer, number formatting, JSON-safe values, the result writer
(atomic, with the GPU, driver and versions of :func:`report_header`), progress lines.
"""

import json
import math
import os
import sys
import time

import numpy as np


def fmt(value, spec=".2f", missing="-"):
    """``format(value, spec)``, or ``missing`` for None/NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return missing
    return format(value, spec)


def one_line(text, limit=160):
    """An exception message on one line, cut at ``limit`` characters (tables)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def format_table(headers, rows, align=None):
    """A plain-text table, columns separated by `` | ``; ``align`` is a string of 'l'/'r' per
    column (default: first column left, the rest right). Cells are converted with str()."""
    ncol = len(headers)
    align = align or ("l" + "r" * (ncol - 1))
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    for row in cells:
        if len(row) != ncol:
            raise ValueError(f"row has {len(row)} cells, expected {ncol}: {row}")
    widths = [max(len(row[i]) for row in cells) for i in range(ncol)]

    def line(row):
        parts = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        return " | ".join(parts).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def jsonable(obj):
    """``obj`` with numpy scalars/arrays, tuples and NaN/inf made JSON-safe (NaN/inf -> None)."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def write_json(path, obj):
    """Write ``obj`` (made JSON-safe) to ``path`` atomically, creating parent directories."""
    path = os.fspath(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(jsonable(obj), f, indent=1, allow_nan=False)
        f.write("\n")
    os.replace(tmp, path)


def timestamp():
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def log(*args):
    """Progress to stderr (the results table goes to stdout)."""
    print(*args, file=sys.stderr, flush=True)


def save_results(args, doc):
    """Write ``doc`` as JSON to ``args.json`` and draw it to ``args.plot`` (a PNG), each if given."""
    if getattr(args, "json", None):
        write_json(args.json, doc)
    if getattr(args, "plot", None):
        from .plot import write_plot    # matplotlib is needed only here

        write_plot(doc, args.plot)




def report_header(bench, env, versions, **fields):
    """The first keys of a result document: ``bench``, ``gpu``, ``driver``, ``env`` (the
    :func:`~numba_tma.bench.env.gpu_environment` it ran on), ``versions``
    (:func:`~numba_tma.bench.env.package_versions`), then ``fields`` in order."""
    return {"bench": bench, "gpu": env.get("gpu"), "driver": env.get("driver"), "env": env,
            "versions": versions, **fields}


def why(exc):
    """An exception as ``"TypeError: message"`` (a result row's reason)."""
    return f"{type(exc).__name__}: {exc}"


def skippable(exc):
    """Whether a launcher's exception means "not supported here" (the row is skipped): a
    TypeError, ValueError or RuntimeError, unless it is a CUDA driver error or a numba compile
    error (the row failed)."""
    try:
        from .._frontend import CudaAPIError, CudaDriverError
        hard = (CudaDriverError, CudaAPIError)
    except Exception:
        hard = ()
    try:
        from .._frontend import errors
        hard += (errors.NumbaError,)
    except Exception:
        pass
    if hard and isinstance(exc, hard):
        return False
    return isinstance(exc, (TypeError, ValueError, RuntimeError))
