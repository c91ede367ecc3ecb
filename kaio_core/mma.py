"""kaio.mma: warp matrix fragments for the matrix units (tensor cores), usable inside kernels.

A fragment is one warp's share of a small matrix: a multiplicand A (``m x k``), a multiplicand
B (``k x n``) or an accumulator (``m x n``). The kernel names whole tiles by their top-left
corner; which lane holds which element belongs to the target, so the same kernel runs on any
warp width. Every op here is warp-collective: all lanes of the warp execute it together, with
the same arguments (see docs/language.md, "Matrix fragments").

    acc = kaio.mma.fill(kaio.f32, 0.0)
    for k0 in range(0, K, 16):
        a = kaio.mma.load_a(A, row0, k0)           # A[row0:row0+16, k0:k0+16]
        b = kaio.mma.load_b(B, k0, col0)           # B[k0:k0+16, col0:col0+8]
        acc = kaio.mma.mma(a, b, acc)              # acc + a @ b, f32 accumulation
    kaio.mma.store(C, row0, col0, acc)             # C[row0:row0+16, col0:col0+8]

A fragment may span several instruction tiles (a warp tile): ``m=``, ``n=`` and ``k=`` on the
loads and the fill (multiples of the shape's m, n and k: 16, 8 and 16 for f16). ``copy_tile``
stages a tile of global memory in a shared array for the whole block (asynchronously where the
target can: ``cp.async``).
"""
from __future__ import annotations

from .lang import Intrinsic

#: the shapes of the matrix multiply (m, n, k), named by ``shape=`` (by default the shape that
#: takes the data's dtype): f16/bf16 multiplicands with f32 accumulators ...
m16n8k16 = "m16n8k16"
#: ... i8 multiplicands with i32 accumulators (exact, wrapping like the hardware) ...
m16n8k32 = "m16n8k32"
#: ... and tf32 multiplicands from f32 data with f32 accumulators: each element of an f32 A or
#: B is rounded to tf32 (10-bit fraction, nearest, ties away from zero; kaio.semantics.tf32)
m16n8k8 = "m16n8k8"

fill = Intrinsic("mma.fill", "fill(dtype, value, shape=None): an accumulator fragment with "
                             "every element ``value``.")
load_a = Intrinsic("mma.load_a", "load_a(buf, row0, col0, ld=None, trans=False, shape=None): "
                                 "the A tile buf[row0:row0+m, col0:col0+k] (trans: buf holds A "
                                 "transposed, A[r, c] = buf[row0 + c, col0 + r]).")
load_b = Intrinsic("mma.load_b", "load_b(buf, row0, col0, ld=None, trans=False, shape=None): "
                                 "the B tile buf[row0:row0+k, col0:col0+n] (trans: buf holds B "
                                 "transposed, as the n x k tile at (row0, col0)).")
load_b_int4 = Intrinsic("mma.load_b_int4", "load_b_int4(packed, row0, col0, dtype, k=16, n=8, "
                                           "ld=None): the B tile of signed int4 weights packed "
                                           "two per byte along K (u8/i8 packed[K/2, N], low "
                                           "nibble: even k) as dtype (f16 or bf16, exact): "
                                           "B[k, n] = nibble k % 2 of packed[row0 + k // 2, "
                                           "col0 + n] (row0 counts packed rows).")
load_a_int4 = Intrinsic("mma.load_a_int4", "load_a_int4(packed, row0, col0, dtype, m=16, k=16, "
                                           "ld=None): the A tile of the transposed int4 "
                                           "weights (the W4A16 layout packed[K/2, N] read as "
                                           "W^T, dtype f16 or bf16, exact): A[r, c] = nibble "
                                           "c % 2 of packed[row0 + c // 2, col0 + r]; the "
                                           "register operand of group_mma(a, x_tile, ...).")
load_acc = Intrinsic("mma.load_acc", "load_acc(buf, row0, col0, ld=None, shape=None): the "
                                     "accumulator tile buf[row0:row0+m, col0:col0+n].")
mma = Intrinsic("mma.mma", "mma(a, b, c) -> c + a @ b (products exact; f32 accumulation, or i32 "
                           "wrapping for i8 multiplicands; f32 multiplicands rounded to tf32).")
