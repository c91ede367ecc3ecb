"""Math functions -> PTX: the instructions PTX has for them, as tables.

- exact functions (what ``kaio.passes.expand_math`` leaves for every target): ``cvt.rmi/rpi/rzi/
  rni`` for floor/ceil/trunc/rint, ``sqrt.rn``, ``copysign`` (sign-bit operations on 16-bit
  floats), ``testp`` for isnan/isinf/isfinite;
- ``fast`` (per call or kernel-wide fast_math): the hardware approximations on f32
  (``ex2.approx``, ``lg2.approx``, ``sin/cos.approx``, ``tanh.approx``, ``rsqrt.approx``,
  ``sqrt.approx``, with scalings such as log(x) = lg2(x) ln 2; tan and pow as two of them),
  ``rsqrt.approx.f64``; f16/bf16 compute in f32 (exact widening, one rounding back). A fast exp
  never gets here: ``expand_math`` turns it into exact IR around a fast exp2 of a reduced
  argument (:mod:`kaio.mathlib.hwexp`), whose ``ex2.approx.ftz.f32`` is :data:`FAST_FTZ`'s entry
  (the op is marked ``ftz``: flushing cannot change that exp's result; a fast exp2 of the user's
  is ``ex2.approx.f32``, no ``.ftz``).

Everything else -- every portable function, and a ``fast`` one with no entry here -- is
:mod:`kaio.mathlib`'s IR, expanded before codegen or (fast ones) by the renderer through
:func:`kaio.passes.expand_math.library_code`: :func:`emit` returns None for those.
"""
from __future__ import annotations

import math

from .. import dtypes as dt
from .ptx_emit import Emitter, f32_hex

LN2 = 0.6931471805599453

#: exact functions on f32/f64: fn -> instruction ({t}: the float type)
EXACT = {"floor": "cvt.rmi.{t}.{t}", "ceil": "cvt.rpi.{t}.{t}", "trunc": "cvt.rzi.{t}.{t}",
         "rint": "cvt.rni.{t}.{t}", "sqrt": "sqrt.rn.{t}"}
#: predicates: fn -> testp class
TESTP = {"isnan": "notanumber", "isinf": "infinite", "isfinite": "finite"}


def _approx(instr, pre=None, post=None):
    """A one-instruction f32 approximation, its argument scaled by ``pre`` and its result by
    ``post`` (exp(x) = ex2(x log2 e), log(x) = lg2(x) ln 2...)."""
    def emit_approx(em, x):
        if pre is not None:
            y = em.tmp("f")
            em.ins(f"mul.rn.f32 {y}, {x}, {f32_hex(pre)}")
            x = y
        d = em.tmp("f")
        em.ins(f"{instr} {d}, {x}")
        if post is not None:
            em.ins(f"mul.rn.f32 {d}, {d}, {f32_hex(post)}")
        return d
    return emit_approx


def _tan(em, x):
    s, c, d = em.tmp("f"), em.tmp("f"), em.tmp("f")
    em.ins(f"sin.approx.f32 {s}, {x}")
    em.ins(f"cos.approx.f32 {c}, {x}")
    em.ins(f"div.approx.f32 {d}, {s}, {c}")
    return d


def _pow(em, x, y):
    lg, d = em.tmp("f"), em.tmp("f")
    em.ins(f"lg2.approx.f32 {lg}, {x}")
    em.ins(f"mul.rn.f32 {lg}, {lg}, {y}")
    em.ins(f"ex2.approx.f32 {d}, {lg}")
    return d


def _rsqrt_f64(em, x):
    d = em.tmp("fd")
    em.ins(f"rsqrt.approx.f64 {d}, {x}")
    return d


#: fast approximations: float type -> fn -> emitter(em, *argument registers) -> result register
FAST = {
    "f32": {"exp2": _approx("ex2.approx.f32"),
            "log": _approx("lg2.approx.f32", post=LN2), "log2": _approx("lg2.approx.f32"),
            "log10": _approx("lg2.approx.f32", post=math.log10(2.0)),
            "sin": _approx("sin.approx.f32"), "cos": _approx("cos.approx.f32"),
            "tanh": _approx("tanh.approx.f32"), "rsqrt": _approx("rsqrt.approx.f32"),
            "sqrt": _approx("sqrt.approx.f32"), "tan": _tan, "pow": _pow},
    "f64": {"rsqrt": _rsqrt_f64},
}
#: the flushing forms, for ``math`` ops marked ``ftz`` (IR: subnormals cannot matter there)
FAST_FTZ = {"f32": {"exp2": _approx("ex2.approx.ftz.f32")}}


def emit(em: Emitter, fn: str, t: dt.DType, args: list[str], fast: bool,
         ftz: bool = False) -> str | None:
    """Result register of math function ``fn`` on registers ``args`` of float dtype ``t``, or
    None when PTX has no instruction for it (the caller emits the library's code). ``ftz``: the
    op's flag (subnormals cannot matter): a :data:`FAST_FTZ` form where there is one."""
    if not t.is_float:
        raise NotImplementedError(f"PTX: math.{fn} on {t.name} (cast to a float dtype first)")
    if fn in TESTP:
        a = em.to_f32(args[0], t) if t.bits == 16 else args[0]
        p = em.tmp("p")
        em.ins(f"testp.{TESTP[fn]}.{'f64' if t.name == 'f64' else 'f32'} {p}, {a}")
        return p
    if fn == "copysign":
        return _copysign(em, t, *args)
    if not has_native(fn, dt.f32 if t.bits == 16 else t, fast):
        return None
    if t.bits == 16:  # compute in f32 (exact widening) and round once
        wide = [em.to_f32(a, t) for a in args]
        return em.from_f32(emit(em, fn, dt.f32, wide, fast, ftz), t)
    if fast and ftz and fn in FAST_FTZ.get(t.name, {}):
        return FAST_FTZ[t.name][fn](em, *args)
    if fast and fn in FAST[t.name]:
        return FAST[t.name][fn](em, *args)
    d = em.reg(t)
    em.ins(f"{EXACT[fn].format(t=t.name)} {d}, {args[0]}")
    return d


def has_native(fn: str, t: dt.DType, fast: bool) -> bool:
    """Whether :func:`emit` has instructions for ``fn`` on f32/f64 dtype ``t``."""
    return fn in TESTP or fn in EXACT or fn == "copysign" or (fast and fn in FAST[t.name])


def _copysign(em, t, mag, sign):
    d = em.reg(t)
    if t.bits == 16:
        m, s = em.tmp("h"), em.tmp("h")
        em.ins(f"and.b16 {m}, {mag}, 0x7FFF")
        em.ins(f"and.b16 {s}, {sign}, 0x8000")
        em.ins(f"or.b16 {d}, {m}, {s}")
    else:
        em.ins(f"copysign.{t.name} {d}, {sign}, {mag}")  # PTX: copysign d, sign-source, magnitude
    return d
