"""Checked mode (``@kaio.kernel(checked=True)``, ``KAIO_CHECKED=1``): every access bounds-checked
on the device (kaio.passes.bounds_check), an out-of-bounds one reported after the launch as the
same IndexError the reference backend raises (kaio.checked).

Run on every backend by the ``backend`` fixture (the reference here, CUDA in the GPU run). The
PTX is assembled by ptxas and executed by tests/ptx_sim.py, the LLVM IR JIT-run on this CPU
(tests/llvm_host.py), and the AMD code objects validated, so every path runs here except the
GPUs themselves.
"""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import kaio
from kaio import backends as be
from kaio import f32, i32
from kaio.backends.abi import kernel_abi
from kaio.backends.targets import emit, get_target
from kaio.errors import OutOfBoundsError
from kaio.ir.rewrite import clone_kernel
from kaio.kernels.ml import norms
from kaio.options import CompileOptions, KernelOptions
from kaio.passes import bounds_check

HERE = os.path.abspath(__file__)


# --- kernels: each defined once, compiled checked and unchecked -------------------------------
def off_by_one_read(x: kaio.In[f32], y: kaio.Region[f32]):
    i = kaio.global_id()
    if i < y.shape[0]:
        y[i] = x[i + 1]  # READ


def off_by_one_write(y: kaio.Region[f32]):
    i = kaio.global_id()
    if i <= y.shape[0]:
        y[i] = 1.0  # WRITE


def row_overrun(y: kaio.Region[f32, kaio.regions.rows()]):
    """Thread 0 writes one column past its row's end: in the flat buffer that is row 1's first
    element, so only a per-dimension check sees it."""
    r = kaio.global_id()
    if r < y.shape[0]:
        n = y.shape[1]
        if r == 0:
            n = n + 1
        for c in range(n):
            y[r, c] = f32(r) + 1.0  # ROW


