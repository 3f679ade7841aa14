"""The check every offline SASS test makes of a compiled kernel: LTO inlined every intrinsic and
device function (no CALL), and nothing lives in local memory (no stack, local bytes, spills,
LDL/STL): fragments, accumulators and operands stay in registers."""


def on_mlir():
    """Whether numba_tma compiles with numba-cuda-mlir (the second front end)."""
    from numba_tma import front_end

    return front_end() == "numba-cuda-mlir"


def skip_on_mlir(what):
    """Skip the calling test on numba-cuda-mlir, where ``what`` (docs/front_ends.md lists it
    under 'Not yet on numba-cuda-mlir')."""
    import pytest

    if on_mlir():
        pytest.skip(f"{what} on numba-cuda-mlir (docs/front_ends.md, 'Not yet on "
                    "numba-cuda-mlir')")


def check_clean(kb):
    assert kb.count("CALL") == 0, f"an intrinsic or device function was not inlined: {kb}"
    assert kb.stack_bytes == 0 and kb.local_bytes == 0, f"local memory in use: {kb}"
    assert kb.spill_stores == 0 and kb.spill_loads == 0, f"register spills: {kb}"
    assert not kb.has("LDL") and not kb.has("STL")


def r2ur_in_wgmma_groups(sass):
    """R2UR moves between a wgmma group's first HGMMA/QGMMA and its last (the one that sets
    gsb0): a descriptor built per thread and moved to the uniform registers mid-group, which
    stalls the issue of the group's next wgmma."""
    count, in_group = 0, False
    for line in sass.splitlines():
        if "GMMA" in line:
            in_group = "gsb0" not in line
        elif in_group and "R2UR" in line:
            count += 1
    return count


def producer_loops(sass):
    """The bodies (lists of instruction texts) of the SASS loops (a predicated branch back)
    that issue TMA loads (``UTMALDG``) and no wgmma: the producer's loops over slices and
    tiles. (The unconditional branches back are the ends of waits' retries, not loops.)"""
    import re

    ins = [(int(m.group(1), 16), m.group(2)) for m in
           re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    bodies = []
    for at, text in ins:
        m = re.search(r"\bBRA (?:0x)?([0-9a-f]+)", text)
        if (m and text.startswith("@") and "U.ANY" not in text
                and int(m.group(1), 16) < at):
            body = [t for a, t in ins if int(m.group(1), 16) <= a <= at]
            if any("UTMALDG" in t for t in body) and not any("GMMA" in t for t in body):
                bodies.append(body)
    return bodies



def producer_lane_loops(sass):
    """The instructions of ptxas's loops over the active lanes (``ELECT`` ... ``BRA.U.ANY``)
    inside the producer's loops: each wraps a one-thread copy whose thread was not elected by
    ``warp.elect_one``. Asserts the SASS has producer loops at all."""
    loops = producer_loops(sass)
    assert loops, "no producer loop (UTMALDG and no wgmma) in the SASS"
    return [t for body in loops for t in body if "ELECT" in t or "U.ANY" in t]

# Exact instruction counts (and a few instruction forms) are the code one toolchain printed: the
# ones the tests pin were read with nvJitLink 13.5, the version CI installs. Under another (the
# H100 image's is 13.0) they are not compared; what the code must do still is.
PINNED_TOOLCHAIN = (13, 5)


def toolchain():
    """(major, minor) of the nvJitLink that links the offline kernels."""
    from cuda.bindings import nvjitlink

    return tuple(nvjitlink.version())


def pinned_toolchain():
    """Whether counts pinned under :data:`PINNED_TOOLCHAIN` apply to this toolchain."""
    return toolchain() == PINNED_TOOLCHAIN


def collected(request, test_name, param):
    """The values of ``param`` that the collected tests ``test_name`` of the requesting module
    take (only the selected ones: ``-k`` builds only what it runs)."""
    return [item.callspec.params[param] for item in request.session.items
            if getattr(item, "originalname", None) == test_name
            and item.module is request.module and hasattr(item, "callspec")]


def compiled_in_processes(values, build):
    """``{repr(value): KernelBinary or the exception}`` of ``build(value)`` for each of
    ``values``, built in parallel processes (one per core): an offline SASS module builds
    dozens of kernels, each on one core. ``build`` must be a module-level function (spawned
    workers import it)."""
    import concurrent.futures
    import multiprocessing
    import os

    values = list({repr(v): v for v in values}.values())
    if not values:
        return {}
    workers = min(len(values), os.cpu_count() or 1)
    out = {}
    # spawn: numba's compiler state is not fork-safe once imported
    with concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {repr(v): pool.submit(build, v) for v in values}
        for key, fut in futures.items():
            try:
                out[key] = fut.result()
            except Exception as e:      # raised again by the test that asks for it
                out[key] = e
    return out


def take(binaries, value):
    """The KernelBinary of ``value`` from :func:`compiled_in_processes` (or its build's error)."""
    kb = binaries[repr(value)]
    if isinstance(kb, Exception):
        raise kb
    return kb
