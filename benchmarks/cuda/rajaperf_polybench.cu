// Polybench group: ATAX, GEMM, JACOBI_1D, JACOBI_2D, HEAT_3D, MVT, FDTD_2D, 2MM
// (see rajaperf_common.cuh for the calling convention). Row-major arrays, as the ports hold them.
#include "rajaperf_common.cuh"

#define RP_INDEX long i = blockIdx.x * (long)blockDim.x + threadIdx.x

// ATAX: tmp = A x (and y zeroed), then y[j] += sum_i A[i][j] tmp[i].
__global__ void rp_atax_1(const double* A, const double* x, double* tmp, double* y, long N) {
    RP_INDEX;
    if (i < N) {
        y[i] = 0.0;
        double dot = 0.0;
        for (long j = 0; j < N; ++j) dot += A[j + i * N] * x[j];
        tmp[i] = dot;
    }
}
__global__ void rp_atax_2(const double* A, const double* tmp, double* y, long N) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (j < N) {
        double dot = y[j];
        for (long i = 0; i < N; ++i) dot += A[j + i * N] * tmp[i];
        y[j] = dot;
    }
}
// GEMM (and 2MM's first product): one thread per C[i][j], 2-D blocks (the suite's Base_CUDA form).
__global__ void rp_gemm(const double* A, const double* B, double* C, double alpha, long ni, long nj, long nk) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long i = blockIdx.y * (long)blockDim.y + threadIdx.y;
    if (i < ni && j < nj) {
        double dot = 0.0;
        for (long k = 0; k < nk; ++k) dot += alpha * A[k + i * nk] * B[j + k * nj];
        C[j + i * nj] = dot;
    }
}
__global__ void rp_jacobi_1d(const double* A, double* B, long N) {
    RP_INDEX;
    if (i > 0 && i < N - 1) B[i] = 0.33333 * (A[i - 1] + A[i] + A[i + 1]);
}
__global__ void rp_jacobi_2d(const double* A, double* B, long N) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long i = blockIdx.y;
    if (i > 0 && i < N - 1 && j > 0 && j < N - 1)
        B[j + i * N] = 0.2 * (A[j + i * N] + A[j - 1 + i * N] + A[j + 1 + i * N] + A[j + (i + 1) * N] +
                              A[j + (i - 1) * N]);
}
__global__ void rp_heat_3d(const double* A, double* B, long N) {
    long k = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long j = blockIdx.y, i = blockIdx.z;
    if (i > 0 && i < N - 1 && j > 0 && j < N - 1 && k > 0 && k < N - 1) {
        long c = k + N * (j + N * i), si = N * N, sj = N;
        B[c] = 0.125 * (A[c + si] - 2.0 * A[c] + A[c - si]) + 0.125 * (A[c + sj] - 2.0 * A[c] + A[c - sj]) +
               0.125 * (A[c + 1] - 2.0 * A[c] + A[c - 1]) + A[c];
    }
}
// MVT: x1[i] += sum_j A[i][j] y1[j]; x2[i] += sum_j A[j][i] y2[i] (the suite's second loop).
__global__ void rp_mvt_1(const double* A, const double* y1, double* x1, long N) {
    RP_INDEX;
    if (i < N) {
        double dot = 0.0;
        for (long j = 0; j < N; ++j) dot += A[j + i * N] * y1[j];
        x1[i] += dot;
    }
}
__global__ void rp_mvt_2(const double* A, const double* y2, double* x2, long N) {
    RP_INDEX;
    if (i < N) {
        double dot = 0.0;
        for (long j = 0; j < N; ++j) dot += A[i + j * N] * y2[i];
        x2[i] += dot;
    }
}
__global__ void rp_fdtd_1(double* ey, const double* fict, long t, long ny) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (j < ny) ey[j] = fict[t];
}
__global__ void rp_fdtd_2(double* ey, const double* hz, long nx, long ny) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x, i = blockIdx.y + 1;
    if (i < nx && j < ny) ey[j + i * ny] = ey[j + i * ny] - 0.5 * (hz[j + i * ny] - hz[j + (i - 1) * ny]);
}
__global__ void rp_fdtd_3(double* ex, const double* hz, long nx, long ny) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x + 1, i = blockIdx.y;
    if (i < nx && j < ny) ex[j + i * ny] = ex[j + i * ny] - 0.5 * (hz[j + i * ny] - hz[j - 1 + i * ny]);
}
__global__ void rp_fdtd_4(double* hz, const double* ex, const double* ey, long nx, long ny) {
    long j = blockIdx.x * (long)blockDim.x + threadIdx.x, i = blockIdx.y;
    if (i < nx - 1 && j < ny - 1)
        hz[j + i * ny] = hz[j + i * ny] - 0.7 * (ex[j + 1 + i * ny] - ex[j + i * ny] + ey[j + (i + 1) * ny] -
                                                 ey[j + i * ny]);
}
// 2MM: tmp = alpha A B (rp_gemm), then D = beta + tmp C (each sum starts at beta).
__global__ void rp_2mm_2(const double* tmp, const double* C, double* D, double beta, long ni, long nj, long nl) {
    long l = blockIdx.x * (long)blockDim.x + threadIdx.x;
    long i = blockIdx.y * (long)blockDim.y + threadIdx.y;
    if (i < ni && l < nl) {
        double dot = beta;
        for (long j = 0; j < nj; ++j) dot += tmp[j + i * nj] * C[l + j * nl];
        D[l + i * nl] = dot;
    }
}

