"""The warm path: a kernel's compiled code from the disk cache without running the frontend.

The compile cache (:mod:`kaio.cache`) is keyed on the printed IR, which only the frontend can
produce, so on its own a fresh process would parse and lower every kernel's Python source just
to find its code on disk. This module adds a first-level key computed from the Python function
itself (:func:`warm_key`):

- the function's code object (bytecode, constants, names, line table, file and first line)
  and its source lines as the file holds them now (a file of kaio's own, the kernel library's,
  is covered by the package stamp below, which any edit to it changes: not read again);
- the value of every global and closure name it reads, and, for each ``@kaio.func`` among
  them, the same for that function, transitively (:func:`value_print`);
- its parameters (names, kinds, annotations, defaults), the Const values of this
  specialisation and whether kaio picks the launch shape (coarsening);
- the compile options (target, warp width, codegen, PTX version, fast math, checked mode, ...)
  and the declared block;
- kaio's version, the Python version and a stamp of kaio's own source files (path, size and
  modification time of each, :func:`package_stamp`), so any edit to a kaio checkout misses
  (an installed wheel: its dist-info RECORD, which every install rewrites).

It is conservative: a value that has no stable fingerprint (a list, a user object, a module
other than kaio's, ``math`` or numpy) makes the kernel take the frontend path, as before.

Under that key the cache holds one JSON text (:func:`store`): the kernel's name, the
coarsening factor, the checked IR as launched -- its signature only (parameters, partitions,
index bounds, declared block, launch dimensions: all a launch checks and the loaders read) as
JSON data (:mod:`kaio.ir.sigjson`), the whole kernel as IR text in checked mode (whose fault
messages walk the body) -- and the second-level key of the loadable artifact (PTX, HSACO), or,
for the reference backend, the lowered IR as text (which the interpreter runs; those entries go
to the default cache, the reference backend keeping nothing in it otherwise). A hit
(:func:`lookup`) reads both entries, each verified on read by the cache (header, key, length,
sha256), rebuilds the kernel's signature (or parses the IR text) and loads the artifact (the
CUDA backend: the cubin the driver made of the PTX in an earlier process,
:mod:`kaio.backends.cuda_cubin`); anything missing, damaged or inconsistent is a miss, and the
frontend path rebuilds and rewrites it.
"""
from __future__ import annotations

import builtins
import gc
import hashlib
import inspect
import json
import linecache
import os
import sys
import threading
import types

import numpy as np

from . import cache as _cache_module
from .backends import Backend, Compiled
from .cache import cache_key, default_cache
from .config import settings
from .dtypes import DType
from .ir import print_kernel
from .ir.parser import ParseError, parse_kernel
from .ir.sigjson import kernel_from_json, signature_json
from .lang import BufferSpec, ConstSpec, DeviceFunction, Intrinsic, _BufferIntent, _Const
from .version import __version__

#: bump when the entry's layout or the key's contents change
FORMAT = 3

#: counters for tests and benchmarks: warm hits, misses, entries refused on read, stores, and
#: kernels whose key could not be computed (a value with no stable fingerprint)
stats = {"hits": 0, "misses": 0, "bad": 0, "stores": 0, "unkeyed": 0}


class Unstable(Exception):
    """A value the key cannot fingerprint stably across processes."""


# --- the package stamp -------------------------------------------------------------------------
_STAMP: str | None = None
#: (pid, thread, [(stamp, covered)]) of the thread computing the stamp since ``import kaio``
#: (prefetch_stamp)
_PREFETCH: tuple | None = None


def package_stamp() -> str:
    """sha256 over kaio's version, the Python version and kaio's own files, computed once per
    process: every .py file's (path, size, mtime) in a source checkout or editable install (the
    frontend, the passes, the race checker, the backends, the kernel library) -- cheaper than
    hashing their contents (a stat per file) and as safe here: an edited file changes its
    stamp, and a stamp that changed for nothing costs one frontend compile; in an installed
    wheel, its dist-info RECORD, rewritten by every install (:func:`installed_record`): one
    stat instead of one per file. In a checkout the stat calls start in a thread at ``import
    kaio`` (:func:`prefetch_stamp`); this waits for it."""
    global _STAMP, _COVERED
    if _STAMP is None:
        got = None
        pre = _PREFETCH
        if pre is not None and pre[0] == os.getpid():   # a forked child computes its own
            pre[1].join()
            got = pre[2][0] if pre[2] else None
        stamp, covered = got if got is not None else _stamp(_stamp_roots())
        _STAMP, _COVERED = stamp, covered
    return _STAMP


