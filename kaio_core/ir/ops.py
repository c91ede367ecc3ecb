"""The op set of kaio's IR: one table, used by the verifier, the passes and the backends.

Each entry says how many operands and regions an op has, whether it is *pure* (no memory or
synchronisation effect, so dead-code elimination may drop it), and its category. Semantics are
documented in docs/ir.md; the ones every backend must honour exactly:

- integer arithmetic wraps (two's complement); ``div``/``rem`` truncate toward zero (C rules);
  an integer division by zero gives an unspecified value (never a trap);
- ``shl``/``shr`` with a shift amount >= the bit width (as unsigned) give 0 (``shr`` of a
  negative signed value: -1); ``shr`` is arithmetic for signed, logical for unsigned dtypes;
- float ops are IEEE-754 round-to-nearest-even; ``mul`` followed by ``add`` is never fused;
  only ``fma`` fuses; ``div`` and ``math sqrt`` are correctly rounded unless ``fast`` is set;
- ``min``/``max`` on floats return the non-NaN operand when one is NaN (IEEE minNum/maxNum);
  of -0.0 and +0.0, ``min`` gives -0.0 and ``max`` +0.0; on bool they are and/or;
- float ``rem`` is C ``fmod`` (exact, the sign of the dividend);
- ``cmp`` on floats is ordered (false on NaN) except ``ne`` (true on NaN), as in Python;
- ``cast`` float->int truncates toward zero and saturates at the target range; NaN gives 0;
  int->float and float->float round to nearest even; to bool means ``!= 0``.
"""
from __future__ import annotations

from dataclasses import field

from ..records import frozen
from .attrs import Flag, Int, Name, OneOf, Scalar, Shape, TypeAttr


@frozen
class OpSpec:
    name: str
    category: str          # 'const' | 'binary' | 'unary' | 'ternary' | 'math' | 'cmp' | 'select' |
    #                        'cast' | 'special' | 'memory' | 'alloc' | 'sync' | 'warp' |
    #                        'reduce' | 'mma' | 'control' | 'terminator'
    pure: bool             # droppable when its results are unused
    n_regions: int = 0
    attrs: dict = field(default_factory=dict)   # key -> kaio.ir.attrs type: every key it may carry
    required: tuple = ()                        # the keys it must carry


def _specs(category, names, pure, n_regions=0, attrs=None, required=None):
    attrs = attrs or {}
    req = tuple(attrs) if required is None else required
    return {n: OpSpec(n, category, pure, n_regions, attrs, req) for n in names}


BINARY = ("add", "sub", "mul", "div", "rem", "min", "max", "and", "or", "xor", "shl", "shr")
UNARY = ("neg", "not", "abs")
CMP_PREDS = ("eq", "ne", "lt", "le", "gt", "ge")
SPECIAL = ("thread_idx", "block_idx", "block_dim", "grid_dim", "lane_id", "warp_size")
ATOMIC_OPS = ("add", "sub", "min", "max", "exch", "cas", "and", "or", "xor")
REDUCE_OPS = ("sum", "max", "min")
SHUFFLE_MODES = ("idx", "up", "down", "xor")
VOTE_MODES = ("any", "all")

