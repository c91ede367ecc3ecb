"""Launch int4_matmul_w4a16 at 256 x 4096 x 4096, group 128, for the named tilings (a few calls
each), for a profiler to attach to: ``ncu -k regex:matmul_w4a16 python3 scripts/profile_w4a16.py
wg64x128x64_s4``."""
import sys

import numpy as np

from kaio import kernels
from kaio.kernels._bench import empty, up
from kaio.kernels.ml import quant


def main(tiles):
    case = kernels.get("ml/int4_matmul_w4a16")
    m, k, n, group = 256, 4096, 4096, 128
    inp = case.make_inputs((m, k, n, group), seed=0)
    ref = case.reference(inp)["y"]
    x, packed, scales = up(inp, "x", "packed", "scales")
    y = empty((m, n), inp["x"].dtype)
    for tile in tiles:
        launch = quant.w4a16_launch("f16", m, n, group, tile)
        for _ in range(3):
            launch(x, packed, scales, y, group)
        got = y.to_host().astype(np.float64)
        ok = bool((np.abs(got - ref) <= 1e-3 + 1e-3 * np.abs(ref)).all())
        print(f"{tile}: within the registry's tolerance: {ok}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
