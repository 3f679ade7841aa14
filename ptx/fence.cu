// Proxy fences (PTX ISA 9.7.13.4 "membar/fence"): order the generic proxy (ordinary loads and
// stores) against the async proxy (TMA, bulk copies, wgmma operands) on sm_90.

extern "C" __device__ void numba_tma_fence_proxy_async_shared_cta() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

extern "C" __device__ void numba_tma_fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;" ::: "memory");
}

extern "C" __device__ void numba_tma_fence_proxy_async() {
    asm volatile("fence.proxy.async;" ::: "memory");
}
