"""PTX emission machinery: registers, typed helpers, labels, source locations.

Register model (one virtual register per SSA value; ptxas allocates the real ones):

- ``bool`` lives in a predicate (``%p``);
- i8/u8/i16/u16/i32/u32 live in 32-bit registers (``%r``). 8- and 16-bit integers are kept
  *canonical*: sign-extended (signed) or zero-extended (unsigned) to 32 bits, so compares,
  division and right shifts on the 32-bit register are exact; arithmetic that can leave the
  narrow range re-truncates with ``bfe`` (:meth:`Emitter.normalize`);
- i64/u64 in ``%rd``; f16/bf16 as bit patterns in 16-bit registers (``%h``); f32 in ``%f``;
  f64 in ``%fd``.
"""
from __future__ import annotations

import linecache
import struct

import numpy as np

from .. import dtypes as dt
from ..ir.types import FragType

#: register class of each dtype
_CLASS = {"bool": "p", "f16": "h", "bf16": "h", "f32": "f", "f64": "fd", "i64": "rd", "u64": "rd"}
#: PTX declaration type of each register class
CLASS_DECL = {"p": ".pred", "h": ".b16", "r": ".b32", "rd": ".b64", "f": ".f32", "fd": ".f64"}
#: type suffix for arithmetic on a dtype's register
_ARITH = {"i8": "s32", "i16": "s32", "i32": "s32", "u8": "u32", "u16": "u32", "u32": "u32",
          "i64": "s64", "u64": "u64", "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64"}
#: type suffix for loads and stores of a dtype (bool is a byte in memory)
_MEM = {"bool": "u8", "i8": "s8", "u8": "u8", "i16": "s16", "u16": "u16", "i32": "s32",
        "u32": "u32", "i64": "s64", "u64": "u64", "f16": "b16", "bf16": "b16", "f32": "f32",
        "f64": "f64"}

#: registers of a kaio.mma fragment of m16n8k16 (f16/bf16 in, f32 accumulator), per role: A is
#: four .b32 of two halves each, B two, the accumulator four .f32 (PTX's mma fragment layout);
#: m16n8k32 (i8 in) packs four bytes per .b32 and its i32 accumulator takes "r" registers;
#: m16n8k8 (tf32 in) holds one tf32 per .b32 (A four, B two: the same counts);
#: a warp-tile fragment has one such set per instruction tile
FRAG_REGS = {"a": ("r",) * 4, "b": ("r",) * 2, "acc": ("f",) * 4}


def reg_class(t: dt.DType) -> str:
    return _CLASS.get(t.name, "r")


def arith(t: dt.DType) -> str:
    """PTX type suffix for arithmetic on ``t`` (small integers compute as 32-bit)."""
    return _ARITH[t.name]


def mem_type(t: dt.DType) -> str:
    return _MEM[t.name]


def bits_type(t: dt.DType) -> str:
    """Untyped suffix of the register holding ``t`` (b16 / b32 / b64)."""
    return {"h": "b16", "r": "b32", "f": "b32", "rd": "b64", "fd": "b64"}[reg_class(t)]


def f32_hex(x: float) -> str:
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


def f64_hex(x: float) -> str:
    return "0d%016X" % struct.unpack("<Q", struct.pack("<d", x))[0]


def half_bits(x: float, t: dt.DType) -> int:
    """Bit pattern of ``x`` rounded to f16 / bf16 (round to nearest even)."""
    return int(np.array(x, dtype=t.storage_np).view(np.uint16))


def imm(value, t: dt.DType) -> str:
    """``value`` as a PTX immediate for an instruction on ``t``'s register."""
    if t.is_float:
        if t.name == "f32":
            return f32_hex(float(value))
        if t.name == "f64":
            return f64_hex(float(value))
        return "0x%04X" % half_bits(float(value), t)
    bits = 64 if t.bits == 64 else 32
    return "0x%X" % (int(value) & ((1 << bits) - 1))


