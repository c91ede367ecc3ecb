"""The reference backend: a numpy SIMT interpreter of kaio IR with a race sanitizer."""
from .backend import ReferenceBackend
from .errors import (
                     DivergentBarrierError,
                     KernelRuntimeError,
                     OutOfBoundsError,
                     OwnershipError,
                     UninitializedReadError,
)

__all__ = ["ReferenceBackend", "KernelRuntimeError", "OutOfBoundsError", "DivergentBarrierError",
           "UninitializedReadError", "OwnershipError"]
