"""A script next to a clone folder named ``kaio`` imports that folder as ``kaio`` (the script's
folder is first on sys.path). The checkout's root __init__.py maps it like the installed package,
so the script works instead of failing with "cannot import name 'f32' from 'kaio'"."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = '''
import numpy as np
import kaio
from kaio import f32

@kaio.kernel
def double(x: kaio.In[f32], y: kaio.Out[f32]):
    for i in y.owned():
        y[i] = x[i] * 2.0

x = np.arange(8, dtype=np.float32)
y = np.zeros_like(x)
double(x, y)
np.testing.assert_array_equal(y, 2 * x)
import kaio.backends, kaio.regions, kaio.kernels, kaio.conformance
print(kaio.__file__)
'''


def test_script_next_to_a_clone_named_kaio(tmp_path):
    try:
        os.symlink(ROOT, tmp_path / "kaio", target_is_directory=True)
    except OSError as e:   # no symlinks on this filesystem
        pytest.skip(f"cannot make a symlink: {e}")
    (tmp_path / "use_kaio.py").write_text(SCRIPT)
    env = dict(os.environ, KAIO_BACKEND="reference")
    p = subprocess.run([sys.executable, "use_kaio.py"], cwd=tmp_path, capture_output=True, text=True,
                       env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(tmp_path / "kaio" / "kaio_core" / "__init__.py")
