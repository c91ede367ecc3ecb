"""Placeholder (being completed)."""
from __future__ import annotations


def run(kernel, warp_size: int = 32):
    return kernel
