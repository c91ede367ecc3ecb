"""``kaio bench --plot``: the roofline's numbers (measured on the reference backend here) and the
picture (drawn from data, so any saved run redraws without a GPU)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from kaio import cli, roofline

mpimg = pytest.importorskip("matplotlib.image")


def synthetic() -> dict:
    """An H200-like run: copy 4 TB/s, f16 matrix 700 TFLOP/s, a few kernels of each kind."""
    rows = []
    for name, group, flops, nbytes, seconds in (
            ("rajaperf/TRIAD", "rajaperf/stream", 2e8, 2.4e9, 0.7e-3),
            ("rajaperf/COPY", "rajaperf/stream", 0.0, 1.6e9, 0.45e-3),
            ("rajaperf/PI_REDUCE", "rajaperf/basic", 6e8, 0.0, 0.2e-3),
            ("rajaperf/MAT_MAT_SHARED", "rajaperf/basic", 2e12, 1.2e10, 0.05),
            ("ml/rmsnorm", "ml", 1e8, 2.7e8, 0.09e-3)):
        rows.append({"name": name, "group": group, "size": "n", "flops": flops, "bytes": nbytes,
                     "seconds": seconds, "gbps": nbytes / seconds / 1e9,
                     "tflops": flops / seconds / 1e12})
    rows.append({"name": "ml/broken", "group": "ml", "size": "n", "flops": 1.0, "bytes": 1.0,
                 "error": "RuntimeError: no"})
    return {"schema": roofline.SCHEMA, "backend": "cuda", "device": "NVIDIA H200", "date": "today",
            "sizes": "default", "copy_bytes": 1 << 30, "gemm_n": 8192, "copy_gbps": 4000.0,
            "matrix_tflops": 700.0, "kernels": rows}


def _check_png(path, min_w=1000, min_h=600):
    img = mpimg.imread(str(path))
    h, w = img.shape[:2]
    assert w >= min_w and h >= min_h
    assert float(np.asarray(img[..., :3]).std()) > 0.05  # lines, dots and text, not a blank page


def test_the_roof_is_bandwidth_then_matrix_rate():
    roof = roofline._roof([0.1, 1.0, 175.0, 1000.0], 4000.0, 700.0)
    assert np.allclose(roof, [0.4, 4.0, 700.0, 700.0])


def test_plot_draws_a_png_from_data(tmp_path):
    out = roofline.plot(synthetic(), str(tmp_path / "roof.png"))
    _check_png(out)


def test_cli_redraws_saved_data(tmp_path, capsys):
    data = tmp_path / "run.json"
    data.write_text(json.dumps(synthetic()))
    png = tmp_path / "again.png"
    assert cli.main(["bench", "--plot", str(png), "--data", str(data)]) == 1   # ml/broken
    err = capsys.readouterr().err
    assert "not measured: ml/broken" in err and "copy 4000 GB/s" in err
    _check_png(png)


def test_cli_measures_on_the_reference_backend(tmp_path, restore_backend):
    png = tmp_path / "stream.png"
    rc = cli.main(["bench", "--plot", str(png), "--backend", "reference",
                   "--kernel", "rajaperf/stream", "ml/rmsnorm"])
    assert rc == 0
    data = json.loads((tmp_path / "stream.json").read_text())
    assert data["backend"] == "reference" and data["sizes"] == "small"
    assert data["copy_gbps"] > 0 and data["matrix_tflops"] > 0
    names = [r["name"] for r in data["kernels"]]
    assert names == [f"rajaperf/{n}" for n in ("ADD", "COPY", "MUL", "TRIAD", "DOT")] + ["ml/rmsnorm"]
    from kaio import kernels as K
    for r in data["kernels"]:
        case = K.get(r["name"])
        assert r["bytes"] == case.bytes(case.small_size) and r["flops"] == case.flops(case.small_size)
        assert r["seconds"] > 0 and r["gbps"] == pytest.approx(r["bytes"] / r["seconds"] / 1e9)
    _check_png(png)


def test_plot_options_need_plot(capsys):
    assert cli.main(["bench", "--kernel", "rmsnorm"]) == 2
    assert "go with --plot" in capsys.readouterr().err


@pytest.fixture
def restore_backend():
    from kaio import backends as be
    previous = be._current
    yield
    be._current = previous
