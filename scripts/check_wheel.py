"""Build kaio's wheel and check that it installs clean, away from the source tree (CI runs this).

Steps, each failing the run with a one-line reason:

1. ``python -m build`` (sdist, then the wheel from the sdist) into a temporary folder;
2. the wheel's file list against the source tree: every module of every package that
   pyproject.toml maps (``[tool.setuptools] packages`` + ``package-dir``) is in it, every folder of
   modules under those packages is a listed package, every non-Python file there and every file
   ``package-data`` names (data read at run time, e.g. the CUDA C++ of ``kaio rajaperf``) is
   shipped, and nothing else is under ``kaio/`` (a stale ``build/`` can leak files);
3. a fresh venv in the temporary folder, ``pip install`` of the wheel, then from that folder (so
   ``import kaio`` cannot find the checkout): ``kaio --version``, ``kaio info`` and
   ``kaio showcase --backend reference --size small``;
4. each extra (``cuda``, ``hip``, ``torch``, ``dev`` and any other declared) is in the wheel's
   metadata and resolves: ``pip install --dry-run --report`` in the fresh venv.

Usage: ``python scripts/check_wheel.py [--wheel FILE.whl] [--no-install] [--no-extras]``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from email.parser import Parser
from pathlib import Path, PurePosixPath

try:
    import tomllib
except ImportError:   # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
#: the extras the README promises; each must be declared and resolve
REQUIRED_EXTRAS = ("cuda", "hip", "torch", "dev")
SKIP_PARTS = {"__pycache__"}
SKIP_SUFFIXES = (".pyc", ".pyo")


def _setuptools(root: Path) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]


def package_dirs(root: Path) -> dict[str, Path]:
    """Each package pyproject.toml lists -> its source folder (setuptools' package-dir rule:
    the longest mapped prefix of the package name, then the rest of the name as folders)."""
    cfg = _setuptools(root)
    mapping = cfg.get("package-dir", {})
    out = {}
    for pkg in cfg["packages"]:
        parts = pkg.split(".")
        for i in range(len(parts), -1, -1):
            prefix = ".".join(parts[:i])
            if prefix in mapping or i == 0:
                base = root / mapping.get(prefix, "")
                out[pkg] = base.joinpath(*parts[i:])
                break
    return out


def _shipped(path: Path) -> bool:
    return not (SKIP_PARTS & set(path.parts)) and not path.name.endswith(SKIP_SUFFIXES)


def expected_files(root: Path) -> tuple[set[str], list[str]]:
    """(paths the wheel must hold under ``kaio/``, problems with the package list itself)."""
    dirs, data = package_dirs(root), _setuptools(root).get("package-data", {})
    problems, files = [], set()
    listed = {d.resolve() for d in dirs.values()}
    for pkg, d in sorted(dirs.items()):
        dest = PurePosixPath(*pkg.split("."))
        declared = {f for pattern in data.get(pkg, []) for f in d.glob(pattern) if f.is_file()}
        if data.get(pkg) and not declared:
            problems.append(f"package-data of {pkg}: nothing matches {data[pkg]} in {d}")
        files |= {str(dest / f.name) for f in declared}
        if not (d / "__init__.py").is_file():
            if not declared:   # a data-only package (package-data, no modules) needs none
                problems.append(f"package {pkg}: {d.relative_to(root)}/__init__.py does not exist")
            continue
        for f in sorted(d.iterdir()):
            if f.is_file() and _shipped(f):
                files.add(str(dest / f.name))
            elif f.is_dir() and _shipped(f) and f.resolve() not in listed \
                    and any(_shipped(p) for p in f.rglob("*") if p.is_file()):
                problems.append(f"{f.relative_to(root)} holds files but no package in "
                                f"pyproject.toml [tool.setuptools] packages maps to it")
    return files, problems


def check_contents(wheel: Path, root: Path = ROOT) -> list[str]:
    """Problems with the wheel's file list against the source tree (empty: complete)."""
    want, problems = expected_files(root)
    names = zipfile.ZipFile(wheel).namelist()
    have = {n for n in names if n.startswith("kaio/")}
    problems += [f"missing from the wheel: {n}" for n in sorted(want - have)]
    problems += [f"in the wheel but not in the source tree: {n}" for n in sorted(have - want)]
    if not any(n.endswith(".dist-info/entry_points.txt") for n in names):
        problems.append("no entry_points.txt: the kaio command would not be installed")
    return problems


