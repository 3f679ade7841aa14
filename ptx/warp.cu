// Warp-level tensor-core data movement and math (PTX ISA "Warp-level Matrix Multiply-Accumulate
// Instructions": ldmatrix, stmatrix, mma.sync). Every instruction here is .sync.aligned: all 32
// lanes of a warp execute it together, converged, with the same qualifiers.
// Fragments travel through local arrays passed by pointer (u32 words, f32 or s32 accumulators);
// LTO inlines these functions and SROA keeps the arrays in registers when the caller indexes them
// with constants only. NVRTC has no standard headers, hence the local typedefs.
typedef unsigned int u32;

static __device__ __forceinline__ u32 smem_u32(const void* p) {
    return static_cast<u32>(__cvta_generic_to_shared(p));
}

// ------------------------------------------------------------------------------ ldmatrix (sm_75+)
// Each lane passes the shared address of the 16-byte row it supplies: lanes 0-7 rows 0-7 of
// matrix 0, lanes 8-15 of matrix 1, ... (x1 reads lanes 0-7, x2 lanes 0-15).

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x1_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];"
                 : "=r"(regs[0]) : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x2_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(regs[0]), "=r"(regs[1]) : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x4_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                 : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x1_trans_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                 : "=r"(regs[0]) : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x2_trans_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(regs[0]), "=r"(regs[1]) : "r"(smem_u32(base) + byte_offset) : "memory");
}

extern "C" __device__ void numba_tma_ldmatrix_sync_aligned_m8n8_x4_trans_shared_b16(
        u32* regs, const void* base, u32 byte_offset) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
                 : "r"(smem_u32(base) + byte_offset) : "memory");
}

// ------------------------------------------------------------------------------- stmatrix (sm_90)
// Same addressing as ldmatrix. Compiled for an older architecture the body is a trap, so that
// the other functions of this unit still link there.

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define NUMBA_TMA_STMATRIX(asm_text, ...) asm volatile(asm_text ::__VA_ARGS__ : "memory")
#else
#define NUMBA_TMA_STMATRIX(asm_text, ...) __trap()
#endif

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x1_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};",
                       "r"(smem_u32(base) + byte_offset), "r"(regs[0]));
}

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x2_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};",
                       "r"(smem_u32(base) + byte_offset), "r"(regs[0]), "r"(regs[1]));
}

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x4_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};",
                       "r"(smem_u32(base) + byte_offset),
                       "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3]));
}

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x1_trans_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};",
                       "r"(smem_u32(base) + byte_offset), "r"(regs[0]));
}

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x2_trans_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};",
                       "r"(smem_u32(base) + byte_offset), "r"(regs[0]), "r"(regs[1]));
}

extern "C" __device__ void numba_tma_stmatrix_sync_aligned_m8n8_x4_trans_shared_b16(
        void* base, u32 byte_offset, const u32* regs) {
    NUMBA_TMA_STMATRIX("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};",
                       "r"(smem_u32(base) + byte_offset),
                       "r"(regs[0]), "r"(regs[1]), "r"(regs[2]), "r"(regs[3]));
}

#undef NUMBA_TMA_STMATRIX

// ------------------------------------------------------------------------------- mma.sync (sm_80)
// d may alias c: every input is read into a register before the instruction, every output
// written after it. Not volatile: pure register math that the compiler may schedule freely.

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k16_row_col_f32_f16_f16_f32(
        float* d, const u32* a, const u32* b, const float* c) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k16_row_col_f32_bf16_bf16_f32(
        float* d, const u32* a, const u32* b, const float* c) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k16_row_col_f16_f16_f16_f16(
        u32* d, const u32* a, const u32* b, const u32* c) {
    asm("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
        "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%8, %9};"
        : "=r"(d[0]), "=r"(d[1])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
          "r"(c[0]), "r"(c[1]));
}

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k8_row_col_f32_f16_f16_f32(
        float* d, const u32* a, const u32* b, const float* c) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]),
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k8_row_col_f32_bf16_bf16_f32(
        float* d, const u32* a, const u32* b, const float* c) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %8, %9, %10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]),
          "f"(c[0]), "f"(c[1]), "f"(c[2]), "f"(c[3]));
}

extern "C" __device__ void numba_tma_mma_sync_aligned_m16n8k32_row_col_s32_s8_s8_s32(
        int* d, const u32* a, const u32* b, const int* c) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]),
          "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]));
}

// ------------------------------------------------------- 16-bit pair conversions (sm_80), epilogues
// An accumulator pair (c0, c1) becomes one f16x2/bf16x2 word for stmatrix, low half = c0; and back.

extern "C" __device__ u32 numba_tma_cvt_rn_f16x2_f32(float lo, float hi) {
    u32 r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));   // a -> upper half
    return r;
}

extern "C" __device__ u32 numba_tma_cvt_rn_bf16x2_f32(float lo, float hi) {
    u32 r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

extern "C" __device__ float numba_tma_cvt_f32_f16_lo(u32 w) {
    float f;
    asm("{.reg .b16 l, h;\n\tmov.b32 {l, h}, %1;\n\tcvt.f32.f16 %0, l;}" : "=f"(f) : "r"(w));
    return f;
}

extern "C" __device__ float numba_tma_cvt_f32_f16_hi(u32 w) {
    float f;
    asm("{.reg .b16 l, h;\n\tmov.b32 {l, h}, %1;\n\tcvt.f32.f16 %0, h;}" : "=f"(f) : "r"(w));
    return f;
}

// bf16 is the upper half of an f32: widening is a shift.
extern "C" __device__ float numba_tma_cvt_f32_bf16_lo(u32 w) { return __uint_as_float(w << 16); }

extern "C" __device__ float numba_tma_cvt_f32_bf16_hi(u32 w) {
    return __uint_as_float(w & 0xffff0000u);
}

// ------------------------------------------------------------------------- elect.sync (sm_90)
// 1 in one lane of the full, converged warp, 0 in the others. ptxas then knows a single lane runs
// the branch it guards: the one-thread copies there (UTMALDG, UBLKCP) issue as they are, where
// under a branch on the thread index each is wrapped in a loop over the active lanes (ELECT,
// PLOP3, BRA.U.ANY).
extern "C" __device__ u32 numba_tma_elect_sync() {
    u32 r;
    asm volatile("{\n\t.reg .pred p;\n\telect.sync _|p, 0xffffffff;\n\tselp.u32 %0, 1, 0, p;\n}"
                 : "=r"(r));
    return r;
}
