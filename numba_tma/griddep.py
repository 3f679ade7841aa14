"""Programmatic dependent launch (sm_90): let a kernel start while the one before it in the
stream finishes. PTX ISA "griddepcontrol"; CUDA's ``cudaGridDependencySynchronize`` /
``cudaTriggerProgrammaticLaunchCompletion``.

A kernel launched with ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``
(:class:`numba_tma.launch.DirectKernel` ``prepare(..., dependent=True)``) may be scheduled
before the kernel ahead of it in the stream (its *primary*) has completed: its blocks start as
SMs free up, set up what touches no global memory (barrier init, descriptor prefetch), and then
call :func:`wait`, which returns once every primary grid has completed and flushed its memory.
A kernel calls :func:`launch_dependents` once the kernel after it may be scheduled; without
it, that happens when it completes. Both are no-ops in a kernel launched without the attribute,
so a kernel may always call them::

    if tid == 0:
        mbarrier.init(bar, 1)            # no global memory: may overlap the primary's tail
    cuda.syncthreads()
    griddep.wait()                       # CORRECT: before the first global load or store
    griddep.launch_dependents()          # the next kernel may start its own setup
    ...

    x = src[i]                           # WRONG before wait(): may read what the primary
    griddep.wait()                       # has not written yet

Issued by: :func:`wait`, every thread that touches global memory (or all threads);
:func:`launch_dependents`, any thread of each block (it counts once per block). SASS: ``ACQBULK``
(wait) and ``PREEXIT`` (launch_dependents).
"""

from ._frontend import overload, types

from ._bridge import declare, host_call

__all__ = ["wait", "launch_dependents"]

_wait = declare("griddep", "numba_tma_griddepcontrol_wait", types.void())
_launch_dependents = declare("griddep", "numba_tma_griddepcontrol_launch_dependents",
                             types.void())


def wait():
    """Wait until the grids this one depends on have completed and their memory is visible
    (returns at once when launched without programmatic serialization).
    PTX: ``griddepcontrol.wait;`` (sm_90)."""
    host_call("griddep.wait")


def launch_dependents():
    """Let the grid launched after this one with programmatic serialization be scheduled once
    every block of this grid has called this or exited. PTX:
    ``griddepcontrol.launch_dependents;`` (sm_90)."""
    host_call("griddep.launch_dependents")


@overload(wait)
def _ov_wait():
    return lambda: _wait()


@overload(launch_dependents)
def _ov_launch_dependents():
    return lambda: _launch_dependents()