class Emitter:
    """Collects PTX lines for one kernel body and hands out registers and labels."""

    def __init__(self, arch: str, fast_math: bool):
        self.arch = arch
        self.sm = int("".join(c for c in arch[3:] if c.isdigit()))
        self.fast_math = fast_math
        self.lines: list[str] = []
        self.counts = {c: 0 for c in CLASS_DECL}
        self.vals: dict[int, str] = {}
        self.n_labels = 0
        self.files: dict[str, int] = {}
        self.cur_loc = None
        self.pending_loc = None
        self.decls: list[str] = []       # function-scope .shared / .local declarations
        self.module_decls: list[str] = []

    # --- registers and values ----------------------------------------------------------
    def tmp(self, cls: str) -> str:
        n = self.counts[cls]
        self.counts[cls] = n + 1
        return f"%{cls}{n}"

    def reg(self, t: dt.DType) -> str:
        if isinstance(t, FragType):   # several registers, comma-joined (backends.ptx_mma)
            return ",".join(self.tmp("r" if t.dtype.is_int else c)       # i32 accumulators
                            for _ in range(t.ntiles) for c in FRAG_REGS[t.role])
        return self.tmp(reg_class(t))

    def define(self, value, reg: str | None = None) -> str:
        """Give an IR value a register (a fresh one unless ``reg`` is given)."""
        r = reg or self.reg(value.type)
        self.vals[value.id] = r
        return r

    def val(self, value) -> str:
        try:
            return self.vals[value.id]
        except KeyError:
            raise AssertionError(f"PTX emitter: {value!r} used before definition") from None

    # --- text --------------------------------------------------------------------------
    def ins(self, text: str) -> None:
        if self.pending_loc is not None:
            self._flush_loc()
        self.lines.append("\t" + text + ";")

    def comment(self, text: str) -> None:
        self.lines.append("\t// " + text)

    def label(self, hint: str = "L") -> str:
        self.n_labels += 1
        return f"$L_{hint}_{self.n_labels}"

    def place(self, label: str) -> None:
        self.lines.append(label + ":")

    def bra(self, label: str, pred: str | None = None, negate: bool = False) -> None:
        if pred is None:
            self.ins(f"bra.uni {label}")
        else:
            self.ins(f"@{'!' if negate else ''}{pred} bra {label}")

    def set_loc(self, loc) -> None:
        """Note the source location of the following instructions (emitted lazily, so ops
        that produce no instruction leave no ``.loc``)."""
        if loc is not None:
            self.pending_loc = loc

    def _flush_loc(self) -> None:
        loc, self.pending_loc = self.pending_loc, None
        key = (loc.file, loc.line, loc.col)
        if self.cur_loc is not None and key == (self.cur_loc.file, self.cur_loc.line, self.cur_loc.col):
            return
        prev, self.cur_loc = self.cur_loc, loc
        fid = self.files.setdefault(loc.file, len(self.files) + 1)
        if prev is None or (prev.file, prev.line) != (loc.file, loc.line):
            text = linecache.getline(loc.file, loc.line).strip() if loc.file else ""
            if text:
                self.comment(f"{loc.file.rsplit('/', 1)[-1]}:{loc.line}: {text}")
        self.lines.append(f"\t.loc {fid} {loc.line} {loc.col + 1}")

    # --- constants ---------------------------------------------------------------------
    def const(self, value, t: dt.DType) -> str:
        r = self.reg(t)
        if t.is_bool:
            self.ins(f"setp.ne.u32 {r}, {1 if value else 0}, 0")
        elif t.is_float and t.bits == 16:
            self.ins(f"mov.b16 {r}, {imm(value, t)}")
        elif t.is_float:
            self.ins(f"mov.{t.name} {r}, {imm(value, t)}")
        else:
            v = int(value)
            # keep narrow integers canonical (sign- or zero-extended)
            if t.bits < 32:
                m = (1 << t.bits) - 1
                v &= m
                if t.is_signed and v >> (t.bits - 1):
                    v -= 1 << t.bits
            self.ins(f"mov.{bits_type(t)} {r}, {imm(v, t)}")
        return r

    # --- canonical narrow integers -------------------------------------------------------
    def normalize(self, r: str, t: dt.DType) -> str:
        """Re-truncate a 32-bit result to ``t``'s width (sign/zero extension), in place."""
        if t.is_int and t.bits < 32:
            self.ins(f"bfe.{'s32' if t.is_signed else 'u32'} {r}, {r}, 0, {t.bits}")
        return r

    # --- float widening / narrowing used by 16-bit float emulation ------------------------
    def to_f32(self, r: str, t: dt.DType) -> str:
        """An f32 register holding the (exact) value of 16-bit float register ``r``."""
        out = self.tmp("f")
        if t.name == "f16":
            self.ins(f"cvt.f32.f16 {out}, {r}")
        elif self.sm >= 90:
            self.ins(f"cvt.f32.bf16 {out}, {r}")
        else:  # bf16 is the top half of an f32
            w = self.tmp("r")
            self.ins(f"cvt.u32.u16 {w}, {r}")
            self.ins(f"shl.b32 {w}, {w}, 16")
            self.ins(f"mov.b32 {out}, {w}")
        return out

    def from_f32(self, f: str, t: dt.DType) -> str:
        """Round f32 register ``f`` to nearest-even f16/bf16."""
        out = self.tmp("h")
        self.ins(f"cvt.rn.{t.name}.f32 {out}, {f}")
        return out

    def f64_to_f32_odd(self, d: str) -> str:
        """f64 -> f32 rounded to odd, so a second rounding to a 16-bit float is correct."""
        f, back, bits = self.tmp("f"), self.tmp("fd"), self.tmp("r")
        p = self.tmp("p")
        self.ins(f"cvt.rz.f32.f64 {f}, {d}")
        self.ins(f"cvt.f64.f32 {back}, {f}")
        self.ins(f"setp.neu.f64 {p}, {back}, {d}")   # inexact (NaN stays NaN either way)
        self.ins(f"mov.b32 {bits}, {f}")
        self.ins(f"@{p} or.b32 {bits}, {bits}, 1")
        self.ins(f"mov.b32 {f}, {bits}")
        return f

    def sat_int_to_f32_odd(self, r: str, src: dt.DType) -> str:
        """Integer -> f32 rounded to odd (for a correct second rounding to bf16 on sm_80)."""
        f, bits = self.tmp("f"), self.tmp("r")
        p = self.tmp("p")
        a = arith(src)
        back = self.tmp("rd" if src.bits == 64 else "r")
        self.ins(f"cvt.rz.f32.{a} {f}, {r}")
        self.ins(f"cvt.rzi.{a}.f32 {back}, {f}")
        self.ins(f"setp.ne.{a} {p}, {back}, {r}")
        self.ins(f"mov.b32 {bits}, {f}")
        self.ins(f"@{p} or.b32 {bits}, {bits}, 1")
        self.ins(f"mov.b32 {f}, {bits}")
        return f

    def pred_to_u32(self, p: str) -> str:
        r = self.tmp("r")
        self.ins(f"selp.u32 {r}, 1, 0, {p}")
        return r
