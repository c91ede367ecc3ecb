"""Calls of kaio.mma inside kernels: warp matrix fragments -> the IR's ``mma_*`` ops.

Each ``kaio.mma.<name>`` call lands in ``intr_mma_<name>``. Arguments are checked here so the
error names the call: a tile is addressed by (row0, col0) in a 2-d buffer, or in a 1-d buffer
with ``ld=`` (element (r, c) at ``r * ld + c``); element types must match the shape's table
(:data:`kaio.ir.types.MMA_ACC`).

Where fragments may live (the race checker's rules, docs/language.md): loads read ``In`` and
``Raw`` global buffers and shared arrays; stores write global ``Region``/``Out`` buffers (the
checker proves each is the storing warp's tile under ``kaio.regions.warp_tiles``) and ``Raw``
ones. ``beta=`` reads the old value, so it is refused on ``Out`` buffers (never copied in).
"""
from __future__ import annotations

import inspect

from .. import dtypes as dt
from ..ir.core import Block
from ..ir.ops import MMA_APPLY_FORBIDDEN
from ..ir.types import (
    MMA_ACC,
    MMA_INPUTS,
    MMA_SHAPES,
    broadcasts_over,
    frag_of_dims,
    mma_shape_of,
    row_frag,
)
from ..lang import DeviceFunction
from .values import Lit, PyObj, describe, is_buffer


