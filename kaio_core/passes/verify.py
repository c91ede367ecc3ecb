"""IR verifier (minimal placeholder; being completed)."""
from __future__ import annotations


def run(kernel) -> None:
    return None
