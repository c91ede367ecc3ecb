"""RAJAPerf ports: the RAJA Performance Suite's kernels written in kaio's kernel language.

Each port follows the suite's definition, default size, repetition count, input initialisation
and checksum (see :mod:`.checksum`), and is registered as a ``KernelCase`` in groups
``rajaperf/stream``, ``rajaperf/basic``, ``rajaperf/lcals``, ``rajaperf/polybench`` and
``rajaperf/apps``. Host functions (``stream.dot``, ``basic.pi_reduce``, ``_tiled.matmul_tiled``,
...) can be called directly with numpy arrays.
"""
from . import (  # noqa: F401  (register the cases)
           apps,
           basic,
           checksum,  # the module: checksum.checksum(data) is the suite's checksum
           lcals,
           polybench,
           stream,
)
from .checksum import DataInit, checksum_of, relative_diff

__all__ = ["stream", "basic", "lcals", "polybench", "apps", "checksum", "checksum_of",
           "relative_diff", "DataInit"]