#: the files the package stamp covers: a set of paths (a checkout, stamped file by file) or a
#: tuple of folders (an installed wheel, stamped by its RECORD); None until it is computed
_COVERED = None


def _stamp_roots() -> tuple:
    """(kaio's package folder, every folder of kaio's own modules)."""
    package = os.path.dirname(os.path.abspath(__file__))
    roots = {package}
    for name in ("kaio.backends", "kaio.regions", "kaio.kernels"):
        mod = sys.modules.get(name)
        paths = getattr(mod, "__path__", None) if mod is not None else _spec_paths(name)
        roots.update(os.path.abspath(p) for p in paths or ())
    return package, roots


def _stamp(where: tuple) -> tuple:
    """(the stamp, the files it covers: see :data:`_COVERED`)."""
    package, roots = where
    h = hashlib.sha256(f"{__version__} {sys.version_info[:2]}".encode())
    record = installed_record(package, roots)
    if record is not None:
        h.update(record.encode())
        return h.hexdigest(), tuple(sorted(r + os.sep for r in roots))
    covered = set()
    for root in sorted(roots):
        files = _files(root)
        covered.update(path for path, _, _ in files)
        h.update("".join(f"{path}\0{size}\0{mtime}\n" for path, size, mtime in files).encode())
    return h.hexdigest(), frozenset(covered)


def _stamped(path: str) -> bool:
    """Whether file ``path`` is one the package stamp covers (a module of kaio's own: the kernel
    library's kernels), so that any edit to it changes the stamp."""
    if _COVERED is None:
        package_stamp()
    covered = _COVERED
    if covered is None:   # a stamp set by hand (tests): nothing known to be covered
        return False
    if isinstance(covered, tuple):
        return path.endswith(".py") and os.path.abspath(path).startswith(covered)
    return path in covered


def prefetch_stamp() -> None:
    """Start the package stamp of a source checkout in a thread (at ``import kaio``): its
    ~170 ``stat`` calls (about 1 ms) then overlap what a process does before its first launch
    -- the rest of its imports, its arrays, the driver's start (``cuInit`` and the context,
    100+ ms on an H200, run with the GIL released) -- instead of adding to that launch. An
    installed wheel's stamp is one stat: computed at once. Nothing starts where the disk cache
    is off (no warm key is computed). The folders are found here, in the importing thread
    (the thread imports nothing); the thread leaves its result for :func:`package_stamp`,
    which is the one to set it."""
    global _PREFETCH
    if _STAMP is not None or _PREFETCH is not None or settings().cache_disable:
        return
    where = _stamp_roots()
    if installed_record(*where) is not None:
        package_stamp()
        return
    out: list = []
    t = threading.Thread(target=lambda: out.append(_stamp(where)), name="kaio-package-stamp",
                         daemon=True)
    try:
        t.start()
    except RuntimeError:   # no thread to be had (a limit on threads): package_stamp computes it
        return
    _PREFETCH = (os.getpid(), t, out)


# the compile cache keeps the compiler's fingerprint under this stamp (kaio.cache sits below
# this module: it is handed the function)
_cache_module.stamp_source = package_stamp


def installed_record(package: str, roots) -> str | None:
    """The stamp text of a kaio installed from a wheel: the path, size and mtime of its
    ``kaio-VERSION.dist-info/RECORD`` next to the package folder (every install writes it
    anew); None where kaio is not installed that way (a source checkout, an editable install:
    their files live outside the folder that holds the dist-info). A file edited by hand
    inside an installed kaio is not seen: edit a checkout instead."""
    if not all(r == package or r.startswith(package + os.sep) for r in roots):
        return None
    record = os.path.join(os.path.dirname(package), f"kaio-{__version__}.dist-info", "RECORD")
    try:
        st = os.stat(record)
    except OSError:
        return None
    return f"{record}\0{st.st_size}\0{st.st_mtime_ns}\n"


def _spec_paths(name: str):
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return None if spec is None else spec.submodule_search_locations


def _files(root: str):
    out = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            entries = list(os.scandir(d))
        except OSError:
            continue
        for e in entries:
            name = e.name
            if name.endswith(".py"):
                try:
                    st = e.stat()
                except OSError:   # replaced or removed meanwhile: stamped as missing
                    out.append((e.path, -1, -1))
                    continue
                out.append((e.path, st.st_size, st.st_mtime_ns))
            elif name != "__pycache__" and e.is_dir(follow_symlinks=False):
                stack.append(e.path)
    return sorted(out)


