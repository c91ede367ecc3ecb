"""kaio's intermediate representation: typed SSA with structured control flow."""
from .core import Block, Kernel, Loc, Op, Param, Value
from .ops import SPECS, spec
from .parser import ParseError, parse_kernel
from .printer import print_kernel
from .types import BufType

__all__ = ["Block", "Builder", "BufType", "Kernel", "Loc", "Op", "Param", "ParseError", "SPECS",
           "Value", "parse_kernel", "print_kernel", "spec"]


def __getattr__(name: str):
    """``Builder`` on first use: building IR is the frontend's (and the passes') work; a launch
    served from the warm cache only parses IR, so ``import kaio`` leaves the builder out."""
    if name == "Builder":
        from .builder import Builder  # lazy: import time, ~1-3 ms; only IR construction needs it
        return Builder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
