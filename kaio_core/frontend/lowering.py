"""The lowering driver: frames, name resolution, statements, device-function inlining.

One :class:`Lowerer` turns one kernel (and every ``@kaio.func`` it calls, inlined) into IR.
Expressions live in :mod:`.exprs`, intrinsics in :mod:`.intrinsics`, control flow in
:mod:`.control`; this module ties them together.
"""
from __future__ import annotations

import ast
import builtins
from dataclasses import field

import numpy as np

from .. import dtypes as dt
from ..errors import CompileError
from ..ir.builder import Builder
from ..ir.core import Param, Value
from ..ir.types import BufType, FragType
from ..records import record
from ..regions import Coarsened, Elementwise
from .analysis import always_returns, contains_return
from .control import ControlMixin
from .diagnostics import Source, error, parse_function
from .exprs import ExprMixin
from .intrinsics import IntrinsicsMixin
from .mma import MmaMixin
from .typing import TypingMixin
from .values import Lit, OwnedMethod, PyObj, ShapeOf, TupleV, Undef, describe, is_scalar


@record
class Frame:
    """The state of one function being lowered (the kernel, or an inlined @kaio.func)."""

    src: Source
    env: dict
    is_kernel: bool
    loops: list = field(default_factory=list)
    ret_flag: str | None = None      # hidden bool variable: a return has executed
    retval: str | None = None        # hidden variable holding the return value
    ret_template: object = None      # leaf types of the return value (funcs with early returns)
    counter: list = field(default_factory=lambda: [0])
    trial_returns: list | None = None  # set while learning a function's return type


