"""A tiny PTX interpreter for testing kaio's PTX numerics and synchronisation without a GPU.

It executes the subset of PTX that kaio's emitter produces with IEEE semantics computed exactly
(fractions) and rounded per instruction, so casts, integer wrap, rounding modes, control flow
and the f64 math sequences can be checked against numpy here. Each thread is a generator that
runs until a ``bar.sync`` or a warp op (``shfl.sync``, ``vote.sync``); the block's threads meet
there (warps by linear thread id), so barriers, shuffles, votes and ballots work too. Memory
ordering between threads is sequential (no data races are modelled).
"""
from __future__ import annotations

import math
import re
import struct
from fractions import Fraction

import numpy as np

from kaio import dtypes as dt

BF16 = dt.bf16.storage_np
#: (precision bits, min normal exponent, max exponent)
FORMATS = {"f16": (11, -14, 15), "bf16": (8, -126, 127), "f32": (24, -126, 127),
           "f64": (53, -1022, 1023)}
WIDTH = {"8": 8, "16": 16, "32": 32, "64": 64}
#: tf32 (``cvt.rna.tf32.f32``'s result, held in a .b32): f32's exponents, an 11-bit significand
TF32 = (11, -126, 127)


def round_frac(q: Fraction, fmt: str, mode: str = "rn") -> float:
    """Round an exact rational to ``fmt`` (nearest-even ``rn``, nearest with ties away from zero
    ``rna``, or toward zero ``rz``); returns a float."""
    if q == 0:
        return 0.0
    p, emin, emax = TF32 if fmt == "tf32" else FORMATS[fmt]
    neg, a = q < 0, abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, emin)
    quantum = Fraction(2) ** (e - p + 1)
    n = a / quantum
    r = n.numerator // n.denominator
    rem = n - r
    if mode == "rn" and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and r & 1)):
        r += 1
    elif mode == "rna" and rem >= Fraction(1, 2):
        r += 1
    v = r * quantum
    if v >= Fraction(2) ** (emax + 1):
        v = math.inf if mode in ("rn", "rna") else float((2 - Fraction(2) ** (1 - p)) * Fraction(2) ** emax)
    v = float(v)
    return -v if neg else v


def to_bits(x: float, fmt: str) -> int:
    if fmt == "f64":
        return struct.unpack("<Q", struct.pack("<d", x))[0]
    if fmt == "f32":
        return int(np.array(x, np.float32).view(np.uint32))
    return int(np.array(x, np.float16 if fmt == "f16" else BF16).view(np.uint16))


def from_bits(b: int, fmt: str) -> float:
    if fmt == "f64":
        return struct.unpack("<d", struct.pack("<Q", b & (2 ** 64 - 1)))[0]
    if fmt == "f32":
        return float(np.array(b & 0xFFFFFFFF, np.uint32).view(np.float32))
    return float(np.array(b & 0xFFFF, np.uint16).view(np.float16 if fmt == "f16" else BF16))


def fround(x: float, fmt: str, mode="rn") -> float:
    """Round a float (exact value) to ``fmt``, keeping infinities, NaN and the sign of zero."""
    if math.isnan(x) or math.isinf(x) or x == 0:
        return x
    return round_frac(Fraction(x), fmt, mode)


class PtxError(Exception):
    pass