static dim3 rp_grid2(long cols, long rows, dim3 block) {
    return dim3((unsigned)((cols + block.x - 1) / block.x), (unsigned)((rows + block.y - 1) / block.y));
}

RP_ENTRY(ATAX) {  // a = (A, x, tmp, y); n = (N,)
    for (long r = 0; r < reps; ++r) {
        rp_atax_1<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), RP_ARG(double, 3), n[0]);
        rp_atax_2<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 2), RP_ARG(double, 3), n[0]);
    }
    return rp_status();
}
RP_ENTRY(GEMM) {  // a = (A, B, C); s = (alpha,); n = (ni, nj, nk)
    dim3 block(32, 8);
    for (long r = 0; r < reps; ++r)
        rp_gemm<<<rp_grid2(n[1], n[0], block), block>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), s[0],
                                                      n[0], n[1], n[2]);
    return rp_status();
}
RP_ENTRY(JACOBI_1D) {  // a = (A, B); n = (N, tsteps)
    double *A = RP_ARG(double, 0), *B = RP_ARG(double, 1);
    for (long r = 0; r < reps; ++r)
        for (long t = 0; t < n[1]; ++t) {
            rp_jacobi_1d<<<rp_grid(n[0]), RP_BLOCK>>>(A, B, n[0]);
            rp_jacobi_1d<<<rp_grid(n[0]), RP_BLOCK>>>(B, A, n[0]);
        }
    return rp_status();
}
RP_ENTRY(JACOBI_2D) {  // a = (A, B); n = (N, tsteps)
    double *A = RP_ARG(double, 0), *B = RP_ARG(double, 1);
    dim3 grid(rp_grid(n[0]), (unsigned)n[0]);
    for (long r = 0; r < reps; ++r)
        for (long t = 0; t < n[1]; ++t) {
            rp_jacobi_2d<<<grid, RP_BLOCK>>>(A, B, n[0]);
            rp_jacobi_2d<<<grid, RP_BLOCK>>>(B, A, n[0]);
        }
    return rp_status();
}
RP_ENTRY(HEAT_3D) {  // a = (A, B); n = (N, tsteps)
    double *A = RP_ARG(double, 0), *B = RP_ARG(double, 1);
    dim3 block(32), grid((unsigned)((n[0] + 31) / 32), (unsigned)n[0], (unsigned)n[0]);
    for (long r = 0; r < reps; ++r)
        for (long t = 0; t < n[1]; ++t) {
            rp_heat_3d<<<grid, block>>>(A, B, n[0]);
            rp_heat_3d<<<grid, block>>>(B, A, n[0]);
        }
    return rp_status();
}
RP_ENTRY(MVT) {  // a = (A, y1, y2, x1, x2); n = (N,)
    for (long r = 0; r < reps; ++r) {
        rp_mvt_1<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 3), n[0]);
        rp_mvt_2<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 2), RP_ARG(double, 4), n[0]);
    }
    return rp_status();
}
RP_ENTRY(FDTD_2D) {  // a = (fict, hz, ex, ey); n = (nx, ny, tsteps)
    double *fict = RP_ARG(double, 0), *hz = RP_ARG(double, 1), *ex = RP_ARG(double, 2), *ey = RP_ARG(double, 3);
    long nx = n[0], ny = n[1];
    dim3 g2(rp_grid(ny), (unsigned)(nx > 1 ? nx - 1 : 1)), g3(rp_grid(ny), (unsigned)nx), g4(rp_grid(ny), (unsigned)nx);
    for (long r = 0; r < reps; ++r)
        for (long t = 0; t < n[2]; ++t) {
            rp_fdtd_1<<<rp_grid(ny), RP_BLOCK>>>(ey, fict, t, ny);
            rp_fdtd_2<<<g2, RP_BLOCK>>>(ey, hz, nx, ny);
            rp_fdtd_3<<<g3, RP_BLOCK>>>(ex, hz, nx, ny);
            rp_fdtd_4<<<g4, RP_BLOCK>>>(hz, ex, ey, nx, ny);
        }
    return rp_status();
}
RP_ENTRY(2MM) {  // a = (A, B, C, tmp, D); s = (alpha, beta); n = (ni, nj, nk, nl)
    dim3 block(32, 8);
    for (long r = 0; r < reps; ++r) {
        rp_gemm<<<rp_grid2(n[1], n[0], block), block>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 3), s[0],
                                                      n[0], n[1], n[2]);
        rp_2mm_2<<<rp_grid2(n[3], n[0], block), block>>>(RP_ARG(double, 3), RP_ARG(double, 2), RP_ARG(double, 4), s[1],
                                                       n[0], n[1], n[3]);
    }
    return rp_status();
}
