"""`kaio info` and `kaio compile` (no GPU needed), and the dispatch of delegated commands."""
from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

from kaio import cli
from kaio.errors import CompileError

KERNELS = textwrap.dedent('''
    import kaio
    from kaio import f32

    @kaio.kernel
    def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
        for i in y.owned():
            y[i] = a * x[i] + y[i]

    @kaio.kernel
    def scale(x: kaio.In[f32], y: kaio.Out[f32], N: kaio.Const[int], half: kaio.Const[bool]):
        for i in y.owned():
            if half:
                y[i] = x[i] * N * 0.5
            else:
                y[i] = x[i] * N

    not_a_kernel = 3
''')


@pytest.fixture
def kfile(tmp_path):
    p = tmp_path / "kernels_for_cli.py"
    p.write_text(KERNELS)
    return p


def run(capsys, *argv):
    rc = cli.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_info(capsys):
    rc, out, err = run(capsys, "info")
    assert rc == 0
    for word in ("kaio", "Python", "numpy", "reference", "cuda", "hip", "devices"):
        assert word in out
    # reference always runs; its row says yes
    ref = next(line for line in out.splitlines() if "reference" in line)
    assert "yes" in ref


def test_compile_ir(capsys, kfile):
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--emit", "ir")
    assert rc == 0, err
    assert out.startswith("kernel @saxpy(") and "store %y" in out
    from kaio.ir import parse_kernel
    assert parse_kernel(out).name == "saxpy"  # the printed IR is the parseable form