# --- fingerprints of functions and values ------------------------------------------------------
def function_print(fn, _active: dict | None = None) -> str:
    """sha256 hex of a Python function as the frontend would see it: its code, its source
    lines, and the fingerprint of every global and closure name it reads (``@kaio.func``
    callees recursively). Raises :class:`Unstable` for a value with no stable fingerprint."""
    active = {} if _active is None else _active
    code = fn.__code__
    if code in active:   # recursion (the frontend refuses it; the key just has to terminate)
        return "recursive:" + code.co_name
    active[code] = True
    h = hashlib.sha256()
    codes = list(_codes(code))
    for c in codes:
        _code_bytes(h, c)
    # the lines as the file holds them now; a file of kaio's own (a library kernel) is in the
    # package stamp already, which changes with any edit to it: not read again here
    h.update(b"stamped" if _stamped(code.co_filename) else _source(code, codes))
    names = sorted({n for c in codes for n in c.co_names})
    glb = fn.__globals__
    for n in names:
        if n in glb:
            h.update(f"\0g {n}={value_print(glb[n], active)}".encode())
        else:
            h.update(f"\0g {n}:{'builtin' if hasattr(builtins, n) else 'undefined'}".encode())
    cells = fn.__closure__ or ()
    for n, cell in zip(code.co_freevars, cells):
        try:
            v = cell.cell_contents
        except ValueError:
            h.update(f"\0c {n}:empty".encode())
            continue
        h.update(f"\0c {n}={value_print(v, active)}".encode())
    h.update(f"\0d {value_print(fn.__defaults__ or (), active)}".encode())
    del active[code]
    return h.hexdigest()


def _codes(code):
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _code_bytes(h, c) -> None:
    h.update(c.co_code)
    h.update(getattr(c, "co_linetable", b"") or b"")
    consts = [_const(k) for k in c.co_consts if not isinstance(k, types.CodeType)]
    h.update(repr((c.co_name, c.co_filename, c.co_firstlineno, c.co_argcount,
                   c.co_kwonlyargcount, c.co_flags, c.co_names, c.co_varnames, c.co_freevars,
                   c.co_cellvars, consts)).encode())


def _const(k) -> str:
    if isinstance(k, frozenset):   # iteration order follows string hashes: per process
        return "frozenset(" + ",".join(sorted(_const(x) for x in k)) + ")"
    if isinstance(k, tuple):
        return "(" + ",".join(_const(x) for x in k) + ")"
    return f"{type(k).__name__}:{k!r}"


def _source(code, codes) -> bytes:
    """The lines of the file the function spans, as the file is now (the frontend reads these:
    a file edited since the import misses, and the frontend reports it). Read as bytes, split
    at the line ends Python counts (``\\n``, ``\\r\\n``, ``\\r``): a third of linecache's cost,
    which decodes the whole file through ``tokenize``; a function whose file is not on disk
    (a notebook cell, whose lines linecache holds) is read through linecache, as before."""
    last = code.co_firstlineno
    for c in codes:
        ends = [ln for _, _, ln in c.co_lines() if ln is not None]
        if ends:
            last = max(last, max(ends))
    lines = _file_lines(code.co_filename)
    if lines is None:
        linecache.checkcache(code.co_filename)   # as inspect does: a rewritten file is read again
        return "".join(linecache.getlines(code.co_filename)[code.co_firstlineno - 1:last]).encode()
    return b"".join(lines[code.co_firstlineno - 1:last])


_LINES: dict = {}   # path -> ((size, mtime), lines): a file read once while it is unchanged


def _file_lines(path: str):
    """The lines of file ``path`` as bytes, or None where it cannot be read."""
    try:
        st = os.stat(path)
        stamp = (st.st_size, st.st_mtime_ns)
        got = _LINES.get(path)
        if got is not None and got[0] == stamp:
            return got[1]
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    lines = data.splitlines(keepends=True)
    if len(data) == stamp[0]:   # not rewritten while read
        _LINES[path] = (stamp, lines)
    return lines


_EMPTY = inspect.Parameter.empty
_PLAIN = (type(None), bool, int, float, complex, str, bytes)
_MODULES = ("math",)   # besides kaio's own: their contents are fixed by the Python version


