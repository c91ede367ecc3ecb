"""Matrix fragments (kaio.mma): tiled GEMMs on the matrix units, f16, bf16 and tf32 (f32 data,
shape m16n8k8), a warp tile of several instruction tiles (``m=32, n=16``) fed from shared
memory by ``kaio.mma.copy_tile`` (zero fill outside the source, the store skipping elements
outside C), integer data, and element access (``kaio.mma.apply``: a per-group scaled
accumulation and a bias + relu epilogue).

Rules: products of two f16/bf16 values are exact in f32, but a matrix unit may add them in
another order and internal precision than the interpreter's documented one (ascending k, f32,
one rounding per addition). docs/language.md bounds both: the interpreter within
``K * 2**-24 * S`` of the exact product and a GPU within twice that, where ``S = |c| + sum_k
|a b|`` and K counts the additions. So the cases on random data are held to
``3 * K * 2**-24 * max S`` against the interpreter and against numpy's model of the documented
order (``kaio.semantics.mma``); S is taken from the fixed inputs. On small-integer data every partial
sum is exact in f32, so the integer case is ``bitwise``. tf32 inputs are rounded first
(``kaio.semantics.tf32``, nearest with ties away, as ``cvt.rna.tf32.f32``), then held to the
same bound around the exact product of the rounded values; gfx90a has no tf32 (xf32) matrix
instruction and refuses that row ("not available on this target").
"""
import numpy as np

import kaio
from kaio import bf16, f16, f32

from ..rules import BITWISE, rel
from ._util import feature

M = N = K = 64
THREADS = 128
ORDER = "matrix-unit accumulation order"


def _gemm(dtype):
    @kaio.kernel
    def fragment_gemm(A: kaio.In[dtype, 2], B: kaio.In[dtype, 2], C: kaio.Raw[f32, 2]):
        """Block x: a 16-row strip of C; each warp one 16 x 8 tile per step (any warp width)."""
        nw = kaio.block_dim.x // kaio.warp_size
        warp = kaio.thread_idx.x // kaio.warp_size
        row0 = kaio.block_idx.x * 16
        for cb in range(0, C.shape[1], 8 * nw):
            col0 = cb + warp * 8
            acc = kaio.mma.fill(f32, 0.0)
            for k0 in range(0, A.shape[1], 16):
                acc = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(B, k0, col0), acc)
            kaio.mma.store(C, row0, col0, acc)
    return fragment_gemm


@kaio.kernel
def fragment_gemm_tf32(A: kaio.In[f32, 2], B: kaio.In[f32, 2], C: kaio.Raw[f32, 2]):
    """The f16 kernel's tiling on tf32 fragments (m16n8k8): f32 data, K steps of 8."""
    nw = kaio.block_dim.x // kaio.warp_size
    warp = kaio.thread_idx.x // kaio.warp_size
    row0 = kaio.block_idx.x * 16
    for cb in range(0, C.shape[1], 8 * nw):
        col0 = cb + warp * 8
        acc = kaio.mma.fill(f32, 0.0, shape=kaio.mma.m16n8k8)
        for k0 in range(0, A.shape[1], 8):
            acc = kaio.mma.mma(kaio.mma.load_a(A, row0, k0), kaio.mma.load_b(B, k0, col0), acc)
        kaio.mma.store(C, row0, col0, acc)


GEMM = {"f16": _gemm(f16), "bf16": _gemm(bf16), "f32": fragment_gemm_tf32}
TM, TN, TK = 64, 32, 32          # the warp-tile kernel's block tile: four 32 x 16 warp tiles


