"""The race sanitizer: per barrier interval, which thread read, wrote or atomically updated
each element, and a :class:`kaio.RaceError` on the first conflict between two threads.

State is per buffer, one int64 array per role over the buffer's flat storage (-1: nobody):
the writer (two distinct writers are already a race), the first two distinct readers and the
first two distinct atomic users. Two suffice: any third access conflicts with at least one of
them. Intervals: shared memory is reset per block at each barrier. Global memory has no grid
barrier, but a block's barrier orders its own threads' global accesses too (CUDA's
``__syncthreads`` and an AMD workgroup barrier make them visible within the block): at a
barrier the accesses its threads recorded move to *fenced* records, which conflict only with
threads of other blocks (two kept per role, of two distinct blocks). Local arrays are private
and not tracked.

Conflicts: write/write (two plain writes, or a plain write and an atomic) and read/write (a
plain read and a plain write or atomic). Atomics among themselves never conflict. A thread
never conflicts with itself.

``dynamic_shared`` arrays are views of one per-block allocation: all views of it share one
record, kept per byte, so an f64 view's element and the two f32 elements it overlaps conflict.
"""
from __future__ import annotations

import numpy as np

from ...errors import RaceError, source_excerpt
from .errors import OwnershipError, UninitializedReadError
from .lanes import describe_gtid


