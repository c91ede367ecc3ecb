"""Memory ops -> PTX: addresses, loads, stores, atomics, shared/local arrays.

Addresses: a global buffer's pointer is converted once (``cvta.to.global``) in the prologue;
an N-d index is linearised row-major in 64-bit arithmetic, ``((i*d1)+j)*d2+k``, then scaled by
the item size and added to the pointer. Shared and local arrays use 32-bit addresses (their
windows are < 4 GiB) with static extents folded into immediates.

Atomics use the native ``atom`` instruction where PTX has one for the op and dtype, and a
compare-and-swap loop otherwise (8/16-bit integers, float min/max, bf16 add before sm_90...).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes as dt
from . import ptx_ops
from .ptx_emit import Emitter, arith, bits_type, mem_type


@dataclass
class BufInfo:
    """How to address one buffer: state space, base register and extents."""

    space: str            # 'global' | 'shared' | 'local'
    base: str             # 64-bit register (global) or 32-bit register (shared/local)
    extents: list         # i32 registers (global) or ints (static shapes)
    extents64: list       # i64 registers for axes >= 1 (global, ndim > 1)
    nc: bool = False      # read-only for the whole kernel: ld.global.nc
    dyn: bool = False     # dynamic shared memory (extent read from %dynamic_smem_size)
    swizzle: bool = False  # a kaio.mma.shared_tile: 128-byte rows swizzled (:func:`swizzled`)


def row_base(em: Emitter, buf: BufInfo, t: dt.DType, lead: list[str]) -> str:
    """``base + lin(lead) * d_last * size`` for an N-d global buffer (N >= 2): the address of
    row ``lead`` (all indices but the last). The PTX renderer computes it once before a loop
    whose accesses share a loop-invariant row; :func:`address` then adds only the last index.
    The 64-bit arithmetic is the same as :func:`address`'s, reassociated (exact mod 2**64)."""
    n = len(lead) + 1
    lin = em.tmp("rd")
    if n == 2:      # i * d1: one widening multiply of two i32s
        em.ins(f"mul.wide.s32 {lin}, {lead[0]}, {buf.extents[1]}")
    else:
        _lin2(em, buf, lead, lin)
        for a in range(2, n - 1):
            j = em.tmp("rd")
            em.ins(f"cvt.s64.s32 {j}, {lead[a]}")
            em.ins(f"mad.lo.s64 {lin}, {lin}, {buf.extents64[a - 1]}, {j}")
        em.ins(f"mul.lo.s64 {lin}, {lin}, {buf.extents64[n - 2]}")
    row = em.tmp("rd")
    em.ins(f"mad.lo.s64 {row}, {lin}, {t.itemsize}, {buf.base}")
    return row


def address(em: Emitter, buf: BufInfo, t: dt.DType, idx: list[str], row: str | None = None) -> str:
    """The address register of element ``idx`` (i32 registers) of ``buf``; ``row``: the
    :func:`row_base` of ``idx[:-1]`` when the caller has it."""
    size = t.itemsize
    if row is not None:
        off, addr = em.tmp("rd"), em.tmp("rd")
        em.ins(f"mul.wide.s32 {off}, {idx[-1]}, {size}")
        em.ins(f"add.s64 {addr}, {row}, {off}")
        return addr
    if buf.swizzle:
        return swizzled(em, buf, idx[0], idx[1])
    if buf.space != "global":
        if len(idx) == 1:
            lin = idx[0]
        else:
            lin = em.tmp("r")
            em.ins(f"mad.lo.s32 {lin}, {idx[0]}, {buf.extents[1]}, {idx[1]}")
            for a in range(2, len(idx)):
                em.ins(f"mad.lo.s32 {lin}, {lin}, {buf.extents[a]}, {idx[a]}")
        addr = em.tmp("r")
        em.ins(f"mad.lo.s32 {addr}, {lin}, {size}, {buf.base}")
        return addr
    addr = em.tmp("rd")
    if len(idx) == 1:
        off = em.tmp("rd")
        em.ins(f"mul.wide.s32 {off}, {idx[0]}, {size}")
        em.ins(f"add.s64 {addr}, {buf.base}, {off}")
        return addr
    lin = em.tmp("rd")
    _lin2(em, buf, idx, lin)
    for a in range(2, len(idx)):
        j = em.tmp("rd")
        em.ins(f"cvt.s64.s32 {j}, {idx[a]}")
        em.ins(f"mad.lo.s64 {lin}, {lin}, {buf.extents64[a - 1]}, {j}")
    em.ins(f"mad.lo.s64 {addr}, {lin}, {size}, {buf.base}")
    return addr


