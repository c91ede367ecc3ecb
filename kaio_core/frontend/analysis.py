"""Small AST scans the lowering needs before it emits a statement.

- :func:`assigned_names`: names a statement list may assign (loop-carried candidates);
- :func:`exits`: which of break / continue / return a statement may execute for the
  enclosing loop (to guard the statements after it with flag variables);
- :func:`is_cheap`: whether an expression may be evaluated eagerly (no memory access or call
  with effects), so ``a and b`` / ``x if c else y`` can become ``and`` / ``select``.
"""
from __future__ import annotations

import ast

_LOOPS = (ast.For, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _targets(t, out: set):
    if isinstance(t, ast.Name):
        out.add(t.id)
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            _targets(e, out)
    elif isinstance(t, ast.Starred):
        _targets(t.value, out)


def assigned_names(stmts) -> set:
    """Every name bound by assignment or as a loop target inside ``stmts`` (nested too)."""
    out: set = set()
    for s in stmts:
        for node in ast.walk(s):
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    _targets(t, out)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                _targets(node.target, out)
            elif isinstance(node, ast.For):
                _targets(node.target, out)
    return out


def exits(stmt) -> set:
    """Subset of {'break', 'continue', 'return'} that ``stmt`` may execute for its own loop.

    break/continue inside nested loops belong to those loops; return leaves every loop.
    """
    out: set = set()

    def visit(node, in_loop: bool):
        if isinstance(node, ast.Return):
            out.add("return")
        elif isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            out.add("break" if isinstance(node, ast.Break) else "continue")
        if isinstance(node, _SCOPES):
            return
        nested = in_loop or isinstance(node, _LOOPS)
        for child in ast.iter_child_nodes(node):
            # a loop's else-clause and its iterator are not inside the loop itself
            visit(child, nested)

    if isinstance(stmt, _LOOPS):
        for child in ast.iter_child_nodes(stmt):
            visit(child, True)
    else:
        visit(stmt, False)
    return out


def body_exits(stmts) -> set:
    out: set = set()
    for s in stmts:
        out |= exits(s)
    return out


def contains_return(stmts) -> bool:
    return any(isinstance(n, ast.Return) for s in stmts for n in ast.walk(s))


def always_returns(stmts) -> bool:
    """Whether every path through ``stmts`` ends in a return (loops do not count)."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and always_returns(s.body) and always_returns(s.orelse):
            return True
    return False


_CHEAP_CALLS = {"abs", "min", "max"}


def is_cheap(node) -> bool:
    """No loads, no calls other than casts / math / min / max / abs, no side effects."""
    for n in ast.walk(node):
        if isinstance(n, (ast.Subscript, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            # x.shape[k] is cheap; any other subscript reads memory
            if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Attribute) \
                    and n.value.attr == "shape":
                continue
            return False
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name is None:
                return False
            if name in _CHEAP_CALLS or name in _CHEAP_NAMES:
                continue
            return False
    return True


_CHEAP_NAMES = {"bool_", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64", "f16", "bf16", "f32",
                "f64", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan",
                "tanh", "erf", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite",
                "fma", "pow", "copysign", "global_id", "lane_id", "len"}
