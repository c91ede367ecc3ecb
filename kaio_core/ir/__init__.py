"""kaio's intermediate representation: typed SSA with structured control flow."""
from .builder import Builder
from .core import Block, Kernel, Loc, Op, Param, Value
from .ops import SPECS, spec
from .parser import ParseError, parse_kernel
from .printer import print_kernel
from .types import BufType

__all__ = ["Block", "Builder", "BufType", "Kernel", "Loc", "Op", "Param", "ParseError", "SPECS",
           "Value", "parse_kernel", "print_kernel", "spec"]
