"""Scalar IR ops -> PTX instructions: arithmetic, compares, selects and casts.

Each function takes the emitter, the dtype and operand registers, and returns the result
register, so atomics' compare-and-swap loops reuse them. Float arithmetic always carries an
explicit rounding mode (``add.rn``...), which also forbids ptxas from contracting a mul and an
add into an fma; only the IR's ``fma`` emits ``fma.rn``.
"""
from __future__ import annotations

from .. import dtypes as dt
from .ptx_emit import Emitter, arith, bits_type, imm

# --- integer and float binary ops: opcode -> instruction template (per family) -------------
#: integers (32- or 64-bit registers); '{t}' is the arithmetic type, '{b}' the bit type
INT_BINARY = {
    "add": "add.{t}", "sub": "sub.{t}", "mul": "mul.lo.{t}", "div": "div.{t}", "rem": "rem.{t}",
    "min": "min.{t}", "max": "max.{t}", "and": "and.{b}", "or": "or.{b}", "xor": "xor.{b}",
    "shl": "shl.{b}", "shr": "shr.{t}",
}
#: results that can leave an 8/16-bit integer's range and need re-truncation
INT_WRAPS = {"add", "sub", "mul", "div", "shl"}
#: f32 / f64 (always an explicit rounding mode: no contraction)
FLOAT_BINARY = {"add": "add.rn.{t}", "sub": "sub.rn.{t}", "mul": "mul.rn.{t}",
                "div": "div.rn.{t}", "min": "min.{t}", "max": "max.{t}"}
#: f16 natively (sm_53+); bf16 natively on sm_90 (sm_80 uses fma forms below)
HALF_BINARY = {"add": "add.rn.{t}", "sub": "sub.rn.{t}", "mul": "mul.rn.{t}",
               "min": "min.{t}", "max": "max.{t}"}
BOOL_BINARY = {"and": "and.pred", "or": "or.pred", "xor": "xor.pred", "min": "and.pred",
               "max": "or.pred"}
