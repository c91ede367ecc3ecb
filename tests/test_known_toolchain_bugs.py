"""Known bugs of NVIDIA's toolchain that kaio's generated code meets, pinned so a fix (ours or
NVIDIA's) shows up. Found by the random-kernel fuzzer's GPU differential (docs/testing.md).

ptxas 13.0 for sm_90 fuses ``min(a, min(b, 0 - c))`` (i32; max too) into one three-input
``VIMNMX3`` and drops the negation: the GPU computes ``min(a, min(b, c))``. kaio's PTX
(``sub.s32 r, 0, c``) and the LLVM path's (``neg.s32``) are correct; sm_80 and sm_89 are not
affected. kaio works around it (kaio.backends.ptx_workarounds: on sm_9x both paths write every
integer negation as ``not`` + ``add 1``, which ptxas does not fuse); the GPU test below must pass.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import kaio
from kaio import i32


@kaio.kernel
def neg_min3(a: kaio.In[i32], y: kaio.Out[i32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = min(a[0], min(a[1], i32(0) - a[2]))


@kaio.kernel
def neg_max3(a: kaio.In[i32], y: kaio.Out[i32]):
    g = kaio.global_id()
    if g < y.shape[0]:
        y[g] = max(a[0], max(a[1], i32(0) - a[2]))


@pytest.mark.parametrize("kernel, want", [(neg_min3, -3), (neg_max3, 3)], ids=["min", "max"])
def test_three_way_min_max_with_a_negated_operand(backend, kernel, want):
    a = np.array([2, 1, 3, 0], np.int32) if want < 0 else np.array([-2, -1, -3, 0], np.int32)
    y = np.zeros(4, np.int32)
    kernel[1, 4](a, y)
    np.testing.assert_array_equal(y, np.full(4, want, np.int32))


@pytest.mark.parametrize("target", ["sm_90", "nvptx64-sm_90"])
def test_sm90_ptx_has_no_integer_negation_for_ptxas_to_fuse(target):
    ptx = neg_min3.emit("ptx", target=target)
    assert not re.search(r"\b(neg\.s32|sub\.s32\s+%r\d+,\s*0,)", ptx), ptx
    assert re.search(r"not\.b32\s+(%r\d+),\s*%r\d+;\s*add\.s32\s+\1,\s*\1,\s*1;", ptx), ptx


@pytest.mark.parametrize("target", ["sm_80", "nvptx64-sm_80"])
def test_unaffected_archs_keep_the_one_instruction_negation(target):
    assert re.search(r"neg\.s32", neg_min3.emit("ptx", target=target))


def test_rewrite_keeps_predicates_and_widths():
    from kaio.backends import ptx_workarounds
    text = "\t@%p1 neg.s64 %rd3, %rd2;\n\tneg.s32 %r1, %r1;"
    assert ptx_workarounds.apply(text, "sm_80") == text
    assert ptx_workarounds.apply(text, "sm_90") == (
        "\t@%p1 not.b64 %rd3, %rd2;\n\t@%p1 add.s64 %rd3, %rd3, 1;\n"
        "\tnot.b32 %r1, %r1;\n\tadd.s32 %r1, %r1, 1;")