def negative_index(x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = x[i - 1]  # NEG


def shared_overrun(x: kaio.In[f32], y: kaio.Raw[f32]):
    sh = kaio.shared_array(f32, 32)
    t = kaio.thread_idx.x
    sh[t] = x[t]  # SHARED
    kaio.sync()
    y[t] = sh[31 - t]


def atomic_overrun(keys: kaio.In[i32], hist: kaio.Atomic[i32]):
    i = kaio.global_id()
    if i < keys.shape[0]:
        kaio.atomic_add(hist, keys[i], 1)  # ATOMIC


CHECKED = {f.__name__: kaio.kernel(f, checked=True) for f in
           (off_by_one_read, off_by_one_write, row_overrun, negative_index, shared_overrun,
            atomic_overrun)}
UNCHECKED = {f.__name__: kaio.kernel(f, checked=False) for f in
             (off_by_one_read, off_by_one_write, row_overrun, negative_index, shared_overrun,
              atomic_overrun)}


def line_of(marker: str) -> int:
    with open(HERE) as f:
        return next(n for n, text in enumerate(f, 1) if text.rstrip().endswith(f"# {marker}"))


def _inputs(name):
    """((grid, block), arguments) of each kernel, with exactly one faulting thread, so the
    message is the same whichever thread a GPU lets record first."""
    return {
        "off_by_one_read": ((1, 16), [np.arange(10, dtype=np.float32), np.zeros(10, np.float32)]),
        "off_by_one_write": ((1, 16), [np.zeros(10, np.float32)]),
        "row_overrun": ((1, 4), [np.zeros((3, 4), np.float32)]),
        "negative_index": ((1, 8), [np.arange(5, dtype=np.float32), np.zeros(5, np.float32)]),
        "shared_overrun": ((1, 33), [np.arange(33, dtype=np.float32), np.zeros(33, np.float32)]),
        "atomic_overrun": ((1, 8), [np.array([0, 1, 2, 3, 4, 1, 2, 3], np.int32), np.zeros(4, np.int32)]),
    }[name]


def _error(kern, name) -> tuple[OutOfBoundsError, list]:
    (grid, block), args = _inputs(name)
    with pytest.raises(IndexError) as ei:
        kern[grid, block](*args)
    assert isinstance(ei.value, OutOfBoundsError)
    return ei.value, args


def _on_reference(fn):
    previous = be._current
    kaio.set_backend("reference")
    try:
        return fn()
    finally:
        be._current = previous


# --- the same IndexError on every backend -----------------------------------------------------
def test_off_by_one_read_names_everything(backend):
    e, args = _error(CHECKED["off_by_one_read"], "off_by_one_read")
    line = line_of("READ")
    head = (f"{HERE}:{line}: in kernel 'off_by_one_read': load from 'x' at index (10,) is out of "
            "bounds for shape (10,) (block (0, 0, 0) thread (9, 0, 0) (global thread 9))")
    assert str(e).splitlines()[0] == head
    assert "y[i] = x[i + 1]" in str(e)
    assert (e.kernel, e.buffer, e.index, e.shape, e.thread, e.line) == \
        ("off_by_one_read", "x", (10,), (10,), 9, line)
    # the launch completed with the access skipped (the load read 0)
    np.testing.assert_array_equal(args[1], np.r_[np.arange(1, 10), 0].astype(np.float32))


def _interpreter_error(name) -> str:
    """The IndexError the reference interpreter raises running the unchecked kernel. Most of
    these overruns are refused before launch, unchecked (tests/test_launch_checks.py); this runs
    the interpreter past that check."""
    (grid, block), args = _inputs(name)
    ref = be.get_backend("reference")
    with pytest.raises(IndexError) as ei:
        ref._launch(UNCHECKED[name].compile(ref), (grid, 1, 1), (block, 1, 1), args)
    return str(ei.value)


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_checked_error_is_the_reference_error(backend, name):
    """One message on every backend: a checked launch's IndexError is word for word the one the
    reference interpreter raises for the unchecked kernel."""
    want = _interpreter_error(name)
    got, _ = _error(CHECKED[name], name)
    assert str(got) == want


def test_off_by_one_write_is_skipped(backend):
    e, (y,) = _error(CHECKED["off_by_one_write"], "off_by_one_write")
    assert (e.buffer, e.index, e.line) == ("y", (10,), line_of("WRITE"))
    assert "store to 'y'" in str(e) and "thread (10, 0, 0)" in str(e)
    np.testing.assert_array_equal(y, np.ones(10, np.float32))


def test_column_past_a_rows_end_is_caught(backend):
    """The flat offset of y[0, 4] is in bounds (it is y[1, 0]); the per-dimension check catches
    it, and the skipped store leaves row 1 to its owner."""
    e, (y,) = _error(CHECKED["row_overrun"], "row_overrun")
    assert (e.buffer, e.index, e.shape, e.line) == ("y", (0, 4), (3, 4), line_of("ROW"))
    assert "store to 'y' at index (0, 4) is out of bounds for shape (3, 4)" in str(e)
    np.testing.assert_array_equal(y, np.repeat([[1.0], [2.0], [3.0]], 4, axis=1).astype(np.float32))


def test_negative_shared_and_atomic_accesses(backend):
    e, _ = _error(CHECKED["negative_index"], "negative_index")
    assert (e.buffer, e.index) == ("x", (-1,))
    e, _ = _error(CHECKED["shared_overrun"], "shared_overrun")
    assert (e.buffer, e.index, e.shape, e.line) == ("sh", (32,), (32,), line_of("SHARED"))
    e, (_, hist) = _error(CHECKED["atomic_overrun"], "atomic_overrun")
    assert "atomic on 'hist' at index (4,)" in str(e) and e.line == line_of("ATOMIC")
    np.testing.assert_array_equal(hist, [1, 2, 2, 2])


# --- in-bounds kernels: the same results -----------------------------------------------------
@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32, kaio.regions.blocked(8)]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


@kaio.kernel
def tiles_transpose(x: kaio.In[f32, 2], y: kaio.Out[f32, 2, kaio.regions.tiles(8, 8)]):
    for r, c in y.owned():
        y[r, c] = x[c, r] * 2.0


def _twin(kern, checked):
    o = kern.options
    return kaio.kernel(kern.fn, fast_math=o.fast_math, max_registers=o.max_registers,
                       disabled_passes=o.disabled_passes, checked=checked)


def _in_bounds_cases():
    rng = np.random.default_rng(7)
    x2 = rng.standard_normal((6, 300)).astype(np.float32)
    sq = rng.standard_normal((20, 20)).astype(np.float32)
    keys = rng.integers(0, 4, 100).astype(np.int32)
    return [
        (saxpy, None, lambda: [np.float32(1.5), np.arange(1000, dtype=np.float32),
                               np.ones(1000, np.float32)], {}),
        (tiles_transpose, None, lambda: [sq, np.zeros((20, 20), np.float32)], {}),
        (norms.softmax_kernel("f32", "f32"), ((6,), (128,)), lambda: [x2, np.zeros_like(x2)], {}),
        (norms.softmax_resident_kernel("f32", "f32"), ((6,), (128,)),
         lambda: [x2, np.zeros_like(x2)], {"PER": 4}),
        (UNCHECKED["shared_overrun"], (1, 32), lambda: [np.arange(32, dtype=np.float32),
                                                        np.zeros(32, np.float32)], {}),
        (UNCHECKED["atomic_overrun"], (1, 128), lambda: [keys, np.zeros(4, np.int32)], {}),
    ]


