"""SASS and resource parsing of :mod:`numba_tma.offline`: mnemonics from ``cuobjdump -sass`` or
``nvdisasm`` text, ``cuobjdump -res-usage`` and the ptxas lines of nvJitLink's log."""

import collections
import re

__all__ = ["parse_mnemonics", "parse_opcodes"]

# "        /*0150*/                   UTMALDG.2D [UR8], [UR4] ;   /* 0x...*/"
# The address comment has no blank inside; the encoding lines ("/* 0x... */") do.
_SASS_LINE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s*(?P<insn>[^;]*);")
_PREDICATE = re.compile(r"^@!?U?P(?:T|\d+)\s+")
# Lower case too: wgmma's shape is part of its mnemonic ("HGMMA.64x256x16.F32").
_MNEMONIC = re.compile(r"^[A-Z0-9_][A-Za-z0-9_.]*")


def parse_mnemonics(sass):
    """Full SASS mnemonics ("UTMALDG.2D", "SYNCS.EXCH.64", "HGMMA.64x256x16.F32") of a dump,
    in program order: the instruction's whole first word, every dotted modifier kept.

    Works on ``cuobjdump -sass`` and ``nvdisasm`` output (with or without ``-hex``);
    predicates ("@P0", "@!UPT"), operands, labels and directives are dropped.
    """
    mnemonics = []
    for line in sass.splitlines():
        m = _SASS_LINE.match(line)
        if not m:
            continue
        insn = _PREDICATE.sub("", m.group("insn").strip())
        mm = _MNEMONIC.match(insn)
        if mm:
            mnemonics.append(mm.group(0))
    return mnemonics


def parse_opcodes(sass):
    """Counter of full SASS mnemonics in a dump (see ``parse_mnemonics``)."""
    return collections.Counter(parse_mnemonics(sass))


_RES_FUNC = re.compile(r"^\s*Function\s+(\S+?):?\s*$")
_RES_PAIR = re.compile(r"([A-Z_]+(?:\[\d+\])?):(\d+)")


def _parse_res_usage(text):
    """``cuobjdump -res-usage`` -> {function: {"REG": 10, "STACK": 0, ...}}."""
    out = {}
    current = None
    for line in text.splitlines():
        m = _RES_FUNC.match(line)
        if m:
            current = m.group(1)
            out[current] = {}
            continue
        if current is not None:
            pairs = _RES_PAIR.findall(line)
            if pairs:
                out[current].update((k, int(v)) for k, v in pairs)
    return out


_LOG_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_LOG_PROPS = re.compile(r"Function properties for (\S+)")
_LOG_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_LOG_USED = re.compile(r"Used (\d+) registers")
_LOG_FIELDS = {
    "barriers": re.compile(r"used (\d+) barriers"),
    "smem": re.compile(r"(\d+) bytes smem"),
    "lmem": re.compile(r"(\d+) bytes lmem"),
    "cumulative_stack": re.compile(r"(\d+) bytes cumulative stack size"),
}


def _has_op(sass, op):
    """Whether SASS text has an instruction of opcode ``op`` (any modifiers)."""
    return re.search(rf"\b{op}(\.|\s)", sass) is not None


def _parse_ptxas_log(text):
    """ptxas lines of the nvJitLink verbose log -> ([entries], {function: {...}})."""
    entries, funcs = [], {}
    current = None
    for line in text.splitlines():
        m = _LOG_ENTRY.search(line)
        if m:
            current = m.group(1)
            entries.append(current)
            funcs.setdefault(current, {})
            continue
        m = _LOG_PROPS.search(line)
        if m:
            current = m.group(1)
            funcs.setdefault(current, {})
            continue
        if current is None:
            continue
        m = _LOG_FRAME.search(line)
        if m:
            d = funcs[current]
            d["stack"], d["spill_stores"], d["spill_loads"] = map(int, m.groups())
            continue
        m = _LOG_USED.search(line)
        if m:
            d = funcs[current]
            d["registers"] = int(m.group(1))
            # ptxas leaves out fields that are zero.
            for key, rx in _LOG_FIELDS.items():
                f = rx.search(line)
                d[key] = int(f.group(1)) if f else 0
    return entries, funcs
