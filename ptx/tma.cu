// TMA tile-mode bulk tensor copies and bulk async-groups (PTX ISA 9.7.9.25 "cp.async.bulk.tensor",
// 9.7.9.26 "cp.async.bulk.commit_group / wait_group"). sm_90.
//
// tmap is a generic address of a 64-byte-aligned CUtensorMap in global memory (a __grid_constant__
// parameter would also do; numba cannot pass one yet). Coordinates are signed element indices,
// c0 the innermost (fastest-varying) dimension; a box that falls partly outside the tensor is
// filled (loads) or clipped (stores) by the hardware.
typedef unsigned int u32;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// global -> shared, completing on an mbarrier with complete_tx::bytes = the box's bytes.
#define TMA_LOAD(RANK, PARAMS, COORD_ASM, ...)                                                   \
    extern "C" __device__ void numba_tma_cp_async_bulk_tensor_##RANK##d_global_to_shared(       \
        void* dst, const void* tmap, void* bar, PARAMS) {                                        \
        asm volatile("cp.async.bulk.tensor." #RANK "d.shared::cluster.global.tile"               \
                     ".mbarrier::complete_tx::bytes [%0], [%1, {" COORD_ASM "}], [%2];"          \
                     ::"r"(smem_u32(dst)), "l"(tmap), "r"(smem_u32(bar)), __VA_ARGS__            \
                     : "memory");                                                                \
    }

// shared -> global, tracked by the issuing thread's bulk async-group.
#define TMA_STORE(RANK, PARAMS, COORD_ASM, ...)                                                  \
    extern "C" __device__ void numba_tma_cp_async_bulk_tensor_##RANK##d_shared_to_global(       \
        const void* tmap, const void* src, PARAMS) {                                             \
        asm volatile("cp.async.bulk.tensor." #RANK "d.global.shared::cta.tile.bulk_group"        \
                     " [%0, {" COORD_ASM "}], [%1];"                                             \
                     ::"l"(tmap), "r"(smem_u32(src)), __VA_ARGS__                                \
                     : "memory");                                                                \
    }

#define P1 int c0
#define P2 int c0, int c1
#define P3 int c0, int c1, int c2
#define P4 int c0, int c1, int c2, int c3
#define P5 int c0, int c1, int c2, int c3, int c4

TMA_LOAD(1, P1, "%3", "r"(c0))
TMA_LOAD(2, P2, "%3, %4", "r"(c0), "r"(c1))
TMA_LOAD(3, P3, "%3, %4, %5", "r"(c0), "r"(c1), "r"(c2))
TMA_LOAD(4, P4, "%3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TMA_LOAD(5, P5, "%3, %4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

TMA_STORE(1, P1, "%2", "r"(c0))
TMA_STORE(2, P2, "%2, %3", "r"(c0), "r"(c1))
TMA_STORE(3, P3, "%2, %3, %4", "r"(c0), "r"(c1), "r"(c2))
TMA_STORE(4, P4, "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TMA_STORE(5, P5, "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

extern "C" __device__ void numba_tma_cp_async_bulk_commit_group() {
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// The pending-group count is a PTX immediate: one function per value.
#define WAIT_GROUP(N)                                                                           \
    extern "C" __device__ void numba_tma_cp_async_bulk_wait_group_##N() {                      \
        asm volatile("cp.async.bulk.wait_group " #N ";" ::: "memory");                         \
    }                                                                                           \
    extern "C" __device__ void numba_tma_cp_async_bulk_wait_group_read_##N() {                 \
        asm volatile("cp.async.bulk.wait_group.read " #N ";" ::: "memory");                    \
    }

WAIT_GROUP(0)
WAIT_GROUP(1)
WAIT_GROUP(2)
WAIT_GROUP(3)
WAIT_GROUP(4)
WAIT_GROUP(5)
WAIT_GROUP(6)
WAIT_GROUP(7)
