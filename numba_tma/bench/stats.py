"""Statistics and bandwidth arithmetic of timed runs (milliseconds in, GB/s, percentages and
speedups out; None where a value is undefined). Pure Python: no GPU.
"""

import math
import statistics


def median(samples):
    if not samples:
        raise ValueError("no samples")
    return float(statistics.median(samples))


def summarize(samples):
    """``{"median", "min", "max", "mean", "stdev", "n"}`` of a list of times (ms)."""
    if not samples:
        raise ValueError("no samples")
    xs = [float(x) for x in samples]
    return {
        "median": float(statistics.median(xs)),
        "min": min(xs),
        "max": max(xs),
        "mean": float(statistics.fmean(xs)),
        "stdev": float(statistics.stdev(xs)) if len(xs) > 1 else 0.0,
        "n": len(xs),
    }


def gbps(nbytes, ms):
    """Decimal GB/s moving ``nbytes`` in ``ms`` milliseconds; None if ``ms`` is not positive."""
    if ms is None or not ms > 0:
        return None
    return nbytes / (ms * 1e-3) / 1e9


def pct_of(value, reference):
    """``value`` as a percentage of ``reference`` (e.g. GB/s of the copy); None when undefined."""
    if value is None or reference is None or not reference > 0:
        return None
    return 100.0 * value / reference


def speedup(reference_ms, ms):
    """How many times faster ``ms`` is than ``reference_ms`` (>1: faster); None when undefined."""
    if reference_ms is None or ms is None or not ms > 0 or not reference_ms > 0:
        return None
    return reference_ms / ms


def geomean(values):
    """Geometric mean of positive numbers (None entries skipped); None when there are none."""
    xs = [float(x) for x in values if x is not None]
    if not xs:
        return None
    if min(xs) <= 0:
        raise ValueError("geomean of a non-positive value")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