@pytest.mark.parametrize("case", range(6))
def test_in_bounds_kernels_give_identical_results(backend, case):
    kern, config, make, consts = _in_bounds_cases()[case]
    results = []
    for checked in (False, True):
        args = make()
        k = _twin(kern, checked)
        (k if config is None else k[config])(*args, **consts)
        results.append([a for a in args if isinstance(a, np.ndarray)])
    for a, b in zip(*results):
        np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


# --- options, environment, cache --------------------------------------------------------------
def test_checked_is_a_compile_option_and_keys_the_cache():
    base = get_target("sm_90").options()
    assert base.checked is False and base.key()["checked"] is False
    on = base.with_kernel(KernelOptions(checked=True))
    assert on.checked and on.key() != base.key()
    k = UNCHECKED["off_by_one_read"].specialize_ir()
    plain = emit(k, "ptx", "sm_90")
    assert plain == emit(k, "ptx", "sm_90", KernelOptions(checked=False))
    assert "_kaio_fault" not in plain
    checked = emit(k, "ptx", "sm_90", KernelOptions(checked=True))
    assert "_kaio_fault_ptr" in checked and "atom.global.cas.b64" in checked
    assert CompileOptions("sm_90", 32, "ptx").checked is False


def test_kaio_checked_is_the_default_for_kernels_that_do_not_say(monkeypatch):
    undecided = kaio.kernel(off_by_one_read)
    args = _inputs("off_by_one_read")[1]
    monkeypatch.delenv("KAIO_CHECKED", raising=False)
    ref = be.get_backend("reference")
    assert not undecided.compile(ref).options.checked
    monkeypatch.setenv("KAIO_CHECKED", "1")
    c = undecided.compile(ref)
    assert c.options.checked and c.kernel.params[-1].name == bounds_check.RECORD_PARAM
    assert not UNCHECKED["off_by_one_read"].compile(ref).options.checked  # checked=False wins
    with pytest.raises(IndexError, match="load from 'x' at index \\(10,\\)"):
        _on_reference(lambda: undecided[1, 16](*args))
    assert args[1][9] == 0  # the checked kernel ran to the end, the access skipped


def test_checked_launch_refuses_graph_capture():
    def capture():
        x = kaio.to_device(np.arange(10, dtype=np.float32))
        y = kaio.to_device(np.zeros(10, np.float32))
        with pytest.raises(kaio.LaunchError, match="checked mode"):
            with kaio.graph():
                CHECKED["off_by_one_read"][1, 16](x, y)
    _on_reference(capture)


def test_the_record_parameter_name_is_reserved():
    def clash(x: kaio.In[f32], _kaio_fault: kaio.Raw[kaio.i64]):
        _kaio_fault[0] = kaio.i64(x[0])
    with pytest.raises(kaio.CompileError, match="reserved for checked mode"):
        kaio.kernel(clash, checked=True).emit("ptx", "sm_90")
    assert "_kaio_fault" in kaio.kernel(clash, checked=False).emit("ptx", "sm_90")


def test_site_table_follows_program_order():
    t = get_target("sm_90")
    arts = t.run(CHECKED["shared_overrun"].specialize_ir(), t.options(KernelOptions(checked=True)),
                 until="lowered")
    s = bounds_check.sites(arts["ir"])
    assert [(x.opcode, x.buffer, x.param, x.static_shape) for x in s] == [
        ("load", "x", 0, None), ("store", "sh", None, (32,)), ("load", "sh", None, (32,)),
        ("store", "y", 1, None)]
    lowered = arts["lowered"]
    recorded = sorted(op.operands[-1].owner.attrs["value"] for op in lowered.walk()
                      if op.opcode == "atomic" and op.operands[0] is lowered.args[-1])
    assert recorded == [1, 2, 3, 4]   # site + 1, one compare-and-swap per site


# --- generated code: assembled, simulated, JIT-run, validated ---------------------------------
_NEEDS_PTXAS = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not installed")
_CODEGEN_CASES = sorted(CHECKED) + ["softmax", "softmax_resident"]


def _checked_ir(name):
    if name == "softmax":
        return norms.softmax_kernel("f32", "f32").specialize_ir()
    if name == "softmax_resident":
        return norms.softmax_resident_kernel("f32", "f32", fast=True).specialize_ir({"PER": 8})
    return CHECKED[name].specialize_ir()


@_NEEDS_PTXAS
@pytest.mark.parametrize("target", ["sm_80", "sm_90", "nvptx64-sm_80", "nvptx64-sm_90"])
@pytest.mark.parametrize("name", _CODEGEN_CASES)
def test_checked_ptx_assembles(name, target):
    ptx = emit(_checked_ir(name), "ptx", target, KernelOptions(checked=True))
    arch = target.rsplit("-", 1)[-1]
    assert emit_cubin(ptx, arch)