def swizzled(em: Emitter, buf: BufInfo, r: str, c: str) -> str:
    """The address of element (r, c) of a kaio.mma.shared_tile (2-byte elements, R rows): its
    columns in slabs of 64 (one 128-byte row each, ``R * 128`` bytes a slab), and in each row
    the eight 16-byte chunks permuted by ``chunk ^ (r % 8)``: Hopper's 128-byte swizzle, which
    wgmma reads through a descriptor, and under which ``ldmatrix`` and the tile copies touch
    eight different chunks of a 128-byte line per eight rows or chunks (no bank conflicts)."""
    R = buf.extents[0]
    slab, row, ch, x, lo, a = (em.tmp("r") for _ in range(6))
    em.ins(f"shr.u32 {slab}, {c}, 6")
    em.ins(f"mul.lo.u32 {slab}, {slab}, {R * 128}")
    em.ins(f"mad.lo.u32 {row}, {r}, 128, {slab}")
    em.ins(f"shr.u32 {ch}, {c}, 3")
    em.ins(f"xor.b32 {x}, {ch}, {r}")
    em.ins(f"and.b32 {x}, {x}, 7")
    em.ins(f"shl.b32 {x}, {x}, 4")
    em.ins(f"and.b32 {lo}, {c}, 7")
    em.ins(f"shl.b32 {lo}, {lo}, 1")
    em.ins(f"add.u32 {a}, {row}, {x}")
    em.ins(f"add.u32 {a}, {a}, {lo}")
    em.ins(f"add.u32 {a}, {a}, {buf.base}")
    return a


def _lin2(em: Emitter, buf: BufInfo, idx: list[str], lin: str) -> None:
    """``lin = idx[0] * d1 + idx[1]`` in 64 bits: one ``mad.wide.s32`` of the i32 index and
    extent (their product is exact in 64 bits), the same value as sign-extending both first and
    multiplying in 64 bits, for one IMAD.WIDE instead of a 64 x 64 multiply (three IMADs)."""
    j = em.tmp("rd")
    em.ins(f"cvt.s64.s32 {j}, {idx[1]}")
    em.ins(f"mad.wide.s32 {lin}, {idx[0]}, {buf.extents[1]}, {j}")


def load(em: Emitter, buf: BufInfo, t: dt.DType, addr: str) -> str:
    space = "global.nc" if buf.nc else buf.space
    if t.is_bool:
        w, d = em.tmp("r"), em.tmp("p")
        em.ins(f"ld.{space}.u8 {w}, [{addr}]")
        em.ins(f"setp.ne.u32 {d}, {w}, 0")
        return d
    d = em.reg(t)
    em.ins(f"ld.{space}.{mem_type(t)} {d}, [{addr}]")  # narrow ints extend into the 32-bit reg
    return d


def store(em: Emitter, buf: BufInfo, t: dt.DType, addr: str, v: str) -> None:
    if t.is_bool:
        v = em.pred_to_u32(v)
    em.ins(f"st.{buf.space}.{mem_type(t)} [{addr}], {v}")


# --- atomics -------------------------------------------------------------------------------------
def _native_atomic(em: Emitter, kind: str, t: dt.DType) -> str | None:
    """The ``atom`` suffix (op.type) for a natively supported op/dtype, else None."""
    if t.bits < 16 or t.is_bool or (t.bits == 16 and t.is_int):
        return None
    n = t.name
    if kind == "add":
        if n in ("i32", "u32", "u64", "f32", "f64"):
            return f"add.{arith(t)}"
        if n == "i64":
            return "add.u64"                 # two's complement: same bits as signed add
        if n == "f16" or (n == "bf16" and em.sm >= 90):
            return f"add.noftz.{n}"
        return None
    if kind in ("min", "max"):
        return f"{kind}.{arith(t)}" if t.is_int else None
    if kind in ("and", "or", "xor"):
        return f"{kind}.{bits_type(t)}" if t.is_int else None
    if kind == "exch":
        return f"exch.{bits_type(t)}" if t.bits >= 32 else None
    if kind == "cas":
        return f"cas.{bits_type(t)}"        # b16 CAS exists on sm_70+
    return None


def atomic(em: Emitter, kind: str, buf: BufInfo, t: dt.DType, addr: str, vals: list[str]) -> str:
    """Atomic read-modify-write; returns the old value's register."""
    space = buf.space
    if kind == "sub" and not t.is_bool:
        neg = ptx_ops.unary(em, "neg", t, vals[0])
        if _native_atomic(em, "add", t):
            return atomic(em, "add", buf, t, addr, [neg])
    suffix = _native_atomic(em, kind, t)
    if suffix is not None:
        d = em.reg(t)
        em.ins(f"atom.{space}.{suffix} {d}, [{addr}], {', '.join(vals)}")
        if t.is_int and t.bits < 32:
            em.normalize(d, t)
        return d
    return _cas_loop(em, kind, space, t, addr, vals)


