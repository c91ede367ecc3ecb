// Hand-written CUDA C++ baselines for benchmarks/bench_gpu.py (compiled there with nvcc -O3).
#include <cuda_runtime.h>

extern "C" __global__ void saxpy(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

// Eight elements per thread as two 16-byte accesses per array (what kaio's blocked(8) Region
// compiles to); the scalar tail covers n % 8 and misaligned pointers.
extern "C" __global__ void saxpy8(float a, const float* __restrict__ x, float* __restrict__ y, int n) {
    long i = 8L * (blockIdx.x * (long)blockDim.x + threadIdx.x);
    bool aligned = ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(y)) & 15) == 0;
    if (i + 8 <= n && aligned) {
        const float4* x4 = reinterpret_cast<const float4*>(x + i);
        float4* y4 = reinterpret_cast<float4*>(y + i);
        float4 xa = x4[0], xb = x4[1], ya = y4[0], yb = y4[1];
        ya.x = a * xa.x + ya.x; ya.y = a * xa.y + ya.y; ya.z = a * xa.z + ya.z; ya.w = a * xa.w + ya.w;
        yb.x = a * xb.x + yb.x; yb.y = a * xb.y + yb.y; yb.z = a * xb.z + yb.z; yb.w = a * xb.w + yb.w;
        y4[0] = ya; y4[1] = yb;
    } else {
        for (long j = i; j < n && j < i + 8; ++j) y[j] = a * x[j] + y[j];
    }
}

// One block per row; blockDim.x threads stride the columns; shared-memory tree reductions.
extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[1024];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    int t = threadIdx.x, nt = blockDim.x;
    float m = -INFINITY;
    for (int j = t; j < cols; j += nt) m = fmaxf(m, xr[j]);
    red[t] = m; __syncthreads();
    for (int s = nt / 2; s > 0; s >>= 1) { if (t < s) red[t] = fmaxf(red[t], red[t + s]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
    for (int j = t; j < cols; j += nt) sum += __expf(xr[j] - m);
    red[t] = sum; __syncthreads();
    for (int s = nt / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }
    float inv = 1.f / red[0];
    for (int j = t; j < cols; j += nt) yr[j] = __expf(xr[j] - m) * inv;
}

// The row held in registers (PER columns per thread, t + k * blockDim.x), read once; the same
// shared-memory tree reductions as softmax_rows.
template <int PER>
__device__ void softmax_resident(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[1024];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* yr = y + (size_t)blockIdx.x * cols;
    int t = threadIdx.x, nt = blockDim.x;
    float v[PER];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        int j = t + k * nt;
        v[k] = j < cols ? xr[j] : -INFINITY;
        m = fmaxf(m, v[k]);
    }
    red[t] = m; __syncthreads();
    for (int s = nt / 2; s > 0; s >>= 1) { if (t < s) red[t] = fmaxf(red[t], red[t + s]); __syncthreads(); }
    m = red[0]; __syncthreads();
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < PER; ++k) { v[k] = __expf(v[k] - m); sum += v[k]; }
    red[t] = sum; __syncthreads();
    for (int s = nt / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }
    float inv = 1.f / red[0];
#pragma unroll
    for (int k = 0; k < PER; ++k) { int j = t + k * nt; if (j < cols) yr[j] = v[k] * inv; }
}

extern "C" __global__ void softmax_rows_resident8(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_resident<8>(x, y, cols);
}

extern "C" __global__ void softmax_rows_resident16(const float* __restrict__ x, float* __restrict__ y, int cols) {
    softmax_resident<16>(x, y, cols);
}

// Partial dot products: one per block (second pass on the host side of the benchmark).
extern "C" __global__ void dot_partials(const float* __restrict__ x, const float* __restrict__ y,
                                        float* __restrict__ part, int n) {
    __shared__ float red[1024];
    int t = threadIdx.x;
    float acc = 0.f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) acc += x[i] * y[i];
    red[t] = acc; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }
    if (t == 0) part[blockIdx.x] = red[0];
}

