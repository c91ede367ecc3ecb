"""kaio's import layers: every module imports only its own layer or lower ones, without cycles.

Layers, lowest first (docs/architecture.md says why each module sits where it does):

=====  ==========  ===========================================================================
rank   layer       modules
=====  ==========  ===========================================================================
0      foundation  kaio.dtypes, kaio.errors, kaio.config, kaio.options, kaio.semantics,
                   kaio.cache, kaio.version, kaio.records
1      ir          kaio.ir.*, kaio.mathlib.* (the math library is written in IR)
2      passes      kaio.passes.*, kaio.regions.* (the race checker is a pass)
3      frontend    kaio.frontend.*, kaio.lang, kaio.math, kaio.signature
3      backends    kaio.backends.* (frontend and backends never import each other)
4      api         kaio, kaio.launch, kaio.device, kaio.devices, kaio.graphs, kaio.blas,
                   kaio.dlpack, kaio.checked, kaio.mpi, kaio.autotune, kaio.warm
5      tools       kaio.kernels.*, kaio.conformance.*, kaio.cli, kaio.showcase, kaio.bench
=====  ==========  ===========================================================================

The test parses every module of the five source folders (pyproject's package-dir) with ``ast``
and fails, listing each offence, on:

- an upward import (function-level imports included): ``module:line -> imported module``;
- an import inside a function of a kaio module or of a required dependency (numpy, llvmlite,
  ml_dtypes, rich, msgpack) without ``# lazy: <reason>`` on its line, where the reason names an
  optional dependency or a measured import-time cost ("import time, ~40 ms"); any other
  non-stdlib import inside a function (an optional dependency) needs ``# lazy:`` too;
- a cycle among module-level imports (imports under ``if TYPE_CHECKING:`` are not executed and
  do not count);
- ``importlib.import_module`` / ``__import__`` outside the registries listed in ``DYNAMIC``
  (a by-name import would hide an edge from this test).

Relative imports are resolved to ``kaio.*`` names; ``from P import name`` is an edge to the
module ``P.name`` when there is one, else to ``P``.
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: (layer, rank, module prefixes); "kaio" names the package itself only
LAYERS = [
    ("foundation", 0, ["kaio.dtypes", "kaio.errors", "kaio.config", "kaio.options", "kaio.semantics",
                       "kaio.cache", "kaio.version", "kaio.records"]),
    ("ir", 1, ["kaio.ir", "kaio.mathlib"]),
    ("passes", 2, ["kaio.passes", "kaio.regions"]),
    ("frontend", 3, ["kaio.frontend", "kaio.lang", "kaio.math", "kaio.mma", "kaio.signature"]),
    ("backends", 3, ["kaio.backends"]),
    ("api", 4, ["kaio", "kaio.launch", "kaio.device", "kaio.devices", "kaio.graphs", "kaio.blas",
                "kaio.dlpack", "kaio.checked", "kaio.mpi", "kaio.autotune", "kaio.residency",
                "kaio.warm"]),
    ("tools", 5, ["kaio.kernels", "kaio.conformance", "kaio.cli", "kaio.showcase", "kaio.bench",
                  "kaio.progress", "kaio.roofline"]),
]
REQUIRED = {"numpy", "llvmlite", "ml_dtypes", "rich", "msgpack"}
OPTIONAL = ("cuda-python", "hip-python", "torch", "triton", "cupy", "mpi", "mpmath", "scipy",
            "pyelftools")
IMPORT_TIME = re.compile(r"import time\b.*\d+(\.\d+)?\s*ms")
#: modules that may import by name, and why
DYNAMIC = {
    "kaio.backends": "the backend registry: a backend's driver bindings are optional",
    "kaio.cli": "delegated subcommands and the versions of optional packages (kaio info)",
}


@dataclass
class Import:
    module: str          # the importing module
    line: int
    target: str          # the imported kaio module, or a third-party top-level name
    internal: bool
    in_function: bool
    type_only: bool      # under `if TYPE_CHECKING:`
    comment: str         # the text after '# lazy:' on the import's lines, or None
    has_lazy: bool


@dataclass
class Scan:
    modules: dict = field(default_factory=dict)      # name -> path
    imports: list = field(default_factory=list)
    dynamic: list = field(default_factory=list)      # (module, line)


def package_dirs() -> dict[str, str]:
    """pyproject's [tool.setuptools.package-dir]: package name -> folder."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-dir]", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^"([\w.]+)"\s*=\s*"([\w/]+)"', section, re.M))


