"""Every ``kaio`` command documents itself: a description, help for every argument, its own
name in the usage line, and plain text (no reStructuredText backticks) throughout."""
from __future__ import annotations

import argparse

import pytest

import kaio
from kaio import cli


class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


def _capture_parser(monkeypatch, argv) -> argparse.ArgumentParser:
    """The parser a command builds when run with ``argv`` (stopped at its parse_args, so
    commands that build their parser inline are walked the same way)."""
    def stop(self, *args, **kwargs):
        raise _Captured(self)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", stop)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", stop)
    with pytest.raises(_Captured) as got:
        cli.main(list(argv))
    return got.value.parser


def _texts(parser: argparse.ArgumentParser):
    """(where, text) for the description, epilog and every argument's help."""
    yield f"{parser.prog}: description", parser.description
    if parser.epilog:
        yield f"{parser.prog}: epilog", parser.epilog
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
            continue
        name = "/".join(a.option_strings) or a.dest
        if isinstance(a, argparse._SubParsersAction):
            for choice in a._choices_actions:
                yield f"{parser.prog} {choice.dest}: help", choice.help
            continue
        yield f"{parser.prog} {name}: help", a.help


def _check_documented(parser: argparse.ArgumentParser):
    for where, text in _texts(parser):
        assert text and text is not argparse.SUPPRESS and text.strip(), f"{where} is missing"
        assert "`" not in text, f"{where} has reStructuredText backticks: {text!r}"
    assert "`" not in parser.format_help()


def _own_subparsers(parser):
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_top_level_and_own_subcommands_are_documented():
    top = cli.build_parser()
    _check_documented(top)
    subs = _own_subparsers(top)
    assert set(cli.DELEGATED) <= set(subs)
    for name in ("info", "compile"):
        assert subs[name].prog == f"kaio {name}"
        _check_documented(subs[name])


@pytest.mark.parametrize("name", sorted(cli.DELEGATED))
def test_delegated_subcommands_are_documented(monkeypatch, name):
    parser = _capture_parser(monkeypatch, [name, "--help"])
    assert parser.prog == f"kaio {name}"
    _check_documented(parser)


def test_bench_ml_is_documented(monkeypatch):
    parser = _capture_parser(monkeypatch, ["bench", "--ml", "--help"])
    assert parser.prog == "kaio bench --ml"
    _check_documented(parser)


def test_compile_help_explains_file_and_kernel(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["compile", "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "FILE.py:KERNEL" in out and "colon" in out and "@kaio.kernel" in out
    assert "kernels.py:saxpy" in out


def test_bench_help_names_itself(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: kaio bench") and "bench_gpu.py" not in out
    assert "--plot FILE.png" in out and "--ml" in out


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"kaio {kaio.__version__}"
