"""Types of IR values: scalar dtypes, buffer types and warp matrix fragments."""
from __future__ import annotations

from functools import lru_cache

from ..dtypes import DType
from ..records import frozen

#: Address spaces of buffers.
SPACES = ("global", "shared", "local")

#: Access intents of buffers. ``region``/``out`` are partitioned writable buffers (``out``: old
#: contents never read, so no copy-in), ``atomic`` allows only atomic ops, ``raw`` is unchecked.
#: Shared and local arrays carry intent ``scratch``.
INTENTS = ("in", "region", "out", "atomic", "raw", "scratch")


@frozen
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
MMA_SHAPES = {"m16n8k16": (16, 8, 16), "m16n8k32": (16, 8, 32), "m16n8k8": (16, 8, 8)}
#: element dtype names of the multiplicands -> accumulator dtype name (f32 multiplicands are
#: tf32 fragments: each element rounded to tf32 on the way in, see kaio.semantics.tf32)
MMA_ACC = {"f16": "f32", "bf16": "f32", "i8": "i32", "f32": "f32"}
#: shape -> the multiplicand dtype names it takes (the first shape taking a dtype is its default)
MMA_INPUTS = {"m16n8k16": ("f16", "bf16"), "m16n8k32": ("i8",), "m16n8k8": ("f32",)}


def mma_shape_of(dtype_name: str, role: str) -> str | None:
    """The default shape for fragments of ``role`` holding ``dtype_name``, or None."""
    for shape, ins in MMA_INPUTS.items():
        if dtype_name in (ins if role != "acc" else {MMA_ACC[i] for i in ins}):
            return shape
    return None
FRAG_ROLES = ("a", "b", "acc")


@frozen
class FragType:
    """A matrix fragment: one warp's share of an ``m x k`` multiplicand A (role ``a``), a
    ``k x n`` multiplicand B (``b``) or an ``m x n`` accumulator (``acc``).

    ``shape`` names the matrix unit's instruction (``m16n8k16``); ``tiles`` is how many of its
    tiles the fragment spans down and across (a warp tile: A of ``(2, 1)`` is 32 x 16). The
    value is the whole matrix; how its elements spread over the warp's lanes belongs to the
    target (the PTX backend uses the ``mma.sync`` register layout, tile by tile; the reference
    interpreter its own). Build with :func:`frag_type`, which interns, so types compare with
    ``is`` like dtypes do.
    """

    role: str
    shape: str       # a key of MMA_SHAPES
    dtype: DType
    tiles: tuple = (1, 1)

    # a fragment is no scalar: the frontend's and the race checker's type tests answer False
    is_bool = is_int = is_float = is_signed = False
    kind = "frag"

    def __post_init__(self):
        assert self.role in FRAG_ROLES and self.shape in MMA_SHAPES, (self.role, self.shape)
        assert len(self.tiles) == 2 and min(self.tiles) >= 1, self.tiles

    @property
    def tile_dims(self) -> tuple[int, int]:
        """(rows, cols) of one instruction tile of this role."""
        m, n, k = MMA_SHAPES[self.shape]
        return {"a": (m, k), "b": (k, n), "acc": (m, n)}[self.role]

    @property
    def dims(self) -> tuple[int, int]:
        """(rows, cols) of the matrix this fragment holds."""
        (r, c), (tr, tc) = self.tile_dims, self.tiles
        return r * tr, c * tc

    @property
    def ntiles(self) -> int:
        return self.tiles[0] * self.tiles[1]

    @property
    def name(self) -> str:
        return str(self)

    def __str__(self) -> str:
        extra = "" if self.tiles == (1, 1) else ", {}x{}".format(*self.dims)
        return f"frag<{self.role}, {self.shape}, {self.dtype.name}{extra}>"

    def __reduce__(self):
        # a pickled or copied IR (the conformance's build workers) keeps the interned object
        return frag_type, (self.role, self.shape, self.dtype, self.tiles)


def frag_type(role: str, shape: str, dtype: DType, tiles: tuple = (1, 1)) -> FragType:
    """The (interned) fragment type of ``role`` in ``shape`` with elements of ``dtype``,
    spanning ``tiles`` instruction tiles (down, across). One object per type however it is
    asked for (``tiles`` left out, given as (1, 1), or as a list): types compare with ``is``."""
    return _interned_frag(role, shape, dtype, (int(tiles[0]), int(tiles[1])))


@lru_cache(maxsize=None)
def _interned_frag(role: str, shape: str, dtype: DType, tiles: tuple) -> FragType:
    return FragType(role, shape, dtype, tiles)


def row_frag(t: FragType) -> FragType:
    """The one-tile-wide accumulator holding a value per row of accumulator ``t`` (the result
    of ``mma_row_reduce``; ``mma_apply`` broadcasts it over ``t``)."""
    return frag_type("acc", t.shape, t.dtype, (t.tiles[0], 1))


def broadcasts_over(arg: FragType, acc: FragType) -> bool:
    """``arg`` is a one-tile-wide accumulator of ``acc``'s rows, passed to ``mma_apply`` as its
    element (i, j % n) (n: the instruction's n)."""
    return arg is row_frag(acc) and arg is not acc


def frag_of_dims(role: str, shape: str, dtype: DType, rows: int, cols: int) -> FragType:
    """The fragment holding a ``rows x cols`` matrix (each a multiple of the instruction's)."""
    probe = frag_type(role, shape, dtype)
    tr, tc = probe.tile_dims
    assert rows % tr == 0 and cols % tc == 0, (rows, cols, tr, tc)
    return frag_type(role, shape, dtype, (rows // tr, cols // tc))
