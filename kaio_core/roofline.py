"""``kaio bench --plot FILE.png``: a roofline of every library kernel.

    data = measure(kernels.cases(), backend="cuda")   # time every kernel, the copy and a gemm
    plot(data, "roofline.png")                          # draw it (matplotlib, no GPU needed)

:func:`measure` times each library kernel's device-resident launch (its ``bench`` closure, at
its default size on a GPU, at CI sizes on the reference backend) with kaio events, and
measures the two roofs on the same device: the copy bandwidth (a device-to-device copy of a
large buffer, counting the bytes read and written) and the matrix rate (``kaio.blas.gemm`` in
f16 with f32 accumulation, the vendor BLAS). It returns plain data (a dict that is also the
JSON written next to the picture), so :func:`plot` can redraw a saved run anywhere.

:func:`plot` draws two panels: the roofline proper (achieved TFLOP/s against flop per byte,
under ``min(copy bandwidth x intensity, matrix rate)``), and each kernel's achieved GB/s against
the copy bandwidth.
"""
from __future__ import annotations

import time

import numpy as np

#: the version of the data dict (the JSON next to the picture)
SCHEMA = "kaio-roofline/1"
#: bytes of the buffer the copy bandwidth is measured with (reference backend: REFERENCE_COPY)
COPY_BYTES, REFERENCE_COPY = 1 << 30, 1 << 20
#: the square f16 gemm that measures the matrix rate (reference backend: REFERENCE_GEMM)
GEMM_N, REFERENCE_GEMM = 8192, 64


def _device_name(backend: str) -> str:
    from .backends import backend_class  # lazy: import time, ~60 ms (kaio and its kernels)
    try:
        cls = backend_class(backend)
        infos = cls.device_info() if hasattr(cls, "device_info") else []
        return str(infos[0]["name"]) if infos else backend
    except Exception:  # the name is a label only
        return backend


def _timer(repeat: int):
    from .showcase import time_device  # lazy: import time, ~60 ms (kaio and its kernels)
    return lambda launch: time_device(launch, repeat)


def copy_bandwidth(nbytes: int, repeat: int) -> float:
    """GB/s of a device-to-device copy of ``nbytes`` (read + written) on the current backend."""
    import kaio  # lazy: import time, ~60 ms (kaio and its kernels)
    n = nbytes // 4
    src, dst = kaio.to_device(np.ones(n, np.float32)), kaio.device_array((n,), np.float32)
    seconds = _timer(repeat)(lambda: dst.copy_(src))
    return 2 * n * 4 / seconds / 1e9


def matrix_rate(n: int, repeat: int) -> float:
    """TFLOP/s of an ``n`` x ``n`` x ``n`` f16 gemm (f32 accumulation) by the vendor BLAS."""
    import kaio  # lazy: import time, ~60 ms (kaio and its kernels)
    a = kaio.to_device(np.random.default_rng(0).standard_normal((n, n)).astype(np.float16))
    out = kaio.device_array((n, n), np.float16)
    seconds = _timer(repeat)(lambda: kaio.blas.gemm(a, a, out=out))
    return 2.0 * n ** 3 / seconds / 1e12


def measure_case(case, size, repeat: int) -> dict:
    """One kernel's row: its work, its median launch time and the rates, or its error."""
    row = {"name": case.name, "group": case.group, "size": str(size),
           "flops": float(case.flops(size)), "bytes": float(case.bytes(size))}
    try:
        launch = case.bench(case.make_inputs(size, 0))
        row["seconds"] = s = _timer(repeat)(launch)
        row["gbps"] = row["bytes"] / s / 1e9
        row["tflops"] = row["flops"] / s / 1e12
    except Exception as e:  # one kernel's failure is a missing point, not a missing picture
        row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return row


def measure(cases, backend: str, *, small: bool | None = None, repeat: int | None = None,
            on_case=None) -> dict:
    """Time ``cases`` and the two roofs on ``backend`` (made current); see the module docstring.
    ``small``: CI sizes (default on the reference backend); ``on_case(case)`` is called before
    each kernel (for a progress bar)."""
    import kaio  # lazy: import time, ~60 ms (kaio and its kernels)
    kaio.set_backend(backend)
    ref = backend == "reference"
    small = ref if small is None else small
    repeat = repeat or (2 if ref else 20)
    data = {"schema": SCHEMA, "backend": backend, "device": _device_name(backend),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "sizes": "small" if small else "default",
            "copy_bytes": REFERENCE_COPY if ref else COPY_BYTES,
            "gemm_n": REFERENCE_GEMM if ref else GEMM_N}
    data["copy_gbps"] = copy_bandwidth(data["copy_bytes"], repeat)
    data["matrix_tflops"] = matrix_rate(data["gemm_n"], repeat)
    data["kernels"] = []
    for case in cases:
        if case.bench is None:
            continue
        if on_case is not None:
            on_case(case)
        data["kernels"].append(measure_case(case, case.small_size if small else case.default_size,
                                            repeat))
    return data


