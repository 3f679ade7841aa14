"""A two-GPU machine for CPU tests of the device check (numba_tma.operands): device 0 launches,
and the driver's pointer query is answered from a table instead of CUDA."""

from numba_tma import operands


def fake_two_gpus(monkeypatch, allocations, size):
    """Patch ``operands`` so that each ``(start, ordinal)`` of ``allocations`` is an allocation of
    ``size`` bytes on that device (anything else is unknown memory). Returns the list of the
    pointers the check asked about, in order."""
    asked = []

    def query(ptr):
        asked.append(ptr)
        for start, ordinal in allocations:
            if start <= ptr < start + size:
                return ordinal, start, size
        return None

    monkeypatch.setattr(operands, "launch_device", lambda: 0)
    monkeypatch.setattr(operands, "_device_count", lambda: 2)
    monkeypatch.setattr(operands, "_query_pointer", query)
    monkeypatch.setattr(operands, "_starts", [])
    monkeypatch.setattr(operands, "_ranges", {})
    return asked
