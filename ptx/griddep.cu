// Programmatic dependent launch (PTX ISA "griddepcontrol", sm_90): a kernel launched with the
// programmatic-stream-serialization attribute may start before the kernel ahead of it in the
// stream has finished; griddepcontrol.wait holds it until that kernel has completed and its
// memory is visible, and griddepcontrol.launch_dependents lets the next such kernel start.

extern "C" __device__ void numba_tma_griddepcontrol_wait() {
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

extern "C" __device__ void numba_tma_griddepcontrol_launch_dependents() {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
