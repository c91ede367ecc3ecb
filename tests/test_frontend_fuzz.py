"""Frontend fuzz (issue 16, "no internal exceptions, ever"): kernels generated from a small
grammar -- expressions over parameters, locals and literals of several dtypes, casts, math
calls, ``if`` / ``for`` / ``while``, shared arrays -- either run cleanly on the reference backend
or fail with a kaio error naming a line of the kernel: a CompileError, or a KernelRuntimeError
(the watchdog, a run-time range step of 0). Any other exception is a compiler crash.

Deterministic (derandomized) and bounded (``max_examples``) so that it stays within ~30 s in CI.
"""
from __future__ import annotations

import linecache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kaio
from kaio.errors import KernelRuntimeError

#: (name, dtype) of the scalar parameters every generated kernel takes, and their values
SCALARS = [("a", "f32", 1.5), ("h", "f16", -0.75), ("d", "f64", 3.0), ("n", "i32", 3),
           ("u", "u32", 7), ("w", "i64", -5), ("s", "i32", 0), ("flag", "bool_", True)]
TYPES = ["f32", "f16", "f64", "i32", "u32", "i64", "u8", "bf16", "bool_"]
INTS = ["i32", "u32", "i64", "u8"]
FLOAT_LITS = ["0.0", "1.0", "-2.5", "1e30", "kaio.math.nan", "kaio.math.inf", "-kaio.math.inf", "1e300"]
INT_LITS = ["0", "1", "-1", "7", "2 ** 31", "2 ** 40", "3 ** 100000", "255", "256"]
BIN = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>"]
CMP = ["<", "<=", "==", "!=", ">", ">="]
MATH1 = ["sqrt", "exp", "log", "sin", "floor", "abs", "isnan", "tanh"]
MATH2 = ["min", "max", "pow", "atan2", "fmod"]


def leaf(names):
    return st.one_of(st.sampled_from(names),
                     st.sampled_from(FLOAT_LITS + INT_LITS + ["True", "False", "None"]),
                     st.sampled_from(["x[i]", "i", "kaio.thread_idx.x", "kaio.block_dim.x"]))


