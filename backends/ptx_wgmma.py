"""Hopper's warp-group matrix multiply (``wgmma``) for ``kaio.mma.group_mma`` on kaio's PTX path.

A group mma (an ``mma`` op with ``group``: operands a, b, acc, row0, col0, k0) lowers to one
``wgmma.mma_async`` per four warps and k16 step when the target is sm_90, its A and B come
straight from ``kaio.mma.shared_tile`` arrays (loads used by nothing else) and the accumulator
is one wgmma can hold (n a multiple of 8 up to 256; of 64 where B is held k x n), the block
is declared in whole warp groups (128 threads) and row0, col0 and k0 are constants on the
swizzle's grid (a descriptor cannot start inside a swizzle row group or slab). The loads
then emit nothing: wgmma reads the tiles through shared-memory descriptors (128-byte swizzle,
:func:`kaio.backends.ptx_mem.swizzled`). Anything else keeps the warp's own path (``ldmatrix``
+ ``mma.sync``), which computes the same product.

wgmma is asynchronous: it writes the accumulator's registers and reads shared memory after it
issues. :class:`Plan` keeps the language's synchronous meaning. The accumulator chains in place
(a group mma's result takes its accumulator's registers, through a K loop's carried values),
and ``wgmma.wait_group 0`` precedes anything else that touches it. At a barrier, the wgmmas
issued since the one before form a group (``commit_group``); groups may keep running through
the barrier only if none reads a shared array written before the next barrier (the race
checker already demands a barrier between any read and a later write by other threads), so
``wait_group N`` keeps the newest such groups in flight: a K loop that refills the stage read
two steps before keeps one step's products running while it waits and copies. ``wgmma.fence``
goes before the first wgmma after the accumulator's registers were touched otherwise; shared
writes of the generic proxy (``cp.async``, ``st.shared``) are fenced for the async proxy
before each barrier. Branches and loop exits complete every wgmma.
"""
from __future__ import annotations

from collections import Counter

from kaio.ir.types import FragType

#: the archs whose kaio PTX issues wgmma (the module's target becomes sm_90a)
WGMMA_ARCHS = ("sm_90", "sm_90a")
_SWIZZLE_128B = 1 << 62
_SBO = 1024                # bytes between 8-row groups of a swizzled operand (8 x 128 B)


ALL = "all"     # in a group's reads or a barrier's writes: any shared array


