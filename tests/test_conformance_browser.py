"""The conformance HTML report renders in a real browser: headless Chromium loads the page a
run wrote, lays it out and takes a screenshot; the picture must be a real page, not a blank one.
Skips cleanly where Chromium is not installed (.ci/run installs Debian's chromium)."""
from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

from kaio.conformance import cli as conformance_cli

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")
WIDTH, HEIGHT = 1280, 900


def _browser() -> str:
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no headless Chromium installed (apt-get install chromium)")


def _headless(browser: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile"  # a private profile: parallel test runs do not share one
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", f"--user-data-dir={profile}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, HOME=str(tmp_path)))


@pytest.fixture(scope="module")
def report_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("conformance")
    rc = conformance_cli.main(["--kernel", "ml/rmsnorm", "ml/softmax", "rajaperf/DAXPY",
                               "--target", "reference", "--out", str(out)])
    assert rc == 0
    return out / "conformance.html"


def test_the_report_renders_in_chromium(report_page, tmp_path):
    mpimg = pytest.importorskip("matplotlib.image")
    browser = _browser()
    shot = tmp_path / "report.png"
    r = _headless(browser, tmp_path, f"--window-size={WIDTH},{HEIGHT}", f"--screenshot={shot}",
                  report_page.as_uri())
    assert shot.exists(), f"no screenshot (rc {r.returncode}): {r.stderr[-2000:]}"
    assert shot.stat().st_size > 20_000           # a page of text and table cells, not an empty PNG
    img = mpimg.imread(str(shot))
    assert img.shape[:2] == (HEIGHT, WIDTH)
    rgb = np.asarray(img[..., :3], dtype=np.float64)
    assert rgb.std() > 0.05                       # not one flat colour
    ink = (rgb.mean(axis=2) < 0.6).mean()         # dark pixels: text, borders
    assert 0.005 < ink < 0.6, ink


def test_chromium_lays_out_the_table(report_page, tmp_path):
    browser = _browser()
    r = _headless(browser, tmp_path, "--dump-dom", report_page.as_uri())
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<table" in dom and "kaio conformance report" in dom
    for kernel in ("ml/rmsnorm", "ml/softmax", "rajaperf/DAXPY"):
        assert kernel in dom