store = Intrinsic("mma.store", "store(buf, row0, col0, acc, ld=None, alpha=None, beta=None, "
                               "row_scale=None, col_scale=None): write the accumulator tile to "
                               "buf[row0:row0+m, col0:col0+n] (rounded to buf's dtype; "
                               "alpha*acc + beta*buf when given; an i32 accumulator into an f32 "
                               "buf as f32(acc) * row_scale[r] * col_scale[c]; elements outside "
                               "buf are skipped; trans=True: element (i, j) to "
                               "buf[row0 + j, col0 + i], into a Raw buffer).")
copy_tile = Intrinsic("mma.copy_tile", "copy_tile(dst, src, row0, col0, rows=None, cols=None): "
                                       "block-collective: shared dst[0:rows, 0:cols] = "
                                       "src[row0:row0+rows, col0:col0+cols], zeros outside src; "
                                       "visible after the next kaio.sync().")

copy_wait = Intrinsic("mma.copy_wait", "copy_wait(pending=0): complete every copy_tile of this "
                                       "block but the `pending` most recent ones; a kernel that "
                                       "calls it keeps copies in flight across barriers (a "
                                       "multi-stage pipeline): a copy is visible after a "
                                       "copy_wait that completes it and a kaio.sync().")

apply = Intrinsic("mma.apply", "apply(fn, acc, row0, col0, *args): a new accumulator whose "
                               "element (i, j) is fn(acc[i, j], row0 + i, col0 + j, *args), fn a "
                               "@kaio.func returning the element's dtype; an argument that is an "
                               "accumulator of acc's type is passed as its element (i, j) (the "
                               "epilogue of a GEMM: scales, bias, activation, masking); one of "
                               "acc's m but n = 8 (row_max, row_sum) as its element (i, j % 8).")

to_a = Intrinsic("mma.to_a", "to_a(acc, dtype): the f32 accumulator (m16n8k16, m x n, n a "
                             "multiple of 16) as an m x n A multiplicand of dtype (f16 or bf16), "
                             "each element rounded to nearest even (P of attention for P @ V).")
row_max = Intrinsic("mma.row_max", "row_max(acc): an m x 8 accumulator whose row i holds the "
                                   "maximum of row i of the f32 accumulator acc (NaNs ignored); "
                                   "apply broadcasts it over a wider accumulator.")
row_sum = Intrinsic("mma.row_sum", "row_sum(acc): an m x 8 accumulator whose row i holds the "
                                   "sum of row i of the f32 accumulator acc (f32; the order is "
                                   "the target's, see docs/language.md).")

shared_tile = Intrinsic("mma.shared_tile", "shared_tile(dtype, (rows, cols)): a block's shared "
                                           "array for group_mma's tiles (f16/bf16, rows a "
                                           "multiple of 8, cols of 64), indexed like any shared "
                                           "array; its physical layout is the target's (Hopper: "
                                           "128-byte swizzled rows for wgmma).")
group_mma = Intrinsic("mma.group_mma", "group_mma(a_buf, b_buf, acc, row0, col0, k0=0, k=16, "
                                       "trans_a=False, trans_b=False): block-collective; warp w "
                                       "of the block returns acc + A[row0+16w : row0+16w+16, "
                                       "k0:k0+k] @ B[k0:k0+k, col0:col0+n] (A, B the shared "
                                       "tiles, transposed when asked; acc 16 x n, f32). row0, "
                                       "col0, k0 are the same in every thread; on sm_90 four "
                                       "warps issue one wgmma from kaio.mma.shared_tile "
                                       "arrays. group_mma(a, b_buf, acc, col0, k0=0, "
                                       "trans_b=False) with an A fragment a (16 x k): each "
                                       "warp's acc + a @ B[k0:k0+k, col0:col0+n] (sm_90: A "
                                       "from registers).")

FUNCTIONS = {o.name[4:]: o for o in (fill, load_a, load_b, load_a_int4, load_b_int4, load_acc,
                                     mma, store, copy_tile, copy_wait, apply, to_a, row_max,
                                     row_sum, shared_tile, group_mma)}
__all__ = [*FUNCTIONS, "m16n8k16", "m16n8k32", "m16n8k8"]
