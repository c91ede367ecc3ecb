"""The warm path (kaio.warm): a fresh process takes a kernel's code from the disk cache without
the frontend, and every change to what the kernel's code depends on misses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types

import numpy as np
import pytest

import kaio
from kaio import f32, warm
from kaio.cache import CompileCache, set_default_cache

KMOD = '''
import os
import kaio
from kaio import f32
from khelp import bump

SCALE = float(os.environ.get("SCALE", "2.0"))
CHECKED = os.environ.get("CHECKED") == "1"


@kaio.kernel(checked=CHECKED)
def k(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = bump(x[i] * SCALE)
'''

KHELP = '''
import kaio


@kaio.func
def bump(v):
    return v + 1.0
'''

CHILD = '''
import hashlib, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if os.environ.get("NO_FRONTEND"):
    sys.modules["kaio.frontend"] = None     # importing the frontend now raises ImportError
import numpy as np
import kaio
from kaio import warm
from kaio.backends import Backend
from kaio.backends.targets import get_target
from kaio.cache import default_cache
# kaio's own files are stamped into every key (warm.package_stamp); pinned here so that edits
# to the checkout while the test runs do not turn its hits into misses
warm._STAMP = "test"
import kmod


class Stub(Backend):
    """sm_90 PTX through the CUDA backend's stages; nothing is loaded."""
    name = "stub"

    def compile_options(self, kernel_options=None):
        return get_target("sm_90").options(kernel_options, ptx_version="8.0")


kaio.set_backend("reference")
x = np.arange(64, dtype=np.float32)
y = np.zeros(64, np.float32)
kmod.k(x, y)
c = kmod.k.compile(Stub())
print(json.dumps({"y": y.tolist(), "ptx": hashlib.sha256(c.artifacts["ptx"].encode()).hexdigest(),
                  "params": [p.name for p in c.kernel.params], "warm": warm.stats,
                  "frontend": sys.modules.get("kaio.frontend") is not None,
                  "cache": default_cache().stats}))
'''


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "kmod.py").write_text(KMOD)
    (tmp_path / "khelp.py").write_text(KHELP)
    (tmp_path / "child.py").write_text(CHILD)
    return tmp_path


def run(proj, **env) -> dict:
    e = dict(os.environ, KAIO_CACHE_DIR=str(proj / "cache"), KAIO_AUTOTUNE="0")
    e.pop("KAIO_CACHE_DISABLE", None)
    e.pop("KAIO_CHECKED", None)
    e.update(env)
    # -B: no .pyc, so a module rewritten within the same second is read again
    p = subprocess.run([sys.executable, "-B", str(proj / "child.py")], env=e, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-4000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def expected(scale=2.0, add=1.0):
    return (np.arange(64, dtype=np.float32) * np.float32(scale) + np.float32(add)).tolist()


def test_fresh_process_hit_never_imports_the_frontend(proj):
    cold = run(proj)
    assert cold["y"] == expected() and cold["frontend"]
    assert cold["warm"]["stores"] == 2 and cold["warm"]["hits"] == 0   # reference + sm_90
    hot = run(proj, NO_FRONTEND="1")   # a frontend import would raise: the hit does without it
    assert hot["y"] == expected() and hot["ptx"] == cold["ptx"]
    assert hot["warm"]["hits"] == 2 and hot["warm"]["stores"] == 0 and not hot["frontend"]
    assert hot["params"] == ["x", "y"]


def test_frontend_really_is_needed_on_a_miss(proj):
    """The guard of the test above is real: without a warm entry the same child fails."""
    e = dict(os.environ, KAIO_CACHE_DIR=str(proj / "cache"), NO_FRONTEND="1")
    p = subprocess.run([sys.executable, "-B", str(proj / "child.py")], env=e, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode != 0 and "kaio.frontend" in p.stderr


def test_global_constant_change_misses(proj):
    first = run(proj)
    changed = run(proj, SCALE="3.0")
    assert changed["y"] == expected(scale=3.0) != first["y"]
    assert changed["warm"]["hits"] == 0 and changed["warm"]["stores"] == 2
    assert changed["ptx"] != first["ptx"]
    assert run(proj, SCALE="3.0", NO_FRONTEND="1")["y"] == expected(scale=3.0)
    assert run(proj, NO_FRONTEND="1")["y"] == first["y"]   # both versions stay cached


def test_called_func_change_misses(proj):
    first = run(proj)
    (proj / "khelp.py").write_text(KHELP.replace("v + 1.0", "v + 10.0"))
    changed = run(proj)
    assert changed["y"] == expected(add=10.0) != first["y"]
    assert changed["warm"]["hits"] == 0 and changed["ptx"] != first["ptx"]


def test_kernel_source_change_misses(proj):
    run(proj)
    (proj / "kmod.py").write_text(KMOD.replace("bump(x[i] * SCALE)", "bump(x[i] * SCALE) * 2.0"))
    changed = run(proj)
    assert changed["y"] == (np.array(expected()) * 2).tolist()
    assert changed["warm"]["hits"] == 0


KMOD_CLOSURE = '''
import os
import kaio
from kaio import f32
from khelp import bump

