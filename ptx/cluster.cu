// Thread-block clusters (sm_90): cluster special registers (PTX ISA 10 "Special Registers"),
// barrier.cluster (9.7.13.4), mapa (9.7.9.22), distributed shared memory ld/st on
// .shared::cluster (9.7.9.8/9.7.9.10) and mbarrier operations across the cluster (9.7.13.15).
//
// A shared::cluster address is a 32-bit address in the cluster's shared window; `mapa` turns the
// executing CTA's shared::cta address of a variable into the address of the same variable in the
// CTA of a given rank. The executing CTA's own shared::cta addresses are valid shared::cluster
// addresses of its own memory.
typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ---- special registers: one mov each; not volatile, so repeated reads fold.
#define SREG(NAME, REG)                                                                      \
    extern "C" __device__ u32 numba_tma_sreg_##NAME() {                                      \
        u32 v;                                                                               \
        asm("mov.u32 %0, %%" #REG ";" : "=r"(v));                                            \
        return v;                                                                            \
    }

SREG(cluster_ctarank, cluster_ctarank)   // rank of this CTA in its cluster, 0..nctarank-1
SREG(cluster_nctarank, cluster_nctarank) // CTAs per cluster
SREG(cluster_ctaid_x, cluster_ctaid.x)   // this CTA's position inside the cluster
SREG(cluster_ctaid_y, cluster_ctaid.y)
SREG(cluster_ctaid_z, cluster_ctaid.z)
SREG(cluster_nctaid_x, cluster_nctaid.x) // the cluster's shape, in CTAs
SREG(cluster_nctaid_y, cluster_nctaid.y)
SREG(cluster_nctaid_z, cluster_nctaid.z)
SREG(clusterid_x, clusterid.x)           // the cluster's position in the grid, in clusters
SREG(clusterid_y, clusterid.y)
SREG(clusterid_z, clusterid.z)
SREG(nclusterid_x, nclusterid.x)         // the grid's shape, in clusters
SREG(nclusterid_y, nclusterid.y)
SREG(nclusterid_z, nclusterid.z)

// ---- barrier.cluster: every non-exited thread of every CTA of the cluster arrives, then waits.
// Not .aligned: numba code may reach these from divergent paths.
extern "C" __device__ void numba_tma_barrier_cluster_arrive() {
    asm volatile("barrier.cluster.arrive;" ::: "memory");
}
extern "C" __device__ void numba_tma_barrier_cluster_arrive_release() {
    asm volatile("barrier.cluster.arrive.release;" ::: "memory");
}
extern "C" __device__ void numba_tma_barrier_cluster_arrive_relaxed() {
    asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");
}
extern "C" __device__ void numba_tma_barrier_cluster_wait() {
    asm volatile("barrier.cluster.wait;" ::: "memory");
}
extern "C" __device__ void numba_tma_barrier_cluster_wait_acquire() {
    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
}

// ---- distributed shared memory.
extern "C" __device__ u32 numba_tma_mapa_shared_cluster_u32(const void* p, u32 cta_rank) {
    u32 remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote) : "r"(smem_u32(p)), "r"(cta_rank));
    return remote;
}

extern "C" __device__ u32 numba_tma_ld_shared_cluster_u32(u32 addr) {
    u32 v;
    asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
    return v;
}

extern "C" __device__ void numba_tma_st_shared_cluster_u32(u32 addr, u32 value) {
    asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(addr), "r"(value) : "memory");
}

// ---- mbarrier across the cluster.
// Arrive on a barrier that may live in another CTA (addr: a shared::cluster address from mapa).
// The remote form returns no state, hence the sink `_`.
extern "C" __device__ void numba_tma_mbarrier_arrive_release_cluster_shared_cluster_b64(
    u32 addr, u32 count) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0], %1;"
                 ::"r"(addr), "r"(count) : "memory");
}

// The PTX default (release at CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id): no fence
// in SASS. Enough for a consumer CTA to hand a stage of its own shared memory back to the CTA
// whose TMA multicast writes it.
extern "C" __device__ void numba_tma_mbarrier_arrive_release_cta_shared_cluster_b64(
    u32 addr, u32 count) {
    asm volatile("mbarrier.arrive.release.cta.shared::cluster.b64 _, [%0], %1;"
                 ::"r"(addr), "r"(count) : "memory");
}

// Waits with cluster-scope acquire: the data that remote CTAs released (st.shared::cluster,
// then a remote arrive) is visible once the phase completes.
extern "C" __device__ u32 numba_tma_mbarrier_try_wait_parity_acquire_cluster_shared_cta_b64(
    void* bar, u32 parity) {
    u32 done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    return done;
}

extern "C" __device__ void numba_tma_mbarrier_wait_parity_acquire_cluster_shared_cta_b64(
    void* bar, u32 parity) {
    const u32 addr = smem_u32(bar);
    // The braces scope the label, so every inlined copy gets its own.
    asm volatile("{\n\t.reg .pred p;\n"
                 "WAIT:\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n\t"
                 "@!p bra WAIT;\n\t}"
                 ::"r"(addr), "r"(parity) : "memory");
}

extern "C" __device__ u32 numba_tma_mbarrier_wait_parity_acquire_cluster_bounded(
    void* bar, u32 parity, u64 timeout_ns) {
    const u32 addr = smem_u32(bar);
    u64 start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (true) {
        u32 done;
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(addr), "r"(parity) : "memory");
        if (done) return 1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > timeout_ns) return 0;
    }
}
