"""Comparison rules: how two results of one kernel must agree, and the check itself.

A :class:`Rule` is stated per kernel:

- ``bitwise``: every output bit-identical, with one allowance: any NaN equals any NaN (payloads
  and quiet bits are not portable). Signed zeros must match. For integer and bool outputs this
  is plain equality.
- ``ulp:N``: floats within N units in the last place (NaN equals only NaN, infinities only
  themselves); non-float outputs still compare exactly.
- ``rel:X`` (optionally with an absolute floor): ``|a - b| <= atol + X * max(|a|, |b|)``.

Every non-bitwise rule carries ``why``: the reason the kernel cannot be bit-reproducible
(fast math, hardware approximations, float atomics summed in scheduling order).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Rule:
    kind: str                 # 'bitwise' | 'ulp' | 'rel'
    bound: float = 0.0        # ulps (ulp) or relative error (rel)
    atol: float = 0.0         # rel only: absolute floor
    why: str = ""

    def describe(self) -> str:
        if self.kind == "bitwise":
            return "bitwise"
        if self.kind == "ulp":
            return f"ulp:{self.bound:g}"
        return f"rel:{self.bound:g}" + (f"+abs:{self.atol:g}" if self.atol else "")


BITWISE = Rule("bitwise")


def ulp(n: float, why: str) -> Rule:
    if not why:
        raise ValueError("a ulp rule needs a justification")
    return Rule("ulp", float(n), 0.0, why)


def rel(x: float, why: str, atol: float = 0.0) -> Rule:
    if not why:
        raise ValueError("a rel rule needs a justification")
    return Rule("rel", float(x), float(atol), why)


def parse(text: str, why: str = "") -> Rule:
    """'bitwise', 'ulp:4' or 'rel:1e-6' as a Rule."""
    kind, _, num = text.partition(":")
    if kind == "bitwise" and not num:
        return BITWISE
    if kind in ("ulp", "rel") and num:
        return Rule(kind, float(num), 0.0, why)
    raise ValueError(f"unknown rule {text!r}: use bitwise, ulp:N or rel:X")


@dataclass
class Mismatch:
    """Where two results first disagree beyond the rule."""

    output: str
    index: tuple
    got: str
    want: str

    def describe(self) -> str:
        return f"{self.output}{list(self.index)}: {self.got} != {self.want}"


@dataclass
class Outcome:
    """The result of comparing one target's outputs with a baseline."""

    identical: bool           # every output bit-identical (NaN == NaN)
    ok: bool                  # within the rule
    max_error: float = 0.0    # largest error in the rule's unit (ulps or relative), 0 if identical
    mismatch: Mismatch | None = None


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype.name == "bfloat16"


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}")


def _fmt(v) -> str:
    if isinstance(v, np.generic) and _is_float(np.asarray(v)):
        bits = int(np.asarray(v).view(f"u{np.asarray(v).dtype.itemsize}"))
        return f"{float(v)!r} (0x{bits:0{2 * np.asarray(v).dtype.itemsize}x})"
    return repr(v.item() if isinstance(v, np.generic) else v)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in ulps between same-dtype floats (float64 counts; exact for small distances).
    +0 and -0 are 0 ulp apart (only the bitwise rule tells them apart)."""
    top = np.uint64(1) << np.uint64(8 * a.dtype.itemsize - 1)
    ba, bb = _bits(a).astype(np.uint64), _bits(b).astype(np.uint64)
    ma, mb = ba & (top - np.uint64(1)), bb & (top - np.uint64(1))
    same_sign = (ba & top) == (bb & top)
    near = np.where(ma > mb, ma - mb, mb - ma).astype(np.float64)
    far = ma.astype(np.float64) + mb.astype(np.float64)
    return np.where(same_sign, near, far)


def identical_mask(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bit equality with any NaN equal to any NaN."""
    same = _bits(a) == _bits(b) if _is_float(a) else a == b
    if _is_float(a):
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        same |= np.isnan(fa) & np.isnan(fb)
    return same


def first_difference(got: dict, want: dict) -> Mismatch | None:
    """The first element that is not bit-identical (NaN == NaN), with both values as float and
    hex bits; None when every output is identical."""
    for name, w in want.items():
        w, g = np.asarray(w), np.asarray(got.get(name))
        if g.shape != w.shape or g.dtype != w.dtype:
            return Mismatch(name, (), f"{g.dtype}{list(g.shape)}", f"{w.dtype}{list(w.shape)}")
        diff = ~identical_mask(g, w)
        if diff.any():
            idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), w.shape))
            return Mismatch(name, idx, _fmt(g[idx]), _fmt(w[idx]))
    return None


def compare(got: dict, want: dict, rule: Rule) -> Outcome:
    """Compare every output in ``want`` with ``got`` under ``rule``."""
    identical, ok, worst, first = True, True, 0.0, None
    for name, w in want.items():
        w = np.asarray(w)
        if name not in got:
            return Outcome(False, False, float("inf"), Mismatch(name, (), "missing", "present"))
        g = np.asarray(got[name])
        if g.shape != w.shape or g.dtype != w.dtype:
            return Outcome(False, False, float("inf"),
                           Mismatch(name, (), f"{g.dtype}{list(g.shape)}", f"{w.dtype}{list(w.shape)}"))
        same = identical_mask(g, w)
        if same.all():
            continue
        identical = False
        if rule.kind == "bitwise" or not _is_float(w):
            err, bad = np.where(same, 0.0, np.inf), ~same
        else:
            err, bad = _errors(g, w, same, rule)
        worst = max(worst, float(err.max()) if err.size else 0.0)
        if bad.any():
            ok = False
            if first is None:
                idx = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), w.shape))
                first = Mismatch(name, idx, _fmt(g[idx]), _fmt(w[idx]))
    return Outcome(identical, ok, worst, first)


def _errors(g, w, same, rule: Rule):
    fg, fw = g.astype(np.float64), w.astype(np.float64)
    nan_g, nan_w = np.isnan(fg), np.isnan(fw)
    with np.errstate(all="ignore"):
        if rule.kind == "ulp":
            err = ulp_distance(g, w)
            bound = rule.bound
        else:
            diff = np.abs(fg - fw)
            scale = np.maximum(np.abs(fg), np.abs(fw))
            err = np.where(diff <= rule.atol, 0.0, diff / np.where(scale > 0, scale, np.inf))
            err = np.where((diff > rule.atol) & (scale == 0), np.inf, err)
            bound = rule.bound
        inf_mismatch = (np.isinf(fg) | np.isinf(fw)) & (fg != fw)
        err = np.where(same, 0.0, err)
        err = np.where((nan_g != nan_w) | inf_mismatch, np.inf, err)
    return err, err > bound
