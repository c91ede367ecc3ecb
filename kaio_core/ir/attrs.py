"""Typed attributes of ops, kernels and parameters.

Every attribute key an op may carry is declared in :data:`kaio.ir.ops.SPECS` with a type from
this module (:class:`OneOf`, :class:`Int`, :class:`Flag`, :class:`TypeAttr`, :class:`Shape`,
:class:`Scalar`, :class:`Name`); kernel attributes are declared in :data:`KERNEL_ATTRS`. An op's
``attrs`` is an :class:`Attrs` mapping that checks every key and value against those types when
it is built or changed, so a pass that writes a misspelt key or a wrongly typed value fails at
the spot. Values are immutable (a shape is a tuple, a dtype attribute a
:class:`~kaio.dtypes.DType`), so copying an op copies its attrs with a shallow ``dict``.

Structured values -- a Region's partition -- are :class:`StructAttr` subclasses: frozen
dataclasses registered under a mnemonic with :func:`register`, printed ``#name{field = v, ...}``
and rebuilt by the parser from the registry (the IR does not import the packages defining them).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from ..dtypes import DType
from ..records import frozen


class AttrError(TypeError):
    """An attribute key that the op does not declare, or a value of the wrong type."""


class AttrType:
    """A declared attribute type. ``check(v)`` returns ``v`` in its stored (immutable) form, or
    ``None`` when ``v`` is not of this type; ``describe()`` says what is expected."""

    def check(self, v):
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@frozen
class OneOf(AttrType):
    """A name from a fixed set (``pred``, ``fn``, ``mode``, ``op``)."""

    choices: tuple

    def check(self, v):
        return v if isinstance(v, str) and v in self.choices else None

    def describe(self):
        return "one of " + ", ".join(self.choices)


@frozen
class Int(AttrType):
    """A Python int (not a bool) in ``lo..hi``; ``hi`` None means unbounded."""

    lo: int
    hi: int | None = None

    def check(self, v):
        ok = type(v) is int and v >= self.lo and (self.hi is None or v <= self.hi)
        return v if ok else None

    def describe(self):
        if self.hi == self.lo:
            return f"the int {self.lo}"
        return f"an int in {self.lo}..{self.hi}" if self.hi is not None else f"an int >= {self.lo}"


class Flag(AttrType):
    """A bool."""

    def check(self, v):
        return v if isinstance(v, bool) else None

    def describe(self):
        return "a bool"


class TypeAttr(AttrType):
    """A scalar dtype (a :class:`~kaio.dtypes.DType`), printed as its name."""

    def check(self, v):
        return v if isinstance(v, DType) else None

    def describe(self):
        return "a dtype"


class Shape(AttrType):
    """A non-empty static shape of positive ints, stored as a tuple."""

    def check(self, v):
        if isinstance(v, (list, tuple)) and v and all(type(x) is int and x >= 1 for x in v):
            return tuple(v)
        return None

    def describe(self):
        return "a non-empty list of positive ints"


class Scalar(AttrType):
    """A constant's value: a bool, int or float (whether it is canonical for the result dtype
    is the verifier's check, which knows the dtype)."""

    def check(self, v):
        return v if type(v) in (bool, int, float) else None

    def describe(self):
        return "a bool, int or float"


class Name(AttrType):
    """An identifier (a parameter name)."""

    def check(self, v):
        return v if isinstance(v, str) and v.isidentifier() else None

    def describe(self):
        return "an identifier"


class Text(AttrType):
    """Any string (a message fragment)."""

    def check(self, v):
        return v if isinstance(v, str) else None

    def describe(self):
        return "a string"


class Records(AttrType):
    """A tuple of structured attributes all registered under one mnemonic (the launch facts
    :mod:`kaio.regions.bounds` records on a checked kernel)."""

    def __init__(self, name: str):
        self.name = name

    def check(self, v):
        if isinstance(v, (list, tuple)) and all(
                isinstance(x, StructAttr) and _MNEMONICS.get(type(x)) == self.name for x in v):
            return tuple(v)
        return None

    def describe(self):
        return f"a list of #{self.name} attributes"


def convert(schema: dict | None, key: str, value, what: str):
    """``value`` checked against ``schema[key]`` (its stored form); AttrError naming ``what``
    when the key is not declared or the value has the wrong type. A ``None`` schema (an
    unknown opcode, which the verifier reports) accepts anything."""
    if schema is None:
        return value
    t = schema.get(key)
    if t is None:
        known = ", ".join(schema) or "none"
        raise AttrError(f"{what} has no attribute {key!r} (its attributes: {known})")
    got = t.check(value)
    if got is None:
        raise AttrError(f"{what}: attribute {key} = {value!r} must be {t.describe()}")
    return got


class Attrs(dict):
    """The attributes of one op or kernel: a dict whose every write is checked against a schema
    (key -> :class:`AttrType`). Reads are plain dict reads."""

    __slots__ = ("schema", "what")

    def __init__(self, schema: dict | None, items=(), what: str = "op"):
        super().__init__()
        self.schema, self.what = schema, what
        self.update(items)

    def __setitem__(self, key, value):
        super().__setitem__(key, convert(self.schema, key, value, self.what))

    def update(self, items=(), **kw):
        for k, v in (dict(items, **kw)).items():
            self[k] = v

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def __copy__(self):
        return Attrs(self.schema, self, self.what)

    def __reduce__(self):
        return (Attrs, (self.schema, dict(self), self.what))


#: kernel attributes: ``launch_dims`` (the race checker's proof assumes a 1-D or 2-D launch;
#: :func:`kaio.regions.check_launch_attrs`), ``max_registers`` (a register cap) and
#: ``index_bounds`` (how far each buffer access reaches, checked at launch:
#: :mod:`kaio.regions.bounds`), ``block`` (the declared block shape, ``@kaio.kernel(block=...)``)
#: and ``launch_dims_at`` (the access whose proof needed ``launch_dims``, for the launch error).
KERNEL_ATTRS = {"launch_dims": Int(1, 3), "max_registers": Int(1),
                "index_bounds": Records("index_bound"), "block": Shape(), "launch_dims_at": Text()}


# --- structured attributes ------------------------------------------------------------------
class StructAttr:
    """Base of structured attribute values. Subclasses are frozen dataclasses whose fields are
    plain attribute values (ints, strings...), registered with :func:`register`."""

    def attr_fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


_STRUCTS: dict[str, type] = {}
_MNEMONICS: dict[type, str] = {}


def register(mnemonic: str, cls: type) -> type:
    """Make ``cls`` (a :class:`StructAttr` dataclass) printable and parseable as ``#mnemonic``."""
    if not (isinstance(cls, type) and issubclass(cls, StructAttr) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"{cls!r} must be a StructAttr dataclass to be an IR attribute")
    _STRUCTS[mnemonic] = cls
    _MNEMONICS[cls] = mnemonic
    return cls


def mnemonic(v: StructAttr) -> str:
    """The registered name of a structured attribute value."""
    try:
        return _MNEMONICS[type(v)]
    except KeyError:
        raise AttrError(f"{type(v).__name__} is not a registered IR attribute "
                        "(kaio.ir.attrs.register)") from None


def build_struct(name: str, fields: dict) -> StructAttr:
    """The value ``#name{fields}`` denotes; KeyError for an unregistered name, and whatever the
    class raises for bad fields."""
    cls = _STRUCTS.get(name)
    if cls is None:
        raise KeyError(f"unknown attribute #{name} (known: {', '.join(sorted(_STRUCTS)) or 'none'})")
    return cls(**fields)