def expr(names):
    """Expressions of any type, often ill-typed on purpose (the errors are under test too)."""
    def grow(sub):
        return st.one_of(
            st.tuples(sub, st.sampled_from(BIN), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(sub, st.sampled_from(CMP), sub).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(TYPES), sub).map(lambda t: f"kaio.{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(MATH1), sub).map(lambda t: f"kaio.math.{t[0]}({t[1]})"),
            st.tuples(st.sampled_from(MATH2), sub, sub).map(lambda t: f"kaio.math.{t[0]}({t[1]}, {t[2]})"),
            st.tuples(st.sampled_from(["-", "~", "not "]), sub).map(lambda t: f"({t[0]}{t[1]})"),
            st.tuples(sub, sub, sub).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        )
    return st.recursive(leaf(names), grow, max_leaves=6)


# --- well-typed expressions (so that most kernels get past the type checks and run) ----------
FLOATS = ["f32", "f16", "f64", "bf16"]
TYPED_LITS = {"float": ["0.0", "1.0", "-2.5", "0.5", "kaio.math.nan", "kaio.math.inf", "3"],
              "int": ["0", "1", "-1", "7", "100", "255"], "bool": ["True", "False"]}
TYPED_OPS = {"float": ["+", "-", "*", "/", "//", "%"], "int": ["+", "-", "*", "//", "%", "&", "|",
                                                              "^", "<<", ">>"],
             "bool": ["&", "|", "^", " and ", " or "]}


def _kind(t):
    return "bool" if t == "bool_" else "float" if t in FLOATS else "int"


def _binary(x) -> str:
    return f"({x[0]} {x[1].strip()} {x[2]})"


def typed(t, env, depth=3):
    """An expression of dtype ``t``; ``env`` maps names to dtypes."""
    k = _kind(t)
    own = [n for n, nt in env.items() if nt == t]
    base = st.sampled_from(own + TYPED_LITS[k]) if own else st.sampled_from(TYPED_LITS[k])
    if depth == 0:
        return base
    sub = typed(t, env, depth - 1)
    other = st.sampled_from(TYPES).flatmap(lambda u: typed(u, env, depth - 1))
    choices = [base, st.tuples(sub, st.sampled_from(TYPED_OPS[k]), sub).map(_binary),
               other.map(lambda e: f"kaio.{t}({e})"),
               st.tuples(st.sampled_from(TYPES).flatmap(lambda u: st.tuples(typed(u, env, depth - 1),
                                                                            typed(u, env, depth - 1))),
                         sub, sub).map(lambda x: f"({x[1]} if {x[0][0]} < {x[0][1]} else {x[2]})")]
    if k == "float":
        choices += [st.tuples(st.sampled_from(["sqrt", "exp", "log", "sin", "floor", "tanh", "abs"]),
                              sub).map(lambda x: f"kaio.math.{x[0]}({x[1]})"),
                    st.tuples(st.sampled_from(["min", "max", "pow", "atan2", "fmod"]), sub, sub)
                    .map(lambda x: f"kaio.math.{x[0]}({x[1]}, {x[2]})"),
                    st.tuples(sub, st.just("**"), st.sampled_from(["2", "3", "-1", "0"])).map(_binary)]
    if k == "int":
        choices.append(st.tuples(st.sampled_from(["min", "max"]), sub, sub)
                       .map(lambda x: f"kaio.math.{x[0]}({x[1]}, {x[2]})"))
    if k == "bool":
        choices.append(st.sampled_from(TYPES).flatmap(
            lambda u: st.tuples(typed(u, env, depth - 1), st.sampled_from(CMP), typed(u, env, depth - 1))
            .map(lambda x: f"({x[0]} {x[1]} {x[2]})")))
    return st.one_of(*choices)


@st.composite
def typed_statements(draw, env, depth=0):
    """Well-typed lines of a block; ``env`` (name -> dtype) grows with the locals they define."""
    lines, env = [], dict(env)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "assign", "if", "for", "while", "shared"]
                                    if depth < 2 else ["assign"]))
        if kind == "assign":
            mine = [n for n in env if n.startswith("v")]
            v = draw(st.sampled_from(mine + [f"v{len(env)}"]))
            t = env.get(v) or draw(st.sampled_from(TYPES))
            lines.append(f"{v} = {draw(typed(t, env, 2))}")
            env[v] = t
        elif kind == "if":
            body, _ = draw(typed_statements(env, depth + 1))
            lines += [f"if {draw(typed('bool_', env, 2))}:", *("    " + ln for ln in body)]
        elif kind == "for":
            body, _ = draw(typed_statements({**env, "j": "i32"}, depth + 1))
            stop = draw(st.sampled_from(["3", "n", "kaio.math.min(n, 5)", "0", "-2"]))
            step = draw(st.sampled_from(["", ", 1", ", 2", ", -1", ", s"]))
            lines += [f"for j in range(0, {stop}{step}):", *("    " + ln for ln in body)]
        elif kind == "while":
            body, _ = draw(typed_statements(env, depth + 1))
            lines += ["t = 0", "while t < 3:", *("    " + ln for ln in body), "    t += 1"]
        else:
            lines += ["sh = kaio.shared_array(kaio.f32, 32)",
                      f"sh[kaio.thread_idx.x] = {draw(typed('f32', env, 2))}", "kaio.sync()",
                      "v_sh = sh[31 - kaio.thread_idx.x]"]
            env["v_sh"] = "f32"
    return lines, env


