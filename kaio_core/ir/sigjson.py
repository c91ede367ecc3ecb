"""A kernel's signature -- name, parameters and their types, partitions, kernel attributes
(index bounds, block, launch dimensions), location -- as JSON data, and back.

What a launch reads of a kernel, without its body: :mod:`kaio.warm` keeps it in a warm cache
entry, and a warm first launch rebuilds the kernel from it. ``json.loads`` and a walk over the
result cost a fraction of parsing the same signature's IR text (4-7x less here; the
register-resident softmax's index bounds make 7.5 KB of it). The round trip is exact: the
rebuilt kernel prints as the original's signature line (tests/test_warm_cache.py).

Attribute values map to JSON as themselves (None, bools, ints, floats -- NaN and infinities as
``json`` writes them --, strings, lists); a dict is ``{"=": {...}}``, a dtype ``{"dt": name}``
and a structured attribute ``{"#": mnemonic, "=": {fields}}``.
"""
from __future__ import annotations

from .. import dtypes as dt
from ..dtypes import DType
from .attrs import StructAttr, build_struct, mnemonic
from .core import Block, Kernel, Loc, Param
from .parser import _Parser
from .types import INTENTS, SPACES, BufType, type_str


def signature_json(k: Kernel) -> dict:
    """The signature of ``k`` as JSON-serialisable data (:func:`kernel_from_json` reverses it)."""
    loc = k.loc
    return {"name": k.name,
            "args": [[a.name, type_str(a.type)] for a in k.args],
            "params": [[p.name, p.kind, _encode(p.partition)] for p in k.params],
            "attrs": _encode(dict(k.attrs)),
            "loc": None if loc is None else [loc.file, loc.line, loc.col, loc.end_col]}


def kernel_from_json(d: dict) -> Kernel:
    """The kernel (empty body) whose signature :func:`signature_json` gave ``d``; ValueError,
    KeyError or TypeError for data of another shape."""
    body = Block()
    for name, ty in d["args"]:   # the few short type strings: the IR text's type grammar
        body.add_arg(_arg_type(ty)).name = name
    params = [Param(name, kind, _decode(part)) for name, kind, part in d["params"]]
    if len(params) != len(body.args):
        raise ValueError(f"{len(params)} parameters for {len(body.args)} arguments")
    loc = d["loc"]
    return Kernel(d["name"], body, params, None if loc is None else Loc(*loc), _decode(d["attrs"]))


_DTYPES = {t.name: t for t in dt.ALL}


def _arg_type(text: str):
    """The type a parameter's type string (:func:`kaio.ir.types.type_str`) names: a dtype or a
    plain global buffer split at its commas (a third of the tokenizer's cost, in a warm first
    launch), anything else through the IR text's type grammar."""
    t = _DTYPES.get(text)
    if t is not None:
        return t
    if text.startswith("buf<") and text.endswith(">") and "[" not in text:
        parts = text[4:-1].split(", ")
        if len(parts) == 4 and parts[0] in _DTYPES and parts[1].isdigit() and parts[2] in SPACES \
                and parts[3] in INTENTS:
            return BufType(_DTYPES[parts[0]], int(parts[1]), parts[2], parts[3])
    return _Parser(text).type()


def _encode(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {"=": {k: _encode(x) for k, x in v.items()}}
    if isinstance(v, DType):
        return {"dt": v.name}
    if isinstance(v, StructAttr):
        return {"#": mnemonic(v), "=": {k: _encode(x) for k, x in v.attr_fields().items()}}
    raise TypeError(f"cannot encode attribute {v!r}")


_LEAVES = frozenset((str, int, float, bool, type(None)))


def _decode(v):
    t = type(v)
    if t is list:   # leaves as they are, without a call each (most of an entry's values)
        return [x if type(x) in _LEAVES else _decode(x) for x in v]
    if t is dict:
        fields = v.get("=")
        if fields is None:
            return dt.from_name(v["dt"])
        fields = {k: x if type(x) in _LEAVES else _decode(x) for k, x in fields.items()}
        name = v.get("#")
        return fields if name is None else build_struct(name, fields)
    return v
