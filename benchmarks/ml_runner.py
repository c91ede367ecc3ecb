"""The GPU half of ``kaio bench --ml`` (benchmarks/bench_ml.py): per case, the data (torch, on
the device), an f32 reference, the three implementations, their checks and timings, and the
reference copy. Needs torch, Triton and an NVIDIA GPU; imported only when those are there.

Every failure is caught where it happens and recorded in the case's result (in its cell when
one implementation fails), so one broken case never stops the table.
"""
from __future__ import annotations

import functools
import gc
import platform

import ml_kaio
import numpy as np
import torch
import torch.nn.functional as F
import triton
import triton_ml
from bench_gpu import timed
from bench_ml import ROW_OPS, MlCase, new_result

import kaio
from kaio.kernels._launch import np_dtype

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
RMS_EPS, LN_EPS = 1e-6, 1e-5  # what the library's bench closures use (kernels/ml/cases.py)

#: (atol, rtol) of the checks against the f32 reference, by output dtype: a few roundings of
#: the output (f16: 2^-11, bf16: 2^-8 relative) over f32 math whose order and exp/erf differ
TOLERANCE = {"f32": (1e-5, 1e-4), "f16": (2e-3, 1e-2), "bf16": (2e-2, 2e-2)}
#: softmax outputs are ~1/cols: a small atol (f16 subnormals are spaced 6e-8), the rtol above
SOFTMAX_ATOL = {"f32": 1e-8, "f16": 1e-7, "bf16": 1e-8}


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


class Env:
    """What every case shares: the device, the timer, the copy rates measured so far."""

    def __init__(self, reps: int = 20, rounds: int = 5, autotune: str = "fresh"):
        self.kaio_error = None
        try:
            kaio.set_backend("cuda")
        except Exception as e:  # Triton and torch can still be measured: kaio's cells say why
            self.kaio_error = _why(e)
        self.dev = torch.device("cuda")
        self.timer = functools.partial(timed, reps=reps, rounds=rounds, warmup=3)
        self.reps, self.rounds = reps, rounds
        self.autotune = autotune  # 'fresh': the row ops tune each shape again; 'cached'
        self.copy_rates: dict[int, dict] = {}

    def header(self) -> list[str]:
        try:
            from kaio.config import settings
            codegen = settings().cuda_codegen
            device = torch.cuda.get_device_name()
        except Exception as e:
            codegen = device = f"? ({_why(e)})"
        return [f"device: {device}  torch {torch.__version__}  triton {triton.__version__}  "
                f"kaio {getattr(kaio, '__version__', '?')} (cuda codegen: {codegen})  "
                f"python {platform.python_version()}",
                f"timing: CUDA events around {self.reps} back-to-back calls, median of "
                f"{self.rounds} rounds, after the row ops' autotuning ({self.autotune}); GB/s = "
                f"bytes a kernel must move / time, (%) = of the same-size torch device copy's "
                f"GB/s; regs/local B per thread from cuFuncGetAttribute"]


# --- data and reference ------------------------------------------------------------------------
def make_data(case: MlCase, dev, seed: int = 0) -> dict:
    """The case's inputs as torch tensors on the device, under the registry's input names, drawn
    as kernels/ml/cases.py draws them (rows: normal(0, 2), weights in [0.5, 1.5], biases in
    [-0.5, 0.5]; elementwise: uniform(-6, 6); int8 uniform over its range, scales in
    [0.001, 0.05])."""
    g = torch.Generator(device=dev)
    g.manual_seed(seed)
    dt = TORCH_DTYPES[case.dtype]

    def uniform(lo, hi, shape):
        return (torch.rand(shape, generator=g, device=dev) * (hi - lo) + lo).to(dt)

    if case.op in ROW_OPS:
        rows, cols = case.shape
        data = {"x": (torch.randn((rows, cols), generator=g, device=dev) * 2.0).to(dt)}
        if case.op != "softmax":
            data["w"] = uniform(0.5, 1.5, (cols,))
        if case.op == "layernorm":
            data["b"] = uniform(-0.5, 0.5, (cols,))
        return data
    if case.op == "dequantize_int8":
        rows, cols = case.shape
        return {"q": torch.randint(-128, 128, (rows, cols), generator=g, device=dev, dtype=torch.int8),
                "scale": torch.rand((rows,), generator=g, device=dev) * 0.049 + 0.001}
    data = {"x": uniform(-6.0, 6.0, case.shape)}
    if case.op == "silu_gate":
        data["gate"] = uniform(-6.0, 6.0, case.shape)
    return data