#: ordered compares (false on NaN) except ne, which is unordered (true on NaN), as in Python
FLOAT_CMP = {"eq": "eq", "ne": "neu", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge"}


def binary(em: Emitter, opcode: str, t: dt.DType, a: str, b: str) -> str:
    if t.is_bool:
        if opcode not in BOOL_BINARY:
            raise NotImplementedError(f"PTX: '{opcode}' on bool")
        d = em.reg(t)
        em.ins(f"{BOOL_BINARY[opcode]} {d}, {a}, {b}")
        return d
    if t.is_int:
        return _int_binary(em, opcode, t, a, b)
    if opcode == "rem":   # no PTX instruction: kaio.passes.expand_math writes it as a loop
        raise NotImplementedError(f"PTX: float 'rem' on {t.name} (run "
                                  "kaio.passes.target_pipeline first: it expands it)")
    if t.bits == 16:
        return _half_binary(em, opcode, t, a, b)
    d = em.reg(t)
    if opcode == "div" and em.fast_math and t.name == "f32":
        em.ins(f"div.full.f32 {d}, {a}, {b}")
    else:
        em.ins(f"{FLOAT_BINARY[opcode].format(t=t.name)} {d}, {a}, {b}")
    return d


def _int_binary(em, opcode, t, a, b):
    d = em.reg(t)
    if opcode in ("shl", "shr") and t.bits == 64:
        # the shift amount register is u32; saturate so amounts >= 2**32 still clamp to 64
        c64, amt = em.tmp("rd"), em.tmp("r")
        em.ins(f"min.u64 {c64}, {b}, 64")
        em.ins(f"cvt.u32.u64 {amt}, {c64}")
        b = amt
    em.ins(f"{INT_BINARY[opcode].format(t=arith(t), b=bits_type(t))} {d}, {a}, {b}")
    if opcode in INT_WRAPS:
        em.normalize(d, t)
    return d


def _half_binary(em, opcode, t, a, b):
    d = em.reg(t)
    if opcode in HALF_BINARY and (t.name == "f16" or em.sm >= 90 or opcode in ("min", "max")):
        em.ins(f"{HALF_BINARY[opcode].format(t=t.name)} {d}, {a}, {b}")
        return d
    if t.name == "bf16" and opcode in ("add", "sub", "mul"):
        # sm_80 has only fma.rn.bf16: a+b = fma(a, 1, b), a-b = fma(b, -1, a), a*b = fma(a, b, -0)
        one, m1, nz = (em.const(v, t) for v in (1.0, -1.0, -0.0))
        x, y, z = {"add": (a, one, b), "sub": (b, m1, a), "mul": (a, b, nz)}[opcode]
        em.ins(f"fma.rn.bf16 {d}, {x}, {y}, {z}")
        return d
    if opcode == "div":
        # exact quotient rounded to f32 then to 16 bits: double rounding is harmless here
        fa, fb, q = em.to_f32(a, t), em.to_f32(b, t), em.tmp("f")
        em.ins(f"div.rn.f32 {q}, {fa}, {fb}")
        return em.from_f32(q, t)
    raise NotImplementedError(f"PTX: '{opcode}' on {t.name}")


def unary(em: Emitter, opcode: str, t: dt.DType, a: str) -> str:
    d = em.reg(t)
    if t.is_bool:
        if opcode != "not":
            raise NotImplementedError(f"PTX: '{opcode}' on bool")
        em.ins(f"not.pred {d}, {a}")
    elif t.is_int:
        if opcode == "abs" and not t.is_signed:
            em.ins(f"mov.{bits_type(t)} {d}, {a}")
            return d
        em.ins({"neg": "neg.{t}", "not": "not.{b}", "abs": "abs.{t}"}[opcode]
               .format(t=arith(t).replace("u", "s"), b=bits_type(t)) + f" {d}, {a}")
        em.normalize(d, t)
    elif t.bits == 16:  # sign-bit manipulation is exact for every 16-bit float value
        if opcode == "not":
            raise NotImplementedError(f"PTX: 'not' on {t.name}")
        em.ins(f"{'xor' if opcode == 'neg' else 'and'}.b16 {d}, {a}, "
               f"{'0x8000' if opcode == 'neg' else '0x7FFF'}")
    else:
        if opcode == "not":
            raise NotImplementedError(f"PTX: 'not' on {t.name}")
        em.ins(f"{opcode}.{t.name} {d}, {a}")
    return d


def fma(em: Emitter, t: dt.DType, a: str, b: str, c: str) -> str:
    d = em.reg(t)
    if t.is_float:
        em.ins(f"fma.rn.{t.name} {d}, {a}, {b}, {c}")
    else:
        em.ins(f"mad.lo.{arith(t)} {d}, {a}, {b}, {c}")
        em.normalize(d, t)
    return d


def cmp(em: Emitter, pred: str, t: dt.DType, a: str, b: str) -> str:
    d = em.tmp("p")
    if t.is_bool:
        em.ins(f"xor.pred {d}, {a}, {b}")
        if pred == "eq":
            em.ins(f"not.pred {d}, {d}")
        elif pred != "ne":  # ordering on bools: false < true
            x, y = (a, b) if pred in ("lt", "le") else (b, a)
            na = em.tmp("p")
            em.ins(f"not.pred {na}, {x}")
            em.ins(f"and.pred {d}, {na}, {y}")  # x < y
            if pred in ("le", "ge"):
                em.ins(f"or.pred {d}, {d}, {_eq_bool(em, a, b)}")
        return d
    if t.is_int:
        em.ins(f"setp.{pred}.{arith(t)} {d}, {a}, {b}")
        return d
    if t.name == "bf16" and em.sm < 90:
        a, b, t = em.to_f32(a, t), em.to_f32(b, t), dt.f32
    em.ins(f"setp.{FLOAT_CMP[pred]}.{t.name} {d}, {a}, {b}")
    return d


def _eq_bool(em, a, b):
    e = em.tmp("p")
    em.ins(f"xor.pred {e}, {a}, {b}")
    em.ins(f"not.pred {e}, {e}")
    return e


def select(em: Emitter, t: dt.DType, c: str, a: str, b: str) -> str:
    d = em.reg(t)
    if t.is_bool:
        x, nc, y = em.tmp("p"), em.tmp("p"), em.tmp("p")
        em.ins(f"and.pred {x}, {c}, {a}")
        em.ins(f"not.pred {nc}, {c}")
        em.ins(f"and.pred {y}, {nc}, {b}")
        em.ins(f"or.pred {d}, {x}, {y}")
    else:
        em.ins(f"selp.{bits_type(t)} {d}, {a}, {b}, {c}")
    return d


# --- casts -------------------------------------------------------------------------------------
def cast(em: Emitter, src: dt.DType, dst: dt.DType, a: str) -> str:
    """Value conversion with the IR's rules: float->int truncates and saturates (NaN -> 0),
    int->float and float narrowing round to nearest even, widening is exact, to bool is != 0."""
    if src is dst:
        return a
    if dst.is_bool:
        return _to_bool(em, src, a)
    if src.is_bool:
        d = em.reg(dst)
        one, zero = (imm(1, dst), imm(0, dst)) if not dst.is_float else (imm(1.0, dst), imm(0.0, dst))
        em.ins(f"selp.{bits_type(dst)} {d}, {one}, {zero}, {a}")
        return d
    if src.is_int and dst.is_int:
        return _int_to_int(em, src, dst, a)
    if src.is_int:
        return _int_to_float(em, src, dst, a)
    if dst.is_int:
        return _float_to_int(em, src, dst, a)
    return _float_to_float(em, src, dst, a)


def _to_bool(em, src, a):
    d = em.tmp("p")
    if src.is_int:
        em.ins(f"setp.ne.{bits_type(src)} {d}, {a}, 0")
        return d
    if src.bits == 16:
        a, src = em.to_f32(a, src), dt.f32
    em.ins(f"setp.neu.{src.name} {d}, {a}, {imm(0.0, src)}")  # NaN is truthy, as in Python
    return d


def _int_to_int(em, src, dst, a):
    d = em.reg(dst)
    if dst.bits == 64:
        if src.bits == 64:
            em.ins(f"mov.b64 {d}, {a}")
        else:  # the canonical 32-bit register already carries the source's sign
            em.ins(f"cvt.{arith(dst)}.{arith(src)} {d}, {a}")
        return d
    if src.bits == 64:
        em.ins(f"cvt.u32.u64 {d}, {a}")
    else:
        em.ins(f"mov.b32 {d}, {a}")
    return em.normalize(d, dst)


def _int_to_float(em, src, dst, a):
    d = em.reg(dst)
    if dst.name == "bf16" and em.sm < 90:
        f = em.sat_int_to_f32_odd(a, src)
        em.ins(f"cvt.rn.bf16.f32 {d}, {f}")
        return d
    em.ins(f"cvt.rn.{dst.name}.{arith(src)} {d}, {a}")
    return d


def _float_to_int(em, src, dst, a):
    if src.bits == 16:
        a, src = em.to_f32(a, src), dt.f32
    if dst.bits >= 32:
        d = em.reg(dst)
        # PTX float->int conversions clamp to the destination range; NaN -> 0 holds for f32
        # sources only (an f64 NaN gives 0x80000000 on the H200), hence the guard below
        em.ins(f"cvt.rzi.{arith(dst)}.{src.name} {d}, {a}")
        return _nan_to_zero(em, src, dst, a, d)
    w = em.tmp("r")
    em.ins(f"cvt.rzi.{arith(dst)}.{src.name} {w}, {a}")  # 32-bit saturating
    d = em.reg(dst)
    em.ins(f"min.{arith(dst)} {d}, {w}, {imm(dst.max_value(), dst)}")
    if dst.is_signed:
        em.ins(f"max.s32 {d}, {d}, {dst.min_value()}")
    return _nan_to_zero(em, src, dst, a, d)


def _nan_to_zero(em, src, dst, a, d):
    """The IR maps NaN to 0 in float->int casts. The hardware does so only for f32 sources
    into 32-bit integers: an f64 source, or any 64-bit destination, gives 0x80...0 (seen on the
    H200), so those get an explicit guard."""
    if src.name != "f64" and dst.bits < 64:
        return d
    p = em.tmp("p")
    em.ins(f"setp.nan.{src.name} {p}, {a}, {a}")
    width = "b64" if dst.bits == 64 else "b32"
    em.ins(f"selp.{width} {d}, 0, {d}, {p}")
    return d


def _float_to_float(em, src, dst, a):
    d = em.reg(dst)
    if dst.bits > src.bits:  # widening is exact
        if src.name == "bf16":
            f = em.to_f32(a, src)
            if dst.name == "f32":
                return f
            em.ins(f"cvt.f64.f32 {d}, {f}")
        else:
            em.ins(f"cvt.{dst.name}.{src.name} {d}, {a}")
        return d
    if src.bits == 16:  # f16 <-> bf16 through exact f32
        return em.from_f32(em.to_f32(a, src), dst)
    if dst.name == "bf16" and src.name == "f64" and em.sm < 90:
        em.ins(f"cvt.rn.bf16.f32 {d}, {em.f64_to_f32_odd(a)}")
        return d
    em.ins(f"cvt.rn.{dst.name}.{src.name} {d}, {a}")
    return d


def bitcast(em: Emitter, src: dt.DType, dst: dt.DType, a: str) -> str:
    """Reinterpret the bits: same-width dtypes only."""
    if src.bits != dst.bits or src.is_bool or dst.is_bool:
        raise NotImplementedError(f"PTX: bitcast {src.name} -> {dst.name}")
    d = em.reg(dst)
    sc, dc = bits_type(src), bits_type(dst)
    if src.bits == 16 and src.is_int:      # canonical 32-bit register -> 16-bit register
        em.ins(f"cvt.u16.u32 {d}, {a}")
    elif dst.bits == 16 and dst.is_int:    # 16-bit register -> canonical 32-bit register
        em.ins(f"cvt.{'s32.s16' if dst.is_signed else 'u32.u16'} {d}, {a}")
    elif src.bits == 8:
        em.ins(f"mov.b32 {d}, {a}")
        em.normalize(d, dst)
    else:
        assert sc == dc
        em.ins(f"mov.{sc} {d}, {a}")
    return d
