// Fast fp32 transcendentals on the SFU (MUFU in SASS), for epilogues that are bound by it.
// numba's libdevice tanhf is an accurate polynomial of a dozen instructions; tanh.approx.f32
// (sm_75+) is one MUFU.TANH with a maximum relative error of about 2^-11.

extern "C" __device__ float numba_tma_tanh_approx(float x) {
    float y;
    asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