// Grid-stride over tiles of eight: two float4 loads per array for full tiles (aligned pointers),
// a scalar loop for the last partial tile.
extern "C" __global__ void dot_partials8(const float* __restrict__ x, const float* __restrict__ y,
                                         float* __restrict__ part, int n) {
    __shared__ float red[1024];
    int t = threadIdx.x;
    float acc = 0.f;
    bool aligned = ((reinterpret_cast<size_t>(x) | reinterpret_cast<size_t>(y)) & 15) == 0;
    long stride = 8L * gridDim.x * blockDim.x;
    for (long b = 8L * (blockIdx.x * (long)blockDim.x + t); b < n; b += stride) {
        if (b + 8 <= n && aligned) {
            float4 xa = *reinterpret_cast<const float4*>(x + b), xb = *reinterpret_cast<const float4*>(x + b + 4);
            float4 ya = *reinterpret_cast<const float4*>(y + b), yb = *reinterpret_cast<const float4*>(y + b + 4);
            acc += xa.x * ya.x; acc += xa.y * ya.y; acc += xa.z * ya.z; acc += xa.w * ya.w;
            acc += xb.x * yb.x; acc += xb.y * yb.y; acc += xb.z * yb.z; acc += xb.w * yb.w;
        } else {
            for (long i = b; i < n && i < b + 8; ++i) acc += x[i] * y[i];
        }
    }
    red[t] = acc; __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) { if (t < s) red[t] += red[t + s]; __syncthreads(); }
    if (t == 0) part[blockIdx.x] = red[0];
}

// The classic grid-stride sum (kaio_bench_kernels.grid_sum): a grid-stride loop, a shuffle tree
// per warp, the warps' partials through shared memory, one atomicAdd per block (total starts at 0).
extern "C" __global__ void grid_sum(const float* __restrict__ x, float* total, int n) {
    __shared__ float partial[32];
    int t = threadIdx.x;
    float acc = 0.f;
    for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x) acc += x[i];
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if ((t & 31) == 0) partial[t >> 5] = acc;
    __syncthreads();
    if (t < 32) {
        float v = t < (int)((blockDim.x + 31) / 32) ? partial[t] : 0.f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (t == 0) atomicAdd(total, v);
    }
}

// Classics written the CUDA way (kaio_bench_kernels.transpose32, stencil5, histogram256).
// The tiled transpose: y (cols x rows) = x (rows x cols)^T through a padded 32 x 33 tile,
// 32 x 8 threads moving four rows each way.
extern "C" __global__ void transpose32(const float* __restrict__ x, float* y, int rows, int cols) {
    __shared__ float tile[32][33];
    int tx = threadIdx.x, ty = threadIdx.y, bx = blockIdx.x, by = blockIdx.y;
    for (int j = 0; j < 32; j += 8) {
        int r = by * 32 + ty + j, c = bx * 32 + tx;
        if (r < rows && c < cols) tile[ty + j][tx] = x[r * cols + c];
    }
    __syncthreads();
    for (int j = 0; j < 32; j += 8) {
        int r = bx * 32 + ty + j, c = by * 32 + tx;
        if (r < cols && c < rows) y[r * rows + c] = tile[tx][ty + j];
    }
}

// The 5-point stencil on an n x m grid, one point per thread (CUDA's 2-D index); edges copied.
extern "C" __global__ void stencil5(const float* __restrict__ x, float* y, int n, int m) {
    int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= 1 && i < n - 1 && j >= 1 && j < m - 1)
        y[i * m + j] = 0.25f * (x[(i - 1) * m + j] + x[(i + 1) * m + j] + x[i * m + j - 1]
                                + x[i * m + j + 1]) - x[i * m + j];
    else if (i < n && j < m)
        y[i * m + j] = x[i * m + j];
}

// The shared-memory histogram of values in [0, 256): per-block bins, a grid-stride loop of
// shared atomics, one global atomic per bin and block (hist starts at 0).
extern "C" __global__ void histogram256(const int* __restrict__ data, int* hist, int n) {
    __shared__ int h[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x) h[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&h[data[i]], 1);
    __syncthreads();
    for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&hist[b], h[b]);
}
