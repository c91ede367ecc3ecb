"""Parser for the IR text form written by :mod:`kaio.ir.printer`."""
from __future__ import annotations

import json
import re

from .. import dtypes as dt
from .attrs import AttrError, build_struct
from .core import Block, Kernel, Loc, Op, Param, Value
from .types import BufType, frag_of_dims, frag_type

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<val>%[A-Za-z0-9_]+)
  | (?P<sym>@[A-Za-z0-9_]+)
  | (?P<struct>\#[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\d+|inf\b))
  | (?P<word>[A-Za-z_][A-Za-z0-9_.]*)
  | (?P<punct>[{}()\[\]<>,:=])
  | (?P<bad>.)
""", re.VERBOSE | re.DOTALL)


class ParseError(ValueError):
    pass


_DTYPES = frozenset(t.name for t in dt.ALL)


def _tokenize(text: str):
    # one finditer pass (a warm compile-cache hit parses IR text: kaio.warm); every character
    # matches some group, ``bad`` the ones no token takes
    toks, line = [], 1
    append = toks.append
    for m in _TOKEN.finditer(text):
        kind = m.lastgroup
        if kind == "ws":
            line += m.group().count("\n")
        elif kind == "bad":
            raise ParseError(f"line {line}: unexpected character {m.group()!r}")
        else:
            append((kind, m.group(), line))
    append(("eof", "", line))
    return toks


class _Parser:
    def __init__(self, text: str):
        self.toks = _tokenize(text)
        self.i = 0
        self.scopes: list[dict[str, Value]] = [{}]

    # --- token helpers --------------------------------------------------------------------
    def peek(self, k=0):
        return self.toks[self.i + k]

    def next(self):
        t = self.toks[self.i]
        if t[0] == "eof":
            raise ParseError(f"line {t[2]}: unexpected end of text")
        self.i += 1
        return t

    def expect(self, text):
        t = self.next()
        if t[1] != text:
            raise ParseError(f"line {t[2]}: expected {text!r}, got {t[1]!r}")
        return t

    def accept(self, text) -> bool:
        if self.peek()[1] == text:
            self.i += 1
            return True
        return False

    # --- values ---------------------------------------------------------------------------
    def define(self, name: str, v: Value):
        v.name = None if name[1:].isdigit() else name[1:]
        self.scopes[-1][name] = v

    def lookup(self, name: str, line: int) -> Value:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        raise ParseError(f"line {line}: use of undefined value {name}")

    # --- types and attributes ---------------------------------------------------------------
    def type(self):
        t = self.next()
        if t[1] == "buf":
            self.expect("<")
            dtype = dt.from_name(self.next()[1])
            self.expect(",")
            ndim = int(self.next()[1])
            self.expect(",")
            space = self.next()[1]
            self.expect(",")
            intent = self.next()[1]
            shape = None
            if self.accept(","):
                shape = tuple(self.attr())
            self.expect(">")
            return BufType(dtype, ndim, space, intent, shape)
        if t[1] == "frag":     # frag<role, shape, dtype[, ROWSxCOLS]>
            self.expect("<")
            role = self.next()[1]
            self.expect(",")
            shape = self.next()[1]
            self.expect(",")
            dtype = dt.from_name(self.next()[1])
            if self.accept(","):
                rows = int(self.next()[1])        # "64x32" lexes as 64, x32
                cols = int(self.next()[1].lstrip("x"))
                self.expect(">")
                return frag_of_dims(role, shape, dtype, rows, cols)
            self.expect(">")
            return frag_type(role, shape, dtype)
        return dt.from_name(t[1])

    def attr(self):
        kind, text, line = self.next()
        if kind == "num":
            if text in ("inf", "-inf"):
                return float(text)
            return float(text) if any(c in text for c in ".eE") or "inf" in text else int(text)
        if kind == "str":
            return json.loads(text)
        if text == "true":
            return True
        if text == "false":
            return False
        if text == "none":
            return None
        if text == "nan":
            return float("nan")
        if kind == "word" and text in _DTYPES:
            return dt.from_name(text)
        if kind == "struct":
            if self.peek()[1] != "{":
                raise ParseError(f"line {line}: expected '{{' after {text}")
            try:
                return build_struct(text[1:], self.attr())
            except (KeyError, TypeError, ValueError) as e:
                raise ParseError(f"line {line}: bad attribute {text}: {e}") from None
        if text == "[":
            items = []
            while not self.accept("]"):
                items.append(self.attr())
                self.accept(",")
            return items
        if text == "{":
            d = {}
            while not self.accept("}"):
                key = self.next()[1]
                self.expect("=")
                d[key] = self.attr()
                self.accept(",")
            return d
        raise ParseError(f"line {line}: bad attribute value {text!r}")

    def region_args(self, block: Block):
        self.expect("(")
        while not self.accept(")"):
            name = self.next()[1]
            self.expect(":")
            v = block.add_arg(self.type())
            self.define(name, v)
            self.accept(",")

    def region(self) -> Block:
        block = Block()
        self.scopes.append({})
        self.region_args(block)
        self.expect("{")
        while not self.accept("}"):
            block.append(self.op())
        self.scopes.pop()
        return block

    def loc(self) -> Loc | None:
        if self.peek()[1] != "loc":
            return None
        self.next()
        self.expect("(")
        kind, text, line = self.next()
        if kind != "str":
            raise ParseError(f"line {line}: expected a quoted file name in loc(...), got {text!r}")
        parts = []
        while self.accept(":"):
            parts.append(int(self.next()[1]))
        self.expect(")")
        return Loc(json.loads(text), *parts)

    def op(self) -> Op:
        results = []
        if self.peek()[0] == "val":
            while True:
                results.append(self.next()[1])
                if not self.accept(","):
                    break
            self.expect("=")
        kind, opcode, line = self.next()
        if kind != "word":
            raise ParseError(f"line {line}: expected an opcode, got {opcode!r}")
        operands = []
        # operands sit on the opcode's line: a '%v' on the next line starts the next op
        if self.peek()[0] == "val" and self.peek()[2] == line:
            operands.append(self.lookup(self.next()[1], line))
            while self.accept(","):
                t = self.next()
                if t[0] != "val":
                    raise ParseError(f"line {t[2]}: expected an operand after ',', got {t[1]!r}")
                operands.append(self.lookup(t[1], t[2]))
        attrs = self.attr() if self.peek()[1] == "{" else {}
        types = []
        if self.accept(":"):
            types.append(self.type())
            while self.accept(","):
                types.append(self.type())
        if len(types) != len(results):
            raise ParseError(f"line {line}: {len(results)} results but {len(types)} types")
        regions = []
        while self.peek()[1] == "(":
            regions.append(self.region())
        try:
            op = Op(opcode, operands, types, attrs, regions, self.loc())
        except AttrError as e:
            raise ParseError(f"line {line}: {e}") from None
        for name, v in zip(results, op.results):
            self.define(name, v)
        return op

    def kernel(self) -> Kernel:
        self.expect("kernel")
        name = self.next()[1][1:]
        body = Block()
        self.region_args(body)
        self.expect("params")
        meta = self.attr()
        attrs = {}
        if self.accept("attrs"):
            attrs = self.attr()
        loc = self.loc()
        params = []
        for v in body.args:
            if v.name not in meta:
                raise ParseError(f"parameter %{v.name} has no entry in the params table")
            m = meta[v.name]
            params.append(Param(v.name, m["kind"], m.get("partition")))
        self.expect("{")
        while not self.accept("}"):
            body.append(self.op())
        try:
            return Kernel(name, body, params, loc, attrs)
        except AttrError as e:
            raise ParseError(f"kernel @{name}: {e}") from None


def parse_kernel(text: str) -> Kernel:
    """Parse one kernel from its text form."""
    p = _Parser(text)
    k = p.kernel()
    if p.peek()[0] != "eof":
        raise ParseError(f"line {p.peek()[2]}: trailing text {p.peek()[1]!r}")
    return k
