"""Expression lowering: operators, comparisons, short-circuit logic, buffer loads and stores."""
from __future__ import annotations

import ast

from .. import dtypes as dt
from ..ir.core import Value
from ..lang import Intrinsic, warp_size
from .analysis import is_cheap
from .typing import fold_binary
from .values import Lit, OwnedMethod, PyObj, ShapeOf, TupleV, describe, is_buffer

_BINOPS = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
           ast.FloorDiv: "floordiv", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and",
           ast.BitOr: "or", ast.BitXor: "xor", ast.LShift: "shl", ast.RShift: "shr"}
_SYMBOL = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%",
           "pow": "**", "and": "&", "or": "|", "xor": "^", "shl": "<<", "shr": ">>"}
_CMPS = {ast.Eq: "eq", ast.NotEq: "ne", ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge"}
_PYCMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
          "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b}
_GEOMETRY = ("thread_idx", "block_idx", "block_dim", "grid_dim")

_UNSUPPORTED_EXPR = {
    "List": ("a list", "kernels have no Python lists; use a tuple of scalars, or "
                       "kaio.local_array(dtype, n) for an array"),
    "Dict": ("a dict", "kernels have no dicts; use separate variables"),
    "Set": ("a set", "kernels have no sets"),
    "ListComp": ("a list comprehension", "write a loop over kaio.static_range(n) or range(n)"),
    "SetComp": ("a set comprehension", "write a loop"),
    "DictComp": ("a dict comprehension", "write a loop"),
    "GeneratorExp": ("a generator expression", "write a loop"),
    "Lambda": ("a lambda", "define a module-level function with @kaio.func"),
    "JoinedStr": ("an f-string", "kernels have no strings"),
    "NamedExpr": ("the walrus operator (:=)", "assign in a separate statement"),
    "Starred": ("*unpacking", "pass each argument explicitly"),
    "Await": ("`await`", "kernels are not coroutines"),
    "Yield": ("`yield`", "kernels are not generators; write results into a buffer"),
    "YieldFrom": ("`yield from`", "kernels are not generators"),
    "Slice": ("a slice", "index single elements, e.g. in a loop"),
}


class ExprMixin:
    def expr(self, node, name_hint: str | None = None):
        handler = getattr(self, "expr_" + type(node).__name__, None)
        if handler is None:
            what, hint = _UNSUPPORTED_EXPR.get(type(node).__name__, (type(node).__name__, None))
            raise self.err(node, f"{what} is not supported in kernels", hint=hint)
        with self.b.located(self.loc(node)):
            v = handler(node)
        if name_hint and isinstance(v, Value) and v.name is None:
            v.name = name_hint
        return v

    # --- atoms --------------------------------------------------------------------------
    def expr_Constant(self, node):
        v = node.value
        if isinstance(v, (bool, int, float)) or v is None:
            return Lit(v)
        if isinstance(v, str):
            raise self.err(node, "strings are not supported in kernels",
                           hint="kernels compute numbers; use numeric codes instead of text")
        raise self.err(node, f"constant {v!r} is not supported in kernels")

    def expr_Name(self, node):
        return self.lookup(node.id, node)

    def expr_Tuple(self, node):
        return TupleV(tuple(self.expr(e) for e in node.elts))

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        attr = node.attr
        if is_buffer(base):
            if attr == "shape":
                return ShapeOf(base)
            if attr == "owned":
                return OwnedMethod(base)
            if attr == "ndim":
                return Lit(base.type.ndim)
            if attr == "dtype":
                return PyObj(base.type.dtype)
            raise self.err(node, f"buffers have no attribute '{attr}'",
                           hint="buffers have .shape, .ndim, .dtype and (Region/Out) .owned()")
        if isinstance(base, PyObj):
            obj = base.obj
            if isinstance(obj, Intrinsic) and obj.name in _GEOMETRY:
                if attr not in ("x", "y", "z"):
                    raise self.err(node, f"kaio.{obj.name} has no attribute '{attr}'",
                                   hint=f"use kaio.{obj.name}.x, .y or .z")
                return self.b.special(obj.name, "xyz".index(attr))
            try:
                sub = getattr(obj, attr)
            except AttributeError:
                name = getattr(obj, "__name__", repr(obj))
                raise self.err(node, f"'{name}' has no attribute '{attr}'",
                               hint="check the spelling; intrinsics live in kaio and kaio.math") from None
            return self.python_value(sub, node)
        raise self.err(node, f"{describe(base)} has no attribute '{attr}'")

    def python_value(self, obj, node):
        if obj is warp_size:
            return self.b.special("warp_size")
        return self.from_python(obj, node)

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        if isinstance(base, ShapeOf):
            k = self.expr(node.slice)
            if not (isinstance(k, Lit) and isinstance(k.value, int) and not isinstance(k.value, bool)):
                raise self.err(node.slice, "the axis in x.shape[axis] must be a constant integer")
            nd = base.buf.type.ndim
            axis = k.value + nd if k.value < 0 else k.value
            if not 0 <= axis < nd:
                raise self.err(node.slice, f"axis {k.value} is out of range for a {nd}-d buffer")
            st = base.buf.type.static_shape
            if st is not None:
                return Lit(int(st[axis]))
            return self.b.shape(base.buf, axis)
        if isinstance(base, TupleV):
            k = self.expr(node.slice)
            if not (isinstance(k, Lit) and isinstance(k.value, int)):
                raise self.err(node.slice, "tuples can only be indexed with a constant integer",
                               hint="use kaio.local_array for an array indexed at run time")
            try:
                return base.items[k.value]
            except IndexError:
                raise self.err(node.slice, f"index {k.value} is out of range for a tuple of "
                                           f"{len(base.items)}") from None
        if is_buffer(base):
            return self.load(base, self.indices(base, node.slice, node), node)
        raise self.err(node.value, f"{describe(base)} cannot be indexed",
                       hint="only buffers, x.shape and tuples can be indexed")

    # --- buffers ------------------------------------------------------------------------
    def indices(self, buf, slice_node, node) -> list:
        if isinstance(slice_node, ast.Slice) or (isinstance(slice_node, ast.Tuple) and any(
                isinstance(e, ast.Slice) for e in slice_node.elts)):
            raise self.err(slice_node, "slices are not supported in kernels",
                           hint="index single elements, e.g. in a loop")
        v = self.expr(slice_node)
        items = list(v.items) if isinstance(v, TupleV) else [v]
        nd = buf.type.ndim
        if len(items) != nd:
            raise self.err(slice_node, f"buffer '{buf.name}' has {nd} dimension(s) but is indexed "
                                       f"with {len(items)} index(es)",
                           hint=f"write {buf.name}[{', '.join('ijk'[:nd])}]")
        with self.b.located(self.loc(slice_node)):
            return [self.index_value(i, slice_node) for i in items]

    def subscript_target(self, t):
        buf = self.expr(t.value)
        if not is_buffer(buf):
            raise self.err(t.value, f"cannot assign to an element of {describe(buf)}",
                           hint="only buffer elements can be assigned: y[i] = v")
        return buf, self.indices(buf, t.slice, t)

    def load(self, buf, idx, node):
        if buf.type.intent == "atomic":
            raise self.err(node, f"buffer '{buf.name}' is Atomic: it can only be used through "
                                 "kaio.atomic_* operations",
                           hint="use kaio.atomic_add(...) etc., or declare it kaio.Raw[...] / kaio.In[...]")
        return self.b.load(buf, idx)

    def store(self, buf, idx, v, value_node, target_node):
        intent = buf.type.intent
        if intent == "in":
            raise self.err(target_node, f"cannot store to '{buf.name}': it is a read-only In buffer",
                           hint="declare it kaio.Region[...] or kaio.Out[...] to write it")
        if intent == "atomic":
            raise self.err(target_node, f"cannot store to '{buf.name}': Atomic buffers allow only "
                                        "atomic operations",
                           hint="use kaio.atomic_exchange(buf, i, v), or declare it kaio.Region[...]")
        with self.b.located(self.loc(target_node)):
            val = self.convert(v, buf.type.dtype, value_node, f"value stored to '{buf.name}'")
            self.b.store(buf, idx, val)

    # --- operators ----------------------------------------------------------------------
    def expr_BinOp(self, node):
        return self.binop(node.op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op_node, a, b, node):
        op = _BINOPS.get(type(op_node))
        if op is None:
            raise self.err(node, "the @ operator is not supported in kernels",
                           hint="write the loops, or use a library matmul kernel")
        sym = _SYMBOL[op]
        self.scalar(a, node, f"left operand of {sym}")
        self.scalar(b, node, f"right operand of {sym}")
        if isinstance(a, Lit) and isinstance(b, Lit):
            return self.fold(op, a, b, node)
        if op == "pow":
            return self.power(a, b, node)
        if op in ("shl", "shr"):
            return self.shift(op, a, b, node)
        a, b, t = self.unify(a, b, node)
        if t.is_bool and op not in ("and", "or", "xor"):
            raise self.err(node, f"arithmetic ({sym}) on bool values",
                           hint="cast first, e.g. kaio.i32(flag)")
        if t.is_float and op in ("and", "or", "xor"):
            raise self.err(node, f"bitwise {sym} on {t.name} values",
                           hint="bitwise operators need integers; reinterpret bits explicitly")
        if op == "truediv":
            if not t.is_float:
                raise self.err(node, f"true division (/) of {t.name} values",
                               hint="use // for C-style integer division, or cast to a float type first")
            return self.b.binary("div", a, b)
        if op == "floordiv":
            if t.is_float:
                return self.b.math("floor", self.b.binary("div", a, b), fast=self.fast_math)
            return self.b.binary("div", a, b)
        if op == "mod":
            if t.is_float:
                return self.b.math("fmod", a, b, fast=self.fast_math)
            return self.b.binary("rem", a, b)
        return self.b.binary(op, a, b)

    def fold(self, op, a: Lit, b: Lit, node):
        x, y = a.value, b.value
        if x is None or y is None:
            raise self.err(node, "None is not a number")
        if op == "truediv" and isinstance(x, int) and isinstance(y, int):
            raise self.err(node, "true division (/) of integer literals",
                           hint="use // for integer division, or write a float literal (1.0)")
        if op in ("and", "or", "xor", "shl", "shr") and (isinstance(x, float) or isinstance(y, float)):
            raise self.err(node, f"bitwise {_SYMBOL[op]} on float literals")
        if op not in ("and", "or", "xor") and (isinstance(x, bool) or isinstance(y, bool)):
            # as for typed bools (binop): Python's True + True == 2 is not kaio's
            raise self.err(node, f"arithmetic ({_SYMBOL[op]}) on bool values",
                           hint="cast first, e.g. kaio.i32(flag)")
        if op in ("shl", "shr") and y < 0:
            raise self.err(node, "negative shift amount")
        try:
            r = fold_binary(op, x, y)
        except ZeroDivisionError:
            raise self.err(node, "division by zero in a constant expression") from None
        except OverflowError:
            raise self.err(node, "constant expression overflows") from None
        if isinstance(x, bool) and isinstance(y, bool) and op in ("and", "or", "xor"):
            r = bool(r)
        if isinstance(r, complex):
            raise self.err(node, "constant expression has a complex result")
        return Lit(r)

    def power(self, a, b, node):
        if isinstance(b, Lit) and isinstance(b.value, int) and not isinstance(b.value, bool):
            n = b.value
            t = a.type
            if t.is_bool:
                raise self.err(node, "** on bool values", hint="cast first")
            if n < 0 and not t.is_float:
                raise self.err(node, "negative integer power of an integer",
                               hint="cast the base to a float type first")
            result, base, k = None, a, abs(n)
            while k:  # exponentiation by squaring, with plain (unfused) multiplies
                if k & 1:
                    result = base if result is None else self.b.binary("mul", result, base)
                k >>= 1
                if k:
                    base = self.b.binary("mul", base, base)
            if result is None:
                result = self.b.const(1, t)
            if n < 0:
                result = self.b.binary("div", self.b.const(1.0, t), result)
            return result
        a, b, t = self.unify(a, b, node)
        if not t.is_float:
            raise self.err(node, f"** with a run-time exponent on {t.name} values",
                           hint="use a constant integer exponent, or cast to a float type (math pow)")
        return self.b.math("pow", a, b, fast=self.fast_math)

    def shift(self, op, a, b, node):
        if isinstance(a, Lit):
            if not b.type.is_int:
                raise self.err(node, f"shift amount has type {b.type.name}", hint="shift by an integer")
            a = self.lit_value(a, b.type, node)
        t = a.type
        if not t.is_int:
            raise self.err(node, f"shift ({_SYMBOL[op]}) of a {t.name} value",
                           hint="shifts need integer operands")
        if isinstance(b, Lit):
            if not isinstance(b.value, int) or b.value < 0:
                raise self.err(node, f"shift amount {b.value!r} must be a non-negative integer")
            b = self.b.const(min(b.value, t.bits), t)
        else:
            if not b.type.is_int:
                raise self.err(node, f"shift amount has type {b.type.name}", hint="shift by an integer")
            b = self.b.cast(b, t)
        return self.b.binary(op, a, b)

    def expr_UnaryOp(self, node):
        v = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            c = self.to_bool(v, node.operand, "operand of `not`")
            return Lit(not c.value) if isinstance(c, Lit) else self.b.unary("not", c)
        self.scalar(v, node)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            if isinstance(v, Lit):
                if isinstance(v.value, bool) or v.value is None:
                    raise self.err(node, "unary - on a bool", hint="cast first")
                return Lit(-v.value)
            if v.type.is_bool:
                raise self.err(node, "unary - on a bool value", hint="cast first, e.g. kaio.i32(b)")
            return self.b.unary("neg", v)
        # ast.Invert
        if isinstance(v, Lit):
            if not isinstance(v.value, int) or isinstance(v.value, bool):
                raise self.err(node, f"~ on {describe(v)}", hint="use `not` for bools")
            return Lit(~v.value)
        if not v.type.is_int:
            raise self.err(node, f"~ on a {v.type.name} value",
                           hint="use `not` for bools; ~ needs an integer")
        return self.b.unary("not", v)

    # --- comparisons and logic ----------------------------------------------------------
    def expr_Compare(self, node):
        def chain(left, i):
            op = type(node.ops[i])
            if op not in _CMPS:
                raise self.err(node, "`is`, `is not`, `in` and `not in` are not supported in kernels",
                               hint="compare values with == and !=")
            right = self.expr(node.comparators[i])
            c = self.compare(_CMPS[op], left, right, node)
            if i == len(node.ops) - 1:
                return c
            rest_cheap = all(is_cheap(n) for n in node.comparators[i + 1:])
            return self.and_then(c, lambda: chain(right, i + 1), rest_cheap, node)
        return chain(self.expr(node.left), 0)

    def compare(self, pred, a, b, node):
        self.scalar(a, node, "comparison operand")
        self.scalar(b, node, "comparison operand")
        if isinstance(a, Lit) and isinstance(b, Lit):
            if a.value is None or b.value is None:
                raise self.err(node, "None is not a number", hint="compare numbers")
            return Lit(bool(_PYCMP[pred](a.value, b.value)))
        a, b, _ = self.unify(a, b, node)
        return self.b.cmp(pred, a, b)

    def expr_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)

        def go(i):
            v = self.to_bool(self.expr(node.values[i]), node.values[i],
                             "operand of `and`" if is_and else "operand of `or`")
            if i == len(node.values) - 1:
                return v
            cheap = all(is_cheap(n) for n in node.values[i + 1:])
            rest = lambda: go(i + 1)  # noqa: E731
            return self.and_then(v, rest, cheap, node) if is_and else self.or_else(v, rest, cheap, node)
        return go(0)

    def and_then(self, a, rhs, cheap: bool, node):
        """``a and rhs()`` on bools; rhs runs only when a is true unless it is cheap."""
        if isinstance(a, Lit):
            return self.to_bool(rhs(), node) if a.value else Lit(False)
        if cheap:
            r = self.to_bool(rhs(), node)
            if isinstance(r, Lit):
                return a if r.value else Lit(False)
            return self.b.binary("and", a, r)
        return self.value_if(a, lambda: self.to_bool(rhs(), node), lambda: Lit(False), node)

    def or_else(self, a, rhs, cheap: bool, node):
        """``a or rhs()`` on bools; rhs runs only when a is false unless it is cheap."""
        if isinstance(a, Lit):
            return Lit(True) if a.value else self.to_bool(rhs(), node)
        if cheap:
            r = self.to_bool(rhs(), node)
            if isinstance(r, Lit):
                return Lit(True) if r.value else a
            return self.b.binary("or", a, r)
        return self.value_if(a, lambda: Lit(True), lambda: self.to_bool(rhs(), node), node)

    def expr_IfExp(self, node):
        c = self.to_bool(self.expr(node.test), node.test)
        if isinstance(c, Lit):
            return self.expr(node.body if c.value else node.orelse)
        if is_cheap(node.body) and is_cheap(node.orelse):
            t, e = self.expr(node.body), self.expr(node.orelse)
            if isinstance(t, Lit) and isinstance(e, Lit) and t.same(e):
                return t
            t, e, ty = self.unify(t, e, node)
            if ty is None:
                ty = dt.promote(dt.literal_dtype(t.value), dt.literal_dtype(e.value))
                t, e = self.lit_value(t, ty, node), self.lit_value(e, ty, node)
            return self.b.select(c, t, e)
        return self.value_if(c, lambda: self.expr(node.body), lambda: self.expr(node.orelse), node)
