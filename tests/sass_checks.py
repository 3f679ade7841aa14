"""The check every offline SASS test makes of a compiled kernel: LTO inlined every intrinsic and
device function (no CALL), and nothing lives in local memory (no stack, local bytes, spills,
LDL/STL): fragments, accumulators and operands stay in registers."""


def check_clean(kb):
    assert kb.count("CALL") == 0, f"an intrinsic or device function was not inlined: {kb}"
    assert kb.stack_bytes == 0 and kb.local_bytes == 0, f"local memory in use: {kb}"
    assert kb.spill_stores == 0 and kb.spill_loads == 0, f"register spills: {kb}"
    assert not kb.has("LDL") and not kb.has("STL")


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
