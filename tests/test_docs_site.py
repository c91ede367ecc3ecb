"""The documentation site (mkdocs.yml: the guides and the API reference from the docstrings)
builds with warnings as errors, and the API pages hold the docstrings of the public API."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytest.importorskip("mkdocstrings_handlers.python", reason="mkdocstrings[python] is in [dev]")


def test_site_builds_strict_with_the_api_reference(tmp_path):
    site = tmp_path / "site"
    p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "WARNING" not in p.stderr, p.stderr[-4000:]

    def page(name):
        return (site / "api" / name / "index.html").read_text()

    # objects from each mapped source folder, found where the wheel puts them
    launches, backends, regions = page("kernels-and-launches"), page("backends"), page("regions")
    assert 'id="kaio.launch.KernelFunction"' in launches and "Decorator: compile a Python" in launches
    assert 'id="kaio.backends.codeobject.validate_code_object"' in backends
    assert 'id="kaio.regions' in regions
    assert (site / "regions" / "index.html").is_file()      # the guides are in the site too
    # reST roles do not leak into the rendered text
    assert not re.search(r":(func|class|meth|mod):<code>", launches + backends)
