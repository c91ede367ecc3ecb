"""Asynchronous tile copies with explicit waits: no shared access meets a copy in flight.

``kaio.mma.copy_tile`` starts a copy group. In a kernel without ``kaio.mma.copy_wait`` each
barrier completes every copy, so a copy is one write in its barrier interval and the interval
check (:mod:`.shared`) covers it. A kernel that calls ``copy_wait(n)`` keeps copies in flight
across barriers (a multi-stage pipeline). Then, beyond that interval check (which orders the
copy after the reads before it: no write-after-read), this pass follows the copy groups through
the kernel in program order:

- ``copy_tile`` into X appends a group {X}, *pending*;
- ``copy_wait(n)`` marks every group but the ``n`` most recent *complete*;
- a barrier publishes (drops) the complete groups: their data is now visible to the block;
- any access of a shared array X (a load, a store, a fragment load, another copy into X) while
  a group holding X is pending or complete-but-unpublished is an error at that access.

Branches (block-uniform, :mod:`.uniformity`) must leave the same groups in flight, and a loop
body must end with the groups it started with (a pipeline's steady state). Every execution of
the kernel then follows one of the walked paths, so no thread touches a copy's destination
between the copy and the barrier after its wait.
"""
from __future__ import annotations

from ..errors import CompileError

_BARRIERS = ("barrier", "block_reduce")
_ACCESS = ("load", "store", "atomic", "mma_load", "mma_store")


def _key(v):
    owner = getattr(v, "owner", None)
    return "dyn" if getattr(owner, "opcode", None) == "dyn_shared" else v.id


def _shared(v) -> bool:
    return getattr(getattr(v, "type", None), "space", None) == "shared"


class _Walk:
    def __init__(self, kernel):
        self.kernel = kernel
        self.origin: dict = {}      # group id -> the copy op that started it

    def fail(self, op, msg, hint):
        raise CompileError.at(op.loc, msg, kernel=self.kernel.name, hint=hint)

    def block(self, block, state: tuple) -> tuple:
        for op in block.ops:
            state = self.op(op, state)
        return state

    def _check_access(self, op, v, state, verb):
        if not _shared(v):
            return
        k = _key(v)
        for gid, bufs, done in state:
            if k in bufs:
                src = self.origin[gid]
                line = src.loc.line if src.loc else "?"
                self.fail(op, f"{verb} shared array '{v.name or 'shared'}' while the copy_tile "
                              f"into it (line {line}) may still be "
                              f"{'unpublished' if done else 'in flight'}",
                          "complete the copy with kaio.mma.copy_wait(n) (n: the copies started "
                          "after it that may stay in flight), then kaio.sync(), before touching "
                          "its destination")

    def op(self, op, state: tuple) -> tuple:
        opc = op.opcode
        if opc == "mma_copy":
            dst = op.operands[0]
            self._check_access(op, dst, state, "copy into")
            gid = len(self.origin)
            self.origin[gid] = op
            return state + ((gid, frozenset([_key(dst)]), False),)
        if opc == "mma_copy_wait":
            n = op.attrs["pending"]
            keep = len(state) - n
            return tuple((g, b, True if i < keep else d) for i, (g, b, d) in enumerate(state))
        if opc in _BARRIERS:
            return tuple(s for s in state if not s[2])
        if opc in _ACCESS:
            self._check_access(op, op.operands[0], state,
                               "reads" if opc in ("load", "mma_load") else "writes")
        if opc == "if":
            outs = [self.block(r, state) for r in op.regions]
            if len(outs) == 1:
                outs.append(state)
            if self._shape(outs[0]) != self._shape(outs[1]):
                self.fail(op, "the branches of this if leave different tile copies in flight",
                          "issue and wait for copy_tile the same way on both branches")
            return outs[0]
        if opc in ("for", "while"):
            return self.loop(op, state)
        return state

    @staticmethod
    def _shape(state):
        """A state without group identities: (buffers, complete) per group, oldest first."""
        return tuple((b, d) for _, b, d in state)

    def loop(self, op, state: tuple) -> tuple:
        """One pass over the body from the groups in flight at entry must end with the same
        groups (by buffer and completion): then every iteration sees what the first did, and
        the code after the loop sees the same groups whether it ran or not."""
        end = state
        for r in op.regions:
            end = self.block(r, end)
        if self._shape(end) != self._shape(state):
            self.fail(op, "the tile copies in flight at the end of this loop's body differ from "
                          "those at its start",
                      "a pipeline starts its first copies before the loop, and each iteration "
                      "waits for as many copies (kaio.mma.copy_wait(n), constant n) as it starts")
        return end


def check(kernel) -> None:
    """Raise CompileError at the first shared access that may meet an unpublished copy."""
    if not any(o.opcode == "mma_copy_wait" for o in kernel.walk()):
        return
    _Walk(kernel).block(kernel.body, ())
