"""mkdocs hooks: lay out the ``kaio`` package for mkdocstrings the way the wheel does, and drop
the reST role prefixes (``:func:``, ``:class:``, ...) the docstrings put before a name.

pyproject.toml maps ``kaio`` to kaio_core/ and ``kaio.backends`` (and regions, kernels,
conformance) to top-level folders; griffe, which reads the sources for mkdocstrings, finds
packages by folder. Before the build this links the mapped folders into one ``kaio`` tree under
build/apidocs/ (mkdocs.yml's handler ``paths``), so the API reference is read from source, with
no imports.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

try:
    import tomllib
except ImportError:   # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / "build" / "apidocs"
#: ``:func:`name``` renders as ":func:" and then the name as code: keep the code
ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj|ref):(?=<code>)")


def stage(root: Path = ROOT, out: Path = STAGE) -> Path:
    """Link every file of the top package's folder, then every mapped subpackage's folder, into
    ``out/kaio``; returns ``out``."""
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    pkg = out / "kaio"
    shutil.rmtree(out, ignore_errors=True)
    pkg.mkdir(parents=True)
    for f in (root / mapping["kaio"]).iterdir():
        if f.name != "__pycache__":
            (pkg / f.name).symlink_to(f.resolve())
    for name, folder in mapping.items():
        if name.count(".") == 1:   # kaio.backends etc.; deeper ones are data (rajaperf's CUDA C++)
            (pkg / name.split(".")[1]).symlink_to((root / folder).resolve())
    return out


def on_startup(command, dirty, **kwargs):
    # before any plugin's on_config: mkdocstrings drops handler paths that do not exist yet
    stage()


def on_page_content(html, page, **kwargs):
    return ROLE.sub("", html)
