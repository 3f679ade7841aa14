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

// ---- L2 prefetch and reductions through a tensor map (PTX ISA "cp.async.bulk.prefetch.tensor",
// "cp.reduce.async.bulk.tensor", "prefetch"). sm_90.

// Hint: may start pulling the box at the coordinates into L2; completes on nothing.
#define TMA_PREFETCH_TILE(RANK, PARAMS, COORD_ASM, ...)                                          \
    extern "C" __device__ void numba_tma_cp_async_bulk_prefetch_tensor_##RANK##d_L2_global(    \
        const void* tmap, PARAMS) {                                                              \
        asm volatile("cp.async.bulk.prefetch.tensor." #RANK "d.L2.global.tile"                   \
                     " [%0, {" COORD_ASM "}];"                                                   \
                     ::"l"(tmap), __VA_ARGS__ : "memory");                                       \
    }

TMA_PREFETCH_TILE(1, P1, "%1", "r"(c0))
TMA_PREFETCH_TILE(2, P2, "%1, %2", "r"(c0), "r"(c1))
TMA_PREFETCH_TILE(3, P3, "%1, %2, %3", "r"(c0), "r"(c1), "r"(c2))
TMA_PREFETCH_TILE(4, P4, "%1, %2, %3, %4", "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TMA_PREFETCH_TILE(5, P5, "%1, %2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

// Brings the 128-byte descriptor itself closer (generic address of a map in global memory).
extern "C" __device__ void numba_tma_prefetch_tensormap(const void* tmap) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

// shared -> global element-wise reduction into the box; the element type comes from the map.
// The operation is a PTX token: one function per (op, rank). and/or/xor on an INT64 map raise
// CUDA_ERROR_ILLEGAL_INSTRUCTION on the H100 (UINT64 works), so numba_tma.tma refuses that pair.
#define TMA_REDUCE_TILE(OP, RANK, PARAMS, COORD_ASM, ...)                                        \
    extern "C" __device__ void                                                                   \
    numba_tma_cp_reduce_async_bulk_tensor_##RANK##d_shared_to_global_##OP(                       \
        const void* tmap, const void* src, PARAMS) {                                             \
        asm volatile("cp.reduce.async.bulk.tensor." #RANK "d.global.shared::cta." #OP            \
                     ".tile.bulk_group [%0, {" COORD_ASM "}], [%1];"                             \
                     ::"l"(tmap), "r"(smem_u32(src)), __VA_ARGS__ : "memory");                   \
    }

#define TMA_REDUCE_RANKS(OP)                                                                     \
    TMA_REDUCE_TILE(OP, 1, P1, "%2", "r"(c0))                                                    \
    TMA_REDUCE_TILE(OP, 2, P2, "%2, %3", "r"(c0), "r"(c1))                                       \
    TMA_REDUCE_TILE(OP, 3, P3, "%2, %3, %4", "r"(c0), "r"(c1), "r"(c2))                          \
    TMA_REDUCE_TILE(OP, 4, P4, "%2, %3, %4, %5", "r"(c0), "r"(c1), "r"(c2), "r"(c3))             \
    TMA_REDUCE_TILE(OP, 5, P5, "%2, %3, %4, %5, %6", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

TMA_REDUCE_RANKS(add)
TMA_REDUCE_RANKS(min)
TMA_REDUCE_RANKS(max)
TMA_REDUCE_RANKS(inc)
TMA_REDUCE_RANKS(dec)
TMA_REDUCE_RANKS(and)
TMA_REDUCE_RANKS(or)
TMA_REDUCE_RANKS(xor)

// ---- multicast load (sm_90a): global -> shared of every CTA of the cluster whose rank bit is set
// in cta_mask, at dst's CTA-relative offset in each; each destination's mbarrier at bar's offset
// receives complete_tx of the box's bytes. ctaMask is a 16-bit operand ("h").
#define TMA_LOAD_MULTICAST(RANK, PARAMS, COORD_ASM, ...)                                         \
    extern "C" __device__ void                                                                   \
    numba_tma_cp_async_bulk_tensor_##RANK##d_global_to_shared_multicast(                         \
        void* dst, const void* tmap, void* bar, u32 cta_mask, PARAMS) {                          \
        asm volatile("cp.async.bulk.tensor." #RANK "d.shared::cluster.global.tile"               \
                     ".mbarrier::complete_tx::bytes.multicast::cluster"                          \
                     " [%0], [%1, {" COORD_ASM "}], [%2], %3;"                                   \
                     ::"r"(smem_u32(dst)), "l"(tmap), "r"(smem_u32(bar)),                        \
                       "h"(static_cast<unsigned short>(cta_mask)), __VA_ARGS__                   \
                     : "memory");                                                                \
    }

TMA_LOAD_MULTICAST(1, P1, "%4", "r"(c0))
TMA_LOAD_MULTICAST(2, P2, "%4, %5", "r"(c0), "r"(c1))
TMA_LOAD_MULTICAST(3, P3, "%4, %5, %6", "r"(c0), "r"(c1), "r"(c2))
TMA_LOAD_MULTICAST(4, P4, "%4, %5, %6, %7", "r"(c0), "r"(c1), "r"(c2), "r"(c3))
TMA_LOAD_MULTICAST(5, P5, "%4, %5, %6, %7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4))

// ---- im2col load (sm_90): global -> shared, completing on an mbarrier. tmap is an im2col-mode
// map (cuTensorMapEncodeIm2col) of an NWC/NHWC/NDHWC tensor; coordinates {c, w, (h), (d), n}
// (c0 innermost) place the filter base pixel, the im2col offsets {ow, (oh), (od)} (16-bit,
// rank - 2 of them, innermost first) shift every pixel read by a filter tap.
#define TMA_LOAD_IM2COL(RANK, PARAMS, COORD_ASM, OFF_ASM, ...)                                   \
    extern "C" __device__ void numba_tma_cp_async_bulk_tensor_##RANK##d_global_to_shared_im2col( \
        void* dst, const void* tmap, void* bar, PARAMS) {                                        \
        asm volatile("cp.async.bulk.tensor." #RANK "d.shared::cluster.global.im2col"             \
                     ".mbarrier::complete_tx::bytes [%0], [%1, {" COORD_ASM "}], [%2], {"        \
                     OFF_ASM "};"                                                                \
                     ::"r"(smem_u32(dst)), "l"(tmap), "r"(smem_u32(bar)), __VA_ARGS__            \
                     : "memory");                                                                \
    }

#define H16(x) "h"(static_cast<unsigned short>(x))
#define PI3 int c0, int c1, int c2, u32 o0
#define PI4 int c0, int c1, int c2, int c3, u32 o0, u32 o1
#define PI5 int c0, int c1, int c2, int c3, int c4, u32 o0, u32 o1, u32 o2

TMA_LOAD_IM2COL(3, PI3, "%3, %4, %5", "%6", "r"(c0), "r"(c1), "r"(c2), H16(o0))
TMA_LOAD_IM2COL(4, PI4, "%3, %4, %5, %6", "%7, %8", "r"(c0), "r"(c1), "r"(c2), "r"(c3), H16(o0),
                H16(o1))
TMA_LOAD_IM2COL(5, PI5, "%3, %4, %5, %6, %7", "%8, %9, %10", "r"(c0), "r"(c1), "r"(c2), "r"(c3),
                "r"(c4), H16(o0), H16(o1), H16(o2))
