"""Execution of kaio IR over numpy lanes: one batch of blocks at a time, all threads of the
batch in lockstep, divergence handled by boolean masks.

Values are numpy arrays with one entry per lane, or numpy scalars when every lane holds the
same value (constants, block_dim, uniform loop counters). A value's entries at lanes that were
inactive where it was computed are don't-care: every consumer that matters (memory ops, the
merges of ``if``/``for``/``while``, warp ops) reads only active lanes.

A mask is ``None`` (every lane of the batch active) or a bool array; a region is never run
with an empty mask, so a barrier in a branch no thread takes is never executed.
"""
from __future__ import annotations

import numpy as np

from ... import semantics
from ...config import settings
from ...errors import KernelRuntimeError, source_excerpt
from ...ir.ops import handler_table
from . import atomics, fragments, warp
from .errors import DivergentBarrierError
from .memory import Buf

#: right identities of integer ops (x op e == x), used to skip whole-array no-ops
_IDENTITY = {"add": 0, "sub": 0, "or": 0, "xor": 0, "shl": 0, "shr": 0, "mul": 1, "div": 1}
_COMMUTATIVE = ("add", "or", "xor", "mul")


def _sel(mask):
    return None if mask is None else np.nonzero(mask)[0]


def _where(cond, a, b):
    if a is b:
        return a
    return np.where(cond, a, b)


def _full_mask(mask, L):
    return np.ones(L, dtype=bool) if mask is None else mask


def _norm(mask):
    """A mask with every lane set becomes None (the fast path)."""
    return None if mask is not None and mask.all() else mask


