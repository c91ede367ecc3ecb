"""The pieces the W4A16 kernels share (kernels/ml/quant_mma.py's pipelined tilings,
kernels/ml/quant_group.py's warp-group ones): the shared stages of x and of the packed weights,
the copy of a K-step into them, and when a quantization group ends."""
import kaio

#: bytes of row padding of the staged packed tiles (rows in distinct banks for the byte loads)
PPAD = 16
#: elements of row padding of the f16/bf16 shared tiles (16 bytes: ldmatrix rows in distinct banks)
QPAD = 8


def stages(T, BM_, BN_, BK_, S, swizzled=False):
    """(buffers, stage), the @kaio.funcs of a pipelined W4A16 kernel's S shared stages:
    ``buffers() -> (Xs, Ps)``, each stage a K-step's x tile (T; ``swizzled``: a
    ``kaio.mma.shared_tile``, else rows padded by QPAD) and its packed weight tile (bytes, a
    quarter of the f16 tile's size); ``stage(Xs, Ps, x, packed, row0, col0, k0)`` copies one
    K-step into a stage (``copy_tile``)."""
    x_tile = (BM_, BK_) if swizzled else (BM_, BK_ + QPAD)
    p_tile = (BK_ // 2, BN_ + PPAD)

    @kaio.func
    def x_buf():
        if swizzled:     # a compile-time choice: only the taken branch is compiled
            b = kaio.mma.shared_tile(T, x_tile)
        else:
            b = kaio.shared_array(T, x_tile)
        return b

    @kaio.func
    def buffers():
        if S == 3:
            Xs = (x_buf(), x_buf(), x_buf())
            Ps = (kaio.shared_array(kaio.u8, p_tile), kaio.shared_array(kaio.u8, p_tile),
                  kaio.shared_array(kaio.u8, p_tile))
        else:
            Xs = (x_buf(), x_buf(), x_buf(), x_buf())
            Ps = (kaio.shared_array(kaio.u8, p_tile), kaio.shared_array(kaio.u8, p_tile),
                  kaio.shared_array(kaio.u8, p_tile), kaio.shared_array(kaio.u8, p_tile))
        return Xs, Ps

    @kaio.func
    def stage(Xs, Ps, x, packed, row0, col0, k0):
        kaio.mma.copy_tile(Xs, x, row0, k0, cols=BK_)
        kaio.mma.copy_tile(Ps, packed, k0 >> 1, col0, cols=BN_)   # // 2: a signed division
    return buffers, stage


@kaio.func
def group_ends(end, at, group, span):
    """Whether a quantization group ends at K offset ``end``, where ``at`` (compile-time) is
    end's offset inside the loop iteration's ``span`` of K (two K-steps; iterations start at
    multiples of span): decided at compile time where groups divide the span (at fixed
    offsets) and where no multiple of the group can fall at this offset (groups spanning whole
    iterations end only at their ends), else tested (uniform across the block)."""
    r = False
    if span % group == 0:
        r = at % group == 0
    elif group % span != 0 or at == span:
        r = over(end, group) * group == end
    return r


@kaio.func
def over(k, d):
    """k // d for k >= 0 and a compile-time d: a shift when d is a power of two (kaio's //
    is a signed division, which ptxas does not reduce to a shift; and a literal // 32 of a
    thread id would read as a warp width)."""
    r = k
    if d & (d - 1) != 0:
        r = k // d
    for p in kaio.static_range(1, 16):
        if d == 1 << p:
            r = k >> p
    return r
