// Non-tensor bulk copies, reductions and prefetches (PTX ISA 9.7.9.25.4 "cp.async.bulk",
// "cp.reduce.async.bulk", "cp.async.bulk.prefetch"). sm_90.
//
// A bulk operation moves `size` contiguous bytes between global and shared memory through the
// TMA unit, without a tensor map. size must be a multiple of 16 and both addresses 16-byte
// aligned (anything else is undefined behaviour). Global operands arrive as generic pointers and
// are converted with __cvta_generic_to_global (the .global instructions take global addresses);
// shared operands as generic pointers converted to 32-bit shared addresses.
typedef unsigned int u32;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

static __device__ __forceinline__ unsigned long long gmem_u64(const void* p) {
    return static_cast<unsigned long long>(__cvta_generic_to_global(p));
}

// global -> shared, completing on an mbarrier with complete_tx::bytes = size. The executing CTA's
// own shared address is a valid shared::cluster address.
extern "C" __device__ void numba_tma_cp_async_bulk_shared_cluster_global_mbarrier(
    void* dst, const void* src, u32 size, void* bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 ::"r"(smem_u32(dst)), "l"(gmem_u64(src)), "r"(size), "r"(smem_u32(bar))
                 : "memory");
}

// shared -> global, tracked by the issuing thread's bulk async-group.
extern "C" __device__ void numba_tma_cp_async_bulk_global_shared_cta_bulk_group(
    void* dst, const void* src, u32 size) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(gmem_u64(dst)), "r"(smem_u32(src)), "r"(size) : "memory");
}

// A hint: may start pulling [src, src + size) into L2; completes on nothing.
extern "C" __device__ void numba_tma_cp_async_bulk_prefetch_L2_global(const void* src, u32 size) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
                 ::"l"(gmem_u64(src)), "r"(size) : "memory");
}

// shared -> global element-wise reduction dst[i] = dst[i] OP src[i], bulk async-group completion.
// One function per (op, type) the ISA allows for a .global destination (its table in
// "cp.reduce.async.bulk"); f16/bf16 add exists only as add.noftz.
#define BULK_RED(OP, TYPE, SUFFIX)                                                              \
    extern "C" __device__ void numba_tma_cp_reduce_async_bulk_global_shared_cta_##OP##_##TYPE(  \
        void* dst, const void* src, u32 size) {                                                 \
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group." SUFFIX               \
                     " [%0], [%1], %2;"                                                         \
                     ::"l"(gmem_u64(dst)), "r"(smem_u32(src)), "r"(size) : "memory");           \
    }

BULK_RED(add, u32, "add.u32")
BULK_RED(add, s32, "add.s32")
BULK_RED(add, u64, "add.u64")
BULK_RED(add, f32, "add.f32")
BULK_RED(add, f64, "add.f64")
BULK_RED(add, f16, "add.noftz.f16")
BULK_RED(add, bf16, "add.noftz.bf16")

BULK_RED(min, u32, "min.u32")
BULK_RED(min, s32, "min.s32")
BULK_RED(min, u64, "min.u64")
BULK_RED(min, s64, "min.s64")
BULK_RED(min, f16, "min.f16")
BULK_RED(min, bf16, "min.bf16")

BULK_RED(max, u32, "max.u32")
BULK_RED(max, s32, "max.s32")
BULK_RED(max, u64, "max.u64")
BULK_RED(max, s64, "max.s64")
BULK_RED(max, f16, "max.f16")
BULK_RED(max, bf16, "max.bf16")

BULK_RED(inc, u32, "inc.u32")
BULK_RED(dec, u32, "dec.u32")

BULK_RED(and, b32, "and.b32")
BULK_RED(and, b64, "and.b64")
BULK_RED(or, b32, "or.b32")
BULK_RED(or, b64, "or.b64")
BULK_RED(xor, b32, "xor.b32")
BULK_RED(xor, b64, "xor.b64")
