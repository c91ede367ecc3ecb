"""``kaio.mma.copy_tile`` on the LLVM paths: a block-collective copy of a global tile into a
shared array, zeros outside the source, visible after the next barrier (kaio.ir.ops
``mma_copy``).

Thread t of the block's T copies units t, t + T, t + 2T ... of the tile. On nvptx64 a unit is
a 16-byte chunk copied by ``cp.async.cg`` (source size 0 outside the source: the hardware zero
fills) where the tile allows it: ``cols`` and the shared row whole chunks, and, tested once at
run time, the source pointer 16-byte aligned and its row length and ``col0`` multiples of the
chunk. Each copy_tile is one ``cp.async`` group. Every barrier of a kernel that copies then
waits for its copies first (``cp.async.wait_all``), which gives "visible after the next
barrier"; a kernel that calls ``kaio.mma.copy_wait(n)`` waits itself instead
(``cp.async.wait_group n``; regions/async_copies.py proves its accesses). Otherwise (AMD, or a
tile that does not qualify) a unit is one element: a load where it lies inside the source, 0
elsewhere, and a store; copy_wait is then a no-op.
"""
from __future__ import annotations

from .llvm_types import literal, memty


class CopyEmitter:
    """``op_mma_copy`` of the LLVM emitter (mixed into kaio.backends.llvm.FunctionEmitter)."""

    def op_mma_copy(self, op):
        """Block-collective ``dst[0:rows, 0:cols] = src[row0.., col0..]``, zeros outside src."""
        dst, src, r0, c0 = op.operands
        rows, cols = op.attrs["rows"], op.attrs["cols"]
        t = dst.type.dtype
        ty = memty(t)
        row0, col0 = (self.index_value(v, "i32") for v in (r0, c0))
        tid, nt = self.block_thread()
        n = 16 // t.itemsize if 16 % t.itemsize == 0 else 0
        scalar_l, end_l = self.new_label("mcscalar"), self.new_label("mcend")
        pitch = dst.type.static_shape[1] * t.itemsize
        if self.async_copies() and n and cols % n == 0 and pitch % 16 == 0:
            base, space, extents = self.bufs[src.id]
            addr = self.ins(f"ptrtoint {self.ptrty(space)} {base} to i64")
            low = self.ins(f"trunc i64 {self.ins(f'and i64 {addr}, 15')} to i32")
            q = self.ins(f"or i32 {low}, {self.ins(f'and i32 {extents[1]}, {n - 1}')}")
            q = self.ins(f"or i32 {q}, {self.ins(f'and i32 {col0}, {n - 1}')}")
            vec_l = self.new_label("mcasync")
            self.emit(f"br i1 {self.ins(f'icmp eq i32 {q}, 0')}, label %{vec_l}, label %{scalar_l}")
            self.start(vec_l)

            def chunk(r, c, inside, sptr, spty, dptr, dpty):
                src_p = self.ins(f"select i1 {inside}, {spty} {sptr}, {spty} {base}")
                size = self.ins(f"select i1 {inside}, i32 16, i32 0")
                self._call_void("llvm.nvvm.cp.async.cg.shared.global.16.s", (dpty, dptr),
                                (spty, src_p), ("i32", size))
            self._copy_loop(src, dst, row0, col0, tid, nt, rows * cols // n, cols // n, n, chunk)
            self.emit(f"br label %{end_l}")
        else:
            self.emit(f"br label %{scalar_l}")
        self.start(scalar_l)
        zero = "0" if ty.startswith("i") else literal(0.0, t)

        def element(r, c, inside, sptr, spty, dptr, dpty):
            pre, load_l, join = self.label, self.new_label("mcload"), self.new_label("mcjoin")
            self.emit(f"br i1 {inside}, label %{load_l}, label %{join}")
            self.start(load_l)
            x = self.ins(f"load {ty}, {spty} {sptr}, align {t.itemsize}")
            self.emit(f"br label %{join}")
            self.start(join)
            x = self.ins(f"phi {ty} [ {zero}, %{pre} ], [ {x}, %{load_l} ]")
            self.emit(f"store {ty} {x}, {dpty} {dptr}, align {t.itemsize}")
        self._copy_loop(src, dst, row0, col0, tid, nt, rows * cols, cols, 1, element)
        self.emit(f"br label %{end_l}")
        self.start(end_l)
        if self.async_copies():     # one group per copy_tile (kaio.mma.copy_wait counts them)
            self._call_void("llvm.nvvm.cp.async.commit.group")

    def op_mma_copy_wait(self, op):
        """``kaio.mma.copy_wait(pending)``: all but the ``pending`` most recent copies complete
        (a following barrier publishes them). Element copies (AMD) are complete already."""
        if self.async_copies():
            self._call_void("llvm.nvvm.cp.async.wait.group", ("i32", str(op.attrs["pending"])))

    def _copy_loop(self, src, dst, row0, col0, tid, nt, units: int, per_row: int, n: int, body):
        """``for u in range(tid, units, nt)``: ``body(r, c, inside, src ptr, its type, dst ptr,
        its type)`` for the unit at tile (r, c) (c a multiple of ``n``), ``inside``: whether it
        lies inside src."""
        pre = self.label
        top, body_l, done = (self.new_label(h) for h in ("mcopy", "mcbody", "mcdone"))
        self.emit(f"br label %{top}")
        self.start(top)
        nxt = self.tmp("u")
        u = self.ins(f"phi i32 [ {tid}, %{pre} ], [ {nxt}, %@LATCH@ ]")
        slot = len(self.lines) - 1
        self.emit(f"br i1 {self.ins(f'icmp ult i32 {u}, {units}')}, label %{body_l}, label %{done}")
        self.start(body_l)
        r, c = self.ins(f"udiv i32 {u}, {per_row}"), self.ins(f"urem i32 {u}, {per_row}")
        if n > 1:
            c = self.ins(f"mul i32 {c}, {n}")
        gr, gc = self.ins(f"add i32 {row0}, {r}"), self.ins(f"add i32 {col0}, {c}")
        sptr, spty, sidx = self._tile_addr(src, gr, gc, None)
        dptr, dpty, _ = self._tile_addr(dst, r, c, None)
        body(r, c, self._inside(src, sidx), sptr, spty, dptr, dpty)
        self.emit(f"{nxt} = add i32 {u}, {nt}")
        self.lines[slot] = self.lines[slot].replace("@LATCH@", self.label)
        self.emit(f"br label %{top}")
        self.start(done)

    def async_copies(self) -> bool:
        """Whether this kernel's copy_tile may run asynchronously (cp.async: nvptx64 only)."""
        if not hasattr(self, "_async"):
            self._async = self.t.triple.startswith("nvptx") and \
                any(o.opcode == "mma_copy" for o in self.k.walk())
        return self._async

    def before_barrier(self) -> None:
        """A barrier makes the block's copies visible: wait for the asynchronous ones first,
        unless the kernel waits for them itself (kaio.mma.copy_wait: a multi-stage pipeline)."""
        if self.async_copies() and not self._explicit_waits():
            self._call_void("llvm.nvvm.cp.async.wait.all")

    def _explicit_waits(self) -> bool:
        if not hasattr(self, "_waits"):
            self._waits = any(o.opcode == "mma_copy_wait" for o in self.k.walk())
        return self._waits

    def _call_void(self, name: str, *args: tuple[str, str]) -> None:
        self.declare("void", name, [t for t, _ in args])
        self.emit(f"call void @{name}(" + ", ".join(f"{t} {v}" for t, v in args) + ")")
