"""Source handling for the frontend: parse a kernel's function and map AST nodes to file locations.

``inspect.getsource`` gives the function's text as written (indented when it is a method or a
nested function); we dedent it to parse it, and add the removed indentation back to every
column so carets land under the right characters of the real file.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types

from ..errors import CompileError
from ..ir.core import Loc
from ..records import record


@record
class Source:
    """A parsed function: its ``ast.FunctionDef`` and where its text sits in its file."""

    fn: object
    tree: ast.FunctionDef
    file: str
    first_line: int      # file line of the source's first line (a decorator, if any)
    indent: int          # columns removed by dedent

    def loc(self, node) -> Loc:
        """File location of an AST node (column span only when the node fits on one line)."""
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0) + self.indent
        end_line = getattr(node, "end_lineno", line)
        end = getattr(node, "end_col_offset", None)
        end_col = end + self.indent if end is not None and end_line == line else None
        return Loc(self.file, self.first_line + line - 1, col, end_col)


_SOURCES: dict = {}


def parse_function(fn, kernel_name: str) -> Source:
    """Parse ``fn``'s source once (cached per function object)."""
    code = getattr(fn, "__code__", None)
    cached = _SOURCES.get(code)
    if cached is not None and cached.fn is fn:
        return cached
    file = code.co_filename if code else "<unknown>"
    fast = _source_lines(fn, code)
    if fast is not None:
        lines, first, dedented, module = fast
    else:
        try:
            lines, first = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise CompileError(f"cannot read the source of '{fn.__name__}': {e}",
                               kernel=kernel_name, file=file,
                               line=code.co_firstlineno if code else None,
                               hint="kernels must be defined in a .py file (not typed into a "
                                    "REPL or built with exec)") from None
        dedented = textwrap.dedent("".join(lines))
        try:
            module = ast.parse(dedented)
        except SyntaxError as e:  # pragma: no cover - Python already compiled it
            raise CompileError(f"cannot parse '{fn.__name__}': {e.msg}", kernel=kernel_name,
                               file=file, line=first + (e.lineno or 1) - 1) from None
    indent = _leading(lines[0]) - _leading(dedented.splitlines(True)[0])
    tree = module.body[0] if module.body else None
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"'{fn.__name__}' is not a plain `def` function", kernel=kernel_name,
                           file=file, line=first,
                           hint="write kernels and @kaio.func functions with `def` "
                                "(lambdas and async functions are not supported)")
    if code is not None and tree.name != code.co_name:
        # inspect reads the file as it is now; it was edited after the module was imported
        raise CompileError(f"the source of '{fn.__name__}' in {file} changed after it was imported",
                           kernel=kernel_name, file=file, line=first,
                           hint="re-import (reload) the module that defines it")
    src = Source(fn, tree, file, first, indent)
    if code is not None:
        _SOURCES[code] = src
    return src


def _source_lines(fn, code):
    """``(lines, first line, dedented text, ast.Module)`` as from ``inspect.getsourcelines(fn)``
    and a parse, without ``tokenize``: the file's lines from the function's first line (its
    first decorator, or ``def``) to the last line its code (nested code included) spans.
    inspect finds the block's end by tokenizing it, whose first use in a process compiles
    tokenize's regular expressions (~10 ms of a cold first compile). None where these lines
    are not one whole ``def`` of that name (the caller then asks inspect)."""
    if code is None or not hasattr(code, "co_positions"):   # Python 3.10: no end lines
        return None
    linecache.checkcache(code.co_filename)   # as inspect does: a rewritten file is read again
    all_lines = linecache.getlines(code.co_filename, getattr(fn, "__globals__", None))
    first = code.co_firstlineno
    if not 0 < first <= len(all_lines) or not all_lines[first - 1].lstrip().startswith(
            ("@", "def ", "def\t")):
        return None
    last, stack = first, [code]
    while stack:
        c = stack.pop()
        last = max([last, *(p[1] for p in c.co_positions() if p[1] is not None)])
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    lines = all_lines[first - 1:last]
    dedented = textwrap.dedent("".join(lines))
    try:
        module = ast.parse(dedented)
    except SyntaxError:
        return None
    body = module.body
    if len(body) != 1 or not isinstance(body[0], ast.FunctionDef) or body[0].name != code.co_name:
        return None
    return lines, first, dedented, module


def _leading(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def error(src: Source | None, node, message: str, kernel: str | None, hint: str | None = None):
    """A CompileError located at ``node`` (caller raises it)."""
    loc = src.loc(node) if src is not None and node is not None else None
    return CompileError.at(loc, message, kernel=kernel, hint=hint)
