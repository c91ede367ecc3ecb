"""Shared fixtures: one `backend` fixture over what is present (reference always).

The race sanitizer is on for every test run on the reference backend (KAIO_SANITIZE=1), so
each test doubles as a check that the kernel it runs is race-free.
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("KAIO_SANITIZE", "1")


def _available(name: str) -> tuple[bool, str]:
    from kaio.backends import availability
    return availability(name)


def pytest_collection_modifyitems(config, items):
    """Skip gpu/cuda/hip-marked tests cleanly, with the reason, where no such device exists."""
    reasons = {}
    for marker, backends in (("cuda", ["cuda"]), ("hip", ["hip"]), ("gpu", ["cuda", "hip"])):
        oks = [(_available(b)) for b in backends]
        if not any(ok for ok, _ in oks):
            reasons[marker] = "; ".join(f"{b}: {why}" for b, (_, why) in zip(backends, oks))
    for item in items:
        for marker, why in reasons.items():
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=f"no {marker} device: {why}"))


def backend_names() -> list:
    names = ["reference"]
    for n in ("cuda", "hip"):
        if _available(n)[0]:
            names.append(n)
    return names


@pytest.fixture(params=backend_names())
def backend(request):
    """Run the test body on each available backend (reference always)."""
    import kaio
    from kaio import backends as be
    previous = be._current
    kaio.set_backend(request.param)
    yield request.param
    be._current = previous