class Tracker:
    """Access record of one buffer's flat storage; role arrays are allocated on first use
    (``tr[role]`` is None until then: nobody in that role yet)."""

    def __init__(self, n: int):
        self.n = n
        self.arrays: dict[str, np.ndarray] = {}
        self.written = None   # shared memory: units written since the launch (not reset)

    def __getitem__(self, key):
        return self.arrays.get(key)

    def ensure(self, role: str):
        if role not in self.arrays:
            self.arrays[role] = np.full(self.n, -1, dtype=np.int64)
            self.arrays[role + "_op"] = np.full(self.n, -1, dtype=np.int32)
        return self.arrays[role], self.arrays[role + "_op"]

    def reset(self, rows: np.ndarray, stride: int):
        """Forget the accesses of the given instances (blocks) of shared storage."""
        for arr in self.arrays.values():
            view = arr[: (len(arr) // stride) * stride].reshape(-1, stride)
            view[rows[: view.shape[0]]] = -1


def _other(first, second, th):
    """The recorded thread that is not ``th`` (-1 when none)."""
    return np.where((first != -1) & (first != th), first, np.where(second != th, second, -1))


class Sanitizer:
    """One per launch. ``read``/``write``/``atomic`` are called before each memory op."""

    def __init__(self, kernel, grid, block):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.ops: list = []
        self.check_uninit_shared = False   # see _check_written
        self._op_index: dict[int, int] = {}
        self._byte_trackers: dict[int, tuple] = {}   # id(dynamic shared bytes) -> (bytes, Tracker)
        self._global: list = []                      # trackers of global buffers (fenced at barriers)
        self._T = int(np.prod(block))                # threads a block: gtid // T is its block

    # --- bookkeeping --------------------------------------------------------------------
    def _opid(self, op) -> int:
        i = self._op_index.get(id(op))
        if i is None:
            i = self._op_index[id(op)] = len(self.ops)
            self.ops.append(op)
        return i

    def _tracker(self, buf):
        if buf.tracker is None:
            raw = _dynamic_bytes(buf)
            if raw is None:
                buf.tracker = Tracker(len(buf.flat))
                if buf.space != "shared":
                    self._global.append(buf.tracker)
            else:   # one byte-level record for every view of the allocation
                buf.tracker = self._byte_trackers.setdefault(id(raw), (raw, Tracker(len(raw))))[1]
        return buf.tracker

    @staticmethod
    def _units(buf, pos, th):
        """Positions in the buffer's record and their threads: bytes for dynamic shared views
        (each lane touches ``itemsize`` of them), elements otherwise."""
        if _dynamic_bytes(buf) is None:
            return pos, th
        size = buf.dtype.itemsize
        nbytes = (np.asarray(pos, dtype=np.int64)[:, None] * size + np.arange(size)).reshape(-1)
        return nbytes, np.repeat(np.asarray(th), size)

    @staticmethod
    def _tracked(buf) -> bool:
        return buf.space != "local" and buf.intent != "in"

    def _threads(self, interp, sel):
        g = interp.batch.gtid
        return g if sel is None else g[sel]

    # --- events -------------------------------------------------------------------------
    def read(self, interp, op, buf, pos, sel):
        if not self._tracked(buf):
            return
        tr, th, me = self._tracker(buf), self._threads(interp, sel), self._opid(op)
        if buf.intent == "out":
            unwritten = np.ones(len(pos), dtype=bool) if tr["w"] is None else tr["w"][pos] == -1
            if unwritten.any():
                k = int(np.argmax(unwritten))
                self._uninitialized(interp, op, buf, int(pos[k]), int(th[k]),
                                    "read of Out buffer", "any thread wrote it",
                                    "Out buffers start undefined (the reference backend fills "
                                    "them with NaN / 0xA5 bytes)")
        self._check_owner(interp, op, buf, pos, th, "read")
        upos, th = self._units(buf, pos, th)
        self._check_written(interp, op, buf, tr, pos, upos, th, "read")
        pos = upos
        self._check(buf, pos, th, me, tr["w"], tr["w_op"], None, None, "read/write")
        self._check(buf, pos, th, me, tr["a1"], tr["a1_op"], tr["a2"], tr["a2_op"], "read/write")
        self._check_fenced(buf, tr, pos, th, me, (("fw", "read/write"), ("fa", "read/write")))
        self._add_pair(tr, "r", pos, th, me)

    def write(self, interp, op, buf, pos, sel):
        if not self._tracked(buf):
            return
        tr, th, me = self._tracker(buf), self._threads(interp, sel), self._opid(op)
        self._check_owner(interp, op, buf, pos, th, "write")
        pos, th = self._units(buf, pos, th)
        self._check_within(buf, pos, th, me)
        self._check(buf, pos, th, me, tr["w"], tr["w_op"], None, None, "write/write")
        self._check(buf, pos, th, me, tr["r1"], tr["r1_op"], tr["r2"], tr["r2_op"], "read/write")
        self._check(buf, pos, th, me, tr["a1"], tr["a1_op"], tr["a2"], tr["a2_op"], "write/write")
        self._check_fenced(buf, tr, pos, th, me, (("fw", "write/write"), ("fr", "read/write"),
                                                  ("fa", "write/write")))
        w, w_op = tr.ensure("w")
        w[pos] = th
        w_op[pos] = me
        self._mark_written(buf, tr, pos)

    def atomic(self, interp, op, buf, pos, sel):
        if not self._tracked(buf):
            return
        tr, th, me = self._tracker(buf), self._threads(interp, sel), self._opid(op)
        upos, th = self._units(buf, pos, th)
        self._check_written(interp, op, buf, tr, pos, upos, th, "atomic update")
        pos = upos
        self._check(buf, pos, th, me, tr["w"], tr["w_op"], None, None, "write/write")
        self._check(buf, pos, th, me, tr["r1"], tr["r1_op"], tr["r2"], tr["r2_op"], "read/write")
        self._check_fenced(buf, tr, pos, th, me, (("fw", "write/write"), ("fr", "read/write")))
        self._add_pair(tr, "a", pos, th, me)
        self._mark_written(buf, tr, pos)

    def barrier(self, interp, blocks):
        """Start a new interval for the shared memory of the blocks that passed a barrier, and
        fence their threads' global accesses (see the module doc)."""
        for buf in interp._static.values():
            if buf.tracker is not None:
                unit = buf.dtype.itemsize if _dynamic_bytes(buf) is not None else 1
                buf.tracker.reset(blocks, buf.inst_stride * unit)
        if self._global:
            passed = interp.batch.first_block + np.nonzero(np.asarray(blocks))[0]
            for tr in self._global:
                self._fence(tr, passed)

    def _fence(self, tr, passed):
        """Move the records of threads of the ``passed`` blocks into the fenced roles."""
        for role, fenced in (("w", "fw"), ("r1", "fr"), ("r2", "fr"), ("a1", "fa"), ("a2", "fa")):
            arr = tr[role]
            if arr is None:
                continue
            hit = arr != -1
            if not hit.any():
                continue
            hit &= np.isin(arr // self._T, passed)
            pos = np.nonzero(hit)[0]
            if not len(pos):
                continue
            th, op = arr[pos], tr[role + "_op"][pos]
            if fenced == "fw":   # a second block's write would have raised: one slot
                w, w_op = tr.ensure("fw")
                w[pos], w_op[pos] = th, op
            else:
                self._add_fenced_pair(tr, fenced, pos, th, op)
            arr[pos] = -1
            tr[role + "_op"][pos] = -1

    def _add_fenced_pair(self, tr, role, pos, th, op):
        """Keep ``th`` among the first two threads of distinct blocks of a fenced role."""
        one, one_op = tr.ensure(role + "1")
        two, two_op = tr.ensure(role + "2")
        a = one[pos]
        set_one = a == -1
        set_two = ~set_one & (a // self._T != th // self._T) & (two[pos] == -1)
        one[pos] = np.where(set_one, th, a)
        one_op[pos] = np.where(set_one, op, one_op[pos])
        two[pos[set_two]] = th[set_two]
        two_op[pos[set_two]] = op[set_two]

    def _check_fenced(self, buf, tr, pos, th, me, roles):
        """Conflicts with fenced records: threads of other blocks only."""
        for role, kind in roles:
            pairs = [role] if role == "fw" else [role + "1", role + "2"]
            for r in pairs:
                rec = tr[r]
                if rec is None:
                    continue
                f = rec[pos]
                bad = (f != -1) & (f // self._T != th // self._T)
                if bad.any():
                    k = int(np.argmax(bad))
                    self._raise(buf, int(pos[k]), int(f[k]), int(th[k]),
                                int(tr[r + "_op"][pos[k]]), me, kind)

    # --- checks -------------------------------------------------------------------------
    @staticmethod
    def _mark_written(buf, tr, upos):
        if buf.space == "shared":
            if tr.written is None:
                tr.written = np.zeros(tr.n, dtype=bool)
            tr.written[upos] = True

    def _check_written(self, interp, op, buf, tr, pos, upos, th, verb):
        """Shared memory: a read (or atomic update) of an element no thread of the block has
        written since the launch began reads garbage on a GPU (the interpreter's poison here):
        an :class:`UninitializedReadError`. The record of written units outlives barriers.
        Only with ``check_uninit_shared`` (ReferenceBackend's option; the fuzz sets it)."""
        if buf.space != "shared" or not self.check_uninit_shared:
            return
        if tr.written is None:
            tr.written = np.zeros(tr.n, dtype=bool)
        unwritten = ~tr.written[upos]
        if not unwritten.any():
            return
        k = int(np.argmax(unwritten))
        self._uninitialized(interp, op, buf, int(upos[k]), int(th[k]), f"{verb} of shared array",
                            "any thread of the block wrote it", "shared memory starts undefined "
                            "(the reference backend fills it with NaN / 0xA5 bytes)")

    def _uninitialized(self, interp, op, buf, pos: int, thread: int, what: str, before: str,
                       why: str):
        """Raise the one UninitializedReadError shape (Out buffers and shared arrays)."""
        idx = self._index(buf, pos)
        raise UninitializedReadError(
            f"{interp.where(op)}in kernel '{self.kernel.name}': {what} '{buf.name}' at index "
            f"{idx} before {before} ({describe_gtid(thread, self.grid, self.block)}); {why}",
            kernel=self.kernel.name, buffer=buf.name, index=idx, thread=thread,
            line=op.loc.line if op.loc else None)

    def _check_owner(self, interp, op, buf, pos, th, verb):
        """Partitioned buffers: only the owner may touch an element."""
        if buf.owner is None:
            return
        own = buf.owner[pos]
        if getattr(buf.partition, "per_warp", False):   # any lane of the owning warp (its lane 0)
            bad = own != th - th % interp.batch.warp_size
        else:
            bad = own != th
        if not bad.any():
            return
        k = int(np.argmax(bad))
        owner, t, idx = int(own[k]), int(th[k]), self._index(buf, int(pos[k]))
        whose = ("no thread" if owner < 0 else describe_gtid(owner, self.grid, self.block))
        if owner >= 0 and getattr(buf.partition, "per_warp", False):
            whose = f"the warp whose lane 0 is {whose}"
        raise OwnershipError(
            f"{interp.where(op)}in kernel '{self.kernel.name}': {verb} of '{buf.name}' at index "
            f"{idx} by {describe_gtid(t, self.grid, self.block)}, but under its partition "
            f"{buf.partition.spec()} that element belongs to {whose}{interp.excerpt(op)}\n"
            f"hint: a thread may write and read back only the elements its partition gives it; "
            f"the static checker should have rejected this kernel (please report it)",
            kernel=self.kernel.name, buffer=buf.name, index=idx, threads=(owner, t),
            lines=(None, op.loc.line if op.loc else None), kind="ownership")

    def _check(self, buf, pos, th, me, first, first_op, second, second_op, kind):
        if first is None:
            return
        f = first[pos]
        if f.size == 0 or f.max() == -1:  # nobody recorded here yet: the common case
            return
        if second is None:
            other = np.where(f != th, f, -1)
        else:
            other = _other(f, second[pos], th)
        bad = other != -1
        if bad.any():
            k = int(np.argmax(bad))
            use_first = second is None or (f[k] != -1 and f[k] != th[k])
            other_op = (first_op if use_first else second_op)[pos[k]]
            self._raise(buf, int(pos[k]), int(other[k]), int(th[k]), int(other_op), me, kind)

    def _check_within(self, buf, pos, th, me):
        """Two lanes of one store writing the same element."""
        if len(pos) < 2 or (pos.strides != (0,) and np.all(pos[1:] > pos[:-1])):
            return
        order = np.argsort(pos, kind="stable")
        sp = pos[order]
        dup = np.nonzero(sp[1:] == sp[:-1])[0]
        if len(dup):
            k = dup[0]
            self._raise(buf, int(sp[k]), int(th[order[k]]), int(th[order[k + 1]]), me, me,
                        "write/write")

    def _add_pair(self, tr, role, pos, th, me):
        """Record ``th`` among the first two distinct threads of ``role`` at each position."""
        one, one_op = tr.ensure(role + "1")
        two, two_op = tr.ensure(role + "2")
        if len(pos) > 1 and pos.strides == (0,):  # one element (uniform index): lanes ascend
            p1 = np.asarray(pos[:1])
            pairs = [(p1, np.asarray(th[:1])), (p1, np.asarray(th[-1:]))]
        elif len(pos) > 1 and not np.all(pos[1:] > pos[:-1]):
            # several lanes on one element: record its lowest and highest thread
            u, inv = np.unique(pos, return_inverse=True)
            lo = np.full(len(u), np.iinfo(np.int64).max)
            hi = np.full(len(u), -1, dtype=np.int64)
            np.minimum.at(lo, inv, th)
            np.maximum.at(hi, inv, th)
            pairs = [(u, lo), (u, hi)]
        else:
            pairs = [(pos, th)]
        for p, t in pairs:
            a = one[p]
            if a.size and a.max() == -1:  # first access of this role here: the common case
                one[p] = t
                one_op[p] = me
                continue
            set_one = a == -1
            set_two = ~set_one & (a != t) & (two[p] == -1)
            one[p] = np.where(set_one, t, a)
            one_op[p] = np.where(set_one, me, one_op[p])
            if set_two.any():
                two[p[set_two]] = t[set_two]
                two_op[p[set_two]] = me

    # --- reporting ----------------------------------------------------------------------
    def _index(self, buf, p: int) -> tuple:
        if _dynamic_bytes(buf) is not None:
            p //= buf.dtype.itemsize   # a byte of the allocation -> this view's element
        local = p % buf.inst_stride if buf.instances != "one" else p
        return tuple(int(i) for i in np.unravel_index(local, buf.shape))

    def _line(self, opid: int):
        op = self.ops[opid] if opid >= 0 else None
        return (op.loc.line if op is not None and op.loc else None), op

    def _raise(self, buf, p, t1, t2, op1, op2, kind):
        idx = self._index(buf, p)
        l1, o1 = self._line(op1)
        l2, o2 = self._line(op2)
        shared = buf.instances == "block"
        where = " in shared memory within one barrier interval" if shared else ""
        first = "write" if kind == "write/write" and o1 is None else _verb(o1)
        lines = [f"in kernel '{self.kernel.name}': data race ({kind}) on '{buf.name}' at index "
                 f"{idx}{where}:"]
        for verb, t, o in ((first, t1, o1), (_verb(o2), t2, o2)):
            at = f"{o.loc.file}:{o.loc.line}" if o is not None and o.loc else "?"
            lines.append(f"  {verb} by {describe_gtid(t, self.grid, self.block)} at {at}")
            if o is not None and o.loc:
                ex = source_excerpt(o.loc.file, o.loc.line, o.loc.col, o.loc.end_col)
                if ex:
                    lines.append(ex)
        lines.append("hint: " + (
            "separate the two accesses with kaio.sync(), or let each thread touch only its own "
            "elements between barriers" if shared else
            "a thread may only touch elements a thread of another block writes in the same "
            "launch (threads of one block may, separated by kaio.sync()): use a Region buffer "
            "with a partition, separate input and output buffers, or atomics"))
        raise RaceError("\n".join(lines), kernel=self.kernel.name, buffer=buf.name, index=idx,
                        threads=(t1, t2), lines=(l1, l2), kind=kind)


def _dynamic_bytes(buf):
    """The byte array under a ``dynamic_shared`` view (the interpreter makes every view with
    ``ndarray.view`` of one per-batch byte array), or None for any other buffer. Static shared
    and local arrays own their storage; global buffers are not in shared space."""
    base = buf.flat.base
    return base if buf.space == "shared" and base is not None and base.dtype == np.uint8 else None


def _verb(op) -> str:
    if op is None:
        return "access"
    return {"load": "read", "store": "write", "atomic": "atomic"}.get(op.opcode, op.opcode)
