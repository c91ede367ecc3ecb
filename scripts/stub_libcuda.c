/* A libcuda.so.1 with no GPU behind it, so that kaio's and cuda.bindings' own host work can be
 * timed on a machine without one:
 *
 * - scripts/bench_launch_overhead.py --fake launches through cuda.bindings' cuLaunchKernel when
 *   it loads this library (a launch does nothing and returns CUDA_SUCCESS);
 * - benchmarks/bench_startup.py --backend stub-driver runs kaio's whole CUDA backend on it:
 *   importing cuda.bindings, cuInit, the primary context, loading a module, launching.
 *
 *     gcc -O2 -shared -fPIC -o DIR/libcuda.so.1 scripts/stub_libcuda.c
 *     LD_LIBRARY_PATH=DIR python3 scripts/bench_launch_overhead.py --fake
 *
 * It answers as one device, "kaio stub H200" (compute capability 9.0, 132 SMs, 1024 threads,
 * 48/227 KiB shared memory per block, warp 32, 140 GiB), driver 13.0. "Device" memory is host
 * memory (malloc), so copies in and out round-trip; kernels never run. Module loading
 * accepts anything, and the JIT linker returns the same few bytes for any PTX. cuda.bindings finds every function through cuGetProcAddress: the ones
 * below by name, every other one as a function that returns 0 and writes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int succeed(void) { return 0; }

int cuDriverGetVersion(int *version) { *version = 13000; return 0; }

int cuInit(unsigned flags) { (void)flags; return 0; }

static int device_get_count(int *count) { *count = 1; return 0; }

static int device_get(int *device, int ordinal) { *device = ordinal; return 0; }

/* the CUdevice_attribute values kaio reads (cuda.h's numbering) */
static int device_get_attribute(int *value, int attribute, int device) {
    (void)device;
    switch (attribute) {
    case 1: *value = 1024; break;             /* MAX_THREADS_PER_BLOCK */
    case 8: *value = 48 * 1024; break;        /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 10: *value = 32; break;              /* WARP_SIZE */
    case 16: *value = 132; break;             /* MULTIPROCESSOR_COUNT */
    case 75: *value = 9; break;               /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *value = 0; break;               /* COMPUTE_CAPABILITY_MINOR */
    case 97: *value = 227 * 1024; break;      /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    default: *value = 0;
    }
    return 0;
}

static int device_get_name(char *name, int len, int device) {
    (void)device;
    strncpy(name, "kaio stub H200", (size_t)len);
    if (len > 0) name[len - 1] = 0;
    return 0;
}

static int device_total_mem(size_t *bytes, int device) {
    (void)device;
    *bytes = (size_t)140 << 30;
    return 0;
}

static int handle_out(void **out) { *out = (void *)(uintptr_t)0x1000; return 0; }

static int primary_ctx_retain(void **ctx, int device) { (void)device; return handle_out(ctx); }

static int module_load_data_ex(void **module, const void *image, unsigned n, void *opts, void *vals) {
    (void)image; (void)n; (void)opts; (void)vals;
    return handle_out(module);
}

static int module_load_data(void **module, const void *image) { (void)image; return handle_out(module); }

static int module_get_function(void **fn, void *module, const char *name) {
    (void)module; (void)name;
    return handle_out(fn);
}

static int mem_alloc(uintptr_t *ptr, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
    *ptr = (uintptr_t)p;
    return 0;
}

static int mem_free(uintptr_t ptr) { free((void *)ptr); return 0; }

static int mem_host_alloc(void **ptr, size_t bytes, unsigned flags) {
    (void)flags;
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? 0 : 2;
}

static int mem_free_host(void *ptr) { free(ptr); return 0; }

/* HtoD, DtoH and DtoD take (dst, src, bytes[, stream]) alike: every pointer is a host one */
static int memcpy_any(uintptr_t dst, uintptr_t src, size_t bytes) {
    memcpy((void *)dst, (const void *)src, bytes);
    return 0;
}

static int memcpy_any_async(uintptr_t dst, uintptr_t src, size_t bytes, void *stream) {
    (void)stream;
    return memcpy_any(dst, src, bytes);
}

/* the JIT linker: every link "completes" with the same few bytes of cubin */
static const char stub_cubin[] = "kaio stub cubin";

static int link_create(unsigned n, void *opts, void *vals, void **state) {
    (void)n; (void)opts; (void)vals;
    return handle_out(state);
}

static int link_complete(void *state, const void **cubin, size_t *size) {
    (void)state;
    *cubin = stub_cubin;
    *size = sizeof stub_cubin;
    return 0;
}

static const struct { const char *name; void *fn; } known[] = {
    {"cuDriverGetVersion", (void *)cuDriverGetVersion},
    {"cuInit", (void *)cuInit},
    {"cuDeviceGetCount", (void *)device_get_count},
    {"cuDeviceGet", (void *)device_get},
    {"cuDeviceGetAttribute", (void *)device_get_attribute},
    {"cuDeviceGetName", (void *)device_get_name},
    {"cuDeviceTotalMem", (void *)device_total_mem},
    {"cuDevicePrimaryCtxRetain", (void *)primary_ctx_retain},
    {"cuModuleLoadDataEx", (void *)module_load_data_ex},
    {"cuModuleLoadData", (void *)module_load_data},
    {"cuModuleGetFunction", (void *)module_get_function},
    {"cuLinkCreate", (void *)link_create},
    {"cuLinkComplete", (void *)link_complete},
    {"cuMemAlloc", (void *)mem_alloc},
    {"cuMemFree", (void *)mem_free},
    {"cuMemHostAlloc", (void *)mem_host_alloc},
    {"cuMemFreeHost", (void *)mem_free_host},
    {"cuMemcpyHtoD", (void *)memcpy_any},
    {"cuMemcpyDtoH", (void *)memcpy_any},
    {"cuMemcpyDtoD", (void *)memcpy_any},
    {"cuMemcpyHtoDAsync", (void *)memcpy_any_async},
    {"cuMemcpyDtoHAsync", (void *)memcpy_any_async},
    {"cuMemcpyDtoDAsync", (void *)memcpy_any_async},
};

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version; (void)flags;
    *pfn = (void *)succeed;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(symbol, known[i].name) == 0) {
            *pfn = known[i].fn;
            break;
        }
    }
    if (status) *status = 0;
    return 0;
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