@st.composite
def statements(draw, names, depth=0):
    """Lines of a block (indented 4 spaces per level by the caller) and the names it defines."""
    lines, names = [], list(names)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["assign", "assign", "if", "for", "while", "shared", "aug"]
                                    if depth < 2 else ["assign", "aug"]))
        if kind == "assign":
            v = draw(st.sampled_from([f"v{len(names)}", *[m for m in names if m.startswith("v")]]
                                     if names else ["v0"]))
            lines.append(f"{v} = {draw(expr(names))}")
            names.append(v)
        elif kind == "aug" and names:
            lines.append(f"{draw(st.sampled_from(names))} {draw(st.sampled_from(BIN))}= "
                         f"{draw(expr(names))}")
        elif kind == "if":
            body, _ = draw(statements(names, depth + 1))
            other, _ = draw(statements(names, depth + 1))
            lines += [f"if {draw(expr(names))}:", *("    " + ln for ln in body), "else:",
                      *("    " + ln for ln in other)]
        elif kind == "for":
            rng = draw(st.sampled_from(["range(3)", "range(n)", "range(0, n, s)", "range(n, 0, -1)",
                                        "range(u)", "range(a)", "range(0, 4, 0)", "kaio.static_range(3)",
                                        f"range({draw(expr(names))})"]))
            body, _ = draw(statements(names + ["j"], depth + 1))
            lines += [f"for j in {rng}:", *("    " + ln for ln in body)]
        elif kind == "while":
            body, _ = draw(statements(names, depth + 1))
            cond = draw(st.sampled_from(["t < 3", "t < n", "True", "flag"]))
            lines += ["t = 0", f"while {cond}:", *("    " + ln for ln in body), "    t += 1"]
        elif kind == "shared":
            size = draw(st.sampled_from(["32", "(4, 8)", "10 ** 12", "0", "n", "12289"]))
            dtype = draw(st.sampled_from(["f32", "i32", "f16"]))
            lines += [f"sh = kaio.shared_array(kaio.{dtype}, {size})",
                      f"sh[kaio.thread_idx.x] = {draw(expr(names))}", "kaio.sync()",
                      "v_sh = sh[31 - kaio.thread_idx.x]"]
            names.append("v_sh")
    return lines, names


@st.composite
def kernels(draw):
    """A kernel body: well-typed (most of them run) or free-form (most of them are refused)."""
    scalars = [n for n, _, _ in SCALARS]
    if draw(st.booleans()):
        env = {"i": "i32", **{n: t for n, t, _ in SCALARS if n != "s"}}
        body, names = draw(typed_statements(env))
    else:
        body, names = draw(statements(["i", *scalars]))
    out = draw(st.sampled_from([m for m in names if m not in scalars] or ["a"]))
    lines = ["i = kaio.global_id()", *body, f"y[i] = kaio.f32({out})"]
    return lines


_count = [0]


def _compile(lines):
    _count[0] += 1
    params = ", ".join(["y: kaio.Raw[kaio.f32]", "x: kaio.In[kaio.f32]",
                        *[f"{n}: kaio.{t}" for n, t, _ in SCALARS]])
    src = "\n".join(["@kaio.kernel", f"def fuzzed({params}):", *("    " + ln for ln in lines)]) + "\n"
    name = f"<frontend fuzz {_count[0]}>"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"kaio": kaio}
    exec(compile(src, name, "exec"), ns)
    return ns["fuzzed"], src, len(src.splitlines())


@pytest.fixture(autouse=True)
def _fast_watchdog(monkeypatch, reference):
    monkeypatch.setenv("KAIO_REF_MAX_ITERATIONS", "200")


@settings(max_examples=150, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(kernels())
def test_generated_kernels_run_or_fail_at_a_kernel_line(lines):
    try:
        k, src, nlines = _compile(lines)
    except kaio.CompileError as e:  # decoration: a bad signature
        assert e.line is not None and 1 <= e.line, str(e)
        return
    y = np.zeros(32, np.float32)
    x = np.linspace(-2, 2, 32, dtype=np.float32)
    try:
        k[1, 32](y, x, *[v for _, _, v in SCALARS])
    except kaio.CompileError as e:
        assert e.line is not None and 1 <= e.line <= nlines, f"{e}\n--- kernel ---\n{src}"
    except KernelRuntimeError as e:
        assert e.line is not None and 1 <= e.line <= nlines, f"{e}\n--- kernel ---\n{src}"
    except Exception as e:  # a crash inside kaio: show the kernel that caused it
        raise AssertionError(f"{type(e).__name__}: {e}\n--- kernel ---\n{src}") from e