class Interpreter:
    """Runs a kernel body for one :class:`~lanes.Batch` against the launch's buffers."""

    def __init__(self, launch, batch):
        self.launch = launch
        self.kernel = launch.kernel
        self.batch = batch
        self.san = launch.sanitizer
        self.env: dict[int, object] = {}
        self._static: dict[int, Buf] = {}   # shared arrays: one allocation per op per batch
        self._dyn_bytes = None
        # the watchdog: iterations one execution of a loop may take (0: no limit)
        self.max_iterations = settings().ref_max_iterations or float("inf")

    # --- entry --------------------------------------------------------------------------
    def run(self, args: list) -> None:
        for v, a in zip(self.kernel.body.args, args):
            self.env[v.id] = a
        self.block(self.kernel.body, None)

    def where(self, op) -> str:
        loc = op.loc
        return f"{loc.file}:{loc.line}: " if loc is not None else ""

    @staticmethod
    def excerpt(op) -> str:
        """The op's source line with a caret, on a new line ('' when unavailable)."""
        loc = op.loc
        ex = source_excerpt(loc.file, loc.line, loc.col, loc.end_col) if loc is not None else ""
        return "\n" + ex if ex else ""

    def block(self, block, mask):
        env = self.env
        for op in block.ops:
            if op.opcode in ("yield", "condition"):
                return [env[v.id] for v in op.operands]
            handler = _HANDLERS.get(op.opcode)
            if handler is None:
                raise NotImplementedError(f"reference backend: no semantics for IR op '{op.opcode}'")
            handler(self, op, mask)
        return []

    def loop_error(self, op, what: str, hint: str) -> KernelRuntimeError:
        """A run-time error of loop ``op`` at its source line."""
        line = op.loc.line if op.loc is not None else None
        return KernelRuntimeError(f"{self.where(op)}in kernel '{self.kernel.name}': {what}"
                                  f"{self.excerpt(op)}\nhint: {hint}", kernel=self.kernel.name,
                                  line=line)

    def runaway(self, op) -> KernelRuntimeError:
        n = self.max_iterations
        return self.loop_error(op, f"this loop ran {n:,} iterations without ending; the reference "
                                   "backend's watchdog stopped it",
                               "check the loop's condition; a kernel that needs longer loops sets "
                               f"KAIO_REF_MAX_ITERATIONS above {n} (0: no limit)")

    def _vals(self, op):
        return [self.env[v.id] for v in op.operands]

    def _set(self, op, value):
        self.env[op.results[0].id] = value

    # --- scalar ops ---------------------------------------------------------------------
    def op_const(self, op, mask):
        self._set(op, semantics.const(op.results[0].type, op.attrs["value"]))

    def op_binary(self, op, mask):
        a, b = self._vals(op)
        t = op.operands[0].type
        if t.is_int:  # skip x + 0, 0 + x, x * 1, ... on lane arrays (index math): exact for ints
            e = _IDENTITY.get(op.opcode)
            if np.ndim(b) == 0 and np.ndim(a) and int(b) == e:
                self._set(op, a)
                return
            if np.ndim(a) == 0 and np.ndim(b) and op.opcode in _COMMUTATIVE and int(a) == e:
                self._set(op, b)
                return
        self._set(op, semantics.binary(op.opcode, t, a, b))

    def op_unary(self, op, mask):
        (a,) = self._vals(op)
        self._set(op, semantics.unary(op.opcode, op.operands[0].type, a))

    def op_fma(self, op, mask):
        self._set(op, semantics.fma(op.operands[0].type, *self._vals(op)))

    def op_math(self, op, mask):
        self._set(op, semantics.math(op.attrs["fn"], op.operands[0].type, *self._vals(op)))

    def op_cmp(self, op, mask):
        a, b = self._vals(op)
        self._set(op, semantics.cmp(op.attrs["pred"], op.operands[0].type, a, b))

    def op_select(self, op, mask):
        c, a, b = self._vals(op)
        self._set(op, semantics.select(op.results[0].type, c, a, b))

    def op_cast(self, op, mask):
        (a,) = self._vals(op)
        self._set(op, semantics.cast(op.operands[0].type, op.results[0].type, a))

    def op_bitcast(self, op, mask):
        (a,) = self._vals(op)
        self._set(op, semantics.bitcast(op.operands[0].type, op.results[0].type, a))

    def op_special(self, op, mask):
        self._set(op, self.batch.special(op.opcode, op.attrs.get("axis", 0)))

    def op_shape(self, op, mask):
        buf = self.env[op.operands[0].id]
        self._set(op, np.int32(buf.shape[op.attrs["axis"]]))

    # --- memory -------------------------------------------------------------------------
    def _positions(self, op, buf, index, mask):
        """(selected lanes, flat positions of the selected lanes) of a memory op."""
        sel = _sel(mask)
        return sel, buf.positions(self, op, index, sel)

    def _spread(self, sel, vals, dtype):
        """Per-selected-lane values back to a full lane array (inactive lanes: zeros)."""
        if sel is None:
            return vals
        out = np.zeros(self.batch.L, dtype=dtype.storage_np)
        out[sel] = vals
        return out

    def op_load(self, op, mask):
        buf = self.env[op.operands[0].id]
        index = [self.env[v.id] for v in op.operands[1:]]
        sel, pos = self._positions(op, buf, index, mask)
        if self.san is not None:
            self.san.read(self, op, buf, pos, sel)
        if pos.strides == (0,) and len(pos):  # broadcast uniform position
            self._set(op, buf.flat[pos[0]])
            return
        self._set(op, self._spread(sel, buf.flat[pos], buf.dtype))

    def op_store(self, op, mask):
        buf = self.env[op.operands[0].id]
        index = [self.env[v.id] for v in op.operands[1:-1]]
        value = self.env[op.operands[-1].id]
        sel, pos = self._positions(op, buf, index, mask)
        if self.san is not None:
            self.san.write(self, op, buf, pos, sel)
        if np.ndim(value) and sel is not None:
            value = value[sel]
        buf.flat[pos] = value

    def op_atomic(self, op, mask):
        buf = self.env[op.operands[0].id]
        nd = op.operands[0].type.ndim
        index = [self.env[v.id] for v in op.operands[1:1 + nd]]
        values = [self.env[v.id] for v in op.operands[1 + nd:]]
        sel, pos = self._positions(op, buf, index, mask)
        if self.san is not None:
            self.san.atomic(self, op, buf, pos, sel)
        n = len(pos)
        values = [np.broadcast_to(v if sel is None or not np.ndim(v) else v[sel], (n,))
                  for v in values]
        old = atomics.apply(op.attrs["op"], buf.dtype, buf.flat, np.ascontiguousarray(pos), values)
        self._set(op, self._spread(sel, old, buf.dtype))

    def op_shared_array(self, op, mask):
        buf = self._static.get(op.results[0].id)
        if buf is None:
            dtype = op.attrs["dtype"]
            name = op.results[0].name or f"shared array (line {op.loc.line if op.loc else '?'})"
            buf = Buf.scratch(name, dtype, tuple(op.attrs["shape"]), self.batch.nblocks, "shared",
                              "block")
            self._static[op.results[0].id] = buf
        self._set(op, buf)

    def op_dyn_shared(self, op, mask):
        # every dyn_shared view aliases the same per-block bytes, as CUDA's extern __shared__
        buf = self._static.get(op.results[0].id)
        if buf is None:
            dtype = op.attrs["dtype"]
            nbytes = self.launch.shared_bytes
            row = -(-nbytes // 8) * 8
            if self._dyn_bytes is None:
                self._dyn_bytes = np.full(self.batch.nblocks * max(row, 8), 0xFF, dtype=np.uint8)
            flat = self._dyn_bytes.view(dtype.storage_np)
            name = op.results[0].name or "dynamic shared"
            buf = Buf(name, dtype, (nbytes // dtype.itemsize,), flat, "shared", "scratch",
                      "block", inst_stride=max(row, 8) // dtype.itemsize)
            self._static[op.results[0].id] = buf
        self._set(op, buf)

    def op_local_array(self, op, mask):
        dtype = op.attrs["dtype"]
        name = op.results[0].name or "local array"
        self._set(op, Buf.scratch(name, dtype, tuple(op.attrs["shape"]), self.batch.L, "local",
                                  "lane"))

    # --- synchronisation and warps ------------------------------------------------------
    def uniform_blocks(self, op, mask, what="barrier"):
        """Blocks taking part in a block-wide op; raise if a block is split by divergence."""
        nb = self.batch.nblocks
        if mask is None:
            return np.ones(nb, dtype=bool)
        pb = self.batch.per_block(mask)
        anyb, allb = pb.any(axis=1), pb.all(axis=1)
        split = anyb & ~allb
        if split.any():
            b = int(np.argmax(split))
            waiting = int(pb[b].sum())
            raise DivergentBarrierError(
                f"{self.where(op)}in kernel '{self.kernel.name}': {what} in divergent control flow: "
                f"only {waiting} of the {self.batch.T} threads of block "
                f"{self.batch.describe_thread(b * self.batch.T).split(' thread')[0][6:]} reach it"
                f"{self.excerpt(op)}\nhint: every thread of a block must reach the same barriers; "
                f"move kaio.sync() out of the branch or make the condition block-uniform",
                kernel=self.kernel.name, line=op.loc.line if op.loc else None)
        return anyb

    def op_barrier(self, op, mask):
        blocks = self.uniform_blocks(op, mask)
        if self.san is not None:
            self.san.barrier(self, blocks)

    def op_shuffle(self, op, mask):
        value, lane = self._vals(op)
        self._set(op, warp.shuffle(self.batch, op.attrs["mode"], value, lane))

    def op_vote(self, op, mask):
        (pred,) = self._vals(op)
        self._set(op, warp.vote(self.batch, op.attrs["mode"], pred, mask))

    def op_ballot(self, op, mask):
        (pred,) = self._vals(op)
        self._set(op, warp.ballot(self.batch, pred, mask))

    def op_warp_reduce(self, op, mask):
        (v,) = self._vals(op)
        self._set(op, warp.warp_reduce(self.batch, op.attrs["op"], op.operands[0].type, v))

    def op_block_reduce(self, op, mask):
        self.uniform_blocks(op, mask, "block reduction")
        (v,) = self._vals(op)
        self._set(op, warp.block_reduce(self.batch, op.attrs["op"], op.operands[0].type, v))

    # --- matrix fragments (kaio.mma): whole-warp matrices, see fragments.py ----------------
    def op_mma_fill(self, op, mask):
        self._set(op, fragments.fill(self, op, mask))

    def op_mma_load(self, op, mask):
        self._set(op, fragments.load(self, op, mask))

    def op_mma(self, op, mask):
        self._set(op, fragments.mma(self, op, mask))

    def op_mma_store(self, op, mask):
        fragments.store(self, op, mask)

    def op_mma_apply(self, op, mask):
        self._set(op, fragments.apply(self, op, mask))

    def op_mma_to_a(self, op, mask):
        self._set(op, fragments.to_a(self, op, mask))

    def op_mma_row_reduce(self, op, mask):
        self._set(op, fragments.row_reduce(self, op, mask))

    def op_mma_copy_wait(self, op, mask):
        """Copies complete when issued here; regions.async_copies proves no thread looks
        before the wait and barrier the GPU needs."""

    def op_mma_copy(self, op, mask):
        self.uniform_blocks(op, mask, "kaio.mma.copy_tile")   # block-collective
        fragments.copy_tile(self, op, mask)

    # --- control flow -------------------------------------------------------------------
    def op_if(self, op, mask):
        cond = self.env[op.operands[0].id]
        then, other = op.regions
        if np.ndim(cond) == 0:
            res = self.block(then if bool(cond) else other, mask)
        else:
            tm = cond if mask is None else mask & cond
            em = ~cond if mask is None else mask & ~cond
            t_on, e_on = bool(tm.any()), bool(em.any())
            tres = self.block(then, _norm(tm)) if t_on else None
            eres = self.block(other, _norm(em)) if e_on else None
            if not op.results:
                return
            if t_on and e_on:
                res = [_where(cond, a, b) for a, b in zip(tres, eres)]
            else:
                res = tres if t_on else eres
            if res is None:  # no lane active at all: results are don't-care
                res = [semantics.poison(r.type) for r in op.results]
        for r, v in zip(op.results, res):
            self.env[r.id] = v

    def op_for(self, op, mask):
        lb, ub, step, *carried = self._vals(op)
        body = op.regions[0]
        iv_arg, c_args = body.args[0], body.args[1:]
        ity = op.operands[0].type
        env = self.env
        if not np.all(step != 0 if mask is None else (step != 0) | ~_full_mask(mask, self.batch.L)):
            # on a GPU such a loop runs no iteration when start <= stop, else forever
            raise self.loop_error(op, "range() step is 0 at run time",
                                  "a range needs a nonzero step; check the value passed")
        budget = self.max_iterations
        if np.ndim(lb) == 0 and np.ndim(ub) == 0 and np.ndim(step) == 0:
            up = step > 0
            iv = lb
            while (iv < ub) if up else (iv > ub):
                budget -= 1
                if budget < 0:
                    raise self.runaway(op)
                env[iv_arg.id] = iv
                for a, v in zip(c_args, carried):
                    env[a.id] = v
                carried = self.block(body, mask)
                iv = semantics.binary("add", ity, iv, step)
        else:
            L = self.batch.L
            iv = np.broadcast_to(lb, (L,)).copy()
            active = _full_mask(mask, L)
            up = np.asarray(step) > 0
            while True:
                active = active & np.where(up, iv < ub, iv > ub)
                if not active.any():
                    break
                budget -= 1
                if budget < 0:
                    raise self.runaway(op)
                env[iv_arg.id] = iv
                for a, v in zip(c_args, carried):
                    env[a.id] = v
                m = _norm(active)
                new = self.block(body, m)
                carried = new if m is None else [_where(active, n, c) for n, c in zip(new, carried)]
                nxt = semantics.binary("add", ity, iv, step)
                iv = nxt if m is None else np.where(active, nxt, iv)
        for r, v in zip(op.results, carried):
            self.env[r.id] = v

    def op_while(self, op, mask):
        carried = self._vals(op)
        before, after = op.regions
        env = self.env
        active, results = mask, None
        budget = self.max_iterations
        while True:
            budget -= 1
            if budget < 0:
                raise self.runaway(op)
            for a, v in zip(before.args, carried):
                env[a.id] = v
            c, *vals = self.block(before, active)
            if np.ndim(c) == 0:  # every active lane agrees
                leaving = None if c else _full_mask(active, self.batch.L)
                going = active if c else None
            else:
                cur = _full_mask(active, self.batch.L)
                going, leaving = cur & c, cur & ~c
            if leaving is not None:
                results = vals if results is None else \
                    [_where(leaving, v, r) for v, r in zip(vals, results)]
                if going is None or not going.any():
                    break
                going = _norm(going)
            for a, v in zip(after.args, vals):
                env[a.id] = v
            carried = self.block(after, going)
            active = going
        for r, v in zip(op.results, results):
            self.env[r.id] = v


_HANDLERS = handler_table(Interpreter, "op_")
