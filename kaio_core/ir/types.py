"""Types of IR values: scalar dtypes, buffer types and warp matrix fragments."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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


#: matrix-multiply shapes (m, n, k) fragments come in, and their element types
MMA_SHAPES = {"m16n8k16": (16, 8, 16)}
#: element dtype names of the multiplicands -> accumulator dtype name
MMA_ACC = {"f16": "f32", "bf16": "f32"}
FRAG_ROLES = ("a", "b", "acc")


@dataclass(frozen=True)
class FragType:
    """A matrix fragment: one warp's share of an ``m x k`` multiplicand A (role ``a``), a
    ``k x n`` multiplicand B (``b``) or an ``m x n`` accumulator (``acc``).

    The value is the whole matrix; how its elements spread over the warp's lanes belongs to the
    target (the PTX backend uses the ``mma.sync`` register layout, the reference interpreter
    its own). Build with :func:`frag_type`, which interns, so types compare with ``is`` like
    dtypes do.
    """

    role: str
    shape: str       # a key of MMA_SHAPES
    dtype: DType

    # a fragment is no scalar: the frontend's and the race checker's type tests answer False
    is_bool = is_int = is_float = is_signed = False
    kind = "frag"

    def __post_init__(self):
        assert self.role in FRAG_ROLES and self.shape in MMA_SHAPES, (self.role, self.shape)

    @property
    def dims(self) -> tuple[int, int]:
        """(rows, cols) of the matrix this fragment holds."""
        m, n, k = MMA_SHAPES[self.shape]
        return {"a": (m, k), "b": (k, n), "acc": (m, n)}[self.role]

    @property
    def name(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return f"frag<{self.role}, {self.shape}, {self.dtype.name}>"


@lru_cache(maxsize=None)
def frag_type(role: str, shape: str, dtype: DType) -> FragType:
    """The (interned) fragment type of ``role`` in ``shape`` with elements of ``dtype``."""
    return FragType(role, shape, dtype)
