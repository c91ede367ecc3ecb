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


@pytest.fixture(autouse=True)
def _settings_follow_monkeypatch(monkeypatch):
    """kaio reads its KAIO_* variables once (kaio.config); a test that changes one through
    monkeypatch gets the settings re-read at once, and every test starts from the environment."""
    from kaio import config
    setenv, delenv = monkeypatch.setenv, monkeypatch.delenv

    def setenv_and_reload(*args, **kwargs):
        setenv(*args, **kwargs)
        config.reload()

    def delenv_and_reload(*args, **kwargs):
        delenv(*args, **kwargs)
        config.reload()

    monkeypatch.setenv, monkeypatch.delenv = setenv_and_reload, delenv_and_reload
    config.reload()
    yield


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


@pytest.fixture
def reference():
    """Run the test body on the reference backend only."""
    import kaio
    from kaio import backends as be
    previous = be._current
    kaio.set_backend("reference")
    yield
    be._current = previous
