"""Python frontend: reads a ``@kaio.kernel`` function's AST and lowers it to kaio IR.

Entry point: :func:`lower_kernel`. The supported language, its typing rules and the errors
users get for unsupported constructs are documented in docs/language.md.
"""
from __future__ import annotations


def lower_kernel(fn, params, consts: dict, fast_math: bool = False):
    """Lower ``fn`` (a kernel's Python function) to a :class:`kaio.ir.Kernel`.

    ``params`` are the kernel's :class:`kaio.signature.ParamInfo` list; ``consts`` gives the
    values of its Const parameters (substituted as weakly typed literals); ``fast_math`` sets
    ``fast`` on every ``math`` op. Raises :class:`kaio.CompileError` on any error in the source.
    """
    from .lowering import Lowerer
    return Lowerer(fn, params, consts, fast_math).lower()


__all__ = ["lower_kernel"]
