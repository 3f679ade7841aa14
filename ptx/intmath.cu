// 32-bit unsigned division and remainder. numba widens integer arithmetic to 64 bits, and a
// 64-bit division with a run-time divisor compiles to a called subroutine (CALL.REL in SASS);
// tile schedulers divide block indices that always fit in 32 bits.
typedef unsigned int u32;

extern "C" __device__ u32 numba_tma_div_u32(u32 a, u32 b) { return a / b; }

extern "C" __device__ u32 numba_tma_rem_u32(u32 a, u32 b) { return a % b; }
