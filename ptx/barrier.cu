// Named CTA barriers (PTX ISA "bar.sync / bar.arrive", barrier.sync.aligned): barrier 0 is
// __syncthreads(); ids 1-15 let a subset of warps synchronise, e.g. the consumer warpgroups of
// a warp-specialised kernel while the producer is elsewhere (or has exited).
typedef unsigned int u32;

extern "C" __device__ void numba_tma_bar_sync(u32 id, u32 count) {
    asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}

extern "C" __device__ void numba_tma_bar_arrive(u32 id, u32 count) {
    asm volatile("bar.arrive %0, %1;" :: "r"(id), "r"(count) : "memory");
}
