"""Placeholder pass (being completed): returns the kernel unchanged."""
from __future__ import annotations


def run(kernel):
    return kernel