CHECKED = False


def make(scale):
    """A kernel closing over ``scale``: how the library's factories give kernels constants."""
    @kaio.kernel
    def k(x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = bump(x[i] * scale)
    return k


k = make(float(os.environ.get("SCALE", "2.0")))
'''


def test_closure_constant_change_misses(proj):
    """A closure variable is part of the warm key: another value misses (and computes with it),
    each value then hits without the frontend."""
    (proj / "kmod.py").write_text(KMOD_CLOSURE)
    first = run(proj)
    assert first["y"] == expected() and first["warm"]["stores"] == 2
    changed = run(proj, SCALE="3.0")
    assert changed["y"] == expected(scale=3.0) and changed["warm"]["hits"] == 0
    assert changed["ptx"] != first["ptx"]
    assert run(proj, SCALE="3.0", NO_FRONTEND="1")["y"] == expected(scale=3.0)
    again = run(proj, NO_FRONTEND="1")
    assert again["y"] == first["y"] and again["warm"]["hits"] == 2


def test_options_change_misses(proj):
    first = run(proj)
    checked = run(proj, CHECKED="1")   # checked mode: the kernel takes the fault record too
    assert checked["warm"]["hits"] == 0 and checked["y"] == first["y"]
    assert checked["ptx"] != first["ptx"] and checked["params"] == ["x", "y", "_kaio_fault"]
    again = run(proj, CHECKED="1", NO_FRONTEND="1")
    assert again["warm"]["hits"] == 2 and again["ptx"] == checked["ptx"]


@pytest.mark.parametrize("which", ["warm", "artifact"])
def test_corrupted_entry_is_detected_and_rebuilt(proj, which):
    first = run(proj)
    files = sorted((proj / "cache").glob("*/*.kc"))
    warm_files = [f for f in files if f.name.startswith("w")]
    assert len(warm_files) == 2
    if which == "warm":
        targets = warm_files
    else:   # the PTX the sm_90 entry points to
        targets = [f for f in files if not f.name.startswith("w")]
    for f in targets:
        data = bytearray(f.read_bytes())
        data[-5] ^= 0x20
        f.write_bytes(bytes(data))
    rebuilt = run(proj)
    assert rebuilt["y"] == first["y"] and rebuilt["ptx"] == first["ptx"]
    assert rebuilt["cache"]["corrupt"] >= 1 and rebuilt["frontend"]
    assert rebuilt["warm"]["hits"] == (1 if which == "artifact" else 0)  # the reference one
    assert run(proj, NO_FRONTEND="1")["warm"]["hits"] == 2               # rewritten whole


# --- in-process: the key --------------------------------------------------------------------------
@pytest.fixture
def disk_cache(tmp_path):
    c = CompileCache(tmp_path / "c", disk=True)
    set_default_cache(c)
    yield c
    set_default_cache(None)


CFG = types.SimpleNamespace(scale=2.0)   # an arbitrary object: no stable fingerprint


def test_unfingerprintable_global_takes_the_frontend(disk_cache):
    @kaio.kernel
    def uses_object(x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = x[i] * CFG.scale

    before = dict(warm.stats)
    x = np.ones(8, np.float32)
    y = np.zeros(8, np.float32)
    uses_object.compile("reference")
    assert warm.stats["unkeyed"] == before["unkeyed"] + 1
    assert warm.stats["stores"] == before["stores"]
    assert uses_object.__dict__["_warm_print"] is None
    uses_object[(1,), (8,)](x, y)
    assert (y == 2.0).all()


SCALE_G = 2.0


def test_value_prints():
    vp = warm.value_print
    assert vp(1) != vp(1.0) != vp(True)
    assert vp((1, 2.5, "a")) == vp((1, 2.5, "a")) != vp((1, 2.5, "b"))
    assert vp(np.float32(1.5)) != vp(np.float64(1.5))
    assert vp(kaio.f32) != vp(kaio.f16)
    assert vp(kaio.math) == "module:kaio.math"
    assert vp(kaio.regions.blocked(4)) != vp(kaio.regions.blocked(8))
    for bad in ([1], {"a": 1}, object(), np.zeros(2), os):
        with pytest.raises(warm.Unstable):
            vp(bad)


def test_function_print_follows_globals_and_callees():
    src = textwrap.dedent('''
        import kaio
        C = 1.0

        @kaio.func
        def g(v):
            return v * C

        def f(x):
            return g(x) + C
    ''')
    ns1, ns2 = {}, {}
    exec(compile(src, "<warm-test>", "exec"), ns1)
    exec(compile(src.replace("C = 1.0", "C = 2.0"), "<warm-test>", "exec"), ns2)
    assert warm.function_print(ns1["f"]) != warm.function_print(ns2["f"])
    ns2["C"] = 1.0   # only g reads it now through its globals: the same values again
    assert warm.function_print(ns1["f"]) == warm.function_print(ns2["f"])


def test_package_stamp_sees_an_edit(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    before = warm._files(str(tmp_path))
    assert [os.path.basename(p) for p, _, _ in before] == ["a.py", "b.py"]
    (tmp_path / "sub" / "b.py").write_text("y = 22\n")
    assert warm._files(str(tmp_path)) != before


class _Stub(kaio.backends.Backend):
    """sm_90 PTX through the CUDA backend's stages; nothing is loaded."""
    name = "stub"

    def compile_options(self, kernel_options=None):
        from kaio.backends.targets import get_target
        return get_target("sm_90").options(kernel_options, ptx_version="8.0")


def _double(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i] * 2.0


def _triple(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i] * 3.0


def test_entry_pointing_at_another_kernels_code_is_refused(disk_cache):
    stub = _Stub()
    a, b = kaio.kernel(_double).compile(stub), kaio.kernel(_triple).compile(stub)
    entries = {}
    for key in disk_cache.stored_keys():
        if key.startswith("w"):
            entry = json.loads(disk_cache.get(key))
            entries[entry["name"]] = (key, entry)
    assert set(entries) == {"_double", "_triple"}
    key_a, entry_a = entries["_double"]
    entry_a["key"] = entries["_triple"][1]["key"]       # a well-formed entry, the wrong PTX
    disk_cache.put(key_a, json.dumps(entry_a))
    disk_cache.clear_memory()
    before = dict(warm.stats)
    again = kaio.kernel(_double).compile(stub)           # a new kernel object: no memory cache
    assert warm.stats["bad"] == before["bad"] + 1 and warm.stats["hits"] == before["hits"]
    assert again.artifacts["ptx"] == a.artifacts["ptx"] != b.artifacts["ptx"]
    disk_cache.clear_memory()
    assert kaio.kernel(_double).compile(stub).artifacts["ptx"] == a.artifacts["ptx"]
    assert warm.stats["hits"] == before["hits"] + 1      # the rewritten entry is right again


# --- what a first launch imports ----------------------------------------------------------------
_LOADED = '''
import json, sys
import kaio
after_import = set(sys.modules)
import kaio.backends.cuda, kaio.backends.reference, kaio.backends.hip
after_backends = set(sys.modules)
from kaio.kernels.ml.norms import softmax_kernel
print(json.dumps({"import": sorted(after_import), "backends": sorted(after_backends),
                  "norms": sorted(sys.modules)}))
'''


def test_first_launch_imports_stay_lazy():
    """``import kaio``, the backend modules and one library kernel's module load neither the
    frontend, the passes, the code generators and llvmlite, nor the autotuner, BLAS, the other
    library modules or the RAJAPerf ports: those load when used (docs/runtime.md)."""
    p = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, KAIO_BACKEND="reference"))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    never = ("kaio.frontend", "kaio.passes.constfold", "kaio.passes.expand_math", "kaio.mathlib",
             "kaio.regions.checker", "kaio.backends.ptx", "kaio.backends.llvm", "llvmlite",
             "kaio.backends.codeobject", "kaio.backends.cublas", "kaio.backends.hipblas",
             "kaio.kernels.rajaperf", "kaio.kernels.ml.attention", "kaio.kernels.ml.quant")
    for stage in ("import", "backends", "norms"):
        assert not [m for m in got[stage] if m.startswith(never)], stage
    assert "kaio.autotune" not in got["import"] and "kaio.blas" not in got["import"]
    # building IR and compile-time diagnostics: the frontend's, not a warm launch's (the
    # reference backend's own modules build IR, so only import kaio is checked here)
    assert not {"kaio.ir.builder", "kaio.ir.scalars", "kaio.regions.diagnose",
                "kaio.regions.widths"} & set(got["import"])
    assert "kaio.kernels.ml.norms" in got["norms"]


@pytest.mark.parametrize("how", ["attribute", "from-import"])
def test_lazy_kaio_attributes_load_in_a_fresh_process(how):
    """``kaio.blas`` / ``kaio.autotune`` as the first thing a process touches (the H200's
    tests/test_blas.py run alone hit a RecursionError: ``from . import blas`` inside the
    package's ``__getattr__`` asked that ``__getattr__`` again)."""
    code = ("import kaio; b, a = kaio.blas, kaio.autotune" if how == "attribute"
            else "from kaio import blas as b, autotune as a")
    code += "; print(b.__name__, a.__name__, callable(b.gemm))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, KAIO_BACKEND="reference"))
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == ["kaio.blas", "kaio.autotune", "True"]


def test_a_backend_with_its_own_compile_sees_every_compilation(disk_cache):
    """A backend whose compile is not Backend.compile (the conformance suite's recorder wraps
    one to record the IR it compiles) is never served a warm entry."""
    seen = []

    class Spy(_Stub):
        def compile(self, kernel, kernel_options=None):
            seen.append(len(list(kernel.walk())))   # the whole kernel, never a signature
            return super().compile(kernel, kernel_options)

    kaio.kernel(_double).compile(_Stub())          # writes the warm entry
    before = dict(warm.stats)
    for _ in range(2):
        disk_cache.clear_memory()
        kaio.kernel(_double).compile(Spy())
    assert len(seen) == 2 and min(seen) > 0
    assert warm.stats["hits"] == before["hits"] and warm.stats["stores"] == before["stores"]


def _installed_tree(tmp_path, version=None):
    """A wheel's layout: site/kaio/{backends,kernels/ml}/... and site/kaio-VERSION.dist-info."""
    site = tmp_path / "site"
    pkg = site / "kaio"
    for d in ("backends", "regions", "kernels/ml"):
        (pkg / d).mkdir(parents=True)
        (pkg / d / "m.py").write_text("x = 1\n")
    info = site / f"kaio-{version or kaio.__version__}.dist-info"
    info.mkdir()
    (info / "RECORD").write_text("kaio/__init__.py,sha256=...,10\n")
    roots = {str(pkg), str(pkg / "backends"), str(pkg / "regions"), str(pkg / "kernels")}
    return pkg, info / "RECORD", roots


def test_installed_wheel_is_stamped_by_its_record(tmp_path):
    pkg, record, roots = _installed_tree(tmp_path)
    first = warm.installed_record(str(pkg), roots)
    assert first is not None and str(record) in first
    assert warm.installed_record(str(pkg), roots) == first
    os.utime(record, ns=(1, 1))       # a reinstall rewrites RECORD
    second = warm.installed_record(str(pkg), roots)
    assert second != first
    record.write_text("kaio/__init__.py,sha256=...,10\nkaio/new.py,sha256=...,5\n")
    os.utime(record, ns=(1, 1))
    assert warm.installed_record(str(pkg), roots) != second


def test_checkout_or_editable_install_is_stamped_file_by_file(tmp_path):
    pkg, record, roots = _installed_tree(tmp_path, version="0.0.0-other")
    assert warm.installed_record(str(pkg), roots) is None       # no RECORD of this version
    pkg, record, roots = _installed_tree(tmp_path / "again")
    elsewhere = str(tmp_path / "checkout" / "backends")        # the editable layout's mapping
    assert warm.installed_record(str(pkg), roots | {elsewhere}) is None
    # this checkout: every file (stamped per file, so an edit misses)
    assert warm.installed_record(os.path.dirname(warm.__file__),
                                 [os.path.dirname(warm.__file__)]) is None


def _signature_cases():
    from kaio.kernels.ml.backward import column_sum_kernel
    from kaio.kernels.ml.elementwise import gelu_tanh_kernel
    from kaio.kernels.ml.gemm import gemm_kernel
    from kaio.kernels.ml.norms import softmax_kernel, softmax_resident_kernel

    @kaio.kernel(block=(32, 4))
    def blocked(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = a * x[i]
    return [(softmax_kernel("f32", "f32"), {}, True),
            (softmax_resident_kernel("f16", "f32", vec=4), {"PER": 16}, False),
            (gemm_kernel("f16", "f32", False, True), {}, False),
            (gelu_tanh_kernel("bf16"), {}, True),
            (column_sum_kernel("f16", "f32"), {}, False),
            (blocked, {}, False)]


def test_signature_json_round_trips_as_the_ir_text_does():
    """The warm entry's signature (kaio.ir.sigjson) rebuilds the kernel exactly: it prints as
    the original's signature line (partitions, index bounds, block, dtypes, locations)."""
    from kaio.ir import print_kernel
    from kaio.ir.parser import parse_kernel
    from kaio.ir.sigjson import kernel_from_json, signature_json
    for k, consts, coarsen in _signature_cases():
        ir = k.specialize_ir(consts, coarsen)
        head = print_kernel(ir).split("\n", 1)[0]
        back = kernel_from_json(json.loads(json.dumps(signature_json(ir))))
        assert print_kernel(back) == head + "\n}\n" == print_kernel(parse_kernel(head + "\n}\n"))
        assert [p.partition for p in back.params] == [p.partition for p in ir.params]
        assert dict(back.attrs) == dict(ir.attrs) and back.loc == ir.loc


def test_entry_keeps_the_signature_as_json(disk_cache):
    """A warm entry holds the signature as JSON data, not IR text; the entry's kernel launches
    checks as the frontend's does (same parameters, partitions and bounds)."""
    from kaio.cache import default_cache
    from kaio.ir import print_kernel
    from kaio.kernels.ml.norms import softmax_kernel
    stub, k = _Stub(), softmax_kernel("f32", "f32")
    k._compiled.clear()    # the factory keeps its kernel objects: forget what this one compiled
    c = k._compile(stub, {}, True)
    cache = stub.compile_cache() or default_cache()
    entries = [json.loads(cache.get(k)) for k in cache.stored_keys() if k.startswith("w")]
    assert len(entries) == 1 and "sig" in entries[0] and "ir" not in entries[0]
    cache.clear_memory()
    k._compiled.clear()
    hits = warm.stats["hits"]
    c2 = k._compile(stub, {}, True)
    assert warm.stats["hits"] == hits + 1
    assert print_kernel(c2.kernel) == print_kernel(c.kernel).split("\n", 1)[0] + "\n}\n"
