// Stream group: ADD, COPY, MUL, TRIAD, DOT (see rajaperf_common.cuh for the calling convention).
#include "rajaperf_common.cuh"

__global__ void rp_add(const double* a, const double* b, double* c, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
__global__ void rp_copy(const double* a, double* c, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i];
}
__global__ void rp_mul(const double* c, double* b, double alpha, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) b[i] = alpha * c[i];
}
__global__ void rp_triad(const double* b, const double* c, double* a, double alpha, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + alpha * c[i];
}
__global__ void rp_dot(const double* a, const double* b, double* dprod, long n) {
    double s = 0.0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += a[i] * b[i];
    s = rp_block_reduce(s, RpAdd());
    if (threadIdx.x == 0) atomicAdd(dprod, s);
}

RP_ENTRY(ADD) {
    for (long r = 0; r < reps; ++r) rp_add<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), n[0]);
    return rp_status();
}
RP_ENTRY(COPY) {
    for (long r = 0; r < reps; ++r) rp_copy<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), n[0]);
    return rp_status();
}
RP_ENTRY(MUL) {
    for (long r = 0; r < reps; ++r) rp_mul<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), s[0], n[0]);
    return rp_status();
}
RP_ENTRY(TRIAD) {
    for (long r = 0; r < reps; ++r)
        rp_triad<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), s[0], n[0]);
    return rp_status();
}
RP_ENTRY(DOT) {
    static double* dprod = nullptr;
    out[0] = rp_sum_reps(reps, &dprod, [&](double* acc) {
        rp_dot<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), acc, n[0]);
    });
    return rp_status();
}
