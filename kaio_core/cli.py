"""The ``kaio`` command.

    kaio info                                   versions, backends, devices
    kaio compile FILE.py:KERNEL --target sm_90 --emit ptx [-o PATH] [--const N=4 ...]
    kaio showcase | conformance | bench ...     (dispatched to their modules when installed)
    kaio rajaperf [--kernels ...] [--variants numpy,kaio,kaio_graph,cuda] [--sizefact F] ...
                                                the RAJAPerf ports, run and reported as the suite does
    kaio bench --ml [--quick] [--ops ...] [--dtypes ...] [--out DIR]   the ML ops vs Triton, torch
    kaio bench --plot FILE.png                  a roofline of every library kernel
    kaio --version
    kaio autotune [--show] [--json] [--clear]   what the autotuner tried and chose (kaio.autotune)

``kaio compile`` needs no GPU: it imports the file, finds the ``@kaio.kernel`` and prints the
requested stage. Errors are reported as one clear line on stderr with exit status 2.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import platform
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from .backends import REGISTRY, availability, backend_class
from .backends.cublas_bindings import summary as cublas_summary
from .backends.targets import COMPILE_TARGETS, STAGES, check
from .errors import KaioError
from .launch import KernelFunction
from .version import __version__

#: subcommands owned by other modules: name -> candidate "module:function" entry points
DELEGATED = {
    "showcase": ("kaio.showcase:main",),
    "conformance": ("kaio.conformance.cli:main",),
    "bench": ("kaio.bench:main", "benchmarks.cli:main", "benchmarks:main"),
    "autotune": ("kaio.autotune:main",),
    "rajaperf": ("kaio.kernels.rajaperf.runner:main",),
}


class CliError(Exception):
    """A user error: printed without a traceback."""


# --- kaio info ----------------------------------------------------------------------------
def _backend_rows() -> list[tuple[str, bool, str]]:
    rows = []
    for name in REGISTRY:
        try:
            ok, why = availability(name)
        except Exception as e:  # a broken backend module must not break `kaio info`
            ok, why = False, f"{type(e).__name__}: {e}"
        rows.append((name, ok, why))
    return rows


def _device_rows() -> list[dict]:
    rows = []
    try:
        cuda = backend_class("cuda")
        if cuda.available()[0]:
            rows += [dict(d, backend="cuda") for d in cuda.device_info()]
    except Exception as e:
        rows.append({"backend": "cuda", "name": f"error: {e}"})
    try:
        hip = backend_class("hip")
        if hip.available()[0] and hasattr(hip, "device_info"):
            rows += [dict(d, backend="hip") for d in hip.device_info()]
    except Exception:
        pass
    return rows


def _cublas_binding() -> str:
    """How kaio.blas reaches cuBLAS here (kaio.backends.cublas_bindings.summary)."""
    try:
        return cublas_summary()
    except Exception as e:  # like a broken backend: reported, never fatal
        return f"error: {type(e).__name__}: {e}"


def cmd_info(args) -> int:
    console = Console()
    t = Table(title="kaio", show_header=False)
    t.add_row("kaio", __version__)
    t.add_row("Python", f"{platform.python_version()} ({sys.executable})")
    t.add_row("numpy", np.__version__)
    for mod in ("cuda.bindings", "llvmlite", "hip"):
        try:
            m = importlib.import_module(mod)
            t.add_row(mod, getattr(m, "__version__", "installed"))
        except Exception:
            t.add_row(mod, "not installed")
    t.add_row("cuBLAS binding", _cublas_binding())
    console.print(t)

    b = Table(title="backends")
    for col in ("backend", "available", "reason / detail"):
        b.add_column(col)
    for name, ok, why in _backend_rows():
        b.add_row(name, "[green]yes[/]" if ok else "[red]no[/]", why)
    console.print(b)

    devs = _device_rows()
    d = Table(title="devices")
    for col in ("backend", "index", "name", "cc / arch", "SMs", "memory"):
        d.add_column(col)
    for r in devs:
        d.add_row(r.get("backend", ""), str(r.get("index", "")), str(r.get("name", "")),
                  f"{r.get('cc', '')} / {r.get('arch', '')}" if "cc" in r else "",
                  str(r.get("sms", "")), f"{r['memory_gib']} GiB" if "memory_gib" in r else "")
    if not devs:
        d.add_row("-", "-", "no GPU found", "", "", "")
    console.print(d)
    return 0


# --- kaio compile -------------------------------------------------------------------------
def parse_const(text: str) -> tuple[str, object]:
    """``N=4`` -> ('N', 4); ``eps=1e-5`` -> float; ``flag=true`` -> True."""
    name, sep, raw = text.partition("=")
    name, raw = name.strip(), raw.strip()
    if not sep or not name.isidentifier() or not raw:
        raise CliError(f"--const expects NAME=VALUE, got {text!r}")
    low = raw.lower()
    if low in ("true", "false"):
        return name, low == "true"
    try:
        return name, int(raw, 0)
    except ValueError:
        pass
    try:
        return name, float(raw)
    except ValueError:
        raise CliError(f"--const {name}: {raw!r} is not an int, a float or true/false") from None


def load_kernel(spec: str):
    """Import ``path/to/file.py:kernel_name`` by path and return the KernelFunction."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise CliError(f"expected FILE.py:KERNEL, got {spec!r}")
    p = Path(path)
    if not p.is_file():
        raise CliError(f"no such file: {path}")
    mod_name = f"_kaio_cli_{abs(hash(str(p.resolve())))}"
    loader_spec = importlib.util.spec_from_file_location(mod_name, p)
    if loader_spec is None or loader_spec.loader is None:
        raise CliError(f"cannot import {path} (is it a .py file?)")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module  # dataclasses and typing look modules up by name
    sys.path.insert(0, str(p.parent.resolve()))  # let the file import its neighbours
    try:
        loader_spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    obj = getattr(module, name, None)
    if obj is None:
        found = sorted(k for k, v in vars(module).items() if isinstance(v, KernelFunction))
        hint = f"; kernels in it: {', '.join(found)}" if found else "; it defines no @kaio.kernel"
        raise CliError(f"{path} has no kernel named {name!r}{hint}")
    if not isinstance(obj, KernelFunction):
        raise CliError(f"{path}:{name} is a {type(obj).__name__}, not a @kaio.kernel function")
    return obj


