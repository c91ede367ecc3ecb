"""Hand-written grid-stride loops whose increment is computed inside the loop
(``i += kaio.grid_dim.x * kaio.block_dim.x``): the increment is the same in every iteration,
so ``i`` is an induction variable (regions/walk.py ``_invariant``), as when it is hoisted.
Accepted kernels run on the sanitizing reference backend against numpy; twins with a wrong
stride, or an increment that changes between iterations, stay rejected."""
from __future__ import annotations

import numpy as np
import pytest
from race_corpus.rejects import rejected_at_race_line
from race_corpus.sanitizing import sanitizing

import kaio
from kaio import f32, i32
from kaio.regions import grid_stride


@pytest.fixture
def sanitized():
    with sanitizing(ownership=True) as backend:
        yield backend


def increment_in_body(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    i = kaio.global_id()
    while i < y.shape[0]:
        y[i] = x[i] * 2.0
        i += kaio.grid_dim.x * kaio.block_dim.x


def unsigned_increment(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    i = kaio.u32(kaio.global_id())
    while i < kaio.u32(y.shape[0]):
        y[i] = x[i] * 2.0
        i = i + kaio.u32(kaio.block_dim.x * kaio.grid_dim.x)


def increment_then_more(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    i = kaio.global_id()
    while i < y.shape[0]:
        y[i] = x[i] * 2.0
        step = kaio.grid_dim.x * kaio.block_dim.x
        i = i + step - kaio.thread_idx.x + kaio.thread_idx.x


ACCEPTED = [increment_in_body, unsigned_increment, increment_then_more]


@pytest.mark.parametrize("fn", ACCEPTED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("n, grid, block", [(100, 2, 16), (7, 1, 32), (64, 4, 8)])
def test_grid_stride_with_increment_in_the_loop(fn, n, grid, block, sanitized):
    x = np.arange(n, dtype=np.float32)
    y = np.zeros(n, np.float32)
    kaio.kernel(fn)[grid, block](x, y)
    np.testing.assert_array_equal(y, 2 * x)


def block_stride(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    i = kaio.global_id()
    while i < y.shape[0]:
        y[i] = x[i]  # RACE
        i += kaio.block_dim.x


def stride_minus_one(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()]):
    i = kaio.global_id()
    while i < y.shape[0]:
        y[i] = x[i]  # RACE
        i += kaio.grid_dim.x * kaio.block_dim.x - 1


def stride_from_the_counter(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()], p: i32):
    i = kaio.global_id()
    k = 0
    while i < y.shape[0]:
        y[i] = x[i]  # RACE
        k = k + 1
        i += kaio.grid_dim.x * kaio.block_dim.x * k


def stride_from_data(x: kaio.In[f32], y: kaio.Region[f32, grid_stride()], s: kaio.In[i32]):
    i = kaio.global_id()
    while i < y.shape[0]:
        y[i] = x[i]  # RACE
        i += s[0]


@pytest.mark.parametrize("fn", [block_stride, stride_minus_one, stride_from_the_counter, stride_from_data],
                         ids=lambda f: f.__name__)
def test_wrong_or_varying_stride_rejected(fn):
    rejected_at_race_line(fn, "not provably owned")
