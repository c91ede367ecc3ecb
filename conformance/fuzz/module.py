"""Generated kernels become a real Python module on disk (the frontend reads a kernel's source
from its file), imported under a unique name."""
from __future__ import annotations

import importlib.util
import os

from .generate import module_text


def load(cases: list, seed: int, directory: str, tag: str):
    """Write ``cases`` as ``directory/kaio_fuzz_<tag>.py``, import it, and return
    (module, {kernel name: first line of its source in the file})."""
    text, first = module_text(seed, cases)
    name = f"kaio_fuzz_{tag}"
    path = os.path.join(directory, name + ".py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, first
