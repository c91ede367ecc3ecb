// Shared by benchmarks/cuda/rajaperf_*.cu: the suite's Base_CUDA form of each kaio RAJAPerf port,
// written for this repository. kernels/rajaperf/native.py compiles them into one shared library
// with nvcc and calls each port's entry point through ctypes on kaio's device arrays:
//
//   extern "C" int rp_NAME(long reps, void** a, const double* s, const long* n, double* out)
//
// a: device pointers (the port's arrays, in the order native.py lists them), s: scalars, n: sizes,
// out: a reduction's value after the last rep (the suite copies it to the host every rep).
// The reps loop runs here in C++, on the legacy default stream, as in the suite; the caller
// synchronizes. The return value is the first CUDA error (0: none).
#pragma once
#include <cuda_runtime.h>

#define RP_BLOCK 256
#define RP_ENTRY(NAME) \
    extern "C" int rp_##NAME(long reps, void** a, const double* s, const long* n, double* out)
#define RP_ARG(T, k) (reinterpret_cast<T*>(a[k]))

static inline unsigned rp_grid(long n) { return (unsigned)((n + RP_BLOCK - 1) / RP_BLOCK); }

static inline int rp_status() { return (int)cudaGetLastError(); }

// reps launches of a one-thread-per-index kernel on the first five arrays (IF_QUAD, INIT3,
// MULADDSUB, PLANCKIAN: three or two inputs, the rest outputs).
template <typename Kernel>
static int rp_map5(Kernel kernel, long reps, void** a, long n) {
    for (long r = 0; r < reps; ++r)
        kernel<<<rp_grid(n), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), RP_ARG(double, 3),
                                         RP_ARG(double, 4), n);
    return rp_status();
}

// One value per block: a shared-memory tree (blockDim.x == RP_BLOCK, a power of two).
template <typename T, typename Op>
__device__ T rp_block_reduce(T v, Op op) {
    __shared__ T buf[RP_BLOCK];
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = RP_BLOCK / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    T r = buf[0];
    __syncthreads();
    return r;
}

struct RpAdd { template <typename T> __device__ T operator()(T x, T y) const { return x + y; } };
struct RpMin { template <typename T> __device__ T operator()(T x, T y) const { return x < y ? x : y; } };
struct RpMax { template <typename T> __device__ T operator()(T x, T y) const { return x > y ? x : y; } };

// Device scratch for reductions, allocated once per entry point (outside the timed reps).
template <typename T>
static T* rp_scratch(T** slot, size_t count) {
    if (*slot == nullptr) cudaMalloc(reinterpret_cast<void**>(slot), count * sizeof(T));
    return *slot;
}

// The suite's reduction reps: each rep zeroes a device accumulator, launches (launch(acc)), and
// copies the value back to the host; returns the last rep's value.
template <typename Launch>
static double rp_sum_reps(long reps, double** slot, Launch launch) {
    double* acc = rp_scratch(slot, 1);
    const double zero = 0.0;
    double sum = 0.0;
    for (long r = 0; r < reps; ++r) {
        cudaMemcpyAsync(acc, &zero, sizeof(double), cudaMemcpyHostToDevice, 0);
        launch(acc);
        cudaMemcpy(&sum, acc, sizeof(double), cudaMemcpyDeviceToHost);
    }
    return sum;
}
