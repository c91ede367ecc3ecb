"""RAJAPerf ports: the RAJA Performance Suite's kernels written in kaio's kernel language.

Each port follows the suite's definition, default size, repetition count, input initialisation
and checksum (see :mod:`.checksum`), and is registered as a ``KernelCase`` in groups
``rajaperf/stream``, ``rajaperf/basic``, ``rajaperf/lcals``, ``rajaperf/polybench`` and
``rajaperf/apps``. Host functions (``stream.dot``, ``basic.pi_reduce``, ``_tiled.matmul_tiled``,
...) can be called directly with numpy arrays.
"""
from . import apps, basic, lcals, polybench, stream  # noqa: F401  (register the cases)
from .checksum import DataInit, checksum, checksum_of, relative_diff

__all__ = ["stream", "basic", "lcals", "polybench", "apps", "checksum", "checksum_of",
           "relative_diff", "DataInit"]