def value_print(v, active: dict | None = None) -> str:
    """A string standing for ``v`` in every process, or :class:`Unstable`."""
    t = type(v)
    if t in _PLAIN:
        return f"{t.__name__}:{v!r}"
    if t is tuple:
        return "(" + ",".join(value_print(x, active) for x in v) + ")"
    mod = getattr(t, "__module__", "") or ""
    if mod.startswith("kaio."):
        return _kaio_value(v, t, active)
    if isinstance(v, types.ModuleType):
        if v.__name__ == "kaio" or v.__name__.startswith("kaio.") or v.__name__ in _MODULES:
            return "module:" + v.__name__
        if v.__name__ == "numpy":
            return "module:numpy " + v.__version__
        raise Unstable(f"module {v.__name__}")
    if isinstance(v, (types.FunctionType, types.BuiltinFunctionType, type)):
        vm = getattr(v, "__module__", "") or ""
        if vm == "kaio" or vm.startswith("kaio.") or vm in ("builtins",) + _MODULES:
            return f"object:{vm}.{v.__qualname__}"
        raise Unstable(f"{vm}.{getattr(v, '__qualname__', '?')}")
    if t.__module__ == "numpy":
        if isinstance(v, np.generic):
            return f"np:{v.dtype.str}:{v.tobytes().hex()}"
        if isinstance(v, np.dtype):
            return f"npdtype:{v.str}"
    raise Unstable(t.__name__)


def _kaio_value(v, t, active) -> str:
    """kaio's own objects: dtypes and intrinsics by name, partitions and annotations by their
    spec, ``@kaio.func`` functions by :func:`function_print`."""
    if isinstance(v, DeviceFunction):
        return "func:" + function_print(v.fn, active)
    if isinstance(v, Intrinsic):
        return "intrinsic:" + v.name
    if isinstance(v, DType):
        return "dtype:" + v.name
    spec = getattr(v, "spec", None)
    if callable(spec) and hasattr(v, "owned_spec"):      # a partition (kaio.regions)
        return f"partition:{t.__qualname__}:{spec()}"
    if isinstance(v, (BufferSpec, ConstSpec)):
        return "spec:" + repr(v)
    if isinstance(v, _BufferIntent):
        return "intent:" + v.intent
    if isinstance(v, _Const):
        return "const"
    raise Unstable(f"{t.__module__}.{t.__qualname__}")


def _param_print(p) -> str:
    default = "empty" if p.default is _EMPTY else value_print(p.default)
    return f"{p.name}:{p.kind}:{p.spec!r}:{default}"


# --- the key ----------------------------------------------------------------------------------
def function_key(kfn) -> str | None:
    """The kernel's part of the warm key (function, callees, values read, parameters), kept
    on the kernel object: like its in-memory IR cache, the values it read at its first
    compilation in this process are the ones it keeps. None: not keyable (see module doc)."""
    fp = kfn.__dict__.get("_warm_print", False)
    if fp is False:
        try:
            fp = hashlib.sha256(json.dumps([
                function_print(kfn.fn), [_param_print(p) for p in kfn.params]]).encode()).hexdigest()
        except Unstable:
            fp = None
            stats["unkeyed"] += 1
        kfn._warm_print = fp
    return fp


def warm_key(kfn, options, consts: dict, coarsen: bool) -> str | None:
    """The first-level key of one compilation of kernel ``kfn`` (a KernelFunction) with
    CompileOptions ``options``, Const values ``consts`` and the coarsening request; None
    when it cannot be computed."""
    fp = function_key(kfn)
    if fp is None:
        return None
    try:
        cs = sorted((k, value_print(v)) for k, v in consts.items())
    except Unstable:
        return None
    blob = json.dumps({"format": FORMAT, "stamp": package_stamp(), "fn": fp, "consts": cs,
                       "coarsen": bool(coarsen), "block": kfn.options.block,
                       "options": options.key()}, sort_keys=True, default=str)
    return "w" + hashlib.sha256(blob.encode()).hexdigest()[1:]


# --- entries ----------------------------------------------------------------------------------
def _needs_body(options) -> bool:
    """Whether a launch reads the checked IR's body: checked mode's fault messages find the
    faulting access in it (the interpreter runs the lowered kernel, kept whole)."""
    return options.checked


