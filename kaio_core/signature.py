"""Kernel signatures: what each parameter of a ``@kaio.kernel`` function is.

``parse_signature`` reads the annotations once at decoration time; ``bind`` matches call
arguments to parameters (missing / extra arguments are errors).
"""
from __future__ import annotations

import inspect
import typing

from . import dtypes as dt
from .errors import ArgumentTypeError, CompileError
from .lang import BufferSpec, ConstSpec
from .records import frozen


@frozen
class ParamInfo:
    """One kernel parameter. ``kind``: 'scalar' (spec is a DType), 'buffer' (BufferSpec),
    'const' (ConstSpec)."""

    name: str
    kind: str
    spec: object
    default: object = inspect.Parameter.empty


def parse_signature(fn) -> list[ParamInfo]:
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # annotations that are not plain types (kaio.In[...] instances)
        hints = dict(getattr(fn, "__annotations__", {}))
    params = []
    code = fn.__code__
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise CompileError(f"*{p.name} / **{p.name} parameters are not supported in kernels",
                               kernel=fn.__name__, file=code.co_filename, line=code.co_firstlineno,
                               hint="list every parameter explicitly")
        ann = hints.get(p.name, p.annotation)
        if isinstance(ann, str):
            ann = eval(ann, fn.__globals__)  # postponed annotations (from __future__ import ...)
        if isinstance(ann, dt.DType):
            params.append(ParamInfo(p.name, "scalar", ann, p.default))
        elif isinstance(ann, BufferSpec):
            params.append(ParamInfo(p.name, "buffer", ann, p.default))
        elif isinstance(ann, ConstSpec):
            params.append(ParamInfo(p.name, "const", ann, p.default))
        else:
            what = "has no annotation" if ann is inspect.Parameter.empty else f"is annotated {ann!r}"
            raise CompileError(
                f"parameter '{p.name}' {what}", kernel=fn.__name__, file=code.co_filename,
                line=code.co_firstlineno,
                hint="annotate every kernel parameter: a dtype (kaio.f32), a buffer "
                     "(kaio.In[kaio.f32], kaio.Region[kaio.f32]) or kaio.Const[int]")
    return params


def bind(kernel_name: str, params: list[ParamInfo], args: tuple, kwargs: dict) -> list:
    """Match arguments to parameters in order; ArgumentTypeError (a TypeError) on missing or
    extra arguments."""
    if len(args) > len(params):
        raise ArgumentTypeError(f"kernel '{kernel_name}' takes {len(params)} arguments "
                                f"({', '.join(p.name for p in params)}) but {len(args)} were given")
    values = list(args) + [inspect.Parameter.empty] * (len(params) - len(args))
    names = [p.name for p in params]
    for k, v in kwargs.items():
        if k not in names:
            raise ArgumentTypeError(f"kernel '{kernel_name}' has no parameter '{k}' "
                                    f"(parameters: {', '.join(names)})")
        i = names.index(k)
        if i < len(args):
            raise ArgumentTypeError(f"kernel '{kernel_name}': parameter '{k}' given twice")
        values[i] = v
    for i, p in enumerate(params):
        if values[i] is inspect.Parameter.empty:
            if p.default is inspect.Parameter.empty:
                raise ArgumentTypeError(f"kernel '{kernel_name}': missing argument for parameter "
                                        f"'{p.name}' ({_describe(p)})")
            values[i] = p.default
    return values


def _describe(p: ParamInfo) -> str:
    return repr(p.spec)