def discover() -> dict[str, Path]:
    mods = {}
    for pkg, folder in package_dirs().items():
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT / folder).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            mods[".".join((pkg,) + rel)] = p
    return mods


def layer_of(module: str):
    best = None
    for name, rank, prefixes in LAYERS:
        for p in prefixes:
            if module == p or (p != "kaio" and module.startswith(p + ".")):
                if best is None or len(p) > len(best[2]):
                    best = (name, rank, p)
    return best


def _parents(tree):
    out = {}
    for n in ast.walk(tree):
        for c in ast.iter_child_nodes(n):
            out[c] = n
    return out


def _is_type_checking(node) -> bool:
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def scan_source(module: str, source: str, is_package: bool, known: set, scan: Scan) -> None:
    """Add ``module``'s imports (and by-name imports) to ``scan``; ``known``: every module name."""
    lines = source.splitlines()
    tree = ast.parse(source)
    parents = _parents(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in ("import_module", "__import__"):
                scan.dynamic.append((module, node.lineno))
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        in_function = type_only = False
        q = node
        while q in parents:
            q = parents[q]
            in_function |= isinstance(q, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            type_only |= _is_type_checking(q)
        text = " ".join(lines[node.lineno - 1:node.end_lineno])
        m = re.search(r"#\s*lazy:\s*(.*)$", text)
        comment = m.group(1).strip() if m else ""
        for target in _targets(module, is_package, node, known):
            internal = target == "kaio" or target.startswith("kaio.")
            scan.imports.append(Import(module, node.lineno, target if internal else target.split(".")[0],
                                       internal, in_function, type_only, comment, m is not None))


def _targets(module: str, is_package: bool, node, known: set) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        parts = module.split(".")
        if not is_package:
            parts = parts[:-1]
        parts = parts[:len(parts) - (node.level - 1)]
        base = ".".join(parts + ([node.module] if node.module else []))
    else:
        base = node.module
    out = []
    for a in node.names:
        sub = f"{base}.{a.name}"
        t = sub if sub in known else base
        if t not in out:
            out.append(t)
    return out


def scan_tree() -> Scan:
    scan = Scan(modules=discover())
    known = set(scan.modules)
    for name, path in scan.modules.items():
        scan_source(name, path.read_text(), path.name == "__init__.py", known, scan)
    return scan


# --- the checks -------------------------------------------------------------------------------
def upward(scan: Scan) -> list[str]:
    bad = []
    for imp in scan.imports:
        if not imp.internal:
            continue
        a, b = layer_of(imp.module), layer_of(imp.target)
        if a is None or b is None:
            continue   # reported by test_every_module_has_a_layer
        if b[1] > a[1] or (b[1] == a[1] and b[0] != a[0]):
            bad.append(f"{imp.module}:{imp.line} ({a[0]}) imports {imp.target} ({b[0]})")
    return bad


def unjustified_lazy(scan: Scan) -> list[str]:
    bad = []
    for imp in scan.imports:
        if not imp.in_function or (not imp.internal and imp.target in sys.stdlib_module_names):
            continue
        where = f"{imp.module}:{imp.line} imports {imp.target} inside a function"
        strict = imp.internal or imp.target in REQUIRED
        if not imp.has_lazy:
            bad.append(where + " (no '# lazy: <reason>' comment)")
        elif strict and not (IMPORT_TIME.search(imp.comment) or any(o in imp.comment for o in OPTIONAL)):
            bad.append(where + f" ('# lazy: {imp.comment}' names no optional dependency and no "
                               "measured import time)")
    return bad


def cycles(scan: Scan) -> list[list[str]]:
    """Strongly connected components (more than one module) of the module-level import graph."""
    graph: dict[str, set] = {m: set() for m in scan.modules}
    for imp in scan.imports:
        if imp.internal and not imp.in_function and not imp.type_only and imp.target != imp.module \
                and imp.target in graph:
            graph[imp.module].add(imp.target)
    index, low, on, stack, out = {}, {}, set(), [], []

    def visit(v):   # Tarjan, iteratively (no recursion limit on deep chains)
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def by_name(scan: Scan) -> list[str]:
    return [f"{m}:{line}" for m, line in scan.dynamic if m not in DYNAMIC]


# --- tests ------------------------------------------------------------------------------------
SCAN = scan_tree()


def test_the_scan_sees_the_whole_tree():
    internal = [i for i in SCAN.imports if i.internal]
    assert len(SCAN.modules) > 100, sorted(SCAN.modules)
    assert len(internal) > 300
    assert {"kaio", "kaio.ir.core", "kaio.backends.ptx", "kaio.regions.checker", "kaio.launch",
            "kaio.kernels", "kaio.conformance.runner"} <= set(SCAN.modules)


def test_every_module_has_a_layer():
    assert [m for m in SCAN.modules if layer_of(m) is None] == []


def test_no_upward_imports():
    bad = upward(SCAN)
    assert not bad, "imports that go up a layer:\n" + "\n".join(bad)


def test_imports_inside_functions_are_justified():
    bad = unjustified_lazy(SCAN)
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    found = cycles(SCAN)
    assert not found, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_by_name_only_in_registries():
    bad = by_name(SCAN)
    assert not bad, "importlib.import_module / __import__ outside DYNAMIC: " + ", ".join(bad)


def test_the_checks_catch_planted_offences():
    """Each check fails on a small planted tree (so a passing run is not a vacuous one)."""
    planted = {
        "kaio.ir.fake": ("from ..launch import kernel\n"          # upward
                         "from . import fake2\n"                  # cycle with fake2
                         "def f():\n"
                         "    import numpy\n"                     # no comment
                         "    from kaio import dtypes  # lazy: it was easier\n"   # no valid reason
                         "    import mpmath  # lazy: mpmath, optional\n"          # fine
                         "    import json\n"),                    # stdlib: fine
        "kaio.ir.fake2": ("import importlib\n"
                          "from typing import TYPE_CHECKING\n"
                          "from kaio.ir import fake\n"
                          "if TYPE_CHECKING:\n"
                          "    from kaio.ir import fake3\n"         # type-only: no cycle edge
                          "def g():\n"
                          "    from kaio.backends import targets  # lazy: import time, ~60 ms\n"  # upward
                          "    return importlib.import_module('kaio.cli')\n"),
        "kaio.ir.fake3": "from kaio.ir import fake2\n",
    }
    scan = Scan(modules=dict.fromkeys(planted))
    for name, src in planted.items():
        scan_source(name, src, False, set(planted) | {"kaio.dtypes", "kaio.launch", "kaio.backends.targets"},
                    scan)
    assert upward(scan) == ["kaio.ir.fake:1 (ir) imports kaio.launch (api)",
                            "kaio.ir.fake2:7 (ir) imports kaio.backends.targets (backends)"]
    lazy = unjustified_lazy(scan)
    assert len(lazy) == 2 and "fake:4 imports numpy" in lazy[0] and "fake:5 imports kaio" in lazy[1]
    assert cycles(scan) == [["kaio.ir.fake", "kaio.ir.fake2"]]
    assert by_name(scan) == ["kaio.ir.fake2:8"]


def test_every_ml_module_imports_first_in_a_fresh_process():
    """`import kaio.kernels.ml.quant` first used to fail: `from . import quant_mma` asked the
    package's __getattr__, which imports every ML module and so quant again, half initialised.
    Each module must import on its own."""
    import pkgutil
    import subprocess
    import sys

    import kaio.kernels.ml as ml
    names = [m.name for m in pkgutil.iter_modules(ml.__path__) if m.name != "torch_ops"]
    failed = []
    for n in names:
        r = subprocess.run([sys.executable, "-c", f"import kaio.kernels.ml.{n}"],
                           capture_output=True, text=True)
        if r.returncode:
            failed.append(f"{n}: {r.stderr.strip().splitlines()[-1]}")
    assert not failed, "\n".join(failed)