def _roof(intensity, copy_gbps: float, matrix_tflops: float):
    return np.minimum(np.asarray(intensity) * copy_gbps / 1e3, matrix_tflops)


def plot(data: dict, path: str) -> str:
    """Draw ``data`` (from :func:`measure`, or its JSON) as a PNG at ``path``; returns the path.
    Kernels with an error, or no time, are listed in the picture's footnote instead of drawn."""
    import matplotlib  # lazy: optional dependency matplotlib
    matplotlib.use("Agg")  # files only: no display needed (CI, SSH sessions)
    import matplotlib.pyplot as plt  # lazy: optional dependency matplotlib

    rows = [r for r in data["kernels"] if r.get("seconds")]
    missing = [r["name"] for r in data["kernels"] if not r.get("seconds")]
    copy_gbps, matrix_tflops = float(data["copy_gbps"]), float(data["matrix_tflops"])
    groups = sorted({r["group"] for r in rows})
    colour = {g: plt.get_cmap("tab10")(i % 10) for i, g in enumerate(groups)}

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(17, max(8.0, 0.2 * len(rows) + 2)),
                                 gridspec_kw={"width_ratios": [1.25, 1]})
    # left: the roofline
    flopping = [r for r in rows if r["flops"] > 0]
    intensities = [r["flops"] / r["bytes"] for r in flopping if r["bytes"] > 0]
    lo = min(intensities + [0.05]) / 2
    ridge = matrix_tflops * 1e3 / copy_gbps
    hi = max(intensities + [ridge]) * 4
    xs = np.geomspace(lo, hi, 200)
    ax.loglog(xs, _roof(xs, copy_gbps, matrix_tflops), color="black", lw=2)
    ax.annotate(f"copy {copy_gbps:,.0f} GB/s", (xs[2], _roof(xs[2], copy_gbps, matrix_tflops)),
                xytext=(-4, 10), textcoords="offset points", va="bottom", fontsize=9)
    ax.axhline(matrix_tflops, color="grey", ls=":", lw=1)
    ax.annotate(f"f16 matrix rate {matrix_tflops:,.3g} TFLOP/s (gemm {data.get('gemm_n')}^3)",
                (hi / 1.5, matrix_tflops), ha="right", va="bottom", fontsize=9)
    for r in flopping:
        x = r["flops"] / r["bytes"] if r["bytes"] > 0 else hi / 1.5  # no memory traffic: right edge
        ax.scatter([x], [r["tflops"]], color=colour[r["group"]], s=22, zorder=3)
        label = r["name"].split("/")[-1] + ("" if r["bytes"] > 0 else " (no memory traffic)")
        ax.annotate(label, (x, r["tflops"]), fontsize=6.5, xytext=(3, 2), textcoords="offset points",
                    ha="left" if r["bytes"] > 0 else "right")
    ax.set_xlabel("arithmetic intensity (flop / byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("roofline")
    ax.grid(True, which="both", alpha=0.25)
    for g in groups:
        ax.scatter([], [], color=colour[g], label=g)
    ax.legend(loc="lower right", fontsize=8)

    # right: achieved bandwidth against the copy's
    moving = sorted((r for r in rows if r["bytes"] > 0), key=lambda r: r["gbps"])
    names = [r["name"] for r in moving]
    bx.barh(range(len(moving)), [r["gbps"] for r in moving],
            color=[colour[r["group"]] for r in moving])
    for i, r in enumerate(moving):
        bx.annotate(f"{100 * r['gbps'] / copy_gbps:.0f}%", (r["gbps"], i), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=6)
    bx.axvline(copy_gbps, color="black", lw=2)
    bx.annotate(f"copy {copy_gbps:,.0f} GB/s ", (copy_gbps, len(moving) - 0.5), ha="right",
                va="bottom", fontsize=9)
    bx.set_ylim(-0.6, len(moving) + 0.4)
    bx.set_yticks(range(len(moving)), names, fontsize=7)
    bx.set_xlabel("achieved GB/s (bytes each kernel must move / time)")
    bx.set_title("bandwidth")
    bx.grid(True, axis="x", alpha=0.25)

    title = (f"kaio kernels on {data.get('device', data.get('backend', '?'))} "
             f"({data.get('backend', '?')}, {data.get('sizes', '?')} sizes, {data.get('date', '')})")
    fig.suptitle(title)
    if missing:
        fig.text(0.01, 0.005, "not measured: " + ", ".join(missing), fontsize=7, color="darkred")
    fig.tight_layout(rect=(0, 0.02, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
