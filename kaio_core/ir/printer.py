"""Text form of the IR. ``print_kernel`` and :mod:`kaio.ir.parser` round-trip exactly.

Every op prints in one generic shape::

    %r0, %r1 = opcode %a, %b {attr = value, ...} : t0, t1 (%arg: t) { ...region... } loc("f.py":3:8)

Regions print as ``(%args) { ops }``; value names come from the frontend's hints (``%i``,
``%acc``) made unique with a numeric suffix.
"""
from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING

from ..dtypes import DType
from .attrs import StructAttr, mnemonic
from .types import type_str

if TYPE_CHECKING:  # annotations only: kaio.ir.core prints kernels with this module
    from .core import Block, Kernel, Op, Value

_NAME_OK = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


def format_attr(v) -> str:
    """The text of an attribute value: ``true``, ``3``, ``-0.0``, ``"s"``, ``[..]``,
    ``{k = v, ..}``, ``none``, a dtype by name (``f32``), a structured attribute as
    ``#name{field = v, ..}``."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {format_attr(x)}" for k, x in v.items()) + "}"
    if v is None:
        return "none"
    if isinstance(v, DType):
        return v.name
    if isinstance(v, StructAttr):
        return "#" + mnemonic(v) + format_attr(v.attr_fields())
    raise TypeError(f"cannot print attribute {v!r}")


class Printer:
    def __init__(self, with_locs: bool = True):
        self.names: dict[int, str] = {}
        self.used: set[str] = set()
        self.counter = 0
        self.with_locs = with_locs

    def name(self, v: Value) -> str:
        n = self.names.get(v.id)
        if n is None:
            hint = v.name if v.name and _NAME_OK.match(v.name) else None
            if hint and hint not in self.used:
                n = hint
            elif hint:
                k = 1
                while f"{hint}_{k}" in self.used:
                    k += 1
                n = f"{hint}_{k}"
            else:
                while str(self.counter) in self.used:
                    self.counter += 1
                n = str(self.counter)
                self.counter += 1
            self.used.add(n)
            self.names[v.id] = n
        return "%" + n

    def op(self, op: Op, indent: str, out: list[str]) -> None:
        s = indent
        if op.results:
            s += ", ".join(self.name(r) for r in op.results) + " = "
        s += op.opcode
        if op.operands:
            s += " " + ", ".join(self.name(v) for v in op.operands)
        if op.attrs:
            s += " " + format_attr(op.attrs)
        if op.results:
            s += " : " + ", ".join(type_str(r.type) for r in op.results)
        for r in op.regions:
            s += " " + self.region_head(r) + " {"
            out.append(s)
            self.block(r, indent + "  ", out)
            s = indent + "}"
        s += self.loc(op.loc)
        out.append(s)

    def loc(self, loc) -> str:
        if loc is None or not self.with_locs:
            return ""
        end = f":{loc.end_col}" if loc.end_col is not None else ""
        return f" loc({json.dumps(loc.file)}:{loc.line}:{loc.col}{end})"

    def region_head(self, b: Block) -> str:
        return "(" + ", ".join(f"{self.name(a)}: {type_str(a.type)}" for a in b.args) + ")"

    def block(self, b: Block, indent: str, out: list[str]) -> None:
        for op in b.ops:
            self.op(op, indent, out)

    def kernel(self, k: Kernel) -> str:
        out: list[str] = []
        meta = {p.name: {"kind": p.kind, **({"partition": p.partition} if p.partition is not None else {})}
                for p in k.params}
        head = f"kernel @{k.name}{self.region_head(k.body)} params {format_attr(meta)}"
        if k.attrs:
            head += " attrs " + format_attr(k.attrs)
        head += self.loc(k.loc)
        out.append(head + " {")
        self.block(k.body, "  ", out)
        out.append("}")
        return "\n".join(out) + "\n"


def print_kernel(k: Kernel, with_locs: bool = True) -> str:
    """The kernel's IR as text (parseable by :func:`kaio.ir.parser.parse_kernel`)."""
    return Printer(with_locs).kernel(k)