def _combine(em, kind, t, old, vals):
    """The new value for one CAS-loop attempt."""
    if kind == "exch":
        return vals[0]
    if kind == "cas":
        c = ptx_ops.cmp(em, "eq", t, old, vals[0]) if not t.is_float else _bits_eq(em, t, old, vals[0])
        return ptx_ops.select(em, t, c, vals[1], old)
    if kind == "sub":
        return ptx_ops.binary(em, "sub", t, old, vals[0])
    return ptx_ops.binary(em, kind, t, old, vals[0])


def _bits_eq(em, t, a, b):
    """CAS compares bit patterns, not float values."""
    p = em.tmp("p")
    em.ins(f"setp.eq.{bits_type(t)} {p}, {a}, {b}")
    return p


def _cas_loop(em: Emitter, kind, space, t, addr, vals):
    em.comment(f"atomic {kind}.{t.name}: compare-and-swap loop")
    if t.bits >= 32:
        word_t = "b64" if t.bits == 64 else "b32"
        old, prev = em.reg(t), em.reg(t)
        ow, pw = em.tmp("rd" if t.bits == 64 else "r"), em.tmp("rd" if t.bits == 64 else "r")
        em.ins(f"ld.{space}.{word_t} {ow}, [{addr}]")
        loop = em.label("cas")
        em.place(loop)
        em.ins(f"mov.{bits_type(t)} {old}, {ow}")
        new = _combine(em, kind, t, old, vals)
        nw = em.tmp("rd" if t.bits == 64 else "r")
        em.ins(f"mov.{bits_type(t)} {nw}, {new}")
        em.ins(f"atom.{space}.cas.{word_t} {pw}, [{addr}], {ow}, {nw}")
        p = em.tmp("p")
        em.ins(f"setp.ne.{word_t} {p}, {pw}, {ow}")
        em.ins(f"mov.{word_t} {ow}, {pw}")
        em.bra(loop, p)
        em.ins(f"mov.{bits_type(t)} {prev}, {ow}")
        return prev
    # 8/16-bit (and bool): CAS on the aligned 32-bit word that contains the element
    wide = space == "global"
    areg = em.tmp("rd" if wide else "r")
    shift, sh = em.tmp("r"), em.tmp("r")
    em.ins(f"and.b{64 if wide else 32} {areg}, {addr}, {'0xFFFFFFFFFFFFFFFC' if wide else '0xFFFFFFFC'}")
    if wide:
        em.ins(f"cvt.u32.u64 {sh}, {addr}")
    else:
        em.ins(f"mov.b32 {sh}, {addr}")
    em.ins(f"and.b32 {sh}, {sh}, 3")
    em.ins(f"shl.b32 {shift}, {sh}, 3")
    width = 8 if t.bits <= 8 else 16
    ow, pw, nw, field = (em.tmp("r") for _ in range(4))
    em.ins(f"ld.{space}.b32 {ow}, [{areg}]")
    loop = em.label("cas")
    em.place(loop)
    em.ins(f"bfe.u32 {field}, {ow}, {shift}, {width}")
    old = _field_to_value(em, t, field)
    new = _combine(em, kind, t, old, vals)
    nf = _value_to_field(em, t, new)
    em.ins(f"bfi.b32 {nw}, {nf}, {ow}, {shift}, {width}")
    em.ins(f"atom.{space}.cas.b32 {pw}, [{areg}], {ow}, {nw}")
    p = em.tmp("p")
    em.ins(f"setp.ne.b32 {p}, {pw}, {ow}")
    em.ins(f"mov.b32 {ow}, {pw}")
    em.bra(loop, p)
    em.ins(f"bfe.u32 {field}, {ow}, {shift}, {width}")
    return _field_to_value(em, t, field)


def _field_to_value(em, t, field):
    """An 8/16-bit field (zero-extended in a 32-bit register) as a value of ``t``."""
    if t.is_bool:
        p = em.tmp("p")
        em.ins(f"setp.ne.u32 {p}, {field}, 0")
        return p
    if t.is_float:
        h = em.reg(t)
        em.ins(f"cvt.u16.u32 {h}, {field}")
        return h
    v = em.reg(t)
    em.ins(f"mov.b32 {v}, {field}")
    return em.normalize(v, t)


def _value_to_field(em, t, v):
    if t.is_bool:
        return em.pred_to_u32(v)
    if t.is_float:
        r = em.tmp("r")
        em.ins(f"cvt.u32.u16 {r}, {v}")
        return r
    return v  # bfi takes only the low bits
