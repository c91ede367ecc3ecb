"""Launch the library GEMM once per tiling at 4096^3 (f16 -> f32), for a profiler to look at.

    ncu --section SpeedOfLight --section WarpStateStats --section Occupancy \\
        -k regex:gemm python3 scripts/profile_gemm.py [TILE ...]

(device_run.sh step gemm-ncu). Prints each tiling's time so the profile can be matched to it.
"""
import sys
import time

import numpy as np

import kaio
from kaio.kernels.ml import gemm as G


def main(argv) -> int:
    kaio.set_backend("cuda")
    tiles = argv or [G.DEFAULT_TILE, "128x256x64_w64x64"]
    n = 4096
    g = np.random.default_rng(0)
    a = kaio.to_device(g.uniform(-1, 1, (n, n)).astype(np.float16))
    b = kaio.to_device(g.uniform(-1, 1, (n, n)).astype(np.float16))
    c = kaio.device_array((n, n), np.float32)
    for t in tiles:
        k = G.gemm_kernel("f16", "f32", False, False, t)[G.launch_config(n, n, t)]
        k(a, b, c, 1.0, 0.0)
        kaio.synchronize()
        t0 = time.perf_counter()
        k(a, b, c, 1.0, 0.0)
        kaio.synchronize()
        print(f"{t}: {(time.perf_counter() - t0) * 1e6:.0f} us", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
