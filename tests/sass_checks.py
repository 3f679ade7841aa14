"""The check every offline SASS test makes of a compiled kernel: LTO inlined every intrinsic and
device function (no CALL), and nothing lives in local memory (no stack, local bytes, spills,
LDL/STL): fragments, accumulators and operands stay in registers."""


def check_clean(kb):
    assert kb.count("CALL") == 0, f"an intrinsic or device function was not inlined: {kb}"
    assert kb.stack_bytes == 0 and kb.local_bytes == 0, f"local memory in use: {kb}"
    assert kb.spill_stores == 0 and kb.spill_loads == 0, f"register spills: {kb}"
    assert not kb.has("LDL") and not kb.has("STL")
