"""64-bit and unsigned indices in the race checker (regions/walk.py, regions/widths.py): a cast
or an add/sub/mul keeps its exact value when the operands' ranges show the result fits its
type (``i64(a) * i64(b)`` of two i32 values always does), so 64-bit index arithmetic is
checked like i32 arithmetic. Accepted kernels run on the sanitizing reference backend against
numpy; the racy twins, where a cast or an operation wraps or the index moves, stay rejected."""
from __future__ import annotations

import numpy as np
import pytest
from race_corpus.rejects import rejected_at_race_line
from race_corpus.sanitizing import sanitizing

import kaio
from kaio import f32, i32
from kaio.regions import blocked, grid_stride


@pytest.fixture
def sanitized():
    with sanitizing(ownership=True) as backend:
        yield backend


def global_id_i64(x: kaio.In[f32], y: kaio.Out[f32], cols: i32):
    g = kaio.i64(kaio.block_idx.x) * kaio.i64(kaio.block_dim.x) + kaio.i64(kaio.thread_idx.x)
    if g < kaio.i64(y.shape[0]):
        y[g] = x[g] + 1.0


def square_i64(x: kaio.In[f32], y: kaio.Out[f32], cols: i32):
    g = kaio.i64(kaio.global_id())
    if g < kaio.i64(y.shape[0]):
        y[g * g - g * g + g] = x[g] + 1.0       # g * g < 2**62: no wrap in i64


def blocked_i64_stride(x: kaio.In[f32], y: kaio.Region[f32, blocked(4)], cols: i32):
    base = kaio.i64(kaio.global_id()) * kaio.i64(cols)   # cols == 4 on the launches below
    for j in range(4):
        i = base - kaio.i64(cols) * 0 + kaio.i64(j)
        if i < kaio.i64(y.shape[0]) and cols == 4:
            y[i] = x[i] + 1.0


def u32_back_to_i32(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()], cols: i32):
    g = kaio.u32(kaio.global_id())
    n = kaio.grid_dim.x * kaio.block_dim.x
    for i in range(g, kaio.u32(y.shape[0]), kaio.u32(n)):
        y[kaio.i32(kaio.i64(i) * kaio.i64(1))] = x[i] + 1.0


ACCEPTED = {"global_id_i64": global_id_i64, "square_i64": square_i64,
            "blocked_i64_stride": blocked_i64_stride, "u32_back_to_i32": u32_back_to_i32}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
@pytest.mark.parametrize("n, grid, block", [(37, 3, 16), (64, 2, 32), (5, 1, 8)])
def test_wide_index_accepted_and_right(name, n, grid, block, sanitized):
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    k = kaio.kernel(ACCEPTED[name])
    if name == "blocked_i64_stride":
        grid, block = 1, -(-n // 4)
    k[grid, block](x, y, 4)
    np.testing.assert_array_equal(y, x + 1)


# --- racy twins: one change each, and the cast or arithmetic that wraps --------------------
def shifted_i64(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g + 1 < y.shape[0]:
        y[kaio.i64(g) + 1] = x[g]  # RACE


def u32_of_g_minus_1(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[kaio.u32(g - 1) + kaio.u32(1)] = x[g]  # RACE: u32(-1) is 2**32 - 1 for g = 0


def u32_sub_wraps(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.u32(kaio.global_id())
    if g < kaio.u32(y.shape[0]):
        y[(g - kaio.u32(1)) + kaio.u32(1)] = x[g]  # RACE: g - 1 wraps for g = 0


def narrow_i16(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[kaio.i16(g)] = x[g]  # RACE: thread 65536 writes [0]


def narrow_i8_sum(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[kaio.i32(kaio.i8(g) + kaio.i8(0))] = x[g]  # RACE: thread 256 writes [0]


def narrow_after_i64_mul(x: kaio.In[f32], y: kaio.Region[f32, blocked(3)]):
    g = kaio.global_id()
    if g * 0 < 1:
        y[kaio.i32(kaio.i64(g) * kaio.i64(3) * kaio.i64(1 << 20)) // (1 << 20)] = x[g]  # RACE


def square_i32(x: kaio.In[f32], y: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g * g - g * g + g] = x[g]  # RACE: g * g wraps in i32


TWINS = [shifted_i64, u32_of_g_minus_1, u32_sub_wraps, narrow_i16, narrow_i8_sum,
         narrow_after_i64_mul, square_i32]


@pytest.mark.parametrize("fn", TWINS, ids=lambda f: f.__name__)
def test_wrapping_or_moved_index_rejected(fn):
    rejected_at_race_line(fn, "is not provably owned")
