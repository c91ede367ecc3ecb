"""Deriving a kernel's comparison rule from its IR.

A kernel is held to ``bitwise`` unless its IR, as lowered for a target, contains something that
is not bit-reproducible across vendors:

- math with ``fast`` set (or a kernel compiled with ``fast_math``): hardware approximations;
- transcendental math still present after lowering: while kaio's portable IR math library is not
  expanding it, each backend evaluates it natively (f64 series rounded once), which agrees to
  about an ulp but not bit for bit;
- float atomic add/sub: the sum's order is the hardware's scheduling order.

For those the rule is a relative bound: the case's own ``native_math_rule`` where given, else the
bound the kernel states against numpy (its :class:`kaio.kernels.Tolerance`), with the reason.
"""

import kaio
from kaio import f32
from kaio.backends.targets import get_target, lower

from .rules import BITWISE, Rule, rel

#: math functions exact or correctly rounded on every backend (no approximation involved)
EXACT_MATH = {"sqrt", "floor", "ceil", "trunc", "rint", "isnan", "isinf", "isfinite",
              "copysign", "fmod", "abs", "min", "max", "fma"}


def features(ir_kernels) -> dict:
    """What in the kernels' target-lowered IR breaks bit reproducibility:
    {'fast': [...], 'native_math': [...], 'float_atomics': [...], 'matrix_units': [...]}
    (function / op / dtype names; matrix units: float fragment multiplies, whose sums the
    hardware orders its own way; integer ones are exact)."""
    found = {"fast": set(), "native_math": set(), "float_atomics": set(), "matrix_units": set()}
    for kernel, options in ir_kernels:
        copts = get_target("reference-w32").options(options)   # portable mode resolved
        fast_kernel = copts.fast_math
        for op in lower(kernel, copts).walk():
            if op.opcode == "math":
                fn = op.attrs.get("fn")
                if op.attrs.get("fast") or (fast_kernel and fn not in EXACT_MATH):
                    found["fast"].add(fn)
                elif fn not in EXACT_MATH:
                    found["native_math"].add(fn)
            elif op.opcode == "mma" and op.operands[0].type.dtype.is_float:
                found["matrix_units"].add(op.operands[0].type.dtype.name)
            elif op.opcode == "atomic" and op.attrs.get("kind", op.attrs.get("op")) in ("add", "sub"):
                t = op.operands[0].type.dtype
                if t.is_float:
                    found["float_atomics"].add(t.name)
        if fast_kernel and not found["fast"]:
            found["fast"].add("div")  # fast_math also approximates f32 division
    return {k: sorted(v) for k, v in found.items()}


def derive_rule(case, ir_kernels, found: dict | None = None) -> Rule:
    """The rule for ``case``: its stated one, else derived from the IR it launched (``found``:
    :func:`features` of it, when already computed)."""
    if case.rule is not None:
        return case.rule
    f = found if found is not None else features(ir_kernels)
    reasons = []
    if f["fast"]:
        reasons.append(f"fast-math hardware approximations ({', '.join(f['fast'])})")
    if f["native_math"]:
        reasons.append(f"math evaluated natively per backend, not by the portable IR library "
                       f"({', '.join(f['native_math'])}): correctly rounded except rare "
                       f"double-rounding ties")
    if f["float_atomics"]:
        reasons.append(f"float atomic add in hardware scheduling order ({', '.join(f['float_atomics'])})")
    if f.get("matrix_units"):
        reasons.append(f"matrix-unit sums in the hardware's order ({', '.join(f['matrix_units'])} "
                       f"fragments; docs/language.md states the bound)")
    if not reasons:
        return BITWISE
    why = "; ".join(reasons)
    if (case.native_math_rule is not None and not f["fast"] and not f["float_atomics"]
            and not f.get("matrix_units")):
        r = case.native_math_rule
        return Rule(r.kind, r.bound, r.atol, f"{why}; {r.why}" if r.why else why)
    tol = case.vs_numpy
    rtol, atol = getattr(tol, "rtol", 0.0), getattr(tol, "atol", 0.0)
    if not rtol and not atol:
        rtol = 1e-6
    return rel(rtol, f"{why}; held to the kernel's stated numpy bound", atol=atol)


def order_reason(case, found: dict) -> str:
    """Why ``case``'s result depends on an order the hardware chooses ('' when it does not):
    its stated reason, or float atomic adds found in its IR."""
    if case.order_dependent:
        return case.order_dependent
    if found.get("float_atomics"):
        return f"float atomics order ({', '.join(found['float_atomics'])} atomic add)"
    if found.get("matrix_units"):
        return f"matrix-unit accumulation order ({', '.join(found['matrix_units'])} fragments)"
    return ""


def portable_math_active() -> bool:
    """True when math like exp is expanded to basic IR ops by the target pipeline (the portable
    IR math library is in use), so non-fast math is bit-identical across targets."""

    @kaio.kernel
    def probe_exp(x: kaio.In[f32], y: kaio.Out[f32]):
        for i in y.owned():
            y[i] = kaio.math.exp(x[i])

    k = lower(probe_exp.specialize_ir({}), get_target("reference-w32").options())
    return not any(op.opcode == "math" and op.attrs.get("fn") == "exp" for op in k.walk())
