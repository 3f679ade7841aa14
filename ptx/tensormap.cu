// Device-side modification of TMA descriptors (tensor maps) and the tensormap-proxy fences.
// PTX ISA 9.7.9.28 "tensormap.replace", 9.7.13.4 "membar/fence" (fence.proxy.tensormap::generic),
// 9.7.13.x "tensormap.cp_fenceproxy". sm_90a (tensormap.replace is architecture-specific).
//
// A descriptor is 128 bytes (.b1024), 128-byte aligned wherever it is modified. Only tile-mode
// descriptors may be modified on the device. Three address forms:
//   *_generic : no state space; the generic address may point to global or shared memory.
//   *_global  : .global; a generic address of global memory (identical on sm_90).
//   *_shared  : .shared::cta; a 32-bit shared-window address (cvta'd here).
// Field ordinals (box_dim, global_dim, global_stride, element_stride) and the .field3 values
// (elemtype, interleave_layout, swizzle_mode, fill_mode) are PTX immediates: one function each.
typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 tmap_smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

static __device__ __forceinline__ u64 tmap_gmem_u64(const void* p) {
    return static_cast<u64>(__cvta_generic_to_global(p));
}

// .field1 (no ordinal) and .field2 (with ordinal), for each address form.
#define TM_F1(FIELD, TY, CT, VTY)                                                                \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_generic(               \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".b1024." #TY " [%0], %1;"                 \
                     ::"l"(tm), CT(v) : "memory");                                               \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_global(                \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".global.b1024." #TY " [%0], %1;"          \
                     ::"l"(tmap_gmem_u64(tm)), CT(v) : "memory");                                \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_shared_cta(            \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".shared::cta.b1024." #TY " [%0], %1;"     \
                     ::"r"(tmap_smem_u32(tm)), CT(v) : "memory");                                \
    }

#define TM_F2(FIELD, ORD, TY, CT, VTY)                                                           \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##ORD##_generic(       \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".b1024." #TY " [%0], " #ORD ", %1;"       \
                     ::"l"(tm), CT(v) : "memory");                                               \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##ORD##_global(        \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".global.b1024." #TY " [%0], " #ORD ", %1;"\
                     ::"l"(tmap_gmem_u64(tm)), CT(v) : "memory");                                \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##ORD##_shared_cta(    \
        void* tm, VTY v) {                                                                       \
        asm volatile("tensormap.replace.tile." #FIELD ".shared::cta.b1024." #TY                  \
                     " [%0], " #ORD ", %1;"                                                      \
                     ::"r"(tmap_smem_u32(tm)), CT(v) : "memory");                                \
    }

// .field3: the new value is an immediate (PTX ISA table "Tensormap new_val validity").
#define TM_F3(FIELD, VAL)                                                                        \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##VAL##_generic(       \
        void* tm) {                                                                              \
        asm volatile("tensormap.replace.tile." #FIELD ".b1024.b32 [%0], " #VAL ";"               \
                     ::"l"(tm) : "memory");                                                      \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##VAL##_global(        \
        void* tm) {                                                                              \
        asm volatile("tensormap.replace.tile." #FIELD ".global.b1024.b32 [%0], " #VAL ";"        \
                     ::"l"(tmap_gmem_u64(tm)) : "memory");                                       \
    }                                                                                            \
    extern "C" __device__ void numba_tma_tensormap_replace_tile_##FIELD##_##VAL##_shared_cta(    \
        void* tm) {                                                                              \
        asm volatile("tensormap.replace.tile." #FIELD ".shared::cta.b1024.b32 [%0], " #VAL ";"   \
                     ::"r"(tmap_smem_u32(tm)) : "memory");                                       \
    }

#define R32 "r"
#define L64 "l"

TM_F1(global_address, b64, L64, u64)
TM_F1(rank, b32, R32, u32)  // new value = rank - 1

#define TM_F2_RANK5(FIELD, TY, CT, VTY)                                                          \
    TM_F2(FIELD, 0, TY, CT, VTY) TM_F2(FIELD, 1, TY, CT, VTY) TM_F2(FIELD, 2, TY, CT, VTY)      \
    TM_F2(FIELD, 3, TY, CT, VTY) TM_F2(FIELD, 4, TY, CT, VTY)

TM_F2_RANK5(box_dim, b32, R32, u32)
TM_F2_RANK5(global_dim, b32, R32, u32)
TM_F2_RANK5(element_stride, b32, R32, u32)
// global_stride ordinal i is the byte stride of dimension i + 1 (dimension 0 is contiguous).
TM_F2(global_stride, 0, b64, L64, u64)
TM_F2(global_stride, 1, b64, L64, u64)
TM_F2(global_stride, 2, b64, L64, u64)
TM_F2(global_stride, 3, b64, L64, u64)

// elemtype 0..12: u8 u16 u32 s32 u64 s64 f16 f32 f32.ftz f64 bf16 tf32 tf32.ftz (13..15: sm_100).
TM_F3(elemtype, 0) TM_F3(elemtype, 1) TM_F3(elemtype, 2) TM_F3(elemtype, 3) TM_F3(elemtype, 4)
TM_F3(elemtype, 5) TM_F3(elemtype, 6) TM_F3(elemtype, 7) TM_F3(elemtype, 8) TM_F3(elemtype, 9)
TM_F3(elemtype, 10) TM_F3(elemtype, 11) TM_F3(elemtype, 12)
// interleave_layout 0..2: none, 16B, 32B.
TM_F3(interleave_layout, 0) TM_F3(interleave_layout, 1) TM_F3(interleave_layout, 2)
// swizzle_mode 0..3: none, 32B, 64B, 128B (4 = 96B: sm_103a only).
TM_F3(swizzle_mode, 0) TM_F3(swizzle_mode, 1) TM_F3(swizzle_mode, 2) TM_F3(swizzle_mode, 3)
// fill_mode 0..1: zero, OOB-NaN.
TM_F3(fill_mode, 0) TM_F3(fill_mode, 1)

// Tensormap-proxy fences. The modifying thread releases after its last tensormap.replace (or
// ordinary store) to a descriptor in global memory; every thread block that uses the modified
// descriptor acquires it (one thread, then a block barrier) before its first cp.async.bulk.tensor.
#define TM_FENCES(SCOPE)                                                                         \
    extern "C" __device__ void numba_tma_fence_proxy_tensormap_generic_release_##SCOPE() {      \
        asm volatile("fence.proxy.tensormap::generic.release." #SCOPE ";" ::: "memory");        \
    }                                                                                            \
    extern "C" __device__ void numba_tma_fence_proxy_tensormap_generic_acquire_##SCOPE(         \
        const void* tm) {                                                                        \
        asm volatile("fence.proxy.tensormap::generic.acquire." #SCOPE " [%0], 128;"             \
                     ::"l"(tm) : "memory");                                                      \
    }                                                                                            \
    /* Warp-collective (.sync.aligned): every lane of the warp executes it with the same      */ \
    /* operands. Copies the 128-byte descriptor from shared to global memory and releases it. */ \
    extern "C" __device__ void numba_tma_tensormap_cp_fenceproxy_global_shared_cta_release_##SCOPE(\
        void* gdst, const void* ssrc) {                                                          \
        asm volatile("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release."    \
                     #SCOPE ".sync.aligned [%0], [%1], 128;"                                     \
                     ::"l"(tmap_gmem_u64(gdst)), "r"(tmap_smem_u32(ssrc)) : "memory");           \
    }

TM_FENCES(cta)
TM_FENCES(cluster)
TM_FENCES(gpu)
TM_FENCES(sys)
