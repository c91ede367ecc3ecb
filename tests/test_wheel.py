"""The wheel check (scripts/check_wheel.py, run by .ci/run): the package list in pyproject.toml
covers every module and data file of the source tree, and the check catches a wheel that misses
a module, a package left out of the list, an unshipped data file and a stale extra file."""
from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("check_wheel", ROOT / "scripts" / "check_wheel.py")
check_wheel = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_wheel)

#: the source folders pyproject.toml maps into the ``kaio`` package
SOURCE_ROOTS = {"kaio_core": "kaio", "backends": "kaio/backends", "regions": "kaio/regions",
                "kernels": "kaio/kernels", "conformance": "kaio/conformance"}


def test_package_list_covers_the_source_tree():
    want, problems = check_wheel.expected_files(ROOT)
    assert problems == []
    # counted independently: every file under the mapped folders, at its place in the package
    on_disk = set()
    for src, dest in SOURCE_ROOTS.items():
        for f in (ROOT / src).rglob("*"):
            if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".pyc":
                on_disk.add(f"{dest}/{f.relative_to(ROOT / src).as_posix()}")
    # plus the data package: the CUDA C++ twins kaio rajaperf compiles at run time
    twins = {f"kaio/kernels/rajaperf/cuda/{f.name}" for f in (ROOT / "benchmarks" / "cuda").iterdir()
             if f.name.startswith("rajaperf_")}
    assert twins and want == on_disk | twins
    for module in ("kaio/__init__.py", "kaio/cli.py", "kaio/ir/__init__.py",
                   "kaio/backends/codeobject.py", "kaio/backends/reference/__init__.py",
                   "kaio/regions/__init__.py", "kaio/kernels/ml/__init__.py",
                   "kaio/conformance/fuzz/__init__.py"):
        assert module in want


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    (root / "core" / "sub").mkdir(parents=True)
    (root / "core" / "extra").mkdir()
    (root / "pyproject.toml").write_text('[tool.setuptools]\npackages = ["kaio", "kaio.sub"]\n'
                                         '[tool.setuptools.package-dir]\n"kaio" = "core"\n')
    for f in ("core/__init__.py", "core/a.py", "core/sub/__init__.py", "core/extra/b.py"):
        (root / f).write_text("")
    (root / "core" / "kernel.cu").write_text("// read at run time")
    return root


def _wheel(tmp_path: Path, names) -> Path:
    path = tmp_path / "kaio-0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for n in names:
            z.writestr(n, "")
        z.writestr("kaio-0.dist-info/METADATA", "Metadata-Version: 2.4\nName: kaio\n"
                   "Provides-Extra: cuda\nProvides-Extra: dev\n")
    return path


def test_check_catches_every_kind_of_gap(tmp_path):
    root = _tree(tmp_path)
    wheel = _wheel(tmp_path, ["kaio/__init__.py", "kaio/sub/__init__.py", "kaio/stale.py"])
    problems = check_wheel.check_contents(wheel, root)
    assert "missing from the wheel: kaio/a.py" in problems
    assert "missing from the wheel: kaio/kernel.cu" in problems
    assert "in the wheel but not in the source tree: kaio/stale.py" in problems
    assert any(p.startswith("core/extra holds files but no package") for p in problems)
    assert any("entry_points.txt" in p for p in problems)
    assert check_wheel.declared_extras(wheel) == ["cuda", "dev"]


def test_check_passes_a_complete_wheel(tmp_path):
    root = _tree(tmp_path)
    (root / "core" / "extra" / "b.py").unlink()
    names = ["kaio/__init__.py", "kaio/a.py", "kaio/kernel.cu", "kaio/sub/__init__.py",
             "kaio-0.dist-info/entry_points.txt"]
    assert check_wheel.check_contents(_wheel(tmp_path, names), root) == []


def test_data_only_package(tmp_path):
    root = _tree(tmp_path)
    (root / "core" / "extra" / "b.py").unlink()
    (root / "cu").mkdir()
    (root / "cu" / "twin_a.cu").write_text("")
    (root / "cu" / "bench.cu").write_text("")       # not named by package-data: not shipped
    (root / "pyproject.toml").write_text(
        '[tool.setuptools]\npackages = ["kaio", "kaio.sub", "kaio.cu"]\n'
        '[tool.setuptools.package-dir]\n"kaio" = "core"\n"kaio.cu" = "cu"\n'
        '[tool.setuptools.package-data]\n"kaio.cu" = ["twin_*.cu"]\n')
    names = ["kaio/__init__.py", "kaio/a.py", "kaio/kernel.cu", "kaio/sub/__init__.py",
             "kaio-0.dist-info/entry_points.txt"]
    assert check_wheel.check_contents(_wheel(tmp_path, names), root) == \
        ["missing from the wheel: kaio/cu/twin_a.cu"]
    assert check_wheel.check_contents(_wheel(tmp_path, names + ["kaio/cu/twin_a.cu"]), root) == []


def test_rajaperf_twins_found_installed_and_in_a_checkout(tmp_path):
    from kaio.kernels.rajaperf import native
    checkout = tmp_path / "repo" / "kernels" / "rajaperf"
    checkout.mkdir(parents=True)
    assert native._source_dir(checkout) == tmp_path / "repo" / "benchmarks" / "cuda"
    (checkout / "cuda").mkdir()                      # the wheel's kaio/kernels/rajaperf/cuda
    assert native._source_dir(checkout) == checkout / "cuda"
    assert native.SOURCE_DIR == ROOT / "benchmarks" / "cuda" and native.sources()


def test_package_dir_rule():
    dirs = check_wheel.package_dirs(ROOT)
    assert dirs["kaio"] == ROOT / "kaio_core"
    assert dirs["kaio.ir"] == ROOT / "kaio_core" / "ir"
    assert dirs["kaio.backends.reference"] == ROOT / "backends" / "reference"