class Plan:
    """Which group mmas of a kernel lower to wgmma, and the in-flight state while emitting.

    wgmmas are committed as one group per barrier interval. At a barrier, the groups still
    running may keep running only if none reads a shared array written before the next barrier
    (:func:`_written_after`, wrapping around a loop body): ``wgmma.wait_group N`` keeps the
    ``N`` most recent such groups in flight, so a K loop that refills the stage read two steps
    before keeps one step's products running through the barrier."""

    def __init__(self, kernel, arch: str):
        self.lowered: dict[int, tuple] = {}    # id(mma op) -> (A load op, B load op)
        self.skip: set[int] = set()            # id(mma_load op) that emits nothing
        self.groups: list[set] = []            # committed groups that may run: arrays read
        self.batch: set | None = None          # wgmmas issued but not yet committed
        self.inflight: set[int] = set()        # value ids whose registers a wgmma may write
        self.fenced = False
        self.entry: dict[int, list] = {}       # id(for op) -> groups running as a trip starts
        if arch not in WGMMA_ARCHS:
            return
        ops = list(kernel.walk())
        uses = Counter(v.id for op in ops for v in op.operands)
        block = kernel.attrs.get("block")     # whole warp groups only: a declared block
        if block is None or (block[0] * block[1] * block[2]) % 128:
            return
        self.a_regs: set[int] = set()          # value ids of register A operands issued
        self.zero_fill: set[int] = set()       # id(mma op) whose accumulator is a fill of 0
        for op in ops:
            if op.opcode == "mma" and op.attrs.get("group") and self._fits(op, uses):
                la, lb = op.operands[0].owner, op.operands[1].owner
                if not _tile_load(la, op.operands[0], uses):
                    la = None                  # A from registers: its load emits as usual
                self.lowered[id(op)] = (la, lb)
                self.skip |= {id(x) for x in (la, lb) if x is not None}
                fill = op.operands[2].owner
                if getattr(fill, "opcode", None) == "mma_fill" and uses[op.operands[2].id] == 1 \
                        and _const(fill.operands[0]) == 0:
                    self.zero_fill.add(id(op))  # its first wgmma overwrites (scale-d false)
                    self.skip.add(id(fill))
        self.uses = uses

    @staticmethod
    def _fits(op, uses) -> bool:
        """Whether a group mma lowers to wgmma: B (and A, unless A is a fragment in registers:
        the register-A form) a load used once of a swizzled shared tile, the origins constants
        on the swizzle's grid, the accumulator one wgmma can hold."""
        a, b, acc = op.operands[:3]
        la, lb = a.owner, b.owner
        if not _tile_load(lb, b, uses):
            return False
        reg_a = not _tile_load(la, a, uses)
        if reg_a and not (a.type.dims[0] == 16 and a.type.dtype.name in ("f16", "bf16")):
            return False
        n = acc.type.dims[1]
        ta = not reg_a and bool(la.attrs.get("trans"))
        tb = bool(lb.attrs.get("trans"))
        # a descriptor starts on the swizzle's grid: the origins must be constants that keep it
        # (MN-major operands whole 64-wide slabs, K-major ones whole 8-row groups, k whole
        # k16 steps); other group mmas take each warp's path, which reads any origin
        grid = ((op.operands[3], 1 if reg_a else 64 if ta else 8),
                (op.operands[4], 8 if tb else 64), (op.operands[5], 16))
        if not all(_const(v) is not None and _const(v) % m == 0 for v, m in grid):
            return False
        return n % 8 == 0 and n <= 256 and (tb or n % 64 == 0)

    @property
    def active(self) -> bool:
        return bool(self.lowered)

    @property
    def pending(self) -> bool:
        return bool(self.groups) or self.batch is not None

    def reads(self, op) -> set:
        return {_array(ld.operands[0]) for ld in self.lowered[id(op)] if ld is not None}

    # --- the in-flight state ---------------------------------------------------------------
    def issued(self, op) -> None:
        self.batch = (self.batch or set()) | self.reads(op)
        self.inflight.add(op.result.id)
        if self.lowered[id(op)][0] is None:    # wgmma reads A's registers until it completes
            self.a_regs.add(op.operands[0].id)

    def _commit(self, em) -> None:
        if self.batch is not None:
            if em is not None:
                em.ins("wgmma.commit_group.sync.aligned")
            self.groups.append(self.batch)
            self.batch = None

    def wait(self, em) -> None:
        """Complete every wgmma (before a use of what they write, a branch, a loop's exit)."""
        if self.pending:
            self._commit(em)
            em.ins("wgmma.wait_group.sync.aligned 0")
            self.groups = []
            self.fenced = False

    def _settle(self, em, written: set) -> None:
        """Wait for the groups that read any of ``written`` (and every older one)."""
        self._commit(em)
        keep = 0
        for g in reversed(self.groups):
            if ALL in g or ALL in written or g & written:
                break
            keep += 1
        if keep < len(self.groups):
            if em is not None:
                em.ins(f"wgmma.wait_group.sync.aligned {keep}")
            self.groups = self.groups[len(self.groups) - keep:]
            self.fenced = False

    def before(self, em, op) -> None:
        """Called before every op: wait where ``op`` reads a value a wgmma may still write;
        note fragment registers touched outside wgmma (the next wgmma fences first)."""
        if not self.active:
            return
        own = id(op) in self.lowered
        if self.pending and (any(v.id in self.inflight for i, v in enumerate(op.operands)
                                 if not (own and i == 2))     # a chain's accumulator runs on
                             or any(v.id in self.a_regs for v in op.results)):
            self.wait(em)     # (a loop's next trip redefines a register A still being read)
        if not own and id(op) not in self.skip and any(
                isinstance(v.type, FragType) for v in (*op.operands, *op.results)):
            self.fenced = False

    def before_barrier(self, em, op) -> None:
        if self.active:
            self._settle(em, _written_after(op))
            em.ins("fence.proxy.async.shared::cta")   # generic-proxy shared writes -> wgmma

    def enter_loop(self, op, carried) -> None:
        """A for loop's body holding wgmmas starts: from its second trip on, the groups the
        body leaves running at its end (found by :meth:`_trip`) may still run."""
        if id(op) not in self.entry:
            self.entry[id(op)] = self._loop_entry(op)
        self.groups = [set(g) for g in self.entry[id(op)]]
        self.batch = None
        self.inflight |= {v.id for v in carried}
        self.fenced = False

    def end_trip(self, em) -> None:
        self._commit(em)

    def _loop_entry(self, op) -> list:
        end = []
        for _ in range(3):      # the state a trip ends with, from the one it starts with
            nxt = self._trip(op.regions[0], end)
            if nxt is None:
                return [{ALL}]
            if nxt == end:
                return end
            end = nxt
        return [{ALL}]

    def _trip(self, body, groups) -> list | None:
        """The groups running after one trip of ``body`` started with ``groups`` (None: the
        body holds control flow with wgmmas or barriers, not followed here)."""
        saved = (self.groups, self.batch, self.fenced)
        self.groups, self.batch = [set(g) for g in groups], None
        try:
            for o in body.ops:
                if o.opcode == "barrier":
                    self._settle(None, _written_after(o))
                elif id(o) in self.lowered:
                    self.batch = (self.batch or set()) | self.reads(o)
                elif o.regions and any(x.opcode == "barrier" or id(x) in self.lowered
                                       for x in _walk(o)):
                    return None
            self._commit(None)
            return self.groups
        finally:
            self.groups, self.batch, self.fenced = saved

    def holds(self, block) -> bool:
        """Whether ``block`` (or a region inside it) holds a lowered group mma."""
        return self.active and any(id(o) in self.lowered for op in block.ops
                                   for o in _walk(op))


