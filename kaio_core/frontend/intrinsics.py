"""Calls inside kernels: kaio intrinsics, kaio.math, casts, builtins and @kaio.func.

Each intrinsic has a handler ``intr_<name>(args, kwargs, node)``; arity and argument kinds are
checked here so errors name the intrinsic and show the call.
"""
from __future__ import annotations

import ast
import builtins
import math

from .. import dtypes as dt
from ..ir.core import Value
from ..ir.indexmath import IndexMath
from ..ir.ops import MATH_FNS
from ..lang import DeviceFunction, Intrinsic, KaioFunction
from .typing import shown_number
from .values import Lit, OwnedMethod, PyObj, TupleV, describe, is_buffer

_ATOMICS = {"atomic_add": "add", "atomic_sub": "sub", "atomic_min": "min", "atomic_max": "max",
            "atomic_and": "and", "atomic_or": "or", "atomic_xor": "xor", "atomic_exchange": "exch"}
_SHUFFLES = {"shuffle": "idx", "shuffle_up": "up", "shuffle_down": "down", "shuffle_xor": "xor"}
_REDUCE = {"warp_sum": ("warp_reduce", "sum"), "warp_max": ("warp_reduce", "max"),
           "warp_min": ("warp_reduce", "min"), "block_sum": ("block_reduce", "sum"),
           "block_max": ("block_reduce", "max"), "block_min": ("block_reduce", "min")}
_MAX_LOCAL = 1 << 16



def saturate(x: float, to: dt.DType) -> int:
    """A float constant cast to the integer dtype ``to`` as the cast does at run time (docs:
    language.md): truncated toward zero, saturated at the type's range, NaN -> 0."""
    if x != x:
        return 0
    if math.isinf(x):
        return to.max_value() if x > 0 else to.min_value()
    return max(to.min_value(), min(to.max_value(), int(x)))