def reference(case: MlCase, d: dict):
    """The op in f32 (torch) on the same, already rounded, inputs."""
    f = {k: v.float() for k, v in d.items()}
    op = case.op
    if op == "softmax":
        return torch.softmax(f["x"], dim=1)
    if op == "rmsnorm":
        x = f["x"]
        return x * torch.rsqrt(x.square().mean(dim=1, keepdim=True) + RMS_EPS) * f["w"]
    if op == "layernorm":
        return F.layer_norm(f["x"], (case.shape[1],), f["w"], f["b"], LN_EPS)
    if op == "silu_gate":
        return F.silu(f["x"]) * f["gate"]
    if op == "gelu_tanh":
        return F.gelu(f["x"], approximate="tanh")
    if op == "gelu_exact":
        return F.gelu(f["x"])
    if op == "dequantize_int8":
        return f["q"] * f["scale"][:, None]
    raise ValueError(f"unknown op {op!r}")


def tolerance(case: MlCase) -> tuple[float, float]:
    atol, rtol = TOLERANCE[case.dtype]
    if case.op == "softmax":
        atol = SOFTMAX_ATOL[case.dtype]
    return atol, rtol


def check(out, ref, tol) -> tuple[bool, float]:
    """(every |out - ref| <= atol + rtol |ref|, the largest |out - ref|); NaN fails."""
    atol, rtol = tol
    if tuple(out.shape) != tuple(ref.shape):
        raise ValueError(f"output shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    err = (out.float() - ref).abs()
    ok = bool((err <= atol + rtol * ref.abs()).all())  # a NaN compares False: fails
    return ok, float(err.max())


def host_copy(t):
    """A numpy copy of a device tensor; bf16 through its bit pattern (numpy has no bf16 of its
    own: kaio uses ml_dtypes')."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).cpu().numpy().view(np_dtype("bf16"))
    return t.cpu().numpy()


class _Cai:
    """A ``__cuda_array_interface__`` for raw device memory (typed as a same-size integer,
    because the interface cannot name bf16)."""

    def __init__(self, ptr: int, shape: tuple, itemsize: int):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": f"<i{itemsize}",
                                         "data": (int(ptr), False), "strides": None, "version": 3}


def torch_view(arr, dtype):
    """A torch tensor over a kaio device array's memory, no copy (valid while ``arr`` lives)."""
    itemsize = np.dtype(arr.dtype).itemsize
    return torch.as_tensor(_Cai(arr.ptr, arr.shape, itemsize), device="cuda").view(dtype)


# --- implementations: (launch, output of a launch's result), plus what to report --------------
def build_kaio(case: MlCase, d: dict, result: dict, env: Env):
    if env.kaio_error:
        raise RuntimeError(f"kaio's CUDA backend is unavailable: {env.kaio_error}")
    inputs = {k: host_copy(v) for k, v in d.items()}
    launch, result["kaio_source"] = ml_kaio.kaio_closure(case.op, case.dtype, inputs)
    del inputs  # the closure holds device copies
    # the autotuner decides before anything is timed
    result["kaio_config"] = ml_kaio.tune(launch, fresh=getattr(env, "autotune", "fresh") == "fresh")
    with ml_kaio.LaunchSpy() as spy:  # a launch: which kernels, with what, into what
        launch()
    torch.cuda.synchronize()
    result["kaio_kernels"] = spy.kernels()
    out = spy.output()
    spy.launches.clear()
    if out is None:
        return launch, None
    dtype = TORCH_DTYPES[case.dtype]
    return launch, lambda _: torch_view(out, dtype).reshape(case.shape)


def build_triton(case: MlCase, d: dict, result: dict, env: Env):
    out = torch.empty(case.shape, device=env.dev, dtype=TORCH_DTYPES[case.dtype])
    x = d.get("x")
    launch = {
        "softmax": lambda: triton_ml.softmax(x, out),
        "rmsnorm": lambda: triton_ml.rmsnorm(x, d.get("w"), out, RMS_EPS),
        "layernorm": lambda: triton_ml.layernorm(x, d.get("w"), d.get("b"), out, LN_EPS),
        "silu_gate": lambda: triton_ml.silu_gate(x, d.get("gate"), out),
        "gelu_tanh": lambda: triton_ml.gelu_tanh(x, out),
        "gelu_exact": lambda: triton_ml.gelu_exact(x, out),
        "dequantize_int8": lambda: triton_ml.dequantize_int8(d.get("q"), d.get("scale"), out),
    }[case.op]
    result["triton_kernel"] = triton_attributes(launch())
    return launch, lambda _: out


def triton_attributes(compiled) -> dict:
    """Registers and local bytes per thread of a Triton launch's compiled kernel (the driver's
    figures, as for kaio's); Triton's own n_regs / n_spills where the driver call fails."""
    try:
        init = getattr(compiled, "_init_handles", None)
        if init is not None:
            init()
        attrs = ml_kaio.function_attributes(getattr(compiled, "function", None))
        if attrs.get("regs") is None:
            attrs["regs"] = getattr(compiled, "n_regs", None)
            spills = getattr(compiled, "n_spills", None)  # Triton's: local bytes / 4
            attrs["local_bytes"] = None if spills is None else 4 * int(spills)
        return attrs
    except Exception as e:
        return {"error": _why(e)}


def build_torch(case: MlCase, d: dict, result: dict, env: Env):
    x, cols = d.get("x"), case.shape[-1]
    op = case.op
    if op == "softmax":
        launch = lambda: torch.softmax(x, dim=1)  # noqa: E731
    elif op == "rmsnorm":
        w = d["w"]
        if hasattr(F, "rms_norm"):
            launch = lambda: F.rms_norm(x, (cols,), w, RMS_EPS)  # noqa: E731
        else:
            launch = lambda: x * torch.rsqrt(x.square().mean(1, keepdim=True) + RMS_EPS) * w  # noqa: E731
    elif op == "layernorm":
        launch = lambda: F.layer_norm(x, (cols,), d["w"], d["b"], LN_EPS)  # noqa: E731
    elif op == "silu_gate":
        launch = lambda: F.silu(x) * d["gate"]  # noqa: E731
    elif op == "gelu_tanh":
        launch = lambda: F.gelu(x, approximate="tanh")  # noqa: E731
    elif op == "gelu_exact":
        launch = lambda: F.gelu(x)  # noqa: E731
    elif op == "dequantize_int8":
        launch = _torch_dequantize(d["q"], d["scale"], TORCH_DTYPES[case.dtype])
    else:
        raise ValueError(f"unknown op {op!r}")
    return launch, lambda res: res


def _torch_dequantize(q, scale, dtype):
    """q * scale in one kernel: f32 math, stored in ``dtype`` through ``out=``; eager's
    multiply-then-cast (two kernels) if this torch refuses the narrower out."""
    s = scale[:, None]
    if dtype == torch.float32:
        return lambda: torch.mul(q, s)
    y = torch.empty(q.shape, device=q.device, dtype=dtype)
    try:
        torch.mul(q, s, out=y)
        torch.cuda.synchronize()
        return lambda: torch.mul(q, s, out=y)
    except Exception:
        return lambda: torch.mul(q, s).to(dtype)


BUILDERS = {"kaio": build_kaio, "triton": build_triton, "torch": build_torch}


# --- one case ----------------------------------------------------------------------------------
def measure(case: MlCase, env: Env, launch, output, ref, tol) -> dict:
    """Check one implementation against the reference, then time it."""
    res = launch()
    torch.cuda.synchronize()
    cell, got = {}, None
    try:  # reading the output back is the benchmark's business: its failure only skips the check
        got = output(res) if output is not None else None
    except Exception as e:
        cell["unchecked"] = f"output not readable: {_why(e)}"
    if got is None:
        cell.setdefault("unchecked", "no output buffer found among the launch's arguments")
    else:
        ok, err = check(got, ref, tol)
        cell["max_err"] = err
        if not ok:
            return {"error": f"check failed: max |err| {err:.3g} over atol {tol[0]:g} + "
                             f"rtol {tol[1]:g} |ref|", "max_err": err}
    del res, got
    ms = env.timer(launch)
    cell.update(ms=ms, gbps=case.traffic_bytes / ms / 1e6)
    return cell


def copy_rate(nbytes: int, env: Env) -> dict:
    """A torch device-to-device copy of ``nbytes`` (it moves 2 * nbytes), cached per size."""
    if nbytes not in env.copy_rates:
        try:
            src = torch.ones(nbytes, dtype=torch.uint8, device=env.dev)
            dst = torch.empty_like(src)
            ms = env.timer(lambda: dst.copy_(src))
            env.copy_rates[nbytes] = {"ms": ms, "gbps": 2 * nbytes / ms / 1e6, "bytes": 2 * nbytes}
            del src, dst
        except Exception as e:
            env.copy_rates[nbytes] = {"error": _why(e)}
    return env.copy_rates[nbytes]


def run_case(case: MlCase, env: Env) -> dict:
    """Every implementation of one case, then the same-size copy; never raises (failures go
    into the result)."""
    result = new_result(case)
    try:
        _run_impls(case, env, result)  # the case's tensors live in its frame: freed on return
        torch.cuda.empty_cache()
        result["copy"] = copy_rate(case.copy_bytes, env)
    except Exception as e:
        result["error"] = _why(e)
    finally:
        gc.collect()
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except Exception as e:  # a faulted context: later cases will say so in their cells
            result["error"] = result["error"] or _why(e)
    return result


def _run_impls(case: MlCase, env: Env, result: dict) -> None:
    data = make_data(case, env.dev)
    ref = reference(case, data)
    tol = tolerance(case)
    result["tolerance"] = list(tol)
    for name, build in BUILDERS.items():
        launch = output = None
        try:
            launch, output = build(case, data, result, env)
            result["impls"][name] = measure(case, env, launch, output, ref, tol)
        except Exception as e:
            result["impls"][name] = {"error": _why(e)}
        finally:
            del launch, output  # frees kaio's device copies before the next implementation
            gc.collect()