class Machine:
    """Parse one ``.entry`` and run it for each thread of a launch."""

    def __init__(self, ptx: str):
        self.widths: dict[str, int] = {}
        self.code: list[tuple] = []
        self.labels: dict[str, int] = {}
        self.symbols: dict[str, tuple[str, int]] = {}   # name -> (space, size)
        self.params: list[str] = []
        in_params = False
        for raw in ptx.splitlines():
            line = raw.split("//")[0].strip()
            if not line:
                continue
            if line.startswith(".visible .entry"):
                in_params = True
                continue
            if in_params:
                m = re.match(r"\.param \.\w+ (\w+)", line)
                if m:
                    self.params.append(m.group(1))
                if line.startswith(")"):
                    in_params = False
                continue
            m = re.match(r"\.reg \.(\w+) %(\w+)<\d+>;", line)
            if m:
                self.widths[m.group(2)] = 1 if m.group(1) == "pred" else int(m.group(1)[1:])
                continue
            m = re.match(r"\.const \.align \d+ \.b64 (\w+)\[(\d+)\] = \{(.*)\};", line)
            if m:
                words = [int(w, 0) for w in m.group(3).split(",")]
                self.const_data = b"".join(w.to_bytes(8, "little") for w in words)
                self.symbols[m.group(1)] = ("const", len(self.const_data))
                continue
            m = re.match(r"(?:\.extern )?\.(shared|local) \.align \d+ \.b8 (\w+)\[(\d*)\];", line)
            if m:
                self.symbols[m.group(2)] = (m.group(1), int(m.group(3) or 1 << 16))
                continue
            if line.startswith((".", "{", "}")):
                continue
            if line.endswith(":"):
                self.labels[line[:-1]] = len(self.code)
                continue
            self.code.append(self._parse(line.rstrip(";")))

    @staticmethod
    def _parse(line):
        guard = None
        if line.startswith("@"):
            g, line = line.split(None, 1)
            guard = (g[1:].lstrip("!"), g.startswith("@!"))
        parts = line.split(None, 1)
        ops = re.findall(r"\{[^}]*\}|\[[^\]]*\]|[^,\s]+", parts[1]) if len(parts) > 1 else []
        return guard, parts[0].split("."), ops

    # --- register access ----------------------------------------------------------------
    def width(self, reg):
        name = re.match(r"%([a-z]+)\d+$", reg).group(1)
        return self.widths[name]

    def raw(self, o):
        """Bits of operand ``o`` (register, immediate, special register, symbol)."""
        if o.startswith("%"):
            if o in self.special:
                return self.special[o]
            return self.regs.get(o, 0)
        if o.startswith("0f"):
            return int(o[2:], 16)
        if o.startswith("0d"):
            return int(o[2:], 16)
        if o in self.symbols:
            return self.sym_base[o]
        return int(o, 0)

    def get(self, o, t):
        b = self.raw(o)
        if t == "pred":
            return bool(b)
        if t in FORMATS:
            return from_bits(b, t)
        w = WIDTH[t[1:]]
        b &= (1 << w) - 1
        if t[0] == "s" and b >> (w - 1):
            b -= 1 << w
        return b

    def put(self, reg, t, v):
        w = self.width(reg)
        if t == "pred":
            self.regs[reg] = int(bool(v))
            return
        if t in FORMATS:
            b = to_bits(v, t)
        else:
            tw = WIDTH[t[1:]]
            b = int(v) & ((1 << tw) - 1)
            if t[0] == "s" and b >> (tw - 1):   # sign-extend into a wider register
                b -= 1 << tw
        self.regs[reg] = b & ((1 << w) - 1) if w > 1 else b

    # --- memory ---------------------------------------------------------------------------
    def addr(self, o):
        inner = o.strip("[]")
        if "+" in inner:
            base, off = inner.split("+")
            return self.raw(base) + int(off, 0)
        return self.raw(inner) if inner.startswith("%") or inner in self.symbols else self.param_addr(inner)

    def param_addr(self, name):
        return ("param", name)

    def load(self, space, a, t):
        if isinstance(a, tuple):
            return self.param_values[a[1]]
        mem = self.mem[space]
        n = 1 if t in ("u8", "s8") else WIDTH[t[1:]] // 8
        b = int.from_bytes(mem[a:a + n], "little")
        if t[0] == "s" and b >> (8 * n - 1):
            b -= 1 << (8 * n)
        return b

    def store(self, space, a, t, bits):
        n = 1 if t in ("u8", "s8") else WIDTH[t[1:]] // 8
        self.mem[space][a:a + n] = (bits & ((1 << (8 * n)) - 1)).to_bytes(n, "little")

    # --- running ---------------------------------------------------------------------------
    def launch(self, args: list, abi, grid, block, shared=0, misalign=0):
        """``args`` in IR order: numpy arrays (updated in place) or scalars. ``misalign`` places
        every buffer that many bytes past a 256-byte boundary."""
        gbytes = bytearray(8)
        bases, self.param_values = {}, {}
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                bases[i] = len(gbytes) + (-len(gbytes)) % 256 + misalign
                gbytes.extend(b"\0" * (bases[i] - len(gbytes)))
                gbytes.extend(a.tobytes())
        for p in abi.params:
            a = args[p.ir_param_index]
            if p.kind == "pointer":
                v = bases[p.ir_param_index]
            elif p.kind == "extent":
                v = a.shape[p.dim]
            elif p.dtype in FORMATS:
                v = to_bits(float(a), p.dtype)
            else:
                v = int(a)
            self.param_values[p.name] = v
        self.mem = {"global": gbytes}
        self.mem["const"] = bytearray(getattr(self, "const_data", b""))
        self.sym_base, off = {}, {"shared": 16, "local": 16, "const": 0}
        for name, (space, size) in sorted(self.symbols.items(), key=lambda kv: kv[0] == "dyn_smem"):
            self.sym_base[name] = off[space]
            off[space] += size + (-size) % 16
        g = tuple(grid) + (1,) * (3 - len(grid))
        bl = tuple(block) + (1,) * (3 - len(block))
        for bz in range(g[2]):
            for by in range(g[1]):
                for bx in range(g[0]):
                    self._block((bx, by, bz), bl, g, shared)
        for i, a in enumerate(args):
            if isinstance(a, np.ndarray):
                flat = np.frombuffer(bytes(gbytes[bases[i]:bases[i] + a.nbytes]), a.dtype)
                a[...] = flat.reshape(a.shape)

    # --- one block: threads run until they reach a barrier or a warp op, then meet there ------
    def _block(self, ctaid, ntid, nctaid, shared):
        self.mem["shared"] = bytearray(1 << 18)
        ctxs, gens = [], []
        for tz in range(ntid[2]):
            for ty in range(ntid[1]):
                for tx in range(ntid[0]):
                    lin = (tz * ntid[1] + ty) * ntid[0] + tx
                    special = {"%laneid": lin % 32, "%dynamic_smem_size": shared}
                    for ax, c in enumerate("xyz"):
                        special[f"%tid.{c}"] = (tx, ty, tz)[ax]
                        special[f"%ctaid.{c}"] = ctaid[ax]
                        special[f"%ntid.{c}"] = ntid[ax]
                        special[f"%nctaid.{c}"] = nctaid[ax]
                    ctxs.append(({}, special, bytearray(1 << 12)))
                    gens.append(self._thread())
        done = object()
        reqs = [None] * len(gens)

        def step(i, value=None):
            self.regs, self.special, self.mem["local"] = ctxs[i]
            try:
                reqs[i] = gens[i].send(value)
            except StopIteration:
                reqs[i] = done

        for i in range(len(gens)):
            step(i)
        while True:
            live = [i for i, r in enumerate(reqs) if r is not done]
            if not live:
                return
            moved = False
            for w in sorted({i // 32 for i in live}):
                lanes = [i for i in live if i // 32 == w]
                if all(reqs[i][0] == "warp" for i in lanes):
                    results = _warp_op(lanes, [reqs[i] for i in lanes])
                    for i, r in zip(lanes, results):
                        step(i, r)
                    moved = True
            if moved:
                continue
            if all(reqs[i][0] == "bar" for i in live):
                for i in live:
                    step(i)
                continue
            raise PtxError("threads wait at different barriers / warp ops (divergent sync)")

    def _thread(self):
        """A generator running one thread; yields at barriers and warp ops."""
        yield from ()
        pc, steps = 0, 0
        while pc < len(self.code):
            steps += 1
            if steps > 2_000_000:
                raise PtxError("too many steps (infinite loop?)")
            guard, opc, ops = self.code[pc]
            pc += 1
            if guard is not None and bool(self.regs.get(guard[0], 0)) == guard[1]:
                continue
            if opc[0] == "ret":
                return
            if opc[0] == "bra":
                pc = self.labels[ops[0]]
                continue
            if opc[0] == "bar":
                yield ("bar",)
                continue
            if opc[0] == "shfl":
                lane = self.special["%laneid"]
                res = yield ("warp", "shfl", opc[2], lane, self.raw(ops[1]), self.get(ops[2], "u32"),
                             self.get(ops[3], "u32"), self.get(ops[4], "u32"))
                self.regs[ops[0]] = res
                continue
            if opc[0] == "vote":
                lane = self.special["%laneid"]
                res = yield ("warp", "vote", opc[2], lane, self.get(ops[1], "pred"),
                             self.get(ops[2], "u32"))
                if opc[2] == "ballot":
                    self.regs[ops[0]] = res
                else:
                    self.put(ops[0], "pred", res)
                continue
            if opc[0] == "ldmatrix":
                regs = [x.strip() for x in ops[0].strip("{}").split(",")]
                res = yield ("warp", "ldmatrix", ".".join(opc[1:]), self.special["%laneid"],
                             self.addr(ops[1]), self.mem["shared"])
                for r, bits in zip(regs, res):
                    self.regs[r] = bits
                continue
            if opc[0] == "cp":     # cp.async: modelled as a synchronous copy (zero fill past src-size)
                if opc[2] == "cg" or opc[2] == "ca":
                    dst, src = self.addr(ops[0]), self.addr(ops[1])
                    n = int(ops[2])
                    got = self.get(ops[3], "u32") if len(ops) > 3 else n   # src-size: all of it
                    if dst % 16 or src % 16:
                        raise PtxError(f"misaligned cp.async {dst:#x} <- {src:#x}")
                    data = bytes(self.mem["global"][src:src + got]) + bytes(n - got)
                    self.mem["shared"][dst:dst + n] = data
                continue
            if opc[0] == "mma":
                regs = [[x.strip() for x in o.strip("{}").split(",")] for o in ops]
                res = yield ("warp", "mma", ".".join(opc[1:]), self.special["%laneid"],
                             [[self.raw(r) for r in rs] for rs in regs[1:]], 0xFFFFFFFF)
                for r, bits in zip(regs[0], res):
                    self.regs[r] = bits
                continue
            execute(self, opc, ops)


def _mma_m16n8k16(reqs):
    """``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}.{f16,bf16}.f32`` for a whole warp,
    from the ISA's fragment tables: with g = lane // 4 and t = lane % 4, A's element i sits at
    (g + 8 * ((i // 2) % 2), 2 * t + (i % 2) + 8 * (i // 4)), B's at (2 * t + (i % 2) +
    8 * (i // 2), g), C/D's at (g + 8 * (i // 2), 2 * t + (i % 2)); two 16-bit elements per
    32-bit register, the lower index in the low half. D is computed exactly and rounded once
    (a bound the hardware meets within its own rounding)."""
    fmt = reqs[0][2].split(".")[6]
    A, B = np.zeros((16, 16)), np.zeros((16, 8))
    for r in reqs:
        lane, (a, b, _) = r[3], r[4]
        g, t = lane // 4, lane % 4
        halves = lambda regs: [(w >> (16 * h)) & 0xFFFF for w in regs for h in (0, 1)]  # noqa: E731
        for i, bits in enumerate(halves(a)):
            A[g + 8 * ((i // 2) % 2), 2 * t + i % 2 + 8 * (i // 4)] = from_bits(bits, fmt)
        for i, bits in enumerate(halves(b)):
            B[2 * t + i % 2 + 8 * (i // 2), g] = from_bits(bits, fmt)
    return _mma_f32_sum(reqs, A, B)


def _mma_m16n8k8_tf32(reqs):
    """``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32``, from the ISA's tables: one tf32
    per .b32, A's element i at (g + 8 * (i % 2), t + 4 * (i // 2)), B's at (t + 4 * i, g),
    C/D's as for m16n8k16. The matrix unit reads a register's sign, exponent and top 10
    fraction bits and ignores the low 13 (so an operand not converted by cvt is truncated);
    D as for m16n8k16, exact and rounded once."""
    A, B = np.zeros((16, 8)), np.zeros((8, 8))
    for r in reqs:
        g, t, (a, b, _) = r[3] // 4, r[3] % 4, r[4]
        for i, bits in enumerate(a):
            A[g + 8 * (i % 2), t + 4 * (i // 2)] = from_bits(bits & 0xFFFFE000, "f32")
        for i, bits in enumerate(b):
            B[t + 4 * i, g] = from_bits(bits & 0xFFFFE000, "f32")
    return _mma_f32_sum(reqs, A, B)


def _mma_f32_sum(reqs, A, B):
    """Each lane's four D elements of ``C + A @ B`` (C from the lanes' f32 accumulator registers,
    laid out as for m16n8k16), the sum exact and rounded once to f32."""
    C = np.zeros((16, 8))
    for r in reqs:
        g, t = r[3] // 4, r[3] % 4
        for i, bits in enumerate(r[4][2]):
            C[g + 8 * (i // 2), 2 * t + i % 2] = from_bits(bits, "f32")
    out = []
    for r in reqs:
        g, t = r[3] // 4, r[3] % 4
        d = []
        for i in range(4):
            row, col = g + 8 * (i // 2), 2 * t + i % 2
            exact = Fraction(C[row, col]) + sum(Fraction(A[row, p]) * Fraction(B[p, col])
                                                for p in range(A.shape[1]))
            d.append(to_bits(round_frac(exact, "f32"), "f32"))
        out.append(d)
    return out


def _mma_m16n8k32_s8(reqs):
    """``mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32``, from the ISA's tables: A's element i
    (four bytes per register, the lowest first) at (g + 8 * ((i // 4) % 2), 4 * t + i % 4 +
    16 * (i // 8)), B's at (4 * t + i % 4 + 16 * (i // 4), g), C/D's as for m16n8k16; the
    sum is exact and wraps modulo 2**32 (no .satfinite)."""
    A, B, C = (np.zeros(s, np.int64) for s in ((16, 32), (32, 8), (16, 8)))
    byte = lambda regs: [((w >> 8 * h) & 0xFF ^ 0x80) - 0x80 for w in regs for h in range(4)]  # noqa: E731
    for r in reqs:
        g, t, (a, b, c) = r[3] // 4, r[3] % 4, r[4]
        for i, v in enumerate(byte(a)):
            A[g + 8 * (i // 4 % 2), 4 * t + i % 4 + 16 * (i // 8)] = v
        for i, v in enumerate(byte(b)):
            B[4 * t + i % 4 + 16 * (i // 4), g] = v
        for i, bits in enumerate(c):
            C[g + 8 * (i // 2), 2 * t + i % 2] = ((bits & 0xFFFFFFFF) ^ 1 << 31) - (1 << 31)
    D = (C + A @ B) & 0xFFFFFFFF
    return [[int(D[r[3] // 4 + 8 * (i // 2), 2 * (r[3] % 4) + i % 2]) for i in range(4)]
            for r in reqs]


def _ldmatrix(reqs, mode):
    """``ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16``: lanes 8i..8i+7 give the row
    addresses of matrix i (16 bytes each, 16-byte aligned); lane l receives, per matrix, the
    elements (l // 4, 2 (l % 4)) and (l // 4, 2 (l % 4) + 1), or of the transpose with .trans."""
    if len(reqs) != 32:
        raise PtxError(f"ldmatrix executed by {len(reqs)} lanes of a warp, not 32")
    parts = mode.split(".")
    n = int(next(p for p in parts if p.startswith("x"))[1:])
    trans = "trans" in parts
    by_lane = {r[3]: r for r in reqs}
    mem = reqs[0][5]
    mats = []
    for i in range(n):
        rows = []
        for j in range(8):
            a = by_lane[8 * i + j][4]
            if a % 16:
                raise PtxError(f"ldmatrix row address {a:#x} not 16-byte aligned")
            rows.append([int.from_bytes(mem[a + 2 * c:a + 2 * c + 2], "little") for c in range(8)])
        mats.append(rows)
    out = []
    for r in reqs:
        lane = r[3]
        row, col = lane // 4, 2 * (lane % 4)
        regs = []
        for m in mats:
            lo, hi = (m[col][row], m[col + 1][row]) if trans else (m[row][col], m[row][col + 1])
            regs.append(lo | (hi << 16))
        out.append(regs)
    return out


def _warp_op(lanes, reqs):
    """Results of one shuffle or vote executed together by the live lanes of a warp."""
    kinds = {(r[1], r[2]) for r in reqs}
    if len(kinds) != 1:
        raise PtxError(f"lanes of one warp are at different warp ops: {kinds}")
    kind, mode = kinds.pop()
    if kind == "ldmatrix":
        return _ldmatrix(reqs, mode)
    if kind == "mma":
        if len(reqs) != 32:
            raise PtxError(f"mma.sync executed by {len(reqs)} lanes of a warp, not 32")
        shape = mode.split(".")[2]
        return {"m16n8k32": _mma_m16n8k32_s8, "m16n8k8": _mma_m16n8k8_tf32}.get(
            shape, _mma_m16n8k16)(reqs)
    by_lane = {r[3]: r for r in reqs}
    members = sum(1 << r[3] for r in reqs)
    for r in reqs:   # the member mask must name exactly the lanes taking part
        if r[-1] != members:
            raise PtxError(f"{kind}.sync member mask {r[-1]:#x} but lanes {members:#x} take part")
    if kind == "vote":
        ps = [r[4] for r in reqs]
        if mode == "ballot":
            return [sum(1 << r[3] for r in reqs if r[4])] * len(reqs)
        return [any(ps) if mode == "any" else all(ps)] * len(reqs)
    out = []
    for r in reqs:
        lane, _a, b, c = r[3], r[4], r[5], r[6]
        bval, cval, seg = b & 31, c & 31, (c >> 8) & 31
        max_lane, min_lane = (lane & seg) | (cval & ~seg), lane & seg
        if mode == "up":
            j = lane - bval
            ok = j >= max_lane
        elif mode == "down":
            j, ok = lane + bval, lane + bval <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            ok = j <= max_lane
        else:
            j = min_lane | (bval & ~seg)
            ok = j <= max_lane
        src = by_lane.get(j if ok else lane)
        out.append((src if src is not None else r)[4])
    return out


# --- instruction semantics ---------------------------------------------------------------------
_TYPES = ("pred", "f16", "bf16", "f32", "f64", "b8", "b16", "b32", "b64", "s8", "s16", "s32",
          "s64", "u8", "u16", "u32", "u64")
_APPROX = {"ex2": lambda x: 2.0 ** x, "lg2": lambda x: math.log2(x) if x > 0 else (
    -math.inf if x == 0 else math.nan), "sin": math.sin, "cos": math.cos, "tanh": math.tanh,
    "rsqrt": lambda x: 1 / math.sqrt(x) if x > 0 else (math.inf if x == 0 else math.nan),
    "sqrt": lambda x: math.sqrt(x) if x >= 0 else math.nan}


def _types(opc):
    return [m for m in opc[1:] if m in _TYPES]


def _fexact(fn, *xs):
    """Exact rational result of fn on finite floats, or None when an operand is not finite."""
    if not all(math.isfinite(x) for x in xs):
        return None
    return fn(*(Fraction(x) for x in xs))


def _farith(name, t, a, b, c=None):
    with np.errstate(all="ignore"):
        if name == "add":
            q, f = _fexact(lambda x, y: x + y, a, b), np.float64(a) + np.float64(b)
        elif name == "sub":
            q, f = _fexact(lambda x, y: x - y, a, b), np.float64(a) - np.float64(b)
        elif name == "mul":
            q, f = _fexact(lambda x, y: x * y, a, b), np.float64(a) * np.float64(b)
        elif name == "div":
            q = _fexact(lambda x, y: x / y, a, b) if b != 0 else None
            f = np.float64(a) / np.float64(b)
        elif name == "fma":
            q, f = _fexact(lambda x, y, z: x * y + z, a, b, c), np.float64(a) * np.float64(b) + np.float64(c)
        else:
            raise PtxError(name)
    if q is None or q == 0:
        return float(f) if q is None else (0.0 if not (f == 0 and math.copysign(1, f) < 0) else -0.0)
    return round_frac(q, t)


def _cmp(cmp, a, b):
    unordered = isinstance(a, float) and (math.isnan(a) or math.isnan(b))
    base = cmp[:-1] if cmp.endswith("u") and cmp not in ("u",) and len(cmp) == 3 else cmp
    if unordered:
        return cmp in ("neu", "equ", "ltu", "leu", "gtu", "geu", "nan")
    if cmp in ("num",):
        return True
    if cmp == "nan":
        return False
    return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}[base]


def _int_range(t):
    w = WIDTH[t[1:]]
    return (-(1 << (w - 1)), (1 << (w - 1)) - 1) if t[0] == "s" else (0, (1 << w) - 1)


def _cvt(m, opc, d, a):
    mods = opc[1:-2]
    dt_, at = opc[-2], opc[-1]
    v = m.get(a, at)
    if dt_ == "tf32":       # cvt.rna.tf32.f32: nearest tf32, ties away, as f32 bits (NaN: canonical)
        if math.isnan(v):
            m.regs[d] = 0x7FFFFFFF
        else:
            m.put(d, "f32", v if v == 0 or math.isinf(v) else round_frac(Fraction(v), "tf32", "rna"))
        return
    if dt_ in FORMATS:
        if at in FORMATS:
            rnd = next((x for x in mods if x in ("rni", "rzi", "rmi", "rpi")), None)
            if rnd:
                if not math.isfinite(v):
                    r = v
                else:
                    r = {"rni": lambda x: float(round(x)), "rzi": math.trunc, "rmi": math.floor,
                         "rpi": math.ceil}[rnd](v)
                    r = math.copysign(float(r), v) if r == 0 else float(r)
                m.put(d, dt_, r)
            else:
                m.put(d, dt_, fround(v, dt_, "rz" if "rz" in mods else "rn"))
        else:
            m.put(d, dt_, round_frac(Fraction(v), dt_, "rz" if "rz" in mods else "rn") if v else 0.0)
        return
    if at in FORMATS:  # float -> int: round, saturate, NaN -> 0
        lo, hi = _int_range(dt_)
        if math.isnan(v):
            r = 0
        elif math.isinf(v):
            r = hi if v > 0 else lo
        else:
            rnd = next((x for x in mods if x in ("rni", "rzi", "rmi", "rpi")), "rzi")
            r = {"rni": round, "rzi": math.trunc, "rmi": math.floor, "rpi": math.ceil}[rnd](v)
            r = min(max(int(r), lo), hi)
        m.put(d, dt_, r)
        return
    r = v
    if "sat" in mods:
        lo, hi = _int_range(dt_)
        r = min(max(r, lo), hi)
    m.put(d, dt_, r)


def execute(m: Machine, opc: list, ops: list) -> None:
    name = opc[0]
    if name == "bar":
        return
    if any(x in _X2 for x in opc):
        return _packed(m, opc, ops)
    ts = _types(opc)
    t = ts[-1] if ts else None
    if name == "mov":
        d, a = ops
        if d.startswith("{"):          # unpack a 64-/32-bit value into two halves
            lo, hi = [x.strip() for x in d.strip("{}").split(",")]
            b, w = m.raw(a), m.width(lo)
            m.regs[lo], m.regs[hi] = b & ((1 << w) - 1), (b >> w) & ((1 << w) - 1)
        elif a.startswith("{"):
            lo, hi = [x.strip() for x in a.strip("{}").split(",")]
            m.regs[d] = m.raw(lo) | (m.raw(hi) << m.width(lo))
        else:
            b = m.raw(a)
            m.regs[d] = b & ((1 << m.width(d)) - 1) if m.width(d) > 1 else int(bool(b))
        return
    if name in ("ld", "st") and ("v4" in opc or "v2" in opc):
        regs = [r.strip() for r in (ops[0] if name == "ld" else ops[1]).strip("{}").split(",")]
        a = m.addr(ops[1] if name == "ld" else ops[0])
        if a % (4 * len(regs)):         # (32-bit words only: v4 and v2 of b32/f32)
            raise PtxError(f"misaligned vector access at {a:#x}")
        for k, r in enumerate(regs):
            if name == "ld":
                m.regs[r] = m.load(opc[1], a + 4 * k, "u32")
            else:
                m.store(opc[1], a + 4 * k, "u32", m.raw(r))
        return
    if name in ("ld", "st") and t == "b32" and opc[1].startswith("global"):
        a = m.addr(ops[1] if name == "ld" else ops[0])
        if not isinstance(a, tuple) and a % 4:   # a narrow vector group's word, as the GPU faults
            raise PtxError(f"misaligned word access at {a:#x}")
    if name == "ld":
        space = opc[1]
        a = m.addr(ops[1])
        v = m.load(space, a, t)
        if isinstance(a, tuple) and t in FORMATS:
            m.regs[ops[0]] = v
        elif t in FORMATS:
            m.regs[ops[0]] = v & ((1 << m.width(ops[0])) - 1)
        else:
            m.put(ops[0], t if t[0] != "b" else "u" + t[1:], v)
        return
    if name == "st":
        b = m.raw(ops[1])
        m.store(opc[1], m.addr(ops[0]), t, b)
        return
    if name == "cvta":
        m.regs[ops[0]] = m.raw(ops[1])
        return
    if name == "cvt":
        _cvt(m, opc, ops[0], ops[1])
        return
    if name == "setp":
        cmp = opc[1]
        comb = opc[2] if opc[2] in ("and", "or", "xor") else None
        r = _cmp(cmp, m.get(ops[1], t), m.get(ops[2], t))
        if comb:
            c = m.get(ops[3], "pred")
            r = {"and": r and c, "or": r or c, "xor": r != c}[comb]
        m.put(ops[0], "pred", r)
        return
    if name == "selp":
        m.regs[ops[0]] = m.raw(ops[1]) if m.get(ops[3], "pred") else m.raw(ops[2])
        m.regs[ops[0]] &= (1 << m.width(ops[0])) - 1
        return
    if name == "testp":
        x = m.get(ops[1], t)
        r = {"notanumber": math.isnan(x), "infinite": math.isinf(x), "finite": math.isfinite(x),
             "number": not math.isnan(x)}[opc[1]]
        m.put(ops[0], "pred", r)
        return
    if name == "atom":
        return _atom(m, opc, ops)
    if t == "pred":
        vals = [m.get(o, "pred") for o in ops[1:]]
        r = {"and": lambda a, b: a and b, "or": lambda a, b: a or b, "xor": lambda a, b: a != b,
             "not": lambda a: not a}[name](*vals)
        m.put(ops[0], "pred", r)
        return
    if t in FORMATS:
        return _float_op(m, name, opc, t, ops)
    return _int_op(m, name, opc, t, ops)


_X2 = {"f16x2": "f16", "bf16x2": "bf16"}


def _packed(m, opc, ops):
    """f16x2 / bf16x2: the scalar op on each 16-bit half of the b32 operands, independently;
    ``cvt.rn.{f16,bf16}x2.f32 d, a, b`` rounds ``a`` into the high half and ``b`` into the low."""
    t = _X2[next(x for x in opc if x in _X2)]
    if opc[0] == "cvt":
        if opc[1] != "rn":
            raise PtxError(f"unsupported packed conversion {'.'.join(opc)}")
        hi, lo = (fround(m.get(o, "f32"), t) for o in ops[1:])
        m.regs[ops[0]] = to_bits(lo, t) | (to_bits(hi, t) << 16)
        return
    words, out = [m.raw(o) for o in ops[1:]], 0
    for lane in (0, 1):
        x = [from_bits((w >> (16 * lane)) & 0xFFFF, t) for w in words]
        if opc[0] in ("add", "sub", "mul", "fma") and "rn" in opc:
            r = _farith(opc[0], t, *x)
        elif opc[0] in ("min", "max") and len(opc) == 2:
            r = _minmax(opc[0], *x)
        else:
            raise PtxError(f"unsupported packed op {'.'.join(opc)}")
        out |= to_bits(r, t) << (16 * lane)
    m.regs[ops[0]] = out


def _minmax(name, a, b):
    """PTX ``min``/``max`` on floats as the ISA states them: a NaN operand loses (NaN only when
    both are) and, of two zeros, -0.0 is the smaller (Python's min/max keep the first of two
    equal values instead, which would hide an emitter that relied on the order of operands)."""
    if math.isnan(a) or math.isnan(b):
        return b if math.isnan(a) else a
    if a == b == 0:
        neg = (math.copysign(1, a) < 0, math.copysign(1, b) < 0)
        return -0.0 if (any(neg) if name == "min" else all(neg)) else 0.0
    return min(a, b) if name == "min" else max(a, b)


def _float_op(m, name, opc, t, ops):
    x = [m.get(o, t) for o in ops[1:]]
    if name in ("add", "sub", "mul", "div", "fma"):
        r = _farith(name, t, *x)   # approx/full division: the exact quotient is within bounds
    elif name in ("min", "max"):
        r = _minmax(name, *x)
    elif name == "neg":
        r = -x[0]
    elif name == "abs":
        r = abs(x[0])
    elif name == "copysign":
        r = math.copysign(x[1], x[0])
    elif name == "rcp" and "rn" in opc:     # IEEE 1/x (LLVM's form of a division of 1.0)
        r = _farith("div", t, 1.0, x[0])
    elif name == "sqrt" and "rn" in opc:
        r = fround(math.sqrt(x[0]), t) if x[0] >= 0 else (x[0] if x[0] == 0 else math.nan)
    elif name in _APPROX:
        a = x[0]
        if "ftz" in opc and t == "f32" and 0 < abs(a) < 2.0 ** -126:
            a = math.copysign(0.0, a)          # .ftz: subnormal arguments and results are zeros
        try:
            r = fround(_APPROX[name](a), t)
        except (OverflowError, ValueError):
            r = math.inf if name == "ex2" else math.nan
        if "ftz" in opc and t == "f32" and 0 < abs(r) < 2.0 ** -126:
            r = math.copysign(0.0, r)
    else:
        raise PtxError(f"unsupported float op {'.'.join(opc)}")
    m.put(ops[0], t, r)


def _int_op(m, name, opc, t, ops):
    if t is None:
        raise PtxError(f"unsupported op {'.'.join(opc)}")
    st = t if t[0] != "b" else "u" + t[1:]
    w = WIDTH[t[1:]]
    if name == "mul" and "wide" in opc:
        m.put(ops[0], st[0] + str(2 * w), m.get(ops[1], st) * m.get(ops[2], st))
        return
    if name == "mul" and "hi" in opc:
        m.put(ops[0], st, (m.get(ops[1], st) * m.get(ops[2], st)) >> w)
        return
    if name == "mad" and "wide" in opc:   # d (2w bits) = a * b + c, a and b w bits
        wt = st[0] + str(2 * w)
        m.put(ops[0], wt, m.get(ops[1], st) * m.get(ops[2], st) + m.get(ops[3], wt))
        return
    if name == "mad":
        m.put(ops[0], st, m.get(ops[1], st) * m.get(ops[2], st) + m.get(ops[3], st))
        return
    if name in ("shl", "shr"):
        a, n = m.get(ops[1], st if name == "shr" else "u" + t[1:]), min(m.get(ops[2], "u32"), w)
        m.put(ops[0], st, a << n if name == "shl" else a >> n)
        return
    if name == "bfe":
        a, pos, ln = m.get(ops[1], "u" + t[1:]), m.get(ops[2], "u32") & 0xFF, m.get(ops[3], "u32") & 0xFF
        v = (a >> pos) & ((1 << ln) - 1)
        if st[0] == "s" and ln and v >> (ln - 1):
            v -= 1 << ln
        m.put(ops[0], st, v)
        return
    if name == "prmt":                 # default mode: byte i of d = byte (c >> 4i) & 7 of {b, a}
        ab, c = m.get(ops[1], "u32") | (m.get(ops[2], "u32") << 32), m.get(ops[3], "u32")

        def byte(i):                   # a selector nibble with bit 3 set: the byte's sign, 8 times
            sel = (c >> 4 * i) & 0xF
            b = (ab >> 8 * (sel & 7)) & 0xFF
            return (0xFF if b & 0x80 else 0) if sel & 8 else b
        m.put(ops[0], "u32", sum(byte(i) << 8 * i for i in range(4)))
        return
    if name == "lop3":                 # bit i of d = bit (a_i b_i c_i as a 3-bit index) of lut
        a, b, c, lut = (m.get(o, "u32") for o in ops[1:5])
        m.put(ops[0], "u32", sum(((lut >> ((a >> i & 1) << 2 | (b >> i & 1) << 1 | (c >> i & 1))) & 1) << i
                                 for i in range(32)))
        return
    if name == "bfi":
        f, b = m.get(ops[1], "u32"), m.get(ops[2], "u32")
        pos, ln = m.get(ops[3], "u32"), m.get(ops[4], "u32")
        mask = ((1 << ln) - 1) << pos
        m.put(ops[0], "u32", (b & ~mask) | ((f << pos) & mask))
        return
    if name == "atom":
        return _atom(m, opc, ops)
    if name == "clz":  # count leading zeros of a .b32/.b64 source; the result is a u32
        width = int(st[1:])
        v = m.get(ops[1], f"u{width}") & ((1 << width) - 1)
        m.put(ops[0], "u32", width - v.bit_length())
        return
    x = [m.get(o, st) for o in ops[1:]]
    if name in ("div", "rem"):
        a, b = x
        if b == 0:
            r = 0
        else:
            q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            r = q if name == "div" else a - q * b
    else:
        r = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "min": min, "max": max, "and": lambda a, b: a & b, "or": lambda a, b: a | b,
             "xor": lambda a, b: a ^ b, "not": lambda a: ~a, "neg": lambda a: -a,
             "abs": abs}[name](*x)
    m.put(ops[0], st, r)


_FBITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def _atom(m, opc, ops):
    space, kind, t = opc[1], opc[2], opc[-1]
    a, d = m.addr(ops[1]), ops[0]
    w = _FBITS.get(t) or WIDTH[t[1:]]
    old = m.load(space, a, f"u{w}")
    if t in FORMATS:
        ov, v = from_bits(old, t), m.get(ops[2], t)
        r = _farith("add", t, ov, v) if kind == "add" else v
        m.store(space, a, f"u{w}", to_bits(r, t))
        m.put(d, t, ov)
        return
    st = t if t[0] != "b" else "u" + t[1:]
    ov = old - (1 << w) if st[0] == "s" and old >> (w - 1) else old
    v = m.get(ops[2], st)
    if kind == "cas":
        r = m.get(ops[3], st) if ov == v else ov
    else:
        r = {"add": lambda: ov + v, "min": lambda: min(ov, v), "max": lambda: max(ov, v),
             "exch": lambda: v, "and": lambda: ov & v, "or": lambda: ov | v,
             "xor": lambda: ov ^ v}[kind]()
    m.store(space, a, f"u{w}", r & ((1 << w) - 1))
    m.put(d, st, ov)
