/* A libcuda.so.1 whose every entry point does nothing and returns CUDA_SUCCESS, so that
 * cuda.bindings' own Python-side work per call (argument conversion, result objects) can be
 * timed on a machine without a GPU: scripts/bench_launch_overhead.py --fake launches through
 * cuda.bindings' cuLaunchKernel when it loads this library.
 *
 *     gcc -O2 -shared -fPIC -o DIR/libcuda.so.1 scripts/stub_libcuda.c
 *     LD_LIBRARY_PATH=DIR python3 scripts/bench_launch_overhead.py --fake
 *
 * cuda.bindings finds every other function through cuGetProcAddress, answered here with one
 * function that returns 0. */
#include <stdint.h>
#include <string.h>

static int succeed(void) { return 0; }

int cuDriverGetVersion(int *version) { *version = 13000; return 0; }

int cuInit(unsigned flags) { (void)flags; return 0; }

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version; (void)flags;
    *pfn = strcmp(symbol, "cuDriverGetVersion") == 0 ? (void *)cuDriverGetVersion : (void *)succeed;
    if (status) *status = 0;
    return 0;
}

int cuGetProcAddress(const char *symbol, void **pfn, int version, uint64_t flags) {
    return cuGetProcAddress_v2(symbol, pfn, version, flags, 0);
}
