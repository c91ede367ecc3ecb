"""Types of IR values: scalar dtypes and buffer types."""
from __future__ import annotations

from dataclasses import dataclass

from ..dtypes import DType

#: Address spaces of buffers.
SPACES = ("global", "shared", "local")

#: Access intents of buffers. ``region``/``out`` are partitioned writable buffers (``out``: old
#: contents never read, so no copy-in), ``atomic`` allows only atomic ops, ``raw`` is unchecked.
#: Shared and local arrays carry intent ``scratch``.
INTENTS = ("in", "region", "out", "atomic", "raw", "scratch")


@dataclass(frozen=True)
class BufType:
    """A buffer: element dtype, number of dimensions, address space and access intent.

    Global buffers are C-contiguous; their shape is known at launch (``shape`` op). Shared and
    local buffers have a static shape (``static_shape``), except dynamic shared memory, whose
    length is set at launch (static_shape None, ndim 1).
    """

    dtype: DType
    ndim: int
    space: str = "global"
    intent: str = "in"
    static_shape: tuple | None = None

    def __post_init__(self):
        assert self.space in SPACES, self.space
        assert self.intent in INTENTS, self.intent

    @property
    def writable(self) -> bool:
        return self.intent != "in"

    def __str__(self) -> str:
        shape = "" if self.static_shape is None else ", [" + ", ".join(map(str, self.static_shape)) + "]"
        return f"buf<{self.dtype.name}, {self.ndim}, {self.space}, {self.intent}{shape}>"


def type_str(t) -> str:
    return t.name if isinstance(t, DType) else str(t)
