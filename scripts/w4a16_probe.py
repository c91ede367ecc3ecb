"""Time the warp-group W4A16 kernel at 256 x 4096 x 4096 per group size (each group ends in a fold
that waits for its wgmmas): ``python3 scripts/w4a16_probe.py wg64x128x128_s4,wg64x64x128_s4``."""
import sys

sys.path.insert(0, "benchmarks")
import torch  # noqa: E402
from bench_gemm import _time  # noqa: E402

from kaio import kernels  # noqa: E402
from kaio.kernels._bench import empty, up  # noqa: E402
from kaio.kernels.ml import quant  # noqa: E402


def probe(tile, group, m=256, k=4096, n=4096):
    case = kernels.get("ml/int4_matmul_w4a16")
    inp = case.make_inputs((m, k, n, group), seed=0)
    x, packed, scales = up(inp, "x", "packed", "scales")
    y = empty((m, n), inp["x"].dtype)
    launch = quant.w4a16_launch("f16", m, n, group, tile)
    return _time(lambda: launch(x, packed, scales, y, group), 20, 5)


if __name__ == "__main__":
    for tile in sys.argv[1].split(","):
        for group in (128, 256, 512, 4096):
            print(f"{tile} group {group}: {probe(tile, group):.1f} us", flush=True)
    xt = torch.randn((256, 4096), device="cuda", dtype=torch.float16)
    wt = torch.randn((4096, 4096), device="cuda", dtype=torch.float16)
    print(f"cuBLAS f16: {_time(lambda: torch.matmul(xt, wt), 20, 5):.1f} us")
