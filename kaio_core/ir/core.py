"""kaio IR: typed SSA values, operations with nested regions, kernels.

Shape of the IR (MLIR-like, deliberately small):

- :class:`Value` -- an SSA value with a type (a :class:`~kaio.dtypes.DType` or a
  :class:`~kaio.ir.types.BufType`). Defined once, by an op result or a block argument.
- :class:`Op` -- ``opcode``, operand values, result values, attributes (plain Python data) and
  zero or more nested :class:`Block` regions (``if`` has two, ``for`` one, ``while`` two).
- :class:`Block` -- block arguments and a list of ops. A region block ends with a terminator
  (``yield`` or ``condition``) when its parent op produces values; the verifier checks it.
- :class:`Kernel` -- name, parameters (the body block's arguments) and parameter metadata.

The ops and their typing rules are listed in :mod:`kaio.ir.ops`; docs/ir.md describes them.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterator

from .types import BufType, type_str

_ids = itertools.count()


@dataclass(frozen=True)
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

    __slots__ = ("type", "name", "id", "owner")

    def __init__(self, type, name: str | None = None, owner=None):
        self.type = type
        self.name = name
        self.id = next(_ids)
        self.owner = owner  # the defining Op, or the Block for block arguments

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
    """An operation. Results are created from ``result_types``."""

    __slots__ = ("opcode", "operands", "results", "attrs", "regions", "loc", "parent")

    def __init__(self, opcode: str, operands=(), result_types=(), attrs=None, regions=(),
                 loc: Loc | None = None, result_names=None):
        self.opcode = opcode
        self.operands: list[Value] = list(operands)
        names = list(result_names or [None] * len(result_types))
        self.results: list[Value] = [Value(t, n, self) for t, n in zip(result_types, names)]
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.regions: list[Block] = list(regions)
        for r in self.regions:
            r.parent = self
        self.loc = loc
        self.parent: Block | None = None

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


@dataclass
class Param:
    """Kernel parameter metadata beyond its type: how the user declared it.

    ``kind`` is 'scalar' or 'buffer'; ``partition`` (buffers with intent region/out) is the
    partition spec (a :class:`kaio.regions.Partition` instance, printed by its ``spec()``).
    """

    name: str
    kind: str
    partition: Any = None


@dataclass
class Kernel:
    """A kernel in IR form: parameters are the body block's arguments."""

    name: str
    body: Block
    params: list[Param]
    loc: Loc | None = None
    attrs: dict = field(default_factory=dict)

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
        from .printer import print_kernel
        return print_kernel(self)
