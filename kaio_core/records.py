"""``@frozen``: a frozen dataclass whose methods cost one ``exec`` to make instead of six.

``import kaio`` defines some thirty frozen dataclasses (settings, options, IR types, partitions,
bounds facts); on Python 3.11 ``dataclasses`` compiles ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` one ``exec`` each, which made about half of the
import's own CPU time (docs/performance.md, "Start-up"). ``@frozen`` lets ``dataclasses``
collect the fields (so ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work
as before), compiles only ``__init__`` and makes the other methods from shared functions:

- ``__init__`` in field order, defaults and ``default_factory`` as dataclasses treats them,
  then ``__post_init__`` when the class has one;
- ``__repr__`` (``repr=False``: the class's own or inherited one), ``__eq__`` over the fields
  with ``compare=True`` for the same class only, ``__hash__`` over the fields that compare
  (``hash=`` respected);
- assignment and deletion raise :class:`dataclasses.FrozenInstanceError`.

A method the class body defines itself is kept, as dataclasses does. Only the options kaio uses
are supported (no ``init=False`` or ``kw_only`` fields, no ``InitVar``); a class that needs them
stays a plain ``@dataclass(frozen=True)``. Subclass a ``@frozen`` class with ``@frozen`` too.
``@record`` does the same for a mutable dataclass (no ``__hash__``, assignment allowed).
"""
from __future__ import annotations

import dataclasses
import operator

_MISSING = dataclasses.MISSING


class _Factory:
    """The default of a ``default_factory`` parameter (printed as dataclasses prints it)."""

    def __repr__(self):
        return "<factory>"


_FACTORY = _Factory()


def frozen(cls=None, /, *, repr: bool = True):
    """Class decorator: ``@frozen`` or ``@frozen(repr=False)``; see the module docstring."""
    if cls is None:
        return lambda c: _make(c, repr, True)
    return _make(cls, repr, True)


def record(cls):
    """Class decorator: a mutable ``@dataclass`` (``__init__``, ``__repr__``, ``__eq__``, and
    ``__hash__ = None``) made as :func:`frozen` makes its classes."""
    return _make(cls, True, False)


def _make(cls, want_repr: bool, is_frozen: bool):
    own = set(cls.__dict__)
    undocumented = not cls.__doc__      # dataclasses would call inspect.signature (slow) for it
    cls.__doc__ = cls.__doc__ or "-"
    # fields, defaults as class attributes, __match_args__: no method is generated here
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    for f in fields:
        if not f.init or f.kw_only:
            raise TypeError(f"@frozen: field {cls.__name__}.{f.name} needs @dataclass")
    names = [f.name for f in fields]
    key = _getter([f.name for f in fields if f.compare])
    hkey = _getter([f.name for f in fields if (f.compare if f.hash is None else f.hash)])
    shown = [f.name for f in fields if f.repr]

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    def __hash__(self):
        return hash(hkey(self))

    def __repr__(self):
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
        return f"{self.__class__.__qualname__}({inner})"

    made = {"__init__": _init(cls, fields, is_frozen), "__eq__": __eq__}
    if is_frozen:
        made.update(__setattr__=_setattr, __delattr__=_delattr)
    if want_repr:
        made["__repr__"] = __repr__
    for name, fn in made.items():
        if name not in own:
            if fn not in (_setattr, _delattr):      # those two are shared by every class
                fn.__qualname__ = f"{cls.__qualname__}.{name}"
                fn.__module__ = cls.__module__
            setattr(cls, name, fn)
    # a class body that defines __eq__ alone gets __hash__ = None from Python: dataclasses
    # replaces that (frozen + eq), but keeps a __hash__ the body wrote itself; a mutable record
    # is unhashable unless its body says otherwise
    if "__hash__" not in own or (cls.__dict__["__hash__"] is None and "__eq__" in own):
        __hash__.__qualname__ = f"{cls.__qualname__}.__hash__"
        cls.__hash__ = __hash__ if is_frozen else None
    if undocumented:
        cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
    return cls


def _getter(names):
    """obj -> the tuple of its ``names`` attributes (what dataclasses compares and hashes)."""
    if not names:
        return lambda obj: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda obj: (one(obj),)
    return operator.attrgetter(*names)


def _init(cls, fields, is_frozen: bool):
    """``__init__`` with the fields as parameters: the one method compiled per class."""
    env = {"_set": object.__setattr__, "_F": _FACTORY}
    put = "    _set(self, {0!r}, {1})" if is_frozen else "    self.{0} = {1}"
    params, body = [], []
    for f in fields:
        if f.default_factory is not _MISSING:
            env[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_F")
            body.append(put.format(f.name, f"_f_{f.name}() if {f.name} is _F else {f.name}"))
        else:
            if f.default is not _MISSING:
                env[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}" if f.default is not _MISSING else f.name)
            body.append(put.format(f.name, f.name))
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    src = "\n".join([f"def __init__({', '.join(['self', *params])}):", *(body or ["    pass"])])
    where = f"<{'frozen' if is_frozen else 'record'} {cls.__qualname__}>"
    exec(compile(src, where, "exec"), env)
    init = env["__init__"]
    init.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    return init


def _setattr(self, name, value):
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self, name):
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