def emit_cubin(ptx: str, arch: str) -> bytes:
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        p = subprocess.run(["ptxas", f"-arch={arch}", src, "-o", dst], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        with open(dst, "rb") as f:
            return f.read()


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
@pytest.mark.parametrize("name", _CODEGEN_CASES)
def test_checked_amd_code_object_validates(name, target):
    report = emit(_checked_ir(name), "report", target, KernelOptions(checked=True))
    assert report.splitlines()[0].split()[2] == "ok:", report


def _same_as_reference(run, name):
    """Run ``name``'s checked kernel through ``run(kernel_ir, args, grid, block)`` (a simulator
    or a JIT); the outputs and the fault record match the reference's checked launch."""
    (grid, block), args = _inputs(name)
    want, want_args = _on_reference(lambda: _error(CHECKED[name], name))
    rec = np.zeros(bounds_check.RECORD_LEN, np.int64)
    run(CHECKED[name].specialize_ir(), [*args, rec], (grid, 1, 1), (block, 1, 1))
    for a, b in zip(args, want_args):
        np.testing.assert_array_equal(a, b)
    ndim = len(want.index)
    assert tuple(rec[bounds_check.INDEX:bounds_check.INDEX + ndim]) == want.index
    assert rec[bounds_check.THREAD] == want.thread
    site = bounds_check.sites(bounds_check.with_record_param(CHECKED[name].specialize_ir()))[
        rec[bounds_check.SITE] - 1]
    assert site.loc.line == want.line


def _ptx_sim(k, args, grid, block):
    from ptx_sim import Machine
    arts = get_target("sm_90").run(k, get_target("sm_90").options(KernelOptions(checked=True)),
                                   until="ptx")
    Machine(arts["ptx"]).launch(args, kernel_abi(arts["ir"]), grid, block)


def _llvm_jit(k, args, grid, block):
    import llvm_host
    llvm_host.run_on_host(bounds_check.run(clone_kernel(k)), args, grid, block)


@pytest.mark.parametrize("name", ["off_by_one_read", "off_by_one_write", "negative_index",
                                  "row_overrun"])
def test_checked_ptx_runs_in_the_simulator(name):
    _same_as_reference(_ptx_sim, name)


@pytest.mark.parametrize("name", ["off_by_one_read", "off_by_one_write", "negative_index",
                                  "row_overrun", "atomic_overrun"])
def test_checked_llvm_ir_runs_on_the_host(name):
    _same_as_reference(_llvm_jit, name)


@pytest.mark.parametrize("name", ["off_by_one_read", "row_overrun"])
def test_checked_launch_through_the_fake_hip_runtime(monkeypatch, name):
    """The whole HIP path with no AMD GPU: a validated gfx90a code object, the fault record
    packed as one more kernel argument, copied in and back (tests/test_hip_runtime.py's fake
    device runs the same guarded IR on this CPU), then the reference's error, word for word."""
    from test_hip_runtime import NO_LLD, FakeHip

    from kaio.backends import hip
    if NO_LLD:
        pytest.skip(NO_LLD)
    want, want_args = _on_reference(lambda: _error(CHECKED[name], name))
    fake = FakeHip()
    monkeypatch.setattr(hip, "_hip_module", fake)
    monkeypatch.setattr(be, "_instances", {})
    monkeypatch.setattr(be, "_current", "hip")
    fake.kernel = bounds_check.run(clone_kernel(CHECKED[name].specialize_ir()))
    got, args = _error(CHECKED[name], name)
    assert str(got) == str(want)
    for a, b in zip(args, want_args):
        np.testing.assert_array_equal(a, b)
    assert not fake.mem, "temporaries must be freed"


@pytest.mark.gpu
@pytest.mark.cuda
@pytest.mark.parametrize("codegen", ["ptx", "llvm"])
@pytest.mark.parametrize("name", sorted(CHECKED))
def test_checked_on_cuda_with_both_code_generators(monkeypatch, codegen, name):
    """On an NVIDIA GPU: kaio's PTX and the LLVM nvptx64 path each raise the reference's error
    word for word and leave the same arrays (the access skipped, no CUDA fault)."""
    from kaio.backends.cuda import CudaBackend
    want, want_args = _on_reference(lambda: _error(CHECKED[name], name))
    monkeypatch.setitem(be._instances, "cuda", CudaBackend(codegen=codegen))
    monkeypatch.setattr(be, "_current", "cuda")
    got, args = _error(CHECKED[name], name)
    assert str(got) == str(want)
    for a, b in zip(args, want_args):
        np.testing.assert_array_equal(a, b)