class MmaMixin:
    def _mma_kw(self, name, args, kwargs, node, positional, keywords):
        """Positional then keyword arguments of kaio.mma.<name>, as a dict (missing: absent)."""
        label = f"kaio.mma.{name}"
        if len(args) > len(positional):
            raise self.err(node, f"{label}() takes {len(positional)} positional argument(s) but "
                                 f"{len(args)} were given",
                           hint=f"pass {', '.join(keywords)} by keyword")
        out = dict(zip(positional, args))
        for k, (v, knode) in kwargs.items():
            if k not in positional + keywords or k in out:
                raise self.err(knode, f"{label}() got an unexpected or repeated argument '{k}'",
                               hint=f"its arguments: {', '.join(positional + keywords)}")
            out[k] = v
        missing = [p for p in positional if p not in out]
        if missing:
            raise self.err(node, f"{label}() is missing {', '.join(missing)}")
        return out

    def _mma_shape(self, a, node, dtype, role, label) -> str:
        """The call's shape= (default: the shape taking ``dtype``), checked against ``dtype``."""
        roles = "multiplicands" if role != "acc" else "accumulators"
        if a is None:
            shape = mma_shape_of(dtype.name, role)
        elif isinstance(a, PyObj) and a.obj in MMA_SHAPES:
            shape = a.obj
        else:
            raise self.err(node, f"shape= must be a kaio.mma shape such as kaio.mma.m16n8k16, "
                                 f"got {describe(a)}")
        ok = MMA_INPUTS.get(shape, ())
        if role == "acc":
            ok = sorted({MMA_ACC[i] for i in ok})
        if shape is None or dtype.name not in ok:
            table = "; ".join(f"{s}: {'/'.join(sorted(ins))} -> {MMA_ACC[ins[0]]}"
                              for s, ins in MMA_INPUTS.items())
            raise self.err(node, f"{label} {'no shape takes' if shape is None else shape + ' takes no'} "
                                 f"{dtype.name} {roles} ({table})",
                           hint="convert the data first (a kaio kernel can cast it), or name the "
                                "shape= that takes it")
        return shape

    #: the size keywords of each role, in (rows, cols) order, and the instruction dim they scale
    _DIM_KW = {"a": (("m", 0), ("k", 2)), "b": (("k", 2), ("n", 1)), "acc": (("m", 0), ("n", 1))}

    def _mma_frag(self, role, shape, dtype, kw, node, label):
        """The fragment type of ``role`` sized by the call's m=/n=/k= (default: one tile)."""
        base = MMA_SHAPES[shape]
        dims = []
        for key, axis in self._DIM_KW[role]:
            v = kw.get(key)
            size = base[axis] if v is None else self.const_int(v, node, f"{label}'s {key}=")
            if size <= 0 or size % base[axis]:
                raise self.err(node, f"{label}: {key}={size} is not a positive multiple of "
                                     f"{base[axis]}, the {shape} instruction's {key}",
                               hint=f"a warp tile spans whole instruction tiles: {key} = "
                                    f"{base[axis]}, {2 * base[axis]}, {4 * base[axis]}, ...")
            dims.append(size)
        return frag_of_dims(role, shape, dtype, *dims)

    def _mma_flag(self, a, node, what) -> bool:
        if a is None:
            return False
        if not (isinstance(a, Lit) and isinstance(a.value, bool)):
            raise self.err(node, f"{what}= must be a compile-time True or False, got {describe(a)}")
        return a.value

    def _mma_tile(self, name, kw, node, write: bool):
        """(buffer, [row0, col0, (ld)]) of a fragment load or store, checked."""
        buf = kw["buf"]
        label = f"kaio.mma.{name}"
        if not is_buffer(buf):
            raise self.err(node, f"the first argument of {label} must be a buffer, got {describe(buf)}")
        t = buf.type
        if t.ndim not in (1, 2):
            raise self.err(node, f"{label} reads tiles of 2-d buffers (or 1-d ones with ld=), "
                                 f"'{buf.name}' has {t.ndim} dimensions")
        if write and not (t.space == "global" and t.intent in ("raw", "region", "out")):
            raise self.err(node, f"{label} into '{buf.name}', a {t.space} {t.intent} buffer: "
                                 "fragment stores go to global Region, Out or Raw buffers",
                           hint="declare the output kaio.Region[T, 2, kaio.regions.warp_tiles("
                                "(BM, BN), (WM, WN))] (each warp owns its tile; the race checker "
                                "proves it) or kaio.Raw[...]")
        if not write and not (t.space == "shared" or t.intent in ("in", "raw")):
            raise self.err(node, f"{label} from '{buf.name}', a {t.intent} buffer",
                           hint="load fragments from kaio.In[...] or kaio.Raw[...] buffers or "
                                "shared arrays")
        ld = kw.get("ld")
        if (t.ndim == 1) != (ld is not None):
            raise self.err(node, f"{label}: a 1-d buffer needs ld= (its row length), a 2-d one "
                                 "takes none" if t.ndim == 1 else
                                 f"{label}: '{buf.name}' is 2-d; ld= is only for 1-d buffers")
        idx = [kw["row0"], kw["col0"]] + ([ld] if ld is not None else [])
        return buf, [self.index_value(i, node) for i in idx]

    def _mma_load(self, name, role, args, kwargs, node, transposable=True):
        keywords = ["ld", "shape", *(k for k, _ in self._DIM_KW[role])] + \
            (["trans"] if transposable else [])
        kw = self._mma_kw(name, args, kwargs, node, ["buf", "row0", "col0"], keywords)
        buf, idx = self._mma_tile(name, kw, node, write=False)
        t = buf.type.dtype
        shape = self._mma_shape(kw.get("shape"), node, t, role,
                                f"kaio.mma.{name}: '{buf.name}' holds {t.name}, and")
        trans = self._mma_flag(kw.get("trans"), node, "trans")
        ftype = self._mma_frag(role, shape, t, kw, node, f"kaio.mma.{name}")
        return self.b._one("mma_load", [buf, *idx], ftype,
                           attrs={"trans": True} if trans else None)

    def intr_mma_load_a(self, name, args, kwargs, node):
        return self._mma_load("load_a", "a", args, kwargs, node)

    def intr_mma_load_b(self, name, args, kwargs, node):
        return self._mma_load("load_b", "b", args, kwargs, node)

    def _mma_load_int4(self, role, args, kwargs, node):
        """load_a_int4 / load_b_int4: f16/bf16 fragments of signed int4 weights packed two per
        byte along K in a u8/i8 buffer (the W4A16 layout packed[K/2, N]); A reads it
        transposed (A = W^T: the register operand of a warp-group multiply)."""
        name = f"load_{role}_int4"
        label = f"kaio.mma.{name}"
        kw = self._mma_kw(name, args, kwargs, node, ["buf", "row0", "col0", "dtype"],
                          ["ld", *(k for k, _ in self._DIM_KW[role])])
        buf, idx = self._mma_tile(name, kw, node, write=False)
        if buf.type.dtype.name not in ("u8", "i8"):
            raise self.err(node, f"{label} unpacks bytes (two int4 per u8/i8 element), but "
                                 f"'{buf.name}' holds {buf.type.dtype.name}",
                           hint="pack the weights as uint8: low nibble k even, high nibble k + 1")
        t = self.const_dtype(kw["dtype"], node)
        if t.name not in ("f16", "bf16"):
            raise self.err(node, f"{label} makes f16 or bf16 {role.upper()} fragments (int4 is "
                                 f"exact in either), not {t.name}")
        ftype = self._mma_frag(role, "m16n8k16", t, kw, node, label)
        attrs = {"int4": True, **({"trans": True} if role == "a" else {})}
        return self.b._one("mma_load", [buf, *idx], ftype, attrs=attrs)

    def intr_mma_load_b_int4(self, name, args, kwargs, node):
        return self._mma_load_int4("b", args, kwargs, node)

    def intr_mma_load_a_int4(self, name, args, kwargs, node):
        return self._mma_load_int4("a", args, kwargs, node)

    def intr_mma_load_acc(self, name, args, kwargs, node):
        return self._mma_load("load_acc", "acc", args, kwargs, node, transposable=False)

    def intr_mma_fill(self, name, args, kwargs, node):
        kw = self._mma_kw("fill", args, kwargs, node, ["dtype", "value"], ["shape", "m", "n"])
        t = self.const_dtype(kw["dtype"], node)
        if t.name not in MMA_ACC.values():
            raise self.err(node, f"kaio.mma.fill makes accumulators, whose dtype is "
                                 f"{'/'.join(sorted(set(MMA_ACC.values())))}, not {t.name}")
        shape = self._mma_shape(kw.get("shape"), node, t, "acc", "kaio.mma.fill:")
        v = self.convert(kw["value"], t, node, "the fill value")
        return self.b._one("mma_fill", [v], self._mma_frag("acc", shape, t, kw, node, "kaio.mma.fill"))

    def intr_mma_mma(self, name, args, kwargs, node):
        self.arity("kaio.mma.mma", args, kwargs, node, 3)
        a, b, c = args
        wanted = (("first", "an A fragment"), ("second", "a B fragment"), ("third", "an accumulator"))
        for v, role, (what, kind) in zip((a, b, c), ("a", "b", "acc"), wanted):
            if getattr(getattr(v, "type", None), "role", None) != role:
                raise self.err(node, f"the {what} argument of kaio.mma.mma must be {kind}, "
                                     f"got {describe(v)}",
                               hint="kaio.mma.mma(a, b, acc): a from load_a, b from load_b, acc "
                                    "from fill or load_acc")
        ta, tb, tc = a.type, b.type, c.type
        if not (ta.shape == tb.shape == tc.shape and ta.dtype is tb.dtype
                and MMA_ACC[ta.dtype.name] == tc.dtype.name):
            raise self.err(node, f"kaio.mma.mma of {ta} and {tb} into {tc}: the shapes and "
                                 "element types do not match",
                           hint="A and B hold one dtype, the accumulator its own, all of one "
                                "shape: f16/bf16 -> f32 (m16n8k16), i8 -> i32 (m16n8k32), "
                                "f32 as tf32 -> f32 (m16n8k8: make its accumulator with "
                                "fill(kaio.f32, 0.0, shape=kaio.mma.m16n8k8))")
        (am, ak), (bk, bn), (cm, cn) = ta.dims, tb.dims, tc.dims
        if not (am == cm and bn == cn and ak == bk):
            raise self.err(node, f"kaio.mma.mma of a {am}x{ak} A and a {bk}x{bn} B into a "
                                 f"{cm}x{cn} accumulator: the sizes do not chain",
                           hint="A is m x k, B is k x n and the accumulator m x n (the m=, n= "
                                "and k= of the loads and the fill)")
        return self.b._one("mma", [a, b, c], tc)

    def intr_mma_shared_tile(self, name, args, kwargs, node):
        """A shared array whose physical layout the target picks for its matrix units."""
        kw = self._mma_kw("shared_tile", args, kwargs, node, ["dtype", "shape"], [])
        t = self.const_dtype(kw["dtype"], node)
        shape = self.shape_arg(kw["shape"], node, "the shape of kaio.mma.shared_tile")
        if t.itemsize != 2 or len(shape) != 2 or shape[0] % 8 or shape[1] % 64:
            raise self.err(node, f"kaio.mma.shared_tile({t.name}, {shape}): a matrix-unit tile "
                                 "is 2-d, of f16 or bf16, with rows a multiple of 8 and columns "
                                 "a multiple of 64",
                           hint="pad the tile (the K step 64, the block tile's rows 64 or 128), "
                                "or use kaio.shared_array")
        return self.b.shared_array(t, shape, swizzle=True)

    def intr_mma_group_mma(self, name, args, kwargs, node):
        """acc + A @ B from two shared tiles, the block's warps splitting A's rows by 16; or,
        with an A fragment first, acc + a @ B (each warp its own A, one B tile)."""
        role = getattr(getattr(args[0], "type", None), "role", None) if args else None
        if role == "a":
            return self._group_mma_fragment(args, kwargs, node)
        if role is not None:
            raise self.err(node, f"the first argument of kaio.mma.group_mma is A: a shared "
                                 f"array or an A fragment, got {describe(args[0])}",
                           hint="group_mma(a_buf, b_buf, acc, row0, col0) or group_mma(a, b_buf, "
                                "acc, col0) with a from load_a / load_a_int4")
        if len(args) == 6 and "k0" not in kwargs:        # k0 may come positionally
            args, kwargs = args[:5], {**kwargs, "k0": (args[5], node)}
        kw = self._mma_kw("group_mma", args, kwargs, node, ["a_buf", "b_buf", "acc", "row0", "col0"],
                          ["k0", "k", "trans_a", "trans_b"])
        label = "kaio.mma.group_mma"
        acc = kw["acc"]
        at = self._group_mma_acc(acc, node, label)
        bufs = [self._group_b_tile(kw[key], key, node, label) for key in ("a_buf", "b_buf")]
        if bufs[0].type.dtype is not bufs[1].type.dtype:
            raise self.err(node, f"{label}: A holds {bufs[0].type.dtype.name}, B "
                                 f"{bufs[1].type.dtype.name}", hint="stage both in one dtype")
        k = 16 if kw.get("k") is None else self.const_int(kw["k"], node, f"{label}'s k=")
        if k <= 0 or k % 16:
            raise self.err(node, f"{label}: k={k} is not a positive multiple of 16")
        ta = self._mma_flag(kw.get("trans_a"), node, "trans_a")
        tb = self._mma_flag(kw.get("trans_b"), node, "trans_b")
        n = at.dims[1]
        row0, col0 = (self.index_value(kw[x], node) for x in ("row0", "col0"))
        k0 = self.index_value(Lit(0) if kw.get("k0") is None else kw["k0"], node)
        b_ = self.b
        i32 = dt.i32
        # warp w of the block (linear thread index // warp size) takes A's rows row0 + 16 w
        lin = b_.special("thread_idx", 2)
        for axis in (1, 0):
            lin = b_.binary("add", b_.binary("mul", lin, b_.special("block_dim", axis)),
                            b_.special("thread_idx", axis))
        warp = b_.binary("div", lin, b_.special("warp_size"))
        r = b_.binary("add", row0, b_.binary("mul", warp, b_.const(16, i32)))
        t = bufs[0].type.dtype
        fa = frag_of_dims("a", "m16n8k16", t, 16, k)
        fb = frag_of_dims("b", "m16n8k16", t, k, n)
        tr = {"trans": True}
        a = b_._one("mma_load", [bufs[0], k0, r] if ta else [bufs[0], r, k0], fa, tr if ta else None)
        bv = b_._one("mma_load", [bufs[1], col0, k0] if tb else [bufs[1], k0, col0], fb,
                     tr if tb else None)
        return b_._one("mma", [a, bv, acc, row0, col0, k0], at, attrs={"group": True})

    def _group_mma_acc(self, acc, node, label):
        at = getattr(acc, "type", None)
        if getattr(at, "role", None) != "acc" or at.dtype is not dt.f32 or at.shape != "m16n8k16" \
                or at.dims[0] != 16:
            raise self.err(node, f"the third argument of {label} must be a 16-row f32 "
                                 f"accumulator, got {describe(acc)}",
                           hint="kaio.mma.fill(kaio.f32, 0.0, m=16, n=N): each warp holds its "
                                "16 rows of the product")
        return at

    def _group_b_tile(self, b, key, node, label):
        if not (is_buffer(b) and b.type.space == "shared" and b.type.ndim == 2
                and b.type.dtype.name in ("f16", "bf16")):
            raise self.err(node, f"{label}: {key} must be a 2-d f16 or bf16 shared array, got "
                                 f"{describe(b)}",
                           hint="stage the tiles with kaio.mma.copy_tile into "
                                "kaio.mma.shared_tile arrays")
        return b

    def _group_mma_fragment(self, args, kwargs, node):
        """``group_mma(a, b_buf, acc, col0, k0=0, trans_b=False)``: each warp's acc + a @
        B[k0:k0+k, col0:col0+n], one B tile for the block (col0, k0 block-uniform); on sm_90 a
        register-A wgmma per four warps (A made in registers, e.g. unpacked int4 weights)."""
        label = "kaio.mma.group_mma"
        if len(args) == 5 and "k0" not in kwargs:
            args, kwargs = args[:4], {**kwargs, "k0": (args[4], node)}
        kw = self._mma_kw("group_mma", args, kwargs, node, ["a", "b_buf", "acc", "col0"],
                          ["k0", "trans_b"])
        a, acc = kw["a"], kw["acc"]
        at = self._group_mma_acc(acc, node, label)
        ta = a.type
        if ta.shape != "m16n8k16" or ta.dims[0] != 16 or ta.dtype.name not in ("f16", "bf16"):
            raise self.err(node, f"{label}: a must be a 16-row f16 or bf16 A fragment, got "
                                 f"{describe(a)}",
                           hint="kaio.mma.load_a(..., m=16, k=16) or load_a_int4(..., m=16)")
        bbuf = self._group_b_tile(kw["b_buf"], "b_buf", node, label)
        if bbuf.type.dtype is not ta.dtype:
            raise self.err(node, f"{label}: a holds {ta.dtype.name}, b_buf "
                                 f"{bbuf.type.dtype.name}", hint="stage B in A's dtype")
        tb = self._mma_flag(kw.get("trans_b"), node, "trans_b")
        col0 = self.index_value(kw["col0"], node)
        k0 = self.index_value(Lit(0) if kw.get("k0") is None else kw["k0"], node)
        b_ = self.b
        fb = frag_of_dims("b", "m16n8k16", ta.dtype, ta.dims[1], at.dims[1])
        bv = b_._one("mma_load", [bbuf, col0, k0] if tb else [bbuf, k0, col0], fb,
                     {"trans": True} if tb else None)
        zero = b_.const(0, dt.i32)
        return b_._one("mma", [a, bv, acc, zero, col0, k0], at, attrs={"group": True})

    def intr_mma_store(self, name, args, kwargs, node):
        kw = self._mma_kw("store", args, kwargs, node, ["buf", "row0", "col0", "acc"],
                          ["ld", "alpha", "beta", "row_scale", "col_scale", "trans"])
        acc = kw["acc"]
        if getattr(getattr(acc, "type", None), "role", None) != "acc":
            raise self.err(node, f"kaio.mma.store stores an accumulator, got {describe(acc)}")
        buf, idx = self._mma_tile("store", kw, node, write=True)
        if self._mma_flag(kw.get("trans"), node, "trans"):
            return self._mma_store_trans(kw, buf, idx, acc, node)
        scaled = kw.get("alpha") is not None or kw.get("beta") is not None
        if acc.type.dtype is dt.i32:      # integer accumulators: stored exactly, or scaled to f32
            return self._mma_store_int(kw, buf, idx, acc, scaled, node)
        if kw.get("row_scale") is not None or kw.get("col_scale") is not None:
            raise self.err(node, "kaio.mma.store: row_scale=/col_scale= scale i32 accumulators",
                           hint="for f32 accumulators use alpha= and beta=")
        if not buf.type.dtype.is_float or buf.type.dtype is dt.f64:
            raise self.err(node, f"kaio.mma.store into '{buf.name}', a {buf.type.dtype.name} buffer",
                           hint="store accumulators into f32, f16 or bf16 buffers")
        if not scaled:
            self.b.op("mma_store", [buf, *idx, acc])
            return Lit(None)
        # the BLAS epilogue: buf = alpha * acc + beta * buf (buf is not read where beta is 0)
        if kw.get("beta") is not None and buf.type.intent == "out":
            raise self.err(node, f"kaio.mma.store(..., beta=) reads '{buf.name}', an Out buffer, "
                                 "whose old contents are never copied in",
                           hint=f"declare '{buf.name}' kaio.Region[...] to scale its old values, "
                                "or leave out beta=")
        scale = [self.convert(Lit(d) if kw.get(k) is None else kw[k], dt.f32, node, f"{k}=")
                 for k, d in (("alpha", 1.0), ("beta", 0.0))]
        self.b.op("mma_store", [buf, *idx, *scale, acc], attrs={"scaled": True})
        return Lit(None)

    def _mma_store_trans(self, kw, buf, idx, acc, node):
        """``trans=True``: element (i, j) of the accumulator to buf[row0 + j, col0 + i] (the
        product of a transposed multiply, e.g. W^T x^T of a warp-group W4A16), rounded to the
        buffer's dtype; into Raw buffers (a transposed tile is not a warp_tiles Region's)."""
        label = "kaio.mma.store(..., trans=True)"
        if buf.type.intent != "raw":
            raise self.err(node, f"{label} into '{buf.name}', a {buf.type.intent} buffer: a "
                                 "transposed tile is not a warp's own Region tile",
                           hint=f"declare '{buf.name}' kaio.Raw[...]")
        extra = [k for k in ("alpha", "beta", "row_scale", "col_scale") if kw.get(k) is not None]
        if extra:
            raise self.err(node, f"{label} takes no {'/'.join(k + '=' for k in extra)}",
                           hint="scale the accumulator first with kaio.mma.apply")
        bt = buf.type.dtype
        ok = bt in (dt.f32, dt.f16, dt.bf16) if acc.type.dtype is dt.f32 else bt is dt.i32
        if not ok:
            raise self.err(node, f"{label} of a {acc.type.dtype.name} accumulator into "
                                 f"'{buf.name}', a {bt.name} buffer",
                           hint="f32 accumulators into f32/f16/bf16 buffers, i32 into i32")
        self.b.op("mma_store", [buf, *idx, acc], attrs={"trans": True})
        return Lit(None)

    def _mma_store_int(self, kw, buf, idx, acc, scaled, node):
        """An i32 accumulator: exactly into an i32 buffer, or with ``row_scale=`` and
        ``col_scale=`` (f32 buffers: [M] or [M, 1], and [N]) into an f32 one as
        ``f32(acc) * row_scale[r] * col_scale[c]``, rounded after each step."""
        rs, cs = kw.get("row_scale"), kw.get("col_scale")
        bt = buf.type.dtype
        want_scales = bt is dt.f32
        if scaled or bt not in (dt.i32, dt.f32) or (rs is None) == want_scales \
                or (cs is None) == want_scales:
            raise self.err(node, f"kaio.mma.store of an i32 accumulator into '{buf.name}', a "
                                 f"{bt.name} buffer"
                                 f"{' with alpha=/beta=' if scaled else ''}",
                           hint="store i32 accumulators into i32 buffers exactly, or into f32 "
                                "buffers with row_scale= and col_scale= (both)")
        if not want_scales:
            self.b.op("mma_store", [buf, *idx, acc])
            return Lit(None)
        for v, what, ndims in ((rs, "row_scale", (1, 2)), (cs, "col_scale", (1,))):
            t = getattr(v, "type", None)
            if not (is_buffer(v) and t.dtype is dt.f32 and t.ndim in ndims and t.space == "global"):
                raise self.err(node, f"kaio.mma.store: {what}= must be a global f32 buffer "
                                     f"({'[M] or [M, 1]' if what == 'row_scale' else '[N]'}), got "
                                     f"{describe(v)}")
        self.b.op("mma_store", [buf, *idx, rs, cs, acc], attrs={"int_scaled": True})
        return Lit(None)

    def intr_mma_apply(self, name, args, kwargs, node):
        """``apply(fn, acc, row0, col0, *args)``: a new accumulator whose element (i, j) is
        ``fn(acc[i, j], row0 + i, col0 + j, *args)``, an argument that is an accumulator of
        acc's type passed as its element (i, j). fn is a @kaio.func; it is inlined into the op's
        region, which each target expands per element of its own lane layout."""
        usage = "kaio.mma.apply(fn, acc, row0, col0, *args) with @kaio.func def fn(x, r, c, *args)"
        if kwargs:
            k, (_, knode) = next(iter(kwargs.items()))
            raise self.err(knode, f"kaio.mma.apply() got a keyword argument '{k}'",
                           hint=f"pass everything by position: {usage}")
        if len(args) < 4:
            raise self.err(node, f"kaio.mma.apply() takes at least 4 arguments, got {len(args)}",
                           hint=usage)
        fn, acc, row0, col0, *rest = args
        if not (isinstance(fn, PyObj) and isinstance(fn.obj, DeviceFunction)):
            raise self.err(node, f"the first argument of kaio.mma.apply must be a @kaio.func, got "
                                 f"{describe(fn)}", hint=usage)
        t = getattr(acc, "type", None)
        if getattr(t, "role", None) != "acc":
            raise self.err(node, f"kaio.mma.apply applies a function to an accumulator, got "
                                 f"{describe(acc)}", hint=usage)
        for v in rest:
            vt = getattr(v, "type", None)
            if getattr(vt, "kind", None) == "frag" and vt is not t and not broadcasts_over(vt, t):
                raise self.err(node, f"kaio.mma.apply combines accumulators of one type: {t} "
                                     f"and {vt}", hint="both from fill/load_acc with the same "
                                                       "shape=, m= and n= (and dtype), or one "
                                                       "of acc's m and n=8 (row_max/row_sum), "
                                                       "broadcast along the rows")
        self._apply_arity(fn.obj, 3 + len(rest), node, usage)
        idx = [self.index_value(v, node) for v in (row0, col0)]
        frags = [v for v in rest if getattr(getattr(v, "type", None), "kind", None) == "frag"]
        body = Block()
        x, r, c = (body.add_arg(ty, n) for ty, n in ((t.dtype, "x"), (dt.INDEX, "r"), (dt.INDEX, "c")))
        elems = iter([body.add_arg(t.dtype, "y") for _ in frags])
        op = self.b.op("mma_apply", [acc, *idx, *frags], [t], regions=[body])
        call = [x, r, c] + [next(elems) if v in frags else v for v in rest]
        with self.b.at(body):
            res = self.call_func(fn.obj, call, {}, node)
            if getattr(getattr(res, "type", None), "kind", None) == "frag" or not (
                    isinstance(res, Lit) or hasattr(res, "type")):
                raise self.err(node, f"@kaio.func '{fn.obj.name}' passed to kaio.mma.apply returns "
                                     f"{describe(res)}, not one {t.dtype.name} element",
                               hint="return the new value of the element x (e.g. x * s[c])")
            self.b.yield_(self.convert(res, t.dtype, node,
                                       f"the value @kaio.func '{fn.obj.name}' returns"))
        for inner in body.walk():
            if inner.opcode in MMA_APPLY_FORBIDDEN + ("store", "atomic"):
                raise self.err(node, f"@kaio.func '{fn.obj.name}' passed to kaio.mma.apply "
                                     f"contains '{inner.opcode}' (line "
                                     f"{inner.loc.line if inner.loc else '?'})",
                               hint="the function computes one element from loads and "
                                    "arithmetic: no stores, atomics, barriers, warp or fragment ops")
        return op.result

    def _mma_acc_arg(self, v, node, label, usage):
        """``v``, checked to be an f32 accumulator (the operand of to_a / row_max / row_sum)."""
        t = getattr(v, "type", None)
        if getattr(t, "role", None) != "acc" or t.dtype is not dt.f32:
            raise self.err(node, f"{label} takes an f32 accumulator, got {describe(v)}",
                           hint=usage)
        return t

    def intr_mma_to_a(self, name, args, kwargs, node):
        """``to_a(acc, dtype)``: an f32 m16n8k16 accumulator (m x n) as an m x n f16/bf16 A
        fragment, each element rounded to nearest even (attention's P for P @ V)."""
        usage = ("kaio.mma.to_a(acc, kaio.f16, col0=0, k=None) (or kaio.bf16), acc an f32 "
                 "m16n8k16 accumulator")
        kw = self._mma_kw("to_a", args, kwargs, node, ["acc", "dtype"], ["col0", "k"])
        t = self._mma_acc_arg(kw["acc"], node, "kaio.mma.to_a", usage)
        d = self.const_dtype(kw["dtype"], node)
        if t.shape != "m16n8k16" or d.name not in MMA_INPUTS["m16n8k16"]:
            raise self.err(node, f"kaio.mma.to_a makes f16 or bf16 A fragments of m16n8k16 "
                                 f"accumulators, got {t} -> {d.name}", hint=usage)
        m, n = t.dims
        col0 = 0 if kw.get("col0") is None else self.const_int(kw["col0"], node, "to_a's col0=")
        k = n - col0 if kw.get("k") is None else self.const_int(kw["k"], node, "to_a's k=")
        if col0 % 16 or k <= 0 or k % 16 or col0 < 0 or col0 + k > n:
            raise self.err(node, f"kaio.mma.to_a of columns {col0} .. {col0 + k} of a {m}x{n} "
                                 f"accumulator: col0 and k must be multiples of 16 (A's k "
                                 f"steps) inside its {n} columns",
                           hint="make the accumulator with n= a multiple of 16, and take "
                                "col0=, k= multiples of 16")
        return self.b._one("mma_to_a", [kw["acc"]], frag_of_dims("a", t.shape, d, m, k),
                           attrs={"col0": col0} if col0 else None)

    def _mma_row_reduce(self, name, args, kwargs, node):
        kw = self._mma_kw(name, args, kwargs, node, ["acc"], [])
        t = self._mma_acc_arg(kw["acc"], node, f"kaio.mma.{name}", f"kaio.mma.{name}(acc)")
        op = name[4:]
        return self.b._one("mma_row_reduce", [kw["acc"]], row_frag(t), attrs={"op": op})

    def intr_mma_row_max(self, name, args, kwargs, node):
        return self._mma_row_reduce("row_max", args, kwargs, node)

    def intr_mma_row_sum(self, name, args, kwargs, node):
        return self._mma_row_reduce("row_sum", args, kwargs, node)

    def _apply_arity(self, dfn, n: int, node, usage: str) -> None:
        """``dfn`` takes ``n`` positional arguments (x, r, c and the extras)."""
        params = list(inspect.signature(dfn.fn).parameters.values())
        required = sum(p.default is inspect.Parameter.empty for p in params)
        if not required <= n <= len(params):
            names = ", ".join(p.name for p in params)
            raise self.err(node, f"kaio.mma.apply calls @kaio.func '{dfn.name}({names})' with {n} "
                                 f"arguments (x, r, c and {n - 3} more)", hint=usage)

    def intr_mma_copy_tile(self, name, args, kwargs, node):
        """Block-collective staging of a global tile in a shared array (zeros outside src)."""
        kw = self._mma_kw("copy_tile", args, kwargs, node, ["dst", "src", "row0", "col0"],
                          ["rows", "cols"])
        dst, src = kw["dst"], kw["src"]
        for b, what, ok in ((dst, "dst", lambda t: t.space == "shared"),
                            (src, "src", lambda t: t.space == "global" and t.intent in ("in", "raw"))):
            if not is_buffer(b) or not ok(b.type) or b.type.ndim != 2:
                raise self.err(node, f"kaio.mma.copy_tile: {what} must be a 2-d "
                                     f"{'shared array' if what == 'dst' else 'kaio.In/kaio.Raw buffer'}"
                                     f", got {describe(b)}",
                               hint="copy_tile(dst_shared, src, row0, col0) copies "
                                    "src[row0:row0+rows, col0:col0+cols] into dst[0:rows, 0:cols]")
        if dst.type.dtype is not src.type.dtype:
            raise self.err(node, f"kaio.mma.copy_tile from {src.type.dtype.name} '{src.name}' into "
                                 f"{dst.type.dtype.name} '{dst.name}': the dtypes differ",
                           hint="copy between buffers of one dtype")
        ext = dst.type.static_shape
        if ext is None:
            raise self.err(node, "kaio.mma.copy_tile needs a shared array of a static shape")
        dims = []
        for key, full in (("rows", ext[0]), ("cols", ext[1])):
            v = full if kw.get(key) is None else self.const_int(kw[key], node, f"{key}=")
            if not 1 <= v <= full:
                raise self.err(node, f"kaio.mma.copy_tile: {key}={v} does not fit '{dst.name}' "
                                     f"({ext[0]} x {ext[1]})")
            dims.append(v)
        idx = [self.index_value(kw[k], node) for k in ("row0", "col0")]
        self.b.op("mma_copy", [dst, src, *idx], attrs={"rows": dims[0], "cols": dims[1]})
        return Lit(None)

    def intr_mma_copy_wait(self, name, args, kwargs, node):
        kw = self._mma_kw("copy_wait", args, kwargs, node, [], ["pending"])
        n = 0 if kw.get("pending") is None else self.const_int(kw["pending"], node, "pending=")
        if n < 0:
            raise self.err(node, f"kaio.mma.copy_wait(pending={n}): pending counts copies still "
                                 "allowed in flight, 0 or more")
        self.b.op("mma_copy_wait", [], attrs={"pending": n})
        return Lit(None)