def store(cache, key: str, compiled, frontend_ir, elems, target) -> None:
    """Write the warm entry of ``compiled`` (just built through the frontend from IR kernel
    ``frontend_ir``) under ``key``; ``elems``: its coarsening factor (None: none)."""
    options = compiled.options
    entry = {"format": FORMAT, "name": compiled.kernel.name, "elems": elems}
    if _needs_body(options):
        entry["ir"] = print_kernel(compiled.kernel)
    else:   # as JSON data: cheaper to read back than the signature line's IR text
        entry["sig"] = signature_json(compiled.kernel)
    if target.family == "reference":
        entry["lowered"] = print_kernel(compiled.artifacts["lowered"])
    else:
        # the artifact's own key, as kaio.backends.targets.build computed it (and kept)
        entry["key"] = (getattr(compiled.artifacts, "cache_key", None)
                        or cache_key(print_kernel(frontend_ir), options.target, options.key()))
        entry["loads"] = target.loads
        if cache.get(entry["key"]) is None:
            return   # not in the cache (a disk error, a cache that keeps nothing)
    cache.put(key, json.dumps(entry))
    stats["stores"] += 1


def lookup(cache, key: str, backend, options, target):
    """``(Compiled, elems)`` from the warm entry under ``key``, or None (a miss: no entry, or
    one that is damaged, inconsistent or points to a missing artifact)."""
    text = cache.get(key)
    if text is None:
        stats["misses"] += 1
        return None
    try:
        entry = json.loads(text)
        if entry["format"] != FORMAT:
            raise ValueError(f"format {entry['format']}")
        kernel = kernel_from_json(entry["sig"]) if "sig" in entry else parse_kernel(entry["ir"])
        if kernel.name != entry["name"]:
            raise ValueError(f"kernel {kernel.name}, entry for {entry['name']}")
        if target.family == "reference":
            loaded = parse_kernel(entry["lowered"])
            if loaded.name != kernel.name or len(loaded.params) != len(kernel.params):
                raise ValueError("the lowered kernel is another kernel's")
        else:
            loaded = cache.get(entry["key"])
            if loaded is not None and not _names(loaded, kernel):
                raise ValueError("the artifact does not define the kernel's entry point")
    except (ValueError, KeyError, TypeError, ParseError):
        stats["bad"] += 1     # the cache verified the bytes: an entry of another layout
        return None
    if loaded is None:
        stats["misses"] += 1  # the artifact is gone: the frontend path rebuilds both
        return None
    from .backends.targets import Artifacts  # lazy: import time, ~9 ms (the target table)
    arts = Artifacts(ir=kernel)
    arts[entry.get("loads", target.loads)] = loaded
    compiled = Compiled(kernel, arts, backend.load(kernel, arts, options), options)
    stats["hits"] += 1
    return compiled, entry["elems"]


def _names(artifact, kernel) -> bool:
    """Whether the PTX text or code object names the kernel's entry point (a cheap check that
    the entry and the artifact it points to belong together)."""
    from .backends.abi import entry_name  # lazy: import time, ~4 ms
    entry = entry_name(kernel.name)
    return (entry in artifact) if isinstance(artifact, str) else (entry.encode() in artifact)


def compile_kernel(kfn, backend, consts: dict, coarsen: bool):
    """Compile kernel ``kfn`` (a KernelFunction) for ``backend`` with these Const values
    (``coarsen``: kaio picks the launch shape), through the warm entry when there is one;
    otherwise through the frontend, then write the entry. Returns the Compiled object."""
    from .backends.targets import get_target  # lazy: import time, ~9 ms (the target table)
    options = backend.compile_options(kfn.options)
    target = get_target(options.target)
    # the reference backend keeps nothing in the compile cache; its warm entries (lowered IR
    # as text) go to the default one
    cache = backend.compile_cache() if target.family != "reference" else default_cache()
    key = None
    # a backend whose compile is not Backend.compile (a wrapper recording what it compiles, as
    # the conformance suite's, or a subclass of its own) sees every compilation
    if cache is not None and cache.disk and type(backend).compile is Backend.compile:
        key = warm_key(kfn, options, consts, coarsen)
    if key is not None:
        got = lookup(cache, key, backend, options, target)
        if got is not None:
            compiled, elems = got
            if coarsen and "_coarsen_k" not in kfn.__dict__:
                kfn._coarsen_k = elems
            return compiled
    # the frontend, the passes and the code generator allocate many small objects that stay
    # alive until the compile ends: the cyclic collector's passes over them (and over what the
    # imports of a first compile create) are pure cost (1-2 ms of a cold compile here)
    was_on = gc.isenabled()
    gc.disable()
    try:
        elems = kfn.coarsening() if coarsen else None
        ir = kfn.specialize_ir(consts, bool(elems))
        compiled = backend.compile(ir, kfn.options)
    finally:
        if was_on:
            gc.enable()
    if key is not None:
        store(cache, key, compiled, ir, elems, target)
    return compiled


prefetch_stamp()   # at import kaio: see prefetch_stamp
