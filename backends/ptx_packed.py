"""Packed f16x2 / bf16x2 PTX instructions for the pairs :mod:`kaio.backends.half_pairs` plans.

A pair's operands and result live in one ``.b32`` register: element ``lo`` in the low half,
``hi`` in the high half (the layout of a 16-byte group's words). Every instruction applies the
scalar op kaio emits otherwise (:mod:`kaio.backends.ptx_ops`) to each half, so the bits are the
same: ``.rn`` arithmetic without ``.ftz``, IEEE ``min``/``max``, sign-bit ``xor``/``and``.
"""
from __future__ import annotations

from .. import dtypes as dt
from .ptx_emit import Emitter

#: sign bits / magnitude bits of both halves
_SIGNS, _MAGS = "0x80008000", "0x7FFF7FFF"
#: the bf16 constant pair of the fma that stands for add / sub / mul on sm_80 (which has
#: fma.rn.bf16x2 but no add/sub/mul.bf16x2): (1, 1), (-1, -1), (-0, -0)
_BF16_FMA_CONST = {"add": "0x3F803F80", "sub": "0xBF80BF80", "mul": "0x80008000"}


def arith(em: Emitter, opcode: str, t: dt.DType, regs: list[str]) -> str:
    """One packed ``opcode`` on the ``.b32`` registers ``regs``; returns the result word."""
    d = em.tmp("r")
    x2 = f"{t.name}x2"
    if opcode == "neg":
        em.ins(f"xor.b32 {d}, {regs[0]}, {_SIGNS}")
    elif opcode == "abs":
        em.ins(f"and.b32 {d}, {regs[0]}, {_MAGS}")
    elif opcode in ("min", "max"):
        em.ins(f"{opcode}.{x2} {d}, {regs[0]}, {regs[1]}")
    elif opcode == "fma":
        em.ins(f"fma.rn.{x2} {d}, {', '.join(regs)}")
    elif t.name == "f16" or em.sm >= 90:
        em.ins(f"{opcode}.rn.{x2} {d}, {regs[0]}, {regs[1]}")
    else:   # bf16 on sm_80, as the scalar path: a+b = fma(a,1,b), a-b = fma(b,-1,a), a*b = fma(a,b,-0)
        a, b = regs
        c = em.tmp("r")
        em.ins(f"mov.b32 {c}, {_BF16_FMA_CONST[opcode]}")
        x, y, z = {"add": (a, c, b), "sub": (b, c, a), "mul": (a, b, c)}[opcode]
        em.ins(f"fma.rn.bf16x2 {d}, {x}, {y}, {z}")
    return d


def narrow(em: Emitter, t: dt.DType, lo: str, hi: str) -> str:
    """The f32 registers ``lo``, ``hi`` each rounded to nearest-even ``t``, as one word
    (``cvt``'s first source goes to the high half)."""
    d = em.tmp("r")
    em.ins(f"cvt.rn.{t.name}x2.f32 {d}, {hi}, {lo}")
    return d


def pack(em: Emitter, lo: str, hi: str) -> str:
    """A word holding the 16-bit registers ``lo`` and ``hi``."""
    d = em.tmp("r")
    em.ins(f"mov.b32 {d}, {{{lo}, {hi}}}")
    return d


def unpack(em: Emitter, w: str, lo: str, hi: str, pred: str | None = None) -> None:
    """``lo``, ``hi`` := the halves of word ``w`` (under ``@pred`` when given)."""
    em.ins(f"{'@' + pred + ' ' if pred else ''}mov.b32 {{{lo}, {hi}}}, {w}")