#: math functions: name -> arity. ``isnan``/``isinf``/``isfinite`` return bool.
MATH_FNS = {
    "sqrt": 1, "rsqrt": 1, "exp": 1, "exp2": 1, "log": 1, "log2": 1, "log10": 1,
    "sin": 1, "cos": 1, "tan": 1, "tanh": 1, "erf": 1, "atan": 1, "asin": 1, "acos": 1,
    "sinh": 1, "cosh": 1, "expm1": 1, "log1p": 1,
    "floor": 1, "ceil": 1, "trunc": 1, "rint": 1,
    "isnan": 1, "isinf": 1, "isfinite": 1,
    "pow": 2, "atan2": 2, "copysign": 2, "fmod": 2,
}
MATH_PREDICATES = ("isnan", "isinf", "isfinite")
#: math functions that are exact or correctly rounded in IEEE-754 (computed natively everywhere)
MATH_EXACT = ("sqrt", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite", "copysign")

SPECS: dict[str, OpSpec] = {}
SPECS.update(_specs("const", ["const"], True, attrs={"value": Scalar()}))
SPECS.update(_specs("binary", BINARY, True))
#: div/rem ``nonneg``: both operands are >= 0 on every launch (kaio.passes.unsigned_divide), so a
#: backend may divide unsigned; the result is the same
SPECS.update(_specs("binary", ["div"], True, attrs={"fast": Flag(), "nonneg": Flag()}, required=()))
SPECS.update(_specs("binary", ["rem"], True, attrs={"nonneg": Flag()}, required=()))
SPECS.update(_specs("unary", UNARY, True))
SPECS.update(_specs("ternary", ["fma"], True))
# ``ftz`` (with ``fast``): neither the argument nor the result needs IEEE subnormals, so a backend
# may use its flushing instruction (the fast exp's reduced exp2: kaio.mathlib.hwexp)
SPECS.update(_specs("math", ["math"], True, attrs={"fn": OneOf(tuple(MATH_FNS)), "fast": Flag(),
                                                   "ftz": Flag()},
                    required=("fn",)))
SPECS.update(_specs("cmp", ["cmp"], True, attrs={"pred": OneOf(CMP_PREDS)}))
SPECS.update(_specs("select", ["select"], True))
SPECS.update(_specs("cast", ["cast", "bitcast"], True))
SPECS.update(_specs("special", SPECIAL[:4], True, attrs={"axis": Int(0, 2)}))
SPECS.update(_specs("special", SPECIAL[4:], True))
SPECS.update(_specs("special", ["shape"], True, attrs={"axis": Int(0)}))
SPECS.update(_specs("memory", ["load"], True))
SPECS.update(_specs("memory", ["store"], False))
SPECS.update(_specs("memory", ["atomic"], False, attrs={"op": OneOf(ATOMIC_OPS)}))
SPECS.update(_specs("alloc", ["local_array"], True, attrs={"dtype": TypeAttr(), "shape": Shape()}))
#: shared_array ``swizzle``: a matrix-unit tile (kaio.mma.shared_tile) whose physical layout the
#: target picks for its matrix units; indexing is unchanged (docs/language.md)
SPECS.update(_specs("alloc", ["shared_array"], True,
                    attrs={"dtype": TypeAttr(), "shape": Shape(), "swizzle": Flag()},
                    required=("dtype", "shape")))
SPECS.update(_specs("alloc", ["dyn_shared"], True, attrs={"dtype": TypeAttr()}))
SPECS.update(_specs("sync", ["barrier"], False))
SPECS.update(_specs("warp", ["shuffle"], False, attrs={"mode": OneOf(SHUFFLE_MODES)}))
SPECS.update(_specs("warp", ["vote"], False, attrs={"mode": OneOf(VOTE_MODES)}))
SPECS.update(_specs("warp", ["ballot"], False))
SPECS.update(_specs("reduce", ["warp_reduce", "block_reduce"], False, attrs={"op": OneOf(REDUCE_OPS)}))
#: warp matrix fragments (kaio.mma): warp-collective, every lane of the warp takes part.
#: mma_load is not pure so loop-invariant motion never lifts it over a store
SPECS.update(_specs("mma", ["mma_fill"], True))
#: mma ``group`` (kaio.mma.group_mma): operands [a, b, acc, row0, col0, k0], a and b loaded from
#: shared arrays; the block's warps multiply rows row0 + 16 w of one A tile by one B tile, so a
#: target may issue one warp-group instruction (wgmma) per four warps from the shared arrays
SPECS.update(_specs("mma", ["mma"], True, attrs={"group": Flag()}, required=()))
#: mma_load ``int4``: a B fragment (f16/bf16) of the signed int4 values packed two per byte along
#: K in a u8/i8 buffer: element (k, n) is nibble k % 2 (low: even k) of buf[row0 + k // 2, col0 + n];
#: with ``trans`` an A fragment of the transposed weights: A[r, c] = the B element (c, r)
#: mma ``group`` whose a is no load of a shared array: A from registers (row0 is 0)
SPECS.update(_specs("mma", ["mma_load"], False, attrs={"trans": Flag(), "int4": Flag()}, required=()))
#: mma_store: ``scaled``: operands [buf, idx..., alpha, beta, acc], storing alpha*acc + beta*buf;
#: ``int_scaled``: [buf, idx..., row_scale, col_scale, acc], an i32 acc stored as
#: f32(acc) * row_scale[r] * col_scale[c]
SPECS.update(_specs("mma", ["mma_store"], False, attrs={"scaled": Flag(), "int_scaled": Flag(),
                                                      "trans": Flag()},
                    required=()))
#: mma_copy: block-collective [dst (shared, 2-d), src (global, 2-d), row0, col0]: dst[0:rows,
#: 0:cols] = src[row0.., col0..] with zeros outside src, visible after the next barrier
SPECS.update(_specs("mma", ["mma_copy"], False, attrs={"rows": Int(1), "cols": Int(1)}))
#: mma_copy_wait: complete all but the ``pending`` most recent copies (regions.async_copies)
SPECS.update(_specs("mma", ["mma_copy_wait"], False, attrs={"pending": Int(0)}))
#: mma_apply: [acc, row0, col0, frag...] and one region (x, r, c, y...) yielding an element: the
#: accumulator with the region applied to each element (x: it, r and c: its coordinates in the
#: enclosing matrix, row0 + i and col0 + j; y...: the other fragments' elements at (i, j)).
#: Warp-collective like every fragment op; not pure (the region may load)
SPECS.update(_specs("mma", ["mma_apply"], False, 1))
#: mma_to_a: [acc] -> columns ``col0`` .. ``col0 + k`` of the f32 (m16n8k16) m x n accumulator
#: as an m x k f16/bf16 A fragment (k: the result's), each element rounded to nearest even;
#: ``col0`` a multiple of 16. Warp-collective (a target may move elements between lanes: AMD's
#: MFMA holds the accumulator transposed against A)
SPECS.update(_specs("mma", ["mma_to_a"], True, attrs={"col0": Int(0)}, required=()))
#: mma_row_reduce: [acc] -> an m x 8 accumulator (one tile wide) whose row i holds ``op`` over
#: row i of acc (max: NaNs ignored, as fmax; sum: f32, in an order the target picks; the
#: reference adds in ascending column order, a rounding per addition)
SPECS.update(_specs("mma", ["mma_row_reduce"], True, attrs={"op": OneOf(("max", "sum"))}))
#: ops a mma_apply region may not hold: it is one lane's code per element, run once per element
#: the lane holds (the target decides which), so nothing that involves other lanes or allocates.
#: (The frontend refuses stores and atomics in the user's function too; checked mode adds its
#: fault record's after it.)
MMA_APPLY_FORBIDDEN = ("barrier", "shuffle", "vote", "ballot", "warp_reduce", "block_reduce",
                       "shared_array", "dyn_shared", "local_array", "mma_fill", "mma_load", "mma",
                       "mma_store", "mma_copy", "mma_copy_wait", "mma_apply", "mma_to_a",
                       "mma_row_reduce")
SPECS.update(_specs("control", ["if"], False, 2))
#: for: ``owned`` names the Region whose owned() loop this is; ``step_sign = 1``: the step is > 0
#: (kaio.passes.loop_facts); ``unrolled = k``: made by kaio.passes.unroll, k bodies per iteration
SPECS.update(_specs("control", ["for"], False, 1,
                    attrs={"owned": Name(), "step_sign": Int(1, 1), "unrolled": Int(1)}, required=()))
SPECS.update(_specs("control", ["while"], False, 2))
SPECS.update(_specs("terminator", ["yield", "condition"], False))


def spec(opcode: str) -> OpSpec:
    try:
        return SPECS[opcode]
    except KeyError:
        raise KeyError(f"unknown IR opcode {opcode!r}") from None


def is_pure(op) -> bool:
    return SPECS[op.opcode].pure


#: opcodes that share one handler per group in every backend
HANDLER_GROUPS = {"binary": BINARY, "unary": UNARY, "special": SPECIAL}


def handler_table(cls, prefix: str, aliases: dict | None = None) -> dict:
    """The dispatch table of a backend class: opcode -> ``cls.<prefix><name>`` for every IR
    opcode the class has a method for, where ``name`` is the opcode itself, its group in
    :data:`HANDLER_GROUPS` (``binary``, ``unary``, ``special``) or ``aliases[opcode]``. An opcode
    without a method is absent, so the backend reports it as unsupported."""
    table = {}
    for opcode in SPECS:
        group = next((g for g, names in HANDLER_GROUPS.items() if opcode in names), None)
        fn = getattr(cls, prefix + (aliases or {}).get(opcode, group or opcode), None)
        if fn is not None:
            table[opcode] = fn
    return table