def test_compile_ptx_default_target(capsys, kfile):
    pytest.importorskip("kaio.backends.ptx")
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--emit", "ptx")
    assert rc == 0, err
    assert ".target sm_90" in out and ".visible .entry saxpy(" in out


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_compile_ptx_targets_assemble(capsys, kfile, tmp_path, arch):
    pytest.importorskip("kaio.backends.ptx")
    out_path = tmp_path / f"saxpy_{arch}.ptx"
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--target", arch, "-o", str(out_path))
    assert rc == 0, err
    text = out_path.read_text()
    assert f".target {arch}" in text and out == ""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("ptxas not installed: PTX written but not assembled")
    r = subprocess.run([ptxas, f"-arch={arch}", str(out_path), "-o", str(tmp_path / "a.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_compile_consts(capsys, kfile):
    pytest.importorskip("kaio.backends.ptx")
    rc, out3, err = run(capsys, "compile", f"{kfile}:scale", "--const", "N=3", "--const", "half=false")
    assert rc == 0, err
    rc, out4, err = run(capsys, "compile", f"{kfile}:scale", "--const", "N=4", "--const", "half=true")
    assert rc == 0, err
    assert out3 != out4


def test_parse_const():
    assert cli.parse_const("N=4") == ("N", 4)
    assert cli.parse_const("N=0x10") == ("N", 16)
    assert cli.parse_const("eps=1e-5") == ("eps", 1e-5)
    assert cli.parse_const("flag=True") == ("flag", True)
    assert cli.parse_const("flag=false") == ("flag", False)
    for bad in ("N", "=3", "N=", "N=abc", "1N=3"):
        with pytest.raises(cli.CliError):
            cli.parse_const(bad)


@pytest.mark.parametrize("argv, message", [
    (["{f}:saxpy", "--target", "sm_99"], "unknown target 'sm_99'"),
    (["{f}:saxpy", "--target", "gfx942", "--emit", "ptx"], "target gfx942 has no stage 'ptx'"),
    (["{f}:saxpy", "--target", "sm_90", "--emit", "hsaco"], "target sm_90 has no stage 'hsaco'"),
    (["{d}/missing.py:saxpy"], "no such file"),
    (["{f}:nope"], "has no kernel named 'nope'; kernels in it: saxpy, scale"),
    (["{f}:not_a_kernel"], "is a int, not a @kaio.kernel"),
    (["{f}"], "expected FILE.py:KERNEL"),
    (["{f}:scale", "--const", "N=2"], "needs values for its constant parameters: --const half=VALUE"),
    (["{f}:scale", "--const", "N=2", "--const", "half=true", "--const", "M=1"],
     "has no constant parameter M"),
    (["{f}:saxpy", "--const", "N=x"], "not an int, a float or true/false"),
])
def test_compile_errors(capsys, kfile, argv, message):
    argv = [a.format(f=kfile, d=kfile.parent) for a in argv]
    rc, out, err = run(capsys, "compile", *argv)
    assert rc == 2 and message in err and "Traceback" not in err


def test_compile_error_in_kernel(capsys, tmp_path):
    p = tmp_path / "bad.py"
    p.write_text("import kaio\n@kaio.kernel\ndef bad(x: kaio.In[kaio.f32]):\n    x[0] = 1.0\n")
    rc, out, err = run(capsys, "compile", f"{p}:bad", "--emit", "ir")
    assert rc == 1 and "bad" in err and "Traceback" not in err


def test_delegated_missing_module(capsys, monkeypatch):
    monkeypatch.setitem(cli.DELEGATED, "showcase", ("kaio._no_such_module_:main",))
    rc, out, err = run(capsys, "showcase")
    assert rc == 2 and "not available" in err


def test_delegated_dispatch(capsys, monkeypatch, tmp_path):
    mod = tmp_path / "fake_conf_cli.py"
    mod.write_text("def main(argv):\n    print('got', argv)\n    return 3\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.DELEGATED, "conformance", ("fake_conf_cli:main",))
    rc, out, err = run(capsys, "conformance", "--json", "x")
    assert rc == 3 and "got ['--json', 'x']" in out


def test_console_script():
    exe = shutil.which("kaio")
    cmd = [exe] if exe else [sys.executable, "-m", "kaio.cli"]
    r = subprocess.run(cmd + ["compile", "/nonexistent.py:k"], capture_output=True, text=True)
    assert r.returncode == 2 and "no such file" in r.stderr


REDUCE = textwrap.dedent('''
    import kaio
    from kaio import f32

    @kaio.kernel
    def bsum(x: kaio.In[f32], out: kaio.Atomic[f32]):
        s = kaio.warp_sum(x[kaio.global_id()])
        if kaio.lane_id() == 0:
            kaio.atomic_add(out, 0, s)
''')


def test_ir_per_target_warp_width(capsys, tmp_path):
    """--emit ir is the checked IR; --emit lowered with a target shows that target's lowering:
    warp 32 vs 64 differ."""
    p = tmp_path / "reduce_for_cli.py"
    p.write_text(REDUCE)
    outs = {}
    for t in (None, "sm_90", "gfx942"):
        stage = ["--emit", "lowered", "--target", t] if t else ["--emit", "ir"]
        rc, out, err = run(capsys, "compile", f"{p}:bsum", *stage)
        assert rc == 0, err
        outs[t] = out
    assert "warp_reduce" in outs[None]
    assert "warp_reduce" not in outs["sm_90"] and "warp_reduce" not in outs["gfx942"]
    # log2(width) shuffle-down steps plus the broadcast from lane 0: 6 at 32 lanes, 7 at 64
    assert outs["sm_90"].count("shuffle") == 6 and outs["gfx942"].count("shuffle") == 7


@pytest.mark.parametrize("target, stage, marker", [
    ("gfx942", "llvm", "amdgcn-amd-amdhsa"),
    ("gfx90a", "asm", "gfx90a"),
    ("nvptx64-sm_90", "ptx", ".target sm_90"),
])
def test_compile_llvm_targets(capsys, kfile, target, stage, marker):
    pytest.importorskip("kaio.backends.llvm_compile")
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--target", target, "--emit", stage)
    assert rc == 0, err
    assert marker in out


def test_compile_hsaco_needs_output(capsys, kfile, tmp_path):
    pytest.importorskip("kaio.backends.llvm_compile")
    if shutil.which("ld.lld") is None and shutil.which("ld.lld-19") is None:
        pytest.skip("no ld.lld to link a code object")
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--target", "gfx942", "--emit", "hsaco")
    assert rc == 2 and "binary" in err
    dest = tmp_path / "saxpy.hsaco"
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--target", "gfx942", "--emit", "hsaco",
                       "-o", str(dest))
    assert rc == 0, err
    assert dest.read_bytes()[:4] == b"\x7fELF"


def test_compile_report_and_lowered_stages(capsys, kfile):
    """Every stage of a target can be printed by name: the AMD code-object check as a line."""
    from kaio.backends.llvm_compile import find_linker
    try:
        find_linker()
    except CompileError:
        pytest.skip("no AMD linker here")
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--emit", "report", "--target", "gfx942")
    assert rc == 0, err
    assert out.startswith("saxpy [gfx942] ok: lds=0B sgpr=")
    rc, out, err = run(capsys, "compile", f"{kfile}:saxpy", "--emit", "lowered", "--target", "sm_90")
    assert rc == 0 and out.startswith("kernel @saxpy")