class IntrinsicsMixin:
    def expr_Call(self, node):
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.err(a, "*args in calls is not supported in kernels",
                               hint="pass each argument explicitly")
        for k in node.keywords:
            if k.arg is None:
                raise self.err(k.value, "**kwargs in calls is not supported in kernels",
                               hint="pass each argument explicitly")
        f = self.expr(node.func)
        if isinstance(f, OwnedMethod):
            raise self.err(node, f"{f.buf.name}.owned() can only be used as `for i in "
                                 f"{f.buf.name}.owned():`", hint="iterate over it in a for loop")
        if not isinstance(f, PyObj):
            raise self.err(node.func, f"{describe(f)} is not callable")
        obj = f.obj
        if isinstance(obj, dt.DType):
            return self.cast_call(obj, node)
        if isinstance(obj, Intrinsic):
            if obj.name == "static_range":
                raise self.err(node, "kaio.static_range(...) can only be used as a for-loop iterator",
                               hint="write `for i in kaio.static_range(n):`")
            args, kwargs = self.call_args(node)
            if obj.name.startswith("math."):
                return self.math_call(obj.name[5:], args, kwargs, node)
            handler = getattr(self, "intr_" + obj.name.replace(".", "_"), None)  # mma.fill -> intr_mma_fill
            if handler is None:
                raise self.err(node, f"kaio.{obj.name} cannot be called",
                               hint=f"use it without parentheses: kaio.{obj.name}")
            return handler(obj.name, args, kwargs, node)
        if isinstance(obj, DeviceFunction):
            args, kwargs = self.call_args(node)
            return self.call_func(obj, args, kwargs, node)
        if isinstance(obj, KaioFunction):  # not a device function: a kernel
            raise self.err(node.func, f"kernel '{obj.name}' cannot be called from a kernel",
                           hint="move the shared code into a @kaio.func device function")
        if obj is builtins.range:
            raise self.err(node, "range(...) can only be used as a for-loop iterator",
                           hint="write `for i in range(...):`")
        if obj in (builtins.abs, builtins.min, builtins.max):
            args, kwargs = self.call_args(node)
            return self.math_call(obj.__name__, args, kwargs, node)
        if obj is builtins.len:
            args, kwargs = self.call_args(node)
            self.arity("len", args, kwargs, node, 1)
            if not is_buffer(args[0]):
                if isinstance(args[0], TupleV):
                    return Lit(len(args[0].items))
                raise self.err(node, f"len() of {describe(args[0])}", hint="len() takes a buffer")
            st = args[0].type.static_shape
            return Lit(int(st[0])) if st is not None else self.b.shape(args[0], 0)
        if obj in (builtins.int, builtins.float, builtins.bool):
            raise self.err(node.func, f"{obj.__name__}(...) is not supported in kernels",
                           hint="cast with a kaio dtype: kaio.i32(x), kaio.f32(x), or compare: x != 0")
        name = getattr(obj, "__name__", repr(obj))
        mod = getattr(obj, "__module__", None) or type(obj).__module__ or ""
        if (mod.split(".")[0] in ("numpy", "math") or mod == "builtins") and name in MATH_FNS:
            raise self.err(node.func, f"{mod.split('.')[0]}.{name} cannot be used in a kernel",
                           hint=f"use kaio.math.{name}(...)")
        if mod == "builtins":
            raise self.err(node.func, f"the Python builtin '{name}' cannot be used in a kernel",
                           hint="kernels support range, len, abs, min and max; loop with "
                                "range(...) instead of enumerate/zip")
        raise self.err(node.func, f"'{name}' is not callable in a kernel: decorate it with @kaio.func",
                       hint="only kaio intrinsics, kaio.math, dtype casts and @kaio.func functions "
                            "can be called inside kernels")

    def call_args(self, node):
        return [self.expr(a) for a in node.args], {k.arg: (self.expr(k.value), k.value)
                                                  for k in node.keywords}

    def arity(self, name, args, kwargs, node, lo, hi=None, allowed_kw=()):
        hi = lo if hi is None else hi
        for k, (_, knode) in kwargs.items():
            if k not in allowed_kw:
                raise self.err(knode, f"{name}() has no keyword argument '{k}'",
                               hint=f"pass arguments by position: {name}(...)")
        n = len(args) + len(kwargs)
        if not lo <= n <= hi:
            want = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise self.err(node, f"{name}() takes {want} argument(s) but {n} were given")

    def const_int(self, v, node, what: str) -> int:
        if not (isinstance(v, Lit) and isinstance(v.value, int) and not isinstance(v.value, bool)):
            raise self.err(node, f"{what} must be a compile-time integer, got {describe(v)}",
                           hint="use a literal, a module-level constant or a kaio.Const[int] parameter")
        return v.value

    def const_dtype(self, v, node, what: str = "dtype"):
        if not (isinstance(v, PyObj) and isinstance(v.obj, dt.DType)):
            raise self.err(node, f"{what} must be a kaio dtype such as kaio.f32, got {describe(v)}")
        return v.obj

    # --- casts --------------------------------------------------------------------------
    def cast_call(self, to, node):
        args, kwargs = self.call_args(node)
        self.arity(f"kaio.{to.name}", args, kwargs, node, 1)
        v = self.scalar(args[0], node.args[0], "cast operand")
        if isinstance(v, Lit):
            x = v.value
            if x is None:
                raise self.err(node.args[0], f"None is not a value (kaio.{to.name} operand)",
                               hint="kernels and device functions work on numbers")
            if to.is_float:
                if isinstance(x, int) and abs(x) > dt.f64.max_value():
                    raise self.err(node, f"literal {shown_number(x)} does not fit in {to.name}",
                                   hint=f"the largest {to.name} is {to.max_value()}")
                return self.b.const(float(x), to)
            if to.is_bool:
                return self.b.const(bool(x), to)
            x = saturate(x, to) if isinstance(x, float) else x
            if not dt.literal_fits(x, to):
                raise self.err(node, f"literal {v.value!r} does not fit in {to.name}",
                               hint=f"range of {to.name}: {to.min_value()}..{to.max_value()}")
            return self.b.const(x, to)
        return self.b.cast(v, to)

    def intr_bitcast(self, name, args, kwargs, node):
        """``kaio.bitcast(value, dtype)``: the same bits as another dtype of the same width."""
        self.arity("kaio.bitcast", args, kwargs, node, 2, allowed_kw=("dtype",))
        to = self.const_dtype(args[1] if len(args) > 1 else kwargs["dtype"][0], node,
                              "the dtype of kaio.bitcast")
        v = self.scalar(args[0], node, "operand of kaio.bitcast")
        if isinstance(v, Lit):
            raise self.err(node, "kaio.bitcast of a literal: its width is not known",
                           hint="give it a dtype first: kaio.bitcast(kaio.f32(1.5), kaio.i32)")
        if v.type.is_bool or to.is_bool or v.type.bits != to.bits:
            raise self.err(node, f"kaio.bitcast from {v.type.name} to {to.name}: the widths differ "
                                 "or one is bool", hint="bitcast between dtypes of one width "
                                                        "(f32 <-> i32/u32, f16/bf16 <-> i16/u16)")
        return self.b.bitcast(v, to)

    # --- math ---------------------------------------------------------------------------
    def math_call(self, fn, args, kwargs, node):
        label = f"kaio.math.{fn}"
        fast = self.fast_math
        if "fast" in kwargs and fn in MATH_FNS:   # per call: the target's approximation
            kwargs = dict(kwargs)
            v, knode = kwargs.pop("fast")
            if not (isinstance(v, Lit) and isinstance(v.value, bool)):
                raise self.err(knode, f"{label}(fast=...) must be a compile-time True or False, "
                                      f"got {describe(v)}", hint=f"{label}(x, fast=True)")
            fast = fast or v.value
        if fn in ("min", "max") and len(args) > 2 and not kwargs:
            out = self.math_call(fn, args[:2], {}, node)
            for a in args[2:]:
                out = self.math_call(fn, [out, a], {}, node)
            return out
        arity = {"abs": 1, "min": 2, "max": 2, "fma": 3}.get(fn) or MATH_FNS[fn]
        self.arity(label, args, kwargs, node, arity)
        vals = [self.scalar(a, node, f"argument of {label}") for a in args]
        typed = [v for v in vals if isinstance(v, Value)]
        if not typed:
            if any(v.value is None for v in vals):
                raise self.err(node, f"None is not a value (argument of {label})",
                               hint="kernels and device functions work on numbers")
            if any(isinstance(v.value, bool) for v in vals):
                raise self.err(node, f"{label} of bool values", hint="cast first")
            if fn in ("abs", "min", "max"):
                return Lit({"abs": abs, "min": min, "max": max}[fn](*[v.value for v in vals]))
            t = dt.f32
        else:
            t = typed[0].type
            for v in typed[1:]:
                t = dt.promote(t, v.type)
        float_only = fn not in ("abs", "min", "max")
        if float_only and not t.is_float:
            raise self.err(node, f"{label} takes float arguments, got {t.name}",
                           hint=f"cast first: {label}(kaio.f32(x))")
        if t.is_bool:
            raise self.err(node, f"{label} of bool values", hint="cast first")
        vals = [self.lit_value(v, t, node) if isinstance(v, Lit) else self.b.cast(v, t) for v in vals]
        if fn == "abs":
            return self.b.unary("abs", vals[0])
        if fn in ("min", "max"):
            return self.b.binary(fn, vals[0], vals[1])
        if fn == "fma":
            return self.b.fma(*vals)
        return self.b.math(fn, *vals, fast=fast)

    # --- thread geometry ----------------------------------------------------------------
    def intr_global_id(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 0, 1, allowed_kw=("axis",))
        a = args[0] if args else kwargs["axis"][0] if kwargs else Lit(0)
        axis = self.const_int(a, node, "the axis of global_id")
        if axis not in (0, 1, 2):
            raise self.err(node, f"global_id axis must be 0, 1 or 2, got {axis}")
        return IndexMath(self.b).global_id(axis)

    def intr_lane_id(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 0)
        return self.b.special("lane_id")

    def intr_sync(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 0)
        self.b.barrier()
        return Lit(None)

    # --- memory -------------------------------------------------------------------------
    def shape_arg(self, v, node, what) -> tuple:
        items = v.items if isinstance(v, TupleV) else (v,)
        shape = tuple(self.const_int(i, node, what) for i in items)
        if not 1 <= len(shape) <= 3 or any(s < 1 for s in shape):
            raise self.err(node, f"{what} must be 1 to 3 positive integers, got {shape}")
        return shape

    def intr_shared_array(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 2, allowed_kw=("dtype", "shape"))
        dtype = args[0] if args else kwargs["dtype"][0]
        shape = args[1] if len(args) > 1 else kwargs["shape"][0]
        t = self.const_dtype(dtype, node)
        return self.b.shared_array(t, self.shape_arg(shape, node, "the shape of shared_array"))

    def intr_dynamic_shared(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 1, allowed_kw=("dtype",))
        return self.b.dyn_shared(self.const_dtype(args[0] if args else kwargs["dtype"][0], node))

    def intr_local_array(self, name, args, kwargs, node):
        self.arity(name, args, kwargs, node, 2, allowed_kw=("dtype", "shape", "n"))
        t = self.const_dtype(args[0] if args else kwargs["dtype"][0], node)
        n = args[1] if len(args) > 1 else next(v for k, (v, _) in kwargs.items() if k != "dtype")
        shape = self.shape_arg(n, node, "the size of local_array")
        total = 1
        for s in shape:
            total *= s
        if total > _MAX_LOCAL:
            raise self.err(node, f"local_array of {total} elements is too large (limit {_MAX_LOCAL})",
                           hint="use shared or global memory for large arrays")
        return self.b.local_array(t, shape)

    def atomic_target(self, name, buf, idx_v, node):
        if not is_buffer(buf):
            raise self.err(node, f"the first argument of kaio.{name} must be a buffer, got {describe(buf)}")
        t = buf.type
        if not (t.space == "shared" or (t.space == "global" and t.intent in ("atomic", "raw"))):
            raise self.err(node, f"kaio.{name} on '{buf.name}', a {t.intent} buffer",
                           hint="atomics need a kaio.Atomic[...] or kaio.Raw[...] parameter or a "
                                "shared array")
        items = list(idx_v.items) if isinstance(idx_v, TupleV) else [idx_v]
        if len(items) != t.ndim:
            raise self.err(node, f"buffer '{buf.name}' has {t.ndim} dimension(s) but the atomic "
                                 f"index has {len(items)}")
        return [self.index_value(i, node) for i in items]

    def _atomic(self, name, args, kwargs, node, kind, nvals):
        self.arity(f"kaio.{name}", args, kwargs, node, 2 + nvals)
        buf = args[0]
        idx = self.atomic_target(name, buf, args[1], node)
        t = buf.type.dtype
        if kind in ("and", "or", "xor") and not t.is_int:
            raise self.err(node, f"kaio.{name} needs an integer buffer, '{buf.name}' holds {t.name}")
        if t.is_bool or t.bits < 32:
            raise self.err(node, f"kaio.{name} on {t.name} elements is not supported",
                           hint="use a 32- or 64-bit element type")
        vals = [self.convert(v, t, node, f"value of kaio.{name}") for v in args[2:]]
        return self.b.atomic(kind, buf, idx, *vals)

    def intr_atomic_cas(self, name, args, kwargs, node):
        return self._atomic(name, args, kwargs, node, "cas", 2)

    # --- warp and block -----------------------------------------------------------------
    def warp_value(self, v, node, what):
        self.scalar(v, node, what)
        return self.default_value(v, node)

    def _shuffle(self, name, args, kwargs, node):
        self.arity(f"kaio.{name}", args, kwargs, node, 2)
        v = self.warp_value(args[0], node, f"value of kaio.{name}")
        lane = self.index_value(args[1], node)
        return self.b.shuffle(_SHUFFLES[name], v, lane)

    def _vote(self, name, args, kwargs, node):
        self.arity(f"kaio.{name}", args, kwargs, node, 1)
        p = self.to_bool(args[0], node, f"argument of kaio.{name}")
        p = self.default_value(p, node)
        if name == "ballot":
            return self.b.ballot(p)
        return self.b.vote("any" if name == "vote_any" else "all", p)

    def _reduce(self, name, args, kwargs, node):
        self.arity(f"kaio.{name}", args, kwargs, node, 1)
        v = self.warp_value(args[0], node, f"value of kaio.{name}")
        if v.type.is_bool:
            raise self.err(node, f"kaio.{name} of bool values", hint="cast to an integer first")
        opcode, kind = _REDUCE[name]
        return (self.b.warp_reduce if opcode == "warp_reduce" else self.b.block_reduce)(kind, v)


def _install():
    for n, kind in _ATOMICS.items():
        setattr(IntrinsicsMixin, "intr_" + n,
                lambda self, name, a, k, node, _kind=kind: self._atomic(name, a, k, node, _kind, 1))
    for n in _SHUFFLES:
        setattr(IntrinsicsMixin, "intr_" + n, IntrinsicsMixin._shuffle)
    for n in ("vote_any", "vote_all", "ballot"):
        setattr(IntrinsicsMixin, "intr_" + n, IntrinsicsMixin._vote)
    for n in _REDUCE:
        setattr(IntrinsicsMixin, "intr_" + n, IntrinsicsMixin._reduce)


_install()
