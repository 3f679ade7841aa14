// mbarrier: the shared-memory transaction barrier that TMA loads complete on (PTX ISA 9.7.13.15).
// Each function takes the barrier as a generic pointer to a 64-bit word in shared memory.
// NVRTC has no standard headers, hence the local typedefs.
typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

extern "C" __device__ void numba_tma_mbarrier_init_shared_cta_b64(void* bar, u32 count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

extern "C" __device__ void numba_tma_mbarrier_inval_shared_cta_b64(void* bar) {
    asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Makes the initialised barrier visible to the async proxy and the cluster (sm_90).
extern "C" __device__ void numba_tma_fence_mbarrier_init_release_cluster() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

extern "C" __device__ u64 numba_tma_mbarrier_arrive_shared_cta_b64(void* bar, u32 count) {
    u64 state;
    asm volatile("mbarrier.arrive.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state) : "r"(smem_u32(bar)), "r"(count) : "memory");
    return state;
}

extern "C" __device__ u64 numba_tma_mbarrier_arrive_expect_tx_shared_cta_b64(void* bar, u32 tx_bytes) {
    u64 state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state) : "r"(smem_u32(bar)), "r"(tx_bytes) : "memory");
    return state;
}

extern "C" __device__ void numba_tma_mbarrier_expect_tx_shared_cta_b64(void* bar, u32 tx_bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
                 ::"r"(smem_u32(bar)), "r"(tx_bytes) : "memory");
}

extern "C" __device__ u32 numba_tma_mbarrier_try_wait_parity_shared_cta_b64(void* bar, u32 parity) {
    u32 done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    return done;
}

extern "C" __device__ u32 numba_tma_mbarrier_test_wait_parity_shared_cta_b64(void* bar, u32 parity) {
    u32 done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    return done;
}

// try_wait suspends the thread for a hardware-chosen time before it returns false, so this
// loop is not a hot spin.
extern "C" __device__ void numba_tma_mbarrier_wait_parity_shared_cta_b64(void* bar, u32 parity) {
    const u32 addr = smem_u32(bar);
    // The braces scope the label, so every inlined copy gets its own.
    asm volatile("{\n\t.reg .pred p;\n"
                 "WAIT:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
                 "@!p bra WAIT;\n\t}"
                 ::"r"(addr), "r"(parity) : "memory");
}

// Bounded wait: gives up after timeout_ns of %globaltimer, so a lost transaction shows as a
// returned 0 instead of a hung kernel.
extern "C" __device__ u32 numba_tma_mbarrier_wait_parity_bounded(void* bar, u32 parity, u64 timeout_ns) {
    const u32 addr = smem_u32(bar);
    u64 start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (true) {
        u32 done;
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(addr), "r"(parity) : "memory");
        if (done) return 1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) return 0;
    }
}
