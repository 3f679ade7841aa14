// 16-byte shared-memory accesses (PTX ISA "ld"/"st" with .v4): numba emits scalar loads and stores,
// and LLVM cannot prove 16-byte alignment of an index, so wide accesses come from here.
// Registers travel through a 4-word local array that LTO+SROA keep in registers.
typedef unsigned int u32;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

extern "C" __device__ void numba_tma_ld_shared_v4_b32(u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                 : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_st_shared_v4_b32(void* base, u32 byte_offset, const u32* regs) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};"
                 ::"r"(smem_u32(base) + byte_offset),
                   "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3]) : "memory");
}

extern "C" __device__ u32 numba_tma_cvta_to_shared_u32(const void* p) {
    return smem_u32(p);
}
