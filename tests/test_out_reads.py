"""Reading an Out element this thread already wrote (regions/checker.py ``_written_before``):
a store on both branches of an if/else, before a loop or earlier in the same loop iteration
is a write before the read; a store on one branch only, or inside
a loop that may run zero times, is not. Accepted kernels run on the sanitizing reference
backend against numpy; their twins are rejected, and with the checker off really read an
element nobody wrote."""
from __future__ import annotations

import numpy as np
import pytest
from race_corpus.rejects import rejected_at_race_line
from race_corpus.sanitizing import sanitizing

import kaio
from kaio import f32, i32
from kaio.backends.reference.errors import UninitializedReadError
from kaio.regions import checker

N = 37


@pytest.fixture
def sanitized():
    with sanitizing(ownership=True) as backend:
        yield backend


def both_branches(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        if x[g] > 10.0:
            y[g] = x[g]
        else:
            y[g] = -x[g]
        z[g] = y[g] * 2.0


def nested_branches(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        if x[g] > 10.0:
            if x[g] > 20.0:
                y[g] = 1.0
            else:
                y[g] = 2.0
        else:
            y[g] = 3.0
        z[g] = y[g]


def before_loop(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = x[g]
        acc = 0.0
        for _ in range(3):
            acc = acc + y[g]
        z[g] = acc


def same_iteration(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        acc = 0.0
        for j in range(3):
            y[g] = x[g] + kaio.f32(j)
            acc = acc + y[g]
        z[g] = acc


EXPECT = {
    "both_branches": lambda x: (np.where(x > 10, x, -x), 2 * np.where(x > 10, x, -x)),
    "nested_branches": lambda x: (None, np.where(x > 20, 1.0, np.where(x > 10, 2.0, 3.0))),
    "before_loop": lambda x: (x, 3 * x),
    "same_iteration": lambda x: (x + 2, 3 * x + 3),
}
ACCEPTED = {"both_branches": both_branches, "nested_branches": nested_branches,
            "before_loop": before_loop, "same_iteration": same_iteration}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_read_after_a_sure_write_runs_right(name, sanitized):
    x = np.arange(N, dtype=np.float32) - 5
    y, z = np.zeros(N, np.float32), np.zeros(N, np.float32)
    kaio.kernel(ACCEPTED[name])(x, y, z)
    want_y, want_z = EXPECT[name](x)
    if want_y is not None:
        np.testing.assert_allclose(y, want_y)
    np.testing.assert_allclose(z, want_z)


# --- twins: the write may not have happened ---------------------------------------------
def one_branch(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32], n: i32):
    g = kaio.global_id()
    if g < y.shape[0]:
        if x[g] > 10.0:
            y[g] = x[g]
        z[g] = y[g]  # RACE


def nested_one_branch(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32], n: i32):
    g = kaio.global_id()
    if g < y.shape[0]:
        if x[g] > 10.0:
            if x[g] > 20.0:
                y[g] = 1.0
        else:
            y[g] = 3.0
        z[g] = y[g]  # RACE


def zero_trip_loop(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32], n: i32):
    g = kaio.global_id()
    if g < y.shape[0]:
        for _ in range(n):
            y[g] = x[g]
        z[g] = y[g]  # RACE


def other_buffer(x: kaio.In[f32], y: kaio.Out[f32], z: kaio.Out[f32], n: i32):
    g = kaio.global_id()
    if g < y.shape[0]:
        if x[g] > 10.0:
            y[g] = x[g]
        else:
            z[g] = x[g]
        z[g] = y[g]  # RACE


TWINS = {"one_branch": one_branch, "nested_one_branch": nested_one_branch,
         "zero_trip_loop": zero_trip_loop, "other_buffer": other_buffer}


@pytest.mark.parametrize("name", sorted(TWINS))
def test_read_after_a_maybe_write_is_rejected(name):
    rejected_at_race_line(TWINS[name], "read of Out buffer 'y' at index `g")


@pytest.mark.parametrize("name", ["one_branch", "nested_one_branch", "zero_trip_loop", "other_buffer"])
def test_twins_really_read_an_unwritten_element(name, sanitized):
    x = np.arange(N, dtype=np.float32) - 5      # x[g] <= 10 for the first threads
    y, z = np.zeros(N, np.float32), np.zeros(N, np.float32)
    with checker.disabled(), pytest.raises(UninitializedReadError):
        kaio.kernel(TWINS[name])(x, y, z, 0)
