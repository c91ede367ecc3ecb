"""``@frozen``: a frozen dataclass whose methods cost one ``exec`` to make instead of six.

``import kaio`` defines some thirty frozen dataclasses (settings, options, IR types, partitions,
bounds facts); on Python 3.11 ``dataclasses`` compiles ``__init__``, ``__repr__``, ``__eq__``,
``__hash__``, ``__setattr__`` and ``__delattr__`` one ``exec`` each, which made about half of the
import's own CPU time (docs/performance.md, "Start-up"). ``@frozen`` lets ``dataclasses``
collect the fields (so ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work
as before) and writes the same methods in one piece of source:

- ``__init__`` in field order, defaults and ``default_factory`` as dataclasses treats them,
  then ``__post_init__`` when the class has one;
- ``__repr__`` (``repr=False``: the class's own or inherited one), ``__eq__`` over the fields
  with ``compare=True`` for the same class only, ``__hash__`` over the fields that compare
  (``hash=`` respected);
- assignment and deletion raise :class:`dataclasses.FrozenInstanceError`.

A method the class body defines itself is kept, as dataclasses does. Only the options kaio uses
are supported (no ``init=False`` or ``kw_only`` fields, no ``InitVar``); a class that needs them
stays a plain ``@dataclass(frozen=True)``. Subclass a ``@frozen`` class with ``@frozen`` too.
"""
from __future__ import annotations

import dataclasses

_MISSING = dataclasses.MISSING


class _Factory:
    """The default of a ``default_factory`` parameter (printed as dataclasses prints it)."""

    def __repr__(self):
        return "<factory>"


_FACTORY = _Factory()


def frozen(cls=None, /, *, repr: bool = True):
    """Class decorator: ``@frozen`` or ``@frozen(repr=False)``; see the module docstring."""
    if cls is None:
        return lambda c: _make(c, repr)
    return _make(cls, repr)


def _make(cls, want_repr: bool):
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
    env = {"_obj": object, "_Frozen": dataclasses.FrozenInstanceError, "_F": _FACTORY}
    params, body = [], []
    for f in fields:
        if f.default_factory is not _MISSING:
            env[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_F")
            body.append(f"    _set(self, {f.name!r}, _f_{f.name}() if {f.name} is _F else {f.name})")
        elif f.default is not _MISSING:
            env[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
            body.append(f"    _set(self, {f.name!r}, {f.name})")
        else:
            params.append(f.name)
            body.append(f"    _set(self, {f.name!r}, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    cmp = [n for n, f in zip(names, fields) if f.compare]
    hsh = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
    tup = lambda obj, ns: "(" + "".join(f"{obj}.{n}," for n in ns) + ")"  # noqa: E731
    rep = ", ".join(f"{f.name}={{self.{f.name}!r}}" for f in fields if f.repr)
    src = "\n".join([
        f"def __init__(self, {', '.join(params)}):" if params else "def __init__(self):",
        "    _set = _obj.__setattr__",
        *(body or ["    pass"]),
        "def __repr__(self):",
        f"    return self.__class__.__qualname__ + f'({rep})'",
        "def __eq__(self, other):",
        "    if other.__class__ is self.__class__:",
        f"        return {tup('self', cmp)} == {tup('other', cmp)}",
        "    return NotImplemented",
        "def __hash__(self):",
        f"    return hash({tup('self', hsh)})",
        "def __setattr__(self, name, value):",
        "    raise _Frozen(f'cannot assign to field {name!r}')",
        "def __delattr__(self, name):",
        "    raise _Frozen(f'cannot delete field {name!r}')",
    ])
    exec(compile(src, f"<frozen {cls.__qualname__}>", "exec"), env)
    made = ["__init__", "__eq__", "__setattr__", "__delattr__"] + ["__repr__"] * want_repr
    # a class body that defines __eq__ alone gets __hash__ = None from Python: dataclasses
    # replaces that (frozen + eq), but keeps a __hash__ the body wrote itself
    if "__hash__" not in own or (cls.__dict__["__hash__"] is None and "__eq__" in own):
        made.append("__hash__")
    for name in made:
        if name in own and name != "__hash__":
            continue
        fn = env[name]
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        fn.__module__ = cls.__module__
        setattr(cls, name, fn)
    if "__init__" not in own:   # inspect.signature as for a dataclass
        cls.__init__.__annotations__ = {**{f.name: f.type for f in fields}, "return": None}
    if undocumented:
        cls.__doc__ = f"{cls.__name__}({', '.join(names)})"
    return cls
