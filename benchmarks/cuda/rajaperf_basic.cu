// Basic group: DAXPY, IF_QUAD, INIT3, MULADDSUB, NESTED_INIT, REDUCE3_INT, TRAP_INT, PI_REDUCE,
// MAT_MAT_SHARED (see rajaperf_common.cuh for the calling convention).
#include <climits>
#include "rajaperf_common.cuh"

#define RP_INDEX long i = blockIdx.x * (long)blockDim.x + threadIdx.x

__global__ void rp_daxpy(const double* x, double* y, double a, long n) {
    RP_INDEX;
    if (i < n) y[i] += a * x[i];
}
__global__ void rp_if_quad(const double* a, const double* b, const double* c, double* x1, double* x2, long n) {
    RP_INDEX;
    if (i < n) {
        double s = b[i] * b[i] - 4.0 * a[i] * c[i];
        if (s >= 0) {
            s = sqrt(s);
            x2[i] = (-b[i] + s) / (2.0 * a[i]);
            x1[i] = (-b[i] - s) / (2.0 * a[i]);
        } else {
            x2[i] = 0.0;
            x1[i] = 0.0;
        }
    }
}
__global__ void rp_init3(const double* in1, const double* in2, double* o1, double* o2, double* o3, long n) {
    RP_INDEX;
    if (i < n) o1[i] = o2[i] = o3[i] = -in1[i] - in2[i];
}
__global__ void rp_muladdsub(const double* in1, const double* in2, double* o1, double* o2, double* o3, long n) {
    RP_INDEX;
    if (i < n) {
        o1[i] = in1[i] * in2[i];
        o2[i] = in1[i] + in2[i];
        o3[i] = in1[i] - in2[i];
    }
}
// One thread per (i, j) with i fastest, blockIdx.z walking k, as the suite's 3-D launch does.
__global__ void rp_nested_init(double* array, long ni, long nj) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long j = blockIdx.y * (long)blockDim.y + threadIdx.y;
    long k = blockIdx.z;
    if (i < ni && j < nj) array[i + ni * (j + nj * k)] = 1.0e-8 * i * j * k;
}
__global__ void rp_reduce3_int(const int* vec, int* vsum, int* vmin, int* vmax, long n) {
    int s = 0, lo = INT_MAX, hi = INT_MIN;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        s += vec[i];
        lo = min(lo, vec[i]);
        hi = max(hi, vec[i]);
    }
    s = rp_block_reduce(s, RpAdd());
    lo = rp_block_reduce(lo, RpMin());
    hi = rp_block_reduce(hi, RpMax());
    if (threadIdx.x == 0) {
        atomicAdd(vsum, s);
        atomicMin(vmin, lo);
        atomicMax(vmax, hi);
    }
}
__device__ inline double rp_trap_func(double x, double y, double xp, double yp) {
    double denom = (x - xp) * (x - xp) + (y - yp) * (y - yp);
    return 1.0 / sqrt(denom);
}
__global__ void rp_trap_int(double x0, double xp, double y, double yp, double h, double* sumx, long n) {
    double s = 0.0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        s += rp_trap_func(x0 + i * h, y, xp, yp);
    s = rp_block_reduce(s, RpAdd());
    if (threadIdx.x == 0) atomicAdd(sumx, s);
}
__global__ void rp_pi_reduce(double dx, double* pi, long n) {
    double s = 0.0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        double x = (double(i) + 0.5) * dx;
        s += dx / (1.0 + x * x);
    }
    s = rp_block_reduce(s, RpAdd());
    if (threadIdx.x == 0) atomicAdd(pi, s);
}
#define RP_TILE 16
// C = A B with 16 x 16 tiles of A and B staged in shared memory (the suite's MAT_MAT_SHARED).
__global__ void rp_mat_mat_shared(const double* A, const double* B, double* C, long N) {
    __shared__ double As[RP_TILE][RP_TILE], Bs[RP_TILE][RP_TILE];
    long tx = threadIdx.x, ty = threadIdx.y;
    long row = blockIdx.y * RP_TILE + ty, col = blockIdx.x * RP_TILE + tx;
    double acc = 0.0;
    for (long t = 0; t < (N + RP_TILE - 1) / RP_TILE; ++t) {
        As[ty][tx] = (row < N && t * RP_TILE + tx < N) ? A[row * N + t * RP_TILE + tx] : 0.0;
        Bs[ty][tx] = (col < N && t * RP_TILE + ty < N) ? B[(t * RP_TILE + ty) * N + col] : 0.0;
        __syncthreads();
        for (int k = 0; k < RP_TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < N && col < N) C[row * N + col] = acc;
}

RP_ENTRY(DAXPY) {
    for (long r = 0; r < reps; ++r) rp_daxpy<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), s[0], n[0]);
    return rp_status();
}
RP_ENTRY(IF_QUAD) { return rp_map5(rp_if_quad, reps, a, n[0]); }
RP_ENTRY(INIT3) { return rp_map5(rp_init3, reps, a, n[0]); }
RP_ENTRY(MULADDSUB) { return rp_map5(rp_muladdsub, reps, a, n[0]); }
RP_ENTRY(NESTED_INIT) {  // n = (ni, nj, nk)
    dim3 block(32, 8, 1);
    dim3 grid((unsigned)((n[0] + 31) / 32), (unsigned)((n[1] + 7) / 8), (unsigned)n[2]);
    for (long r = 0; r < reps; ++r) rp_nested_init<<<grid, block>>>(RP_ARG(double, 0), n[0], n[1]);
    return rp_status();
}
RP_ENTRY(REDUCE3_INT) {  // out = (sum, min, max) of the last rep
    static int* acc = nullptr;
    rp_scratch(&acc, 3);
    const int init[3] = {0, INT_MAX, INT_MIN};
    int host[3];
    for (long r = 0; r < reps; ++r) {
        cudaMemcpyAsync(acc, init, sizeof(init), cudaMemcpyHostToDevice, 0);
        rp_reduce3_int<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(int, 0), acc, acc + 1, acc + 2, n[0]);
        cudaMemcpy(host, acc, sizeof(host), cudaMemcpyDeviceToHost);
    }
    for (int k = 0; k < 3; ++k) out[k] = host[k];
    return rp_status();
}
RP_ENTRY(TRAP_INT) {  // s = (x0, xp, y, yp, h); out = h * sum of the last rep
    static double* acc = nullptr;
    out[0] = s[4] * rp_sum_reps(reps, &acc, [&](double* sum) {
        rp_trap_int<<<rp_grid(n[0]), RP_BLOCK>>>(s[0], s[1], s[2], s[3], s[4], sum, n[0]);
    });
    return rp_status();
}
RP_ENTRY(PI_REDUCE) {  // s = (dx,); out = 4 * sum of the last rep
    static double* acc = nullptr;
    out[0] = 4.0 * rp_sum_reps(reps, &acc, [&](double* sum) { rp_pi_reduce<<<rp_grid(n[0]), RP_BLOCK>>>(s[0], sum, n[0]); });
    return rp_status();
}
RP_ENTRY(MAT_MAT_SHARED) {
    dim3 block(RP_TILE, RP_TILE);
    dim3 grid((unsigned)((n[0] + RP_TILE - 1) / RP_TILE), (unsigned)((n[0] + RP_TILE - 1) / RP_TILE));
    for (long r = 0; r < reps; ++r)
        rp_mat_mat_shared<<<grid, block>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), n[0]);
    return rp_status();
}
