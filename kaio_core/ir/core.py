"""kaio IR: typed SSA values, operations with nested regions, kernels.

Shape of the IR (MLIR-like, deliberately small):

- :class:`Value` -- an SSA value with a type (a :class:`~kaio.dtypes.DType` or a
  :class:`~kaio.ir.types.BufType`). Defined once, by an op result or a block argument. It knows
  its users (:attr:`Value.users`), so replacing a value touches only the ops that use it.
- :class:`Op` -- ``opcode``, operand values, result values, typed attributes
  (:mod:`kaio.ir.attrs`, declared per opcode in :mod:`kaio.ir.ops`) and zero or more nested
  :class:`Block` regions (``if`` has two, ``for`` one, ``while`` two).

Use-lists are kept by :attr:`Op.operands`: setting it (construction included) moves the op
between its old and new operands' users. An op leaves the IR through
:func:`kaio.ir.rewrite.erase` (or :meth:`Op.drop_operands` on every op it holds), which drops
its uses; merely unlinking it from its block keeps them, for an op that moves elsewhere.
- :class:`Block` -- block arguments and a list of ops. A region block ends with a terminator
  (``yield`` or ``condition``) when its parent op produces values; the verifier checks it.
- :class:`Kernel` -- name, parameters (the body block's arguments) and parameter metadata.

The ops and their typing rules are listed in :mod:`kaio.ir.ops`; docs/ir.md describes them.
"""
from __future__ import annotations

import itertools
from dataclasses import field
from typing import Any, Iterator

from ..records import frozen, record
from .attrs import KERNEL_ATTRS, Attrs
from .ops import SPECS
from .printer import print_kernel
from .types import BufType, type_str

_ids = itertools.count()


@frozen
class Loc:
    """A source location: file, 1-based line, 0-based column span on that line."""

    file: str
    line: int
    col: int = 0
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Value:
    """An SSA value. ``name`` is a readability hint only (printers keep it when unique)."""

    __slots__ = ("type", "name", "id", "owner", "_users")

    def __init__(self, type, name: str | None = None, owner=None):
        self.type = type
        self.name = name
        self.id = next(_ids)
        self.owner = owner  # the defining Op, or the Block for block arguments
        self._users: dict[Op, None] = {}  # ops having this value as an operand (ordered set)

    @property
    def users(self) -> tuple["Op", ...]:
        """The ops using this value (each once, however many of its operands it is)."""
        return tuple(self._users)

    @property
    def is_used(self) -> bool:
        return bool(self._users)

    def replace_all_uses_with(self, new: "Value", keep=()) -> int:
        """Make every user of this value use ``new`` instead, except the ops in ``keep``;
        returns how many operands changed. Touches only the users."""
        n = 0
        for op in self.users:
            if op in keep:
                continue
            n += op.operands.count(self)
            op.operands = [new if v is self else v for v in op.operands]
        return n

    @property
    def dtype(self):
        return self.type

    @property
    def is_buffer(self) -> bool:
        return isinstance(self.type, BufType)

    def __repr__(self) -> str:
        return f"%{self.name or 'v'}.{self.id}:{type_str(self.type)}"


class Block:
    """A list of ops with block arguments; the body of a region."""

    __slots__ = ("args", "ops", "parent")

    def __init__(self, args: list[Value] | None = None):
        self.args: list[Value] = list(args or [])
        for a in self.args:
            a.owner = self
        self.ops: list[Op] = []
        self.parent: Op | None = None

    def add_arg(self, type, name=None) -> Value:
        v = Value(type, name, self)
        self.args.append(v)
        return v

    def append(self, op: "Op") -> "Op":
        op.parent = self
        self.ops.append(op)
        return op

    @property
    def terminator(self) -> "Op | None":
        if self.ops and self.ops[-1].opcode in ("yield", "condition"):
            return self.ops[-1]
        return None

    def walk(self) -> Iterator["Op"]:
        """All ops in this block and nested regions, pre-order."""
        for op in list(self.ops):
            yield from op.walk()


class Op:
    """An operation. Results are created from ``result_types``; ``attrs`` are checked against
    the opcode's declared attributes (:class:`kaio.ir.attrs.AttrError` when one is wrong)."""

    __slots__ = ("opcode", "_operands", "results", "_attrs", "regions", "loc", "parent")

    def __init__(self, opcode: str, operands=(), result_types=(), attrs=None, regions=(),
                 loc: Loc | None = None, result_names=None):
        self.opcode = opcode
        self._operands: tuple[Value, ...] = ()
        self.operands = operands
        names = list(result_names or [None] * len(result_types))
        self.results: list[Value] = [Value(t, n, self) for t, n in zip(result_types, names)]
        self.attrs = attrs or {}
        self.regions: list[Block] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

    @property
    def operands(self) -> tuple[Value, ...]:
        """The operand values (a tuple: change them by assigning a new sequence, which keeps the
        values' use-lists right)."""
        return self._operands

    @operands.setter
    def operands(self, values) -> None:
        new = tuple(values)
        for v in new:
            if not isinstance(v, Value):
                raise TypeError(f"'{self.opcode}': operand {v!r} is not an IR value")
        for v in self._operands:
            v._users.pop(self, None)
        for v in new:
            v._users[self] = None
        self._operands = new

    def drop_operands(self) -> None:
        """Forget the operands (the op is leaving the IR): it is no longer a user of them."""
        self.operands = ()

    @property
    def attrs(self) -> Attrs:
        return self._attrs

    @attrs.setter
    def attrs(self, items) -> None:
        spec = SPECS.get(self.opcode)
        self._attrs = Attrs(spec.attrs if spec is not None else None, items, f"'{self.opcode}'")

    @property
    def result(self) -> Value:
        assert len(self.results) == 1, f"{self.opcode} has {len(self.results)} results"
        return self.results[0]

    def walk(self) -> Iterator["Op"]:
        yield self
        for r in self.regions:
            yield from r.walk()

    def __repr__(self) -> str:
        return f"<Op {self.opcode} {self.operands} -> {self.results} {self.attrs}>"


@record
class Param:
    """Kernel parameter metadata beyond its type: how the user declared it.

    ``kind`` is 'scalar' or 'buffer'; ``partition`` (buffers with intent region/out) is the
    partition: a :class:`kaio.regions.Partition`, a structured attribute
    (:class:`kaio.ir.attrs.StructAttr`) that prints as ``#blocked{k = 4}``.
    """

    name: str
    kind: str
    partition: Any = None


@record
class Kernel:
    """A kernel in IR form: parameters are the body block's arguments."""

    name: str
    body: Block
    params: list[Param]
    loc: Loc | None = None
    attrs: dict = field(default_factory=dict)

    def __post_init__(self):
        self.attrs = Attrs(KERNEL_ATTRS, self.attrs, "kernel")

    @property
    def args(self) -> list[Value]:
        return self.body.args

    def param_value(self, name: str) -> Value:
        for p, v in zip(self.params, self.body.args):
            if p.name == name:
                return v
        raise KeyError(name)

    def walk(self) -> Iterator[Op]:
        return self.body.walk()

    def __str__(self) -> str:
        return print_kernel(self)