def cmd_compile(args) -> int:
    try:
        target = check(args.emit, args.target)
    except ValueError as e:
        raise CliError(str(e)) from None
    consts = dict(parse_const(c) for c in args.const or [])
    k = load_kernel(args.kernel)
    known = {p.name for p in k.params if p.kind == "const"}
    unknown = sorted(set(consts) - known)
    if unknown:
        raise CliError(f"kernel '{k.name}' has no constant parameter {', '.join(unknown)}"
                       + (f" (constants: {', '.join(sorted(known))})" if known else " (it has none)"))
    missing = sorted(known - set(consts))
    if missing:
        raise CliError(f"kernel '{k.name}' needs values for its constant parameters: "
                       + ", ".join(f"--const {m}=VALUE" for m in missing))
    out = k.emit(args.emit, target, **consts)
    if args.output:
        Path(args.output).write_bytes(out if isinstance(out, bytes) else out.encode())
        print(f"wrote {args.emit} of kernel '{k.name}' for {target or 'the IR'} to {args.output}",
              file=sys.stderr)
    elif isinstance(out, bytes):
        raise CliError(f"--emit {args.emit} is binary; write it to a file with -o PATH")
    else:
        sys.stdout.write(out if out.endswith("\n") else out + "\n")
    return 0


# --- delegated subcommands ----------------------------------------------------------------
def _delegate(name: str, argv: list[str]) -> int:
    for entry in DELEGATED[name]:
        mod, _, fn = entry.partition(":")
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and (mod == e.name or mod.startswith(e.name + ".")):
                continue  # this candidate is not installed: try the next one
            raise
        return int(getattr(m, fn)(argv) or 0)
    raise CliError(f"'kaio {name}' is not available in this installation "
                   f"(none of {', '.join(DELEGATED[name])} could be imported)")


#: one line per delegated subcommand for ``kaio --help`` (their own parsers say the rest)
DELEGATED_HELP = {
    "showcase": "run the kernel library on the best backend, validate it and report speed",
    "conformance": "run every kernel on every target and write the conformance report",
    "bench": "GPU benchmarks side by side, and a roofline picture of the kernel library",
    "autotune": "show or clear the autotuner's records",
    "rajaperf": "run the RAJAPerf ports the way the RAJA Performance Suite runs them",
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of ``kaio`` and its own subcommands; delegated ones only appear by name here
    (``kaio NAME --help`` reaches their module's parser)."""
    ap = argparse.ArgumentParser(prog="kaio", description="kaio: GPU kernels in Python, race-free, "
                                 "on NVIDIA and AMD.",
                                 epilog="Run 'kaio COMMAND --help' for the options of a command.")
    ap.add_argument("--version", action="version", version=f"kaio {__version__}",
                    help="print kaio's version and exit")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("info", help="versions, backends and devices",
                   description="Print kaio's version, the Python packages it uses, which backends "
                               "are available (and why not), and the GPUs found.")
    c = sub.add_parser("compile", help="print one compilation stage of a kernel (no GPU needed)",
                       description="Import a Python file, find a @kaio.kernel in it and print "
                                   "(or write) one compilation stage: the kaio IR, PTX, LLVM IR or "
                                   "an AMD code object. Needs no GPU.",
                       epilog="Example: kaio compile kernels.py:saxpy --target sm_90 --emit ptx")
    c.add_argument("kernel", metavar="FILE.py:KERNEL",
                   help="the kernel: a path to a Python file, a colon, and the name of a "
                        "@kaio.kernel function defined in that file (e.g. kernels.py:saxpy)")
    c.add_argument("--target", default=None,
                   help=f"the GPU to compile for, one of: {', '.join(COMPILE_TARGETS)} "
                        "(default: the stage's usual target)")
    c.add_argument("--emit", default="ptx", choices=STAGES, help="stage to print (default: ptx)")
    c.add_argument("-o", "--output", metavar="PATH",
                   help="write to this file instead of stdout (needed for binary stages)")
    c.add_argument("--const", action="append", metavar="NAME=VALUE",
                   help="value of a kaio.Const parameter (int, float, true/false); repeatable")
    for name in DELEGATED:
        sub.add_parser(name, help=DELEGATED_HELP.get(name, f"run kaio {name}"), add_help=False)
    return ap


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in DELEGATED:
        try:
            return _delegate(argv[0], argv[1:])
        except CliError as e:
            print(f"kaio {argv[0]}: error: {e}", file=sys.stderr)
            return 2
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help()
        return 0
    try:
        return {"info": cmd_info, "compile": cmd_compile}[args.command](args)
    except CliError as e:
        print(f"kaio {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # compile errors from the kernel itself: show them, not a traceback
        if isinstance(e, KaioError):
            print(f"kaio {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