def declared_extras(wheel: Path) -> list[str]:
    """The extras in the wheel's METADATA (Provides-Extra)."""
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        msg = Parser().parsestr(z.read(meta).decode())
    return msg.get_all("Provides-Extra") or []


def _run(cmd, cwd, env=None) -> subprocess.CompletedProcess:
    """Run ``cmd``; print one line (its last output line too), and the output's tail on failure."""
    t = time.time()
    p = subprocess.run(cmd, cwd=cwd, env=env, text=True, capture_output=True)
    last = (p.stdout.strip().splitlines() or [""])[-1][:100]
    print(f"  {' '.join(Path(c).name if i == 0 else str(c) for i, c in enumerate(cmd[:5]))}"
          f"{' ...' if len(cmd) > 5 else ''}: rc={p.returncode} ({time.time() - t:.0f} s) {last}",
          flush=True)
    if p.returncode:
        print((p.stdout + p.stderr)[-3000:])
    return p


def build(out: Path) -> Path:
    p = _run([sys.executable, "-m", "build", "--outdir", str(out), str(ROOT)], cwd=ROOT)
    if p.returncode:
        sys.exit("check_wheel: python -m build failed")
    return Path(glob.glob(str(out / "kaio-*.whl"))[0])


def _clean_env(tmp: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["KAIO_CACHE_DIR"] = str(tmp / "cache")
    return env


def install_and_run(wheel: Path, tmp: Path) -> tuple[Path, list[str]]:
    """A fresh venv with the wheel; the commands run from ``tmp``. Returns (venv python, problems)."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], cwd=tmp)
    py, kaio = venv / "bin" / "python", venv / "bin" / "kaio"
    env = _clean_env(tmp)
    if _run([py, "-m", "pip", "install", "-q", str(wheel)], cwd=tmp, env=env).returncode:
        return py, ["pip install of the wheel failed"]
    problems = []
    where = _run([py, "-c", "import kaio; print(kaio.__file__)"], cwd=tmp, env=env)
    if where.returncode or not where.stdout.strip().startswith(str(venv)):
        problems.append(f"import kaio did not come from the venv: {where.stdout.strip()!r}")
    for args in (["--version"], ["info"], ["showcase", "--backend", "reference", "--size", "small"]):
        p = _run([kaio, *args], cwd=tmp, env=env)
        if p.returncode:
            problems.append(f"kaio {' '.join(args)} exited {p.returncode}")
    return py, problems


def resolve_extras(wheel: Path, py: Path, tmp: Path) -> list[str]:
    """Each declared extra resolves in the fresh venv (pip's dry run); the required ones exist."""
    declared = declared_extras(wheel)
    problems = [f"extra [{e}] is not declared in pyproject.toml" for e in REQUIRED_EXTRAS
                if e not in declared]
    for extra in declared:
        report = tmp / f"report-{extra}.json"
        p = _run([py, "-m", "pip", "install", "--dry-run", "--ignore-installed", "-q", "--report",
                  str(report), f"kaio[{extra}] @ {wheel.as_uri()}"], cwd=tmp, env=_clean_env(tmp))
        if p.returncode:
            problems.append(f"extra [{extra}] does not resolve")
            continue
        got = sorted(i["metadata"]["name"] for i in json.loads(report.read_text())["install"])
        print(f"    [{extra}] resolves: {len(got)} packages ({', '.join(got)})")
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="check_wheel.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheel", type=Path, help="check this wheel instead of building one")
    ap.add_argument("--no-install", action="store_true", help="only the file list")
    ap.add_argument("--no-extras", action="store_true", help="skip resolving the extras")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kaio-wheel-") as d:
        tmp = Path(d)
        wheel = args.wheel.resolve() if args.wheel else build(tmp / "dist")
        print(f"check_wheel: {wheel.name}")
        problems = check_contents(wheel)
        if not problems and not args.no_install:
            py, found = install_and_run(wheel, tmp)
            problems += found
            if not found and not args.no_extras:
                problems += resolve_extras(wheel, py, tmp)
    for p in problems:
        print("check_wheel: FAIL:", p)
    print("check_wheel:", "FAILED" if problems else "ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