@kaio.kernel(block=THREADS)
def fragment_warp_tile(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    """One block: A and B staged whole in shared memory by copy_tile (zeros past their edges),
    then 32 x 16 warp tiles (2 x 2 instruction tiles each), spread over the warps."""
    As = kaio.shared_array(f16, (TM, TK))
    Bs = kaio.shared_array(f16, (TK, TN))
    kaio.mma.copy_tile(As, A, 0, 0)
    kaio.mma.copy_tile(Bs, B, 0, 0)
    kaio.sync()
    nw = kaio.block_dim.x // kaio.warp_size
    warp = kaio.thread_idx.x // kaio.warp_size
    for base in range(0, (TM // 32) * (TN // 16), nw):   # block-uniform trip count
        t = base + warp                                   # 4 tiles: 4 or 2 warps divide them
        r0 = (t // (TN // 16)) * 32
        c0 = (t % (TN // 16)) * 16
        acc = kaio.mma.fill(f32, 0.0, m=32, n=16)
        for k0 in range(0, TK, 16):
            a = kaio.mma.load_a(As, r0, k0, m=32, k=16)
            b = kaio.mma.load_b(Bs, k0, c0, k=16, n=16)
            acc = kaio.mma.mma(a, b, acc)
        kaio.mma.store(C, r0, c0, acc)


AM, AN, AK, GROUP = 64, 48, 64, 16    # the apply kernel: 16 x 24 warp tiles, a scale per 16 of K


@kaio.func
def _group_step(x, r, c, t, scale, g):
    return x + t * scale[g, c]


@kaio.func
def _bias_relu(x, r, c, bias):
    return max(x + bias[r], 0.0)


@kaio.kernel(block=THREADS)
def fragment_apply(A: kaio.In[f16, 2], B: kaio.In[f16, 2], Scale: kaio.In[f32, 2],
                   Bias: kaio.In[f32, 1], C: kaio.Raw[f32, 2]):
    """Element access (kaio.mma.apply): 16 x 24 warp tiles (three n-tiles, a lone one on AMD's
    16-wide MFMA); each K step of 16 multiplied into a temporary folded in as
    ``acc + tmp * Scale[k / 16, c]``, then ``relu(acc + Bias[r])``."""
    nw = kaio.block_dim.x // kaio.warp_size
    warp = kaio.thread_idx.x // kaio.warp_size
    for base in range(0, (AM // 16) * (AN // 24), nw):
        t = base + warp
        r0 = (t // (AN // 24)) * 16
        c0 = (t % (AN // 24)) * 24
        acc = kaio.mma.fill(f32, 0.0, n=24)
        for g in range(0, AK // GROUP):
            tmp = kaio.mma.mma(kaio.mma.load_a(A, r0, g * GROUP),
                               kaio.mma.load_b(B, g * GROUP, c0, n=24),
                               kaio.mma.fill(f32, 0.0, n=24))
            acc = kaio.mma.apply(_group_step, acc, r0, c0, tmp, Scale, g)
        kaio.mma.store(C, r0, c0, kaio.mma.apply(_bias_relu, acc, r0, c0, Bias))


def _apply_case():
    g = np.random.default_rng(12)
    inp = {"a": g.integers(-3, 4, (AM, AK)).astype(np.float16),
           "b": g.integers(-3, 4, (AK, AN)).astype(np.float16),
           "scale": (2.0 ** g.integers(-2, 2, (AK // GROUP, AN))).astype(np.float32),
           "bias": g.integers(-40, 40, AM).astype(np.float32)}

    def run(i):
        c = np.full((AM, AN), -1.0, np.float32)
        fragment_apply[1, THREADS](i["a"], i["b"], i["scale"], i["bias"], c)
        return {"c": c}

    def expected(i):
        a, b = i["a"].astype(np.float64), i["b"].astype(np.float64)
        acc = sum(a[:, k:k + GROUP] @ b[k:k + GROUP] * i["scale"][k // GROUP]
                  for k in range(0, AK, GROUP))
        return {"c": np.maximum(acc + i["bias"][:, None], 0).astype(np.float32)}
    return feature("fragment_apply", lambda: inp, run, expected, vs_numpy=BITWISE, rule=BITWISE,
                   description="kaio.mma.apply: per-group scaled accumulation of two "
                               "accumulators and a bias + relu epilogue by element (r, c) on "
                               "16x24 warp tiles; small integers and power-of-two scales, so "
                               "bitwise on every target")


@kaio.func
def _minus(x, r, c, m):
    return x - m


@kaio.func
def _plus(x, r, c, m):
    return x + m


@kaio.kernel(block=THREADS)
def fragment_rows(A: kaio.In[f16, 2], B: kaio.In[f16, 2], V: kaio.In[f16, 2],
                  O: kaio.Raw[f32, 2], L: kaio.Raw[f32, 2]):
    """Whole rows (kaio.mma.row_max / row_sum, broadcast by apply) and kaio.mma.to_a: per warp
    a 16 x 32 score tile S = A B, P = S - rowmax(S), O = P V with P's two 16-column slices as A
    fragments in registers, and rowsum(P) + rowmax(S)."""
    r0 = (kaio.thread_idx.x // kaio.warp_size) * 16
    s = kaio.mma.mma(kaio.mma.load_a(A, r0, 0), kaio.mma.load_b(B, 0, 0, n=32),
                     kaio.mma.fill(f32, 0.0, n=32))
    mx = kaio.mma.row_max(s)
    p = kaio.mma.apply(_minus, s, r0, 0, mx)
    o = kaio.mma.fill(f32, 0.0, n=16)
    for kk in kaio.static_range(2):
        o = kaio.mma.mma(kaio.mma.to_a(p, f16, col0=kk * 16, k=16),
                         kaio.mma.load_b(V, kk * 16, 0, n=16), o)
    kaio.mma.store(O, r0, 0, o)
    kaio.mma.store(L, r0, 0, kaio.mma.apply(_plus, kaio.mma.row_sum(p), r0, 0, mx))


def _rows_case():
    g = np.random.default_rng(13)
    rows = 16 * THREADS // 64          # every warp of a 64-lane target's block has a tile too
    inp = {"a": g.integers(-3, 4, (rows * 2, 16)).astype(np.float16),
           "b": g.integers(-3, 4, (16, 32)).astype(np.float16),
           "v": g.integers(-3, 4, (32, 16)).astype(np.float16)}

    def run(i):
        o = np.full((2 * rows, 16), -1.0, np.float32)
        lsum = np.full((2 * rows, 8), -1.0, np.float32)
        fragment_rows[1, THREADS](i["a"], i["b"], i["v"], o, lsum)
        return {"o": o, "l": lsum}

    def expected(i, warp):
        s = i["a"].astype(np.float64) @ i["b"].astype(np.float64)
        mx = s.max(axis=1, keepdims=True)
        p = s - mx
        o = (p @ i["v"].astype(np.float64)).astype(np.float32)
        lsum = np.repeat(p.sum(axis=1, keepdims=True) + mx, 8, axis=1).astype(np.float32)
        n = 16 * (THREADS // warp)                     # rows the block's warps cover
        o[n:], lsum[n:] = -1.0, -1.0
        return {"o": o, "l": lsum}
    return feature("fragment_rows", lambda: inp, run, expected, vs_numpy=BITWISE, rule=BITWISE,
                   width_dependent=True,
                   description="kaio.mma.row_max / row_sum (an m x 8 accumulator per row, "
                               "broadcast along the rows by apply) and kaio.mma.to_a (16-column "
                               "slices of an accumulator as A fragments): attention's shape on "
                               "small integers, so bitwise on every target")


def _random(npdt, shape_a, shape_b, seed):
    g = np.random.default_rng(seed)
    a = g.standard_normal(shape_a).astype(np.float32).astype(npdt)
    b = g.standard_normal(shape_b).astype(np.float32).astype(npdt)
    return a, b


def _documented(a, b) -> np.ndarray:
    """The product in the documented order (kaio.semantics.mma: ascending k, f32, one rounding
    per addition); zero padding up to the tile adds exact zeros, so it needs none."""
    return kaio.semantics.mma(a, b, np.zeros((a.shape[0], b.shape[1]), np.float32))


def _scale(a, b) -> float:
    """max over C of sum_k |a b| (c starts at 0; f32 data as the tf32 values multiplied)."""
    if a.dtype == np.float32:
        a, b = kaio.semantics.tf32(a), kaio.semantics.tf32(b)
    return float((np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))).max())


def _bounds(a, b, k: int, what: str):
    """The rule for these inputs (against the interpreter and the documented-order model)."""
    s = _scale(a, b)
    why = (f"{ORDER}: matrix units may add the {k} products per element in another order and "
           f"precision; interpreter within {k}*2^-24*S of exact, GPU within 2*{k}*2^-24*S "
           f"(S = max sum|a b| = {s:.4g}; {what})")
    return rel(0.0, why, atol=3 * k * 2.0**-24 * s)


def _gemm_case(name):
    npdt = kaio.dtypes.from_name(name).storage_np
    a, b = _random(npdt, (M, K), (K, N), seed={"f16": 7, "bf16": 8}.get(name, 11))
    rule = _bounds(a, b, K, "fixed inputs" + (", rounded to tf32" if name == "f32" else ""))

    def run(inp):
        c = np.zeros((M, N), np.float32)
        GEMM[name][M // 16, THREADS](inp["a"], inp["b"], c)
        return {"c": c}

    shape, what = ("m16n8k8", "tf32 (f32 data rounded nearest-away)") if name == "f32" \
        else ("m16n8k16", name)
    return feature(f"fragment_gemm_{'tf32' if name == 'f32' else name}", lambda: {"a": a, "b": b},
                   run, lambda inp: {"c": _documented(inp["a"], inp["b"])}, vs_numpy=rule,
                   rule=rule, description=f"tiled {M}x{N}x{K} GEMM on {shape} fragments, "
                                          f"{what} -> f32")


def _run_tile(inp):
    c = np.full((inp["a"].shape[0], inp["b"].shape[1]), -1.0, np.float32)
    fragment_warp_tile[1, THREADS](inp["a"], inp["b"], c)
    return {"c": c}


def _tile_inputs(seed, integer=False):
    shape_a, shape_b = (TM - 4, TK - 2), (TK - 2, TN - 2)   # ragged: copy_tile zero-fills
    if integer:
        g = np.random.default_rng(seed)
        return {"a": g.integers(-8, 9, shape_a).astype(np.float16),
                "b": g.integers(-8, 9, shape_b).astype(np.float16)}
    a, b = _random(np.float16, shape_a, shape_b, seed)
    return {"a": a, "b": b}


def _tile_case():
    inp = _tile_inputs(9)
    rule = _bounds(inp["a"], inp["b"], TK, "ragged 60x30 @ 30x30 through copy_tile")
    return feature("fragment_warp_tile", lambda: inp, _run_tile,
                   lambda i: {"c": _documented(i["a"], i["b"])}, vs_numpy=rule, rule=rule,
                   description="m=32,n=16 warp tiles from shared memory filled by "
                               "kaio.mma.copy_tile; ragged edges zero-filled and masked")


def _exact_case():
    inp = _tile_inputs(10, integer=True)
    return feature("fragment_integer_data", lambda: inp, _run_tile,
                   lambda i: {"c": _documented(i["a"], i["b"])}, vs_numpy=BITWISE, rule=BITWISE,
                   description="the warp-tile kernel on small integers: every partial sum "
                               "exact in f32, so bitwise on every target")


@kaio.kernel(block=THREADS)
def fragment_group(A: kaio.In[f16, 2], B: kaio.In[f16, 2], C: kaio.Raw[f32, 2]):
    """kaio.mma.group_mma from kaio.mma.shared_tile arrays (wgmma on sm_90, the warp's own
    fragments elsewhere): warp w takes A's rows 16 w, all of B's 64 columns, B held n x k."""
    As = kaio.mma.shared_tile(f16, (64, 64))
    Bs = kaio.mma.shared_tile(f16, (64, 64))
    kaio.mma.copy_tile(As, A, 0, 0)
    kaio.mma.copy_tile(Bs, B, 0, 0)
    kaio.sync()
    acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
    for kk in kaio.static_range(2):
        acc = kaio.mma.group_mma(As, Bs, acc, 0, 0, kk * 32, k=32, trans_b=True)
    kaio.mma.store(C, (kaio.thread_idx.x // kaio.warp_size) * 16, 0, acc)


def _group_case():
    g = np.random.default_rng(17)
    inp = {"a": g.integers(-4, 5, (64, 60)).astype(np.float16),      # ragged K: zero-filled
           "b": g.integers(-4, 5, (64, 60)).astype(np.float16)}

    def run(i):
        c = np.full((64, 64), -1.0, np.float32)
        fragment_group[1, THREADS](i["a"], i["b"], c)
        return {"c": c}

    def expected(i, warp):
        c = (i["a"].astype(np.float64) @ i["b"].astype(np.float64).T).astype(np.float32)
        c[16 * (THREADS // warp):] = -1.0              # rows past the block's warps
        return {"c": c}
    return feature("fragment_group", lambda: inp, run, expected, vs_numpy=BITWISE, rule=BITWISE,
                   width_dependent=True,
                   description="kaio.mma.group_mma: the block's warps multiply 128-byte-swizzled "
                               "shared tiles together (one wgmma per four warps on sm_90), B "
                               "held transposed, ragged K zero-filled; small integers, bitwise")


@kaio.kernel(block=(64,))
def fragment_int4(X: kaio.In[bf16, 2], P: kaio.In[kaio.u8, 2], C: kaio.Raw[f32, 2]):
    """kaio.mma.load_b_int4: B fragments unpacked from int4 weights packed two per byte along K,
    staged in shared memory by copy_tile (the W4A16 kernel's pattern); two warps, 16 columns
    each."""
    Ps = kaio.shared_array(kaio.u8, (32, 48))
    w = kaio.thread_idx.x // kaio.warp_size
    kaio.mma.copy_tile(Ps, P, 0, 0, cols=32)
    kaio.sync()
    acc = kaio.mma.fill(f32, 0.0, m=16, n=16)
    for kk in kaio.static_range(4):
        a = kaio.mma.load_a(X, 0, kk * 16, m=16, k=16)
        acc = kaio.mma.mma(a, kaio.mma.load_b_int4(Ps, kk * 8, 16 * w, bf16, k=16, n=16), acc)
    kaio.mma.store(C, 0, 16 * w, acc)


def _int4_case():
    g = np.random.default_rng(19)
    q = g.integers(-8, 8, (64, 32))
    inp = {"x": g.integers(-4, 5, (16, 64)).astype(np.float32).astype(kaio.bf16.storage_np),
           "p": ((q[0::2] & 15) | ((q[1::2] & 15) << 4)).astype(np.uint8), "q": q}

    def run(i):
        c = np.zeros((16, 32), np.float32)
        fragment_int4[1, 64](i["x"], i["p"], c)
        return {"c": c}

    def expected(i, warp):
        c = (i["x"].astype(np.float64) @ i["q"].astype(np.float64)).astype(np.float32)
        c[:, 16 * (64 // warp):] = 0.0                 # columns past the block's warps
        return {"c": c}
    return feature("fragment_int4", lambda: inp, run, expected, vs_numpy=BITWISE, rule=BITWISE,
                   width_dependent=True,
                   description="kaio.mma.load_b_int4: bf16 B fragments unpacked from signed int4 "
                               "weights packed two per byte along K, staged in shared memory; "
                               "small integers, bitwise")


@kaio.kernel(block=THREADS)
def fragment_group_register_a(X: kaio.In[f16, 2], P: kaio.In[kaio.u8, 2], C: kaio.Raw[f32, 2]):
    """The warp-group W4A16 pattern (kernels/ml/quant_group.py): C = X @ W as (W^T X^T)^T, each
    warp's A fragment the transposed int4 weights of its 16 columns (kaio.mma.load_a_int4 from
    a copy_tile-staged byte tile), B the swizzled x tile held transposed, one register-A wgmma
    per four warps on sm_90; the accumulator stored transposed."""
    Xs = kaio.mma.shared_tile(f16, (64, 64))
    Ps = kaio.shared_array(kaio.u8, (32, 80))
    kaio.mma.copy_tile(Xs, X, 0, 0)
    kaio.mma.copy_tile(Ps, P, 0, 0, cols=64)
    kaio.sync()
    wn = 16 * (kaio.thread_idx.x // kaio.warp_size)
    acc = kaio.mma.fill(f32, 0.0, m=16, n=64)
    for kk in kaio.static_range(4):
        a = kaio.mma.load_a_int4(Ps, kk * 8, wn, f16, m=16, k=16)
        acc = kaio.mma.group_mma(a, Xs, acc, 0, kk * 16, trans_b=True)
    kaio.mma.store(C, 0, wn, acc, trans=True)


def _register_a_case():
    g = np.random.default_rng(23)
    q = g.integers(-8, 8, (64, 64))
    inp = {"x": g.integers(-4, 5, (60, 64)).astype(np.float16),     # ragged M: zero-filled
           "p": ((q[0::2] & 15) | ((q[1::2] & 15) << 4)).astype(np.uint8), "q": q}

    def run(i):
        c = np.full((60, 64), -1.0, np.float32)
        fragment_group_register_a[1, THREADS](i["x"], i["p"], c)
        return {"c": c}

    def expected(i, warp):
        c = (i["x"].astype(np.float64) @ i["q"].astype(np.float64)).astype(np.float32)
        c[:, 16 * (THREADS // warp):] = -1.0           # columns past the block's warps
        return {"c": c}
    return feature("fragment_group_register_a", lambda: inp, run, expected, vs_numpy=BITWISE,
                   rule=BITWISE, width_dependent=True,
                   description="kaio.mma.group_mma with A fragments in registers (int4 weights "
                               "unpacked transposed by load_a_int4; a register-A wgmma per four "
                               "warps on sm_90), B a swizzled x tile, stored transposed; small "
                               "integers, bitwise")


def cases():
    out = [_gemm_case("f16"), _gemm_case("bf16"), _gemm_case("f32"), _tile_case(), _exact_case(),
           _apply_case(), _rows_case(), _group_case(), _int4_case(), _register_a_case()]
    for c in out[:4]:
        c.order_dependent = ORDER
    return out
