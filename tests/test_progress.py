"""kaio.progress: bars on stderr only where a person watches; silent in pipes and tests."""
from __future__ import annotations

import io

from kaio import progress as P


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_disabled_under_pytest_and_in_pipes(monkeypatch, capsys):
    assert not P.enabled(_Tty())                     # PYTEST_CURRENT_TEST is set here
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    assert P.enabled(_Tty())
    assert not P.enabled(io.StringIO())              # not a terminal
    monkeypatch.setenv("KAIO_PROGRESS", "0")
    assert not P.enabled(_Tty())
    items = list(P.track([1, 2, 3], "quiet"))
    assert items == [1, 2, 3]
    out, err = capsys.readouterr()
    assert out == "" and err == ""


def test_disabled_bar_still_counts():
    with P.progress("x", total=4, force=False) as bar:
        bar.label("a")
        bar.advance()
        bar.advance(2)
    assert bar.done == 3


def test_forced_bar_draws_on_stderr_not_stdout(capsys):
    seen = list(P.track(["alpha", "beta"], "demo-task", label=lambda s: f"now-{s}", force=True))
    out, err = capsys.readouterr()
    assert seen == ["alpha", "beta"]
    assert out == ""
    assert "demo-task" in err and "now-beta" in err and "2/2" in err