class Lowerer(ExprMixin, IntrinsicsMixin, MmaMixin, ControlMixin, TypingMixin):
    def __init__(self, fn, params, consts: dict, fast_math: bool, coarsen: int | None = None):
        self.fn = fn
        self.kernel_name = fn.__name__
        self.fast_math = fast_math
        self.coarsen = coarsen   # k for default Regions, or None: elementwise (frontend.coarsen)
        self.params = params
        self.consts = consts
        self.buf_params: dict[int, tuple] = {}   # Value.id -> (param name, partition)
        self.frames: list[Frame] = []
        self.inlining: list = []

    # --- helpers used everywhere --------------------------------------------------------
    @property
    def frame(self) -> Frame:
        return self.frames[-1]

    @property
    def env(self) -> dict:
        return self.frames[-1].env

    def err(self, node, message: str, hint: str | None = None) -> CompileError:
        return error(self.frame.src if self.frames else None, node, message, self.kernel_name, hint)

    def loc(self, node):
        return self.frame.src.loc(node)

    def fresh(self, stem: str) -> str:
        """A hidden variable name (users cannot write '$')."""
        self.frame.counter[0] += 1
        return f"${stem}{self.frame.counter[0]}"

    # --- entry --------------------------------------------------------------------------
    def lower(self):
        src = parse_function(self.fn, self.kernel_name)
        tree = src.tree
        sig = []
        for p in self.params:
            if p.kind == "scalar":
                sig.append((p.name, p.spec, Param(p.name, "scalar")))
            elif p.kind == "buffer":
                spec = p.spec
                default = Coarsened(self.coarsen) if self.coarsen else Elementwise()
                part = (spec.partition or default) if spec.intent in ("region", "out") else None
                sig.append((p.name, BufType(spec.dtype, spec.ndim, "global", spec.intent),
                            Param(p.name, "buffer", part)))
        self.b = Builder.for_kernel(self.kernel_name, sig, src.loc(tree))
        env: dict = {}
        args = iter(self.b.kernel.body.args)
        for p in self.params:
            if p.kind == "const":
                env[p.name] = Lit(self.consts[p.name])
            else:
                v = next(args)
                env[p.name] = v
                if p.kind == "buffer":
                    self.buf_params[v.id] = (p.name, _partition_of(sig, p.name))
        frame = Frame(src, env, is_kernel=True)
        self.frames.append(frame)
        body = _strip_docstring(tree.body)
        if contains_return(body):
            frame.ret_flag = self.fresh("ret")
            with self.b.located(src.loc(tree)):
                env[frame.ret_flag] = self.b.const(False, dt.bool_)
        self.lower_block(body)
        self.frames.pop()
        return self.b.finish()

    # --- names --------------------------------------------------------------------------
    def lookup(self, name: str, node):
        env = self.env
        if name in env:
            v = env[name]
            if isinstance(v, Undef):
                hint = (f"assign '{name}' before the loop (e.g. {name} = 0) to keep its last value "
                        "after it, as Python does" if "loop variable" in v.why
                        else f"assign '{name}' before the if/loop so it is defined on every path")
                raise self.err(node, f"variable '{name}' may be undefined here ({v.why})", hint=hint)
            return v
        fn = self.frame.src.fn
        code = fn.__code__
        if fn.__closure__ and name in code.co_freevars:
            try:
                obj = fn.__closure__[code.co_freevars.index(name)].cell_contents
            except ValueError:  # empty cell
                raise self.err(node, f"name '{name}' is not defined yet",
                               hint="define it before the kernel function") from None
            return self.python_value(obj, node)
        if name in fn.__globals__:
            return self.python_value(fn.__globals__[name], node)
        if hasattr(builtins, name):
            return PyObj(getattr(builtins, name))
        raise self.err(node, f"undefined name '{name}'",
                       hint="define it in the kernel, pass it as a parameter, or import it")

    def from_python(self, obj, node, name: str = "value"):
        """A Python object seen from a kernel: numbers become weak literals."""
        if isinstance(obj, (bool, int, float)):
            return Lit(obj)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return Lit(obj.item())
        if isinstance(obj, tuple):
            return TupleV(tuple(self.from_python(o, node, name) for o in obj))
        return PyObj(obj)

    # --- statements ---------------------------------------------------------------------
    def stmt(self, s):
        handler = getattr(self, "stmt_" + type(s).__name__, None)
        if handler is None:
            raise self.unsupported(s)
        handler(s)

    def unsupported(self, node):
        name = type(node).__name__
        what, hint = _UNSUPPORTED.get(name, (name, "see docs/language.md for what kernels support"))
        return self.err(node, f"{what} is not supported in kernels", hint=hint)

    def stmt_Pass(self, s):
        pass

    def stmt_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # a string statement is a comment
        self.expr(s.value)

    def stmt_Assign(self, s):
        hint = s.targets[0].id if len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) else None
        v = self.expr(s.value, name_hint=hint)
        for t in s.targets:
            self.assign(t, v, s.value)

    def stmt_AnnAssign(self, s):
        if s.value is None:
            raise self.err(s, "a declaration without a value is not supported",
                           hint="give the variable a value: `x: kaio.f32 = 0.0`")
        ann = self.expr(s.annotation)
        v = self.expr(s.value, name_hint=getattr(s.target, "id", None))
        if isinstance(ann, PyObj) and isinstance(ann.obj, dt.DType):
            v = self.convert(v, ann.obj, s.value)
        else:
            raise self.err(s.annotation, f"a variable annotation must be a dtype, got {describe(ann)}",
                           hint="e.g. `acc: kaio.f32 = 0.0`")
        self.assign(s.target, v, s.value)

    def stmt_AugAssign(self, s):
        t = s.target
        if isinstance(t, ast.Name):
            cur = self.lookup(t.id, t)
            self.assign(t, self.binop(s.op, cur, self.expr(s.value), s), s)
        elif isinstance(t, ast.Subscript):
            buf, idx = self.subscript_target(t)
            cur = self.load(buf, idx, t)
            self.store(buf, idx, self.binop(s.op, cur, self.expr(s.value), s), s, t)
        else:
            raise self.err(t, "augmented assignment needs a variable or a buffer element")

    def assign(self, target, v, value_node):
        if isinstance(target, ast.Name):
            self.bind(target.id, v, target)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise self.err(target, "starred assignment is not supported",
                               hint="unpack every element by name: a, b = t")
            if not isinstance(v, TupleV):
                raise self.err(value_node, f"cannot unpack {describe(v)} into {len(target.elts)} names",
                               hint="only tuples can be unpacked")
            if len(v.items) != len(target.elts):
                raise self.err(value_node, f"cannot unpack a tuple of {len(v.items)} into "
                                           f"{len(target.elts)} names")
            for t, item in zip(target.elts, v.items):
                self.assign(t, item, value_node)
        elif isinstance(target, ast.Subscript):
            buf, idx = self.subscript_target(target)
            self.store(buf, idx, v, value_node, target)
        elif isinstance(target, ast.Attribute):
            raise self.err(target, "assigning to an attribute is not supported",
                           hint="assign to a variable or a buffer element")
        else:
            raise self.unsupported(target)

    def bind(self, name: str, v, node):
        """Assign ``name = v``, keeping one type per variable."""
        if isinstance(v, (ShapeOf, OwnedMethod)):
            raise self.err(node, f"cannot store {describe(v)} in a variable",
                           hint="index it directly: x.shape[0]")
        v = self.keep_type(name, self.env.get(name), v, node)
        if isinstance(v, Value) and v.name is None:
            v.name = name
        self.env[name] = v

    def keep_type(self, name: str, old, v, node):
        """``v`` converted to the type ``old`` already has (literals convert; others must match)."""
        if isinstance(old, TupleV) and isinstance(v, TupleV) and len(old.items) == len(v.items):
            return TupleV(tuple(self.keep_type(name, o, x, node) for o, x in zip(old.items, v.items)))
        if not (isinstance(old, Value) and is_scalar(old)):
            return v
        if isinstance(v, Lit):
            return self.lit_value(v, old.type, node, f"assigned to '{name}'")
        if isinstance(v, Value) and is_scalar(v) and v.type is not old.type:
            raise self.err(node, f"variable '{name}' has type {old.type.name} but is assigned "
                                 f"a {v.type.name} value",
                           hint=f"a variable keeps one type: cast explicitly with "
                                f"kaio.{old.type.name}(...) or use a new name")
        if not is_scalar(v):
            raise self.err(node, f"variable '{name}' holds a {old.type.name} value but is "
                                 f"assigned {describe(v)}", hint="use a new name")
        return v

    # --- device functions ---------------------------------------------------------------
    def call_func(self, dfn, args, kwargs, node):
        """Inline a ``@kaio.func`` at this call site."""
        if dfn in self.inlining:
            chain = " -> ".join(f.name for f in self.inlining) + f" -> {dfn.name}"
            raise self.err(node, f"recursive call of @kaio.func '{dfn.name}' ({chain})",
                           hint="device functions are inlined: rewrite the recursion as a loop")
        src = parse_function(dfn.fn, self.kernel_name)
        tree = src.tree
        a = tree.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs:
            raise error(src, tree, f"@kaio.func '{dfn.name}' uses *args, **kwargs or keyword-only "
                                   "parameters, which are not supported", self.kernel_name,
                        hint="list every parameter explicitly")
        names = [p.arg for p in a.args]
        if len(args) > len(names):
            raise self.err(node, f"@kaio.func '{dfn.name}' takes {len(names)} arguments "
                                 f"({', '.join(names)}) but {len(args)} were given")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise self.err(node, f"@kaio.func '{dfn.name}' has no parameter '{k}'")
            if k in bound:
                raise self.err(node, f"@kaio.func '{dfn.name}': parameter '{k}' given twice")
            bound[k] = v
        defaults = dict(zip(names[len(names) - len(a.defaults):], a.defaults))
        env = {}
        for p in a.args:
            if p.arg in bound:
                v = bound[p.arg]
            elif p.arg in defaults:
                v = self.from_python(dfn.fn.__defaults__[list(defaults).index(p.arg)], node)
            else:
                raise self.err(node, f"@kaio.func '{dfn.name}': missing argument '{p.arg}'")
            ann = dfn.fn.__annotations__.get(p.arg)
            if isinstance(ann, dt.DType):
                v = self.convert(v, ann, node, f"argument '{p.arg}' of '{dfn.name}'")
            env[p.arg] = v
        body = _strip_docstring(tree.body)
        frame = Frame(src, env, is_kernel=False)
        self.inlining.append(dfn)
        self.frames.append(frame)
        try:
            simple = not any(contains_return([s]) for s in body[:-1]) and not (
                body and not isinstance(body[-1], ast.Return) and contains_return(body[-1:]))
            if simple:
                result = Lit(None)
                if body and isinstance(body[-1], ast.Return):
                    self.lower_block(body[:-1])
                    ret = body[-1]
                    result = self.expr(ret.value) if ret.value is not None else Lit(None)
                else:
                    self.lower_block(body)
            else:
                result = self.lower_func_with_returns(body, tree)
        except CompileError as e:
            raise self._called_from(e, dfn, node) from None
        finally:
            self.frames.pop()
            self.inlining.pop()
        return result

    def _called_from(self, e: CompileError, dfn, node) -> CompileError:
        """Add the call site to an error raised inside an inlined function (innermost only)."""
        if getattr(e, "call_site", None) is not None or type(e) is not CompileError:
            return e
        site = self.frames[-2].src.loc(node)
        new = CompileError(f"{e.bare_message} (in @kaio.func '{dfn.name}' called at "
                           f"{site.file}:{site.line})", kernel=e.kernel, file=e.file, line=e.line,
                           col=e.col, end_col=e.end_col, hint=e.hint)
        new.call_site = site
        return new

    def lower_func_with_returns(self, body, tree):
        """Early returns: a hidden flag guards the rest; a hidden variable carries the value."""
        frame = self.frame
        frame.ret_flag = self.fresh("ret")
        rets = [n for s in body for n in ast.walk(s) if isinstance(n, ast.Return)]
        with_value = [r for r in rets if r.value is not None]
        if with_value and len(with_value) != len(rets):
            raise self.err(next(r for r in rets if r.value is None),
                           "this function returns a value elsewhere but not here",
                           hint="return a value on every path")
        self.env[frame.ret_flag] = self.b.const(False, dt.bool_)
        if with_value:
            if not always_returns(body):
                raise self.err(tree, f"@kaio.func '{tree.name}' may end without returning a value",
                               hint="end the function with a return statement")
            frame.ret_template = self.return_types(body, with_value)
            frame.retval = self.fresh("retval")
            self.env[frame.retval] = self.zero_of(frame.ret_template, tree)
        self.lower_block(body)
        return self.env[frame.retval] if with_value else Lit(None)

    def return_types(self, body, rets):
        """Lower the body once in a scratch block to learn the type of the returned values."""
        found = []
        saved_env = dict(self.env)
        self.frame.trial_returns = found
        with self.scratch():
            self.lower_block(body)
        self.frame.env = saved_env
        self.frame.trial_returns = None
        template = None
        for node, v in found:
            t = _type_template(v)
            if template is None:
                template = t
                continue
            template = self.merge_template(template, t, node)
        return template

    def merge_template(self, a, b, node):
        if isinstance(a, tuple) or isinstance(b, tuple):
            if not (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)):
                raise self.err(node, "returns tuples of different lengths on different paths")
            return tuple(self.merge_template(x, y, node) for x, y in zip(a, b))
        if isinstance(a, Lit) and isinstance(b, Lit):
            return dt.promote(dt.literal_dtype(a.value), dt.literal_dtype(b.value))
        if isinstance(a, Lit):
            return b
        if isinstance(b, Lit) or a is b:
            return a
        raise self.err(node, f"returns {b.name} here but {a.name} on another path",
                       hint="cast the returned values to one type")

    def zero_of(self, template, node):
        if isinstance(template, tuple):
            return TupleV(tuple(self.zero_of(t, node) for t in template))
        if isinstance(template, Lit):
            template = dt.literal_dtype(template.value)
        if isinstance(template, FragType):   # no placeholder value: fragments are warp-collective
            raise self.err(node, f"@kaio.func '{node.name}' returns a matrix fragment from more "
                                 "than one return statement",
                           hint="assign the fragment to one variable on every path and return it "
                                "once, at the end")
        return self.b.const(0, template)