def _tile_load(ld, v, uses) -> bool:
    """Whether ``ld`` (making value v) is a load used once of a swizzled shared tile: an
    operand wgmma reads through a descriptor."""
    if getattr(ld, "opcode", None) != "mma_load" or uses[v.id] != 1 or ld.attrs.get("int4"):
        return False
    arr = ld.operands[0].owner
    return getattr(arr, "opcode", None) == "shared_array" and bool(arr.attrs.get("swizzle"))


def _const(v):
    """The int a value is where a ``const`` op makes it, else None."""
    o = v.owner
    return o.attrs["value"] if getattr(o, "opcode", None) == "const" else None


def _array(buf):
    """The shared array op behind a buffer value (its id), or :data:`ALL`."""
    o = buf.owner
    return id(o) if getattr(o, "opcode", None) == "shared_array" else ALL


def _writes(op) -> set:
    """The shared arrays ``op`` (and its regions) may write."""
    out = set()
    for o in _walk(op):
        if o.opcode == "mma_copy" or (o.opcode in ("store", "atomic")
                                      and o.operands[0].type.space == "shared"):
            out.add(_array(o.operands[0]))
    return out


def _written_after(barrier) -> set:
    """The shared arrays written after ``barrier`` until the next one: on in its block, then
    around to the top of a loop body (a loop's exit and a branch's end wait for every wgmma)."""
    blk = barrier.parent
    ops = blk.ops
    i = next(k for k, o in enumerate(ops) if o is barrier)
    loop = blk.parent is not None and blk.parent.opcode in ("for", "while")
    out = set()
    for o in ops[i + 1:] + (ops[:i] if loop else []):
        if o.opcode == "barrier":
            return out
        out |= _writes(o)
        if any(x.opcode == "barrier" for x in _walk(o)):
            return out
    return out


def _walk(op):
    yield op
    for r in op.regions:
        for o in r.ops:
            yield from _walk(o)


def _desc(em, start: str, lbo: int) -> str:
    """The 64-bit shared-memory matrix descriptor of a swizzled operand at ``start``."""
    s, d = em.tmp("r"), em.tmp("rd")
    em.ins(f"and.b32 {s}, {start}, 262143")
    em.ins(f"shr.u32 {s}, {s}, 4")
    em.ins(f"cvt.u64.u32 {d}, {s}")
    em.ins(f"or.b64 {d}, {d}, {_SWIZZLE_128B | ((lbo >> 4) << 16) | ((_SBO >> 4) << 32)}")
    return d


def _start(em, base: str, rows: int, row: str, col: str, into_row: bool) -> str:
    """The address a descriptor starts at in a swizzled tile of ``rows`` rows: the 64-column
    slab holding column ``col``, its row ``row``, and with ``into_row`` (a K-major operand, K
    along the rows: ``col`` is a multiple of 16) ``(col % 64) * 2`` bytes into that 128-byte
    row, the offset wgmma's swizzle expects; an MN-major operand (K down the rows) starts at the
    slab's row ``row`` = k."""
    a = em.tmp("r")
    em.ins(f"shr.u32 {a}, {col}, 6")
    em.ins(f"mul.lo.u32 {a}, {a}, {rows * 128}")
    em.ins(f"mad.lo.u32 {a}, {row}, 128, {a}")
    if into_row:
        t = em.tmp("r")
        em.ins(f"and.b32 {t}, {col}, 63")
        em.ins(f"mad.lo.u32 {a}, {t}, 2, {a}")
    em.ins(f"add.u32 {a}, {a}, {base}")
    return a


