// 16-byte global-memory loads and stores (PTX ISA "ld"/"st" with .v4): numba emits one access per
// element and LLVM cannot prove a run-time index 16-byte aligned, so LDG.128/STG.128 come from here.
// Registers travel through a 4-word local array that LTO+SROA keep in registers.
typedef unsigned int u32;
typedef unsigned long long u64;

// LD_V4(name, qualifier): one load per L2 prefetch size (.L2::64B/128B/256B: the L2 fetches
// that much of the surrounding, naturally aligned memory along with the line it misses on).
#define LD_V4(NAME, QUAL)                                                                       \
    extern "C" __device__ void NAME(u32* regs, const void* base, u64 byte_offset) {             \
        const char* p = static_cast<const char*>(base) + byte_offset;                          \
        asm volatile("ld.global" QUAL ".v4.b32 {%0, %1, %2, %3}, [%4];"                         \
                     : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3]) : "l"(p));    \
    }
LD_V4(numba_tma_ld_global_v4_b32, "")
LD_V4(numba_tma_ld_global_v4_b32_l2_64b, ".L2::64B")
LD_V4(numba_tma_ld_global_v4_b32_l2_128b, ".L2::128B")
LD_V4(numba_tma_ld_global_v4_b32_l2_256b, ".L2::256B")
#undef LD_V4

extern "C" __device__ void numba_tma_st_global_v4_b32(void* base, u64 byte_offset, const u32* regs) {
    char* p = static_cast<char*>(base) + byte_offset;
    asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"
                 ::"l"(p), "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3]) : "memory");
}

// Asynchronous global -> shared copies of 4, 8 or 16 bytes (PTX ISA "cp.async", sm_80+), cached
// in L1 (.ca), and the mbarrier arrive that waits for them ("cp.async.mbarrier.arrive", without
// .noinc: the barrier's pending count is raised now and lowered when the copies land, so its
// expected arrivals are unchanged and its phase cannot complete before them).
#define CP_ASYNC(N)                                                                             \
    extern "C" __device__ void numba_tma_cp_async_ca_shared_global_##N(void* dst,              \
                                                                      const void* src) {       \
        asm volatile("cp.async.ca.shared.global [%0], [%1], " #N ";"                            \
                     ::"r"(static_cast<u32>(__cvta_generic_to_shared(dst))),                    \
                       "l"(__cvta_generic_to_global(src)) : "memory");                          \
    }
CP_ASYNC(4)
CP_ASYNC(8)
CP_ASYNC(16)
#undef CP_ASYNC

extern "C" __device__ void numba_tma_cp_async_mbarrier_arrive_shared_b64(void* bar) {
    asm volatile("cp.async.mbarrier.arrive.shared::cta.b64 [%0];"
                 ::"r"(static_cast<u32>(__cvta_generic_to_shared(bar))) : "memory");
}