def _type_template(v):
    if isinstance(v, TupleV):
        return tuple(_type_template(x) for x in v.items)
    if isinstance(v, Lit):
        return v
    return v.type


def _partition_of(sig, name):
    for pname, _, param in sig:
        if pname == name:
            return param.partition
    return None


def _strip_docstring(body):
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[1:]
    return body



_UNSUPPORTED = {
    "With": ("`with`", "kernels have no context managers"),
    "AsyncWith": ("`async with`", "kernels are not coroutines"),
    "Try": ("`try`", "kernels cannot raise or catch exceptions"),
    "TryStar": ("`try`", "kernels cannot raise or catch exceptions"),
    "Raise": ("`raise`", "kernels cannot raise exceptions; write an error code to a buffer"),
    "Assert": ("`assert`", "kernels cannot raise exceptions; write an error code to a buffer"),
    "ClassDef": ("a class definition", "define classes outside the kernel"),
    "FunctionDef": ("a nested function", "define it at module level with @kaio.func"),
    "AsyncFunctionDef": ("an async function", "define it at module level with @kaio.func"),
    "Global": ("`global`", "kernels cannot rebind module names; pass values as parameters"),
    "Nonlocal": ("`nonlocal`", "kernels cannot rebind outer names; pass values as parameters"),
    "Delete": ("`del`", "variables live until the end of the kernel; just stop using it"),
    "Import": ("`import`", "import at module level"),
    "ImportFrom": ("`import`", "import at module level"),
    "AsyncFor": ("`async for`", "use `for ... in range(...)`"),
    "Match": ("`match`", "use if/elif/else"),
    "TypeAlias": ("`type`", "define type aliases outside the kernel"),
}