def emit(r, op) -> None:
    """One wgmma per k16 step of the group mma ``op`` (a ``_Renderer`` in ``r``), in place on
    the accumulator's registers."""
    em, plan = r.em, r.wgmma
    la, lb = plan.lowered[id(op)]
    a, b, acc, row0, col0, k0 = op.operands
    t = acc.type
    if id(op) in plan.zero_fill:
        regs = em.reg(t)         # fresh registers: the first wgmma writes them (scale-d false)
    elif plan.uses[acc.id] == 1:
        regs = r.v(acc)          # its last use: wgmma accumulates into its registers
    else:
        if acc.id in plan.inflight:
            plan.wait(em)
        regs = em.reg(t)
        for d, s in zip(regs.split(","), r.v(acc).split(",")):
            em.ins(f"mov.b32 {d}, {s}")
        plan.fenced = False
    em.define(op.result, regs)
    reg_a = la is None
    ta, tb = not reg_a and bool(la.attrs.get("trans")), bool(lb.attrs.get("trans"))
    abuf = None if reg_a else r._buf(la.operands[0])
    bbuf = r._buf(lb.operands[0])
    ra, rb = (0 if reg_a else abuf.extents[0]), bbuf.extents[0]
    a_tiles = r.v(a).split(",") if reg_a else None     # 4 registers per k16 step
    lin, _ = r._linear_thread()
    grow = em.tmp("r")                         # the warp group's first row: row0 + 64 (w / 4)
    em.ins(f"shr.u32 {grow}, {lin}, 7")
    em.ins(f"mad.lo.u32 {grow}, {grow}, 64, {r.v(row0)}")
    n, dtype = t.dims[1], a.type.dtype.name
    p = em.tmp("p")
    em.ins(f"setp.eq.u32 {p}, {lin}, {lin}")   # scale-d: accumulate
    first = p
    if id(op) in plan.zero_fill:                # ... but the first overwrites
        first = em.tmp("p")
        em.ins(f"setp.ne.u32 {first}, {lin}, {lin}")
    b_base: dict = {}
    for kk in range(a.type.dims[1] // 16):
        k = r.v(k0)
        if kk:
            k = em.tmp("r")
            em.ins(f"add.u32 {k}, {r.v(k0)}, {16 * kk}")
        if reg_a:   # this warp's 16 x 16 slice of the group's 64 x 16 A, mma.sync's layout
            da = "{" + ", ".join(a_tiles[4 * kk:4 * kk + 4]) + "}"
        elif ta:    # A held k x m: MN-major (the leading offset: one 64-wide slab)
            da = _desc(em, _start(em, abuf.base, ra, k, grow, False), ra * 128)
        else:
            da = _desc(em, _start(em, abuf.base, ra, grow, k, True), 16)
        # B's origin is constant (the grid check): one descriptor of the tile's base per
        # op, each k16 step's an add of its constant offset (a descriptor's address field is
        # (address & 0x3FFFF) >> 4 and shared addresses stay below 2^18)
        kc, cc = _const(k0) + 16 * kk, _const(col0)
        if tb:      # B held n x k: K-major
            off, lbo = (kc // 64) * rb * 128 + cc * 128 + (kc % 64) * 2, 16
        else:
            off, lbo = (cc // 64) * rb * 128 + kc * 128, rb * 128
        if lbo not in b_base:
            b_base[lbo] = _desc(em, bbuf.base, lbo)
        db = b_base[lbo]
        if off:
            db = em.tmp("rd")
            em.ins(f"add.s64 {db}, {b_base[lbo]}, {off >> 4}")
        if not plan.fenced:
            em.ins("wgmma.fence.sync.aligned")
            plan.fenced = True
        trans = f"{int(not tb)}" if reg_a else f"{int(ta)}, {int(not tb)}"
        em.ins(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{dtype}.{dtype} {{{regs}}}, {da}, "
               f"{db}, {first if kk == 0 else p}, 1, 1, {trans}")
    plan.issued(op)
