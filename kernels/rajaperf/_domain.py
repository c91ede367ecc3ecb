"""The suite's structured-mesh domain for the Apps kernels (src/apps/AppsData.hpp, ADomain).

``rzmax`` real zones per edge plus ghost layers: NPNL = 2 below and NPNR = 1 above, so each
edge has ``rzmax + 3 + 1`` nodes, stored flat (``i + j*jp + k*kp``). The suite builds it with
``rzmax = edge + 1`` and has ``edge`` real zones per edge (``imax - imin``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NPNL, NPNR = 2, 1


@dataclass(frozen=True)
class Domain:
    """Padded 2-D or 3-D domain with ``edge`` real zones per edge."""

    edge: int
    ndims: int

    @property
    def imin(self) -> int:
        return NPNL

    @property
    def imax(self) -> int:
        return self.edge + 1 + NPNR           # rzmax + NPNR, rzmax = edge + 1

    @property
    def jp(self) -> int:
        return self.imax - self.imin + 1 + NPNL + NPNR

    @property
    def kp(self) -> int:
        return self.jp * self.jp if self.ndims == 3 else 0

    @property
    def nnalls(self) -> int:
        return self.jp ** self.ndims

    @property
    def fpz(self) -> int:
        """First zone of the linear zone range (ghost zones included)."""
        frn = NPNL * (self.kp + self.jp) + NPNL
        return frn - self.jp - self.kp - 1

    @property
    def lpz(self) -> int:
        """Last zone of the linear zone range (inclusive)."""
        return self.nnalls - 1 - NPNR * (self.kp + self.jp) - NPNR

    def positions(self, *spacing: float) -> list:
        """Node coordinates: node (i, j[, k]) sits at (i dx, j dy[, k dz]) on every node,
        ghosts included (the suite's setMeshPositions_2d/3d)."""
        shape = (self.jp,) * self.ndims      # (k,) j, i: i varies fastest
        out = []
        for axis, d in enumerate(spacing[:self.ndims]):
            line = np.arange(self.jp) * d        # the same products as (flat index -> i, j, k) * d
            arr = np.empty(shape)
            arr[...] = line.reshape([-1 if dim == self.ndims - 1 - axis else 1
                                     for dim in range(self.ndims)])
            out.append(arr.reshape(-1))
        return out

    def real_zones(self) -> np.ndarray:
        """Lower-left node of every real zone, j (then k) outer, i inner (setRealZones_2d/3d)."""
        r = np.arange(self.imin, self.imax)
        if self.ndims == 2:
            j, i = np.meshgrid(r, r, indexing="ij")
            return (i + j * self.jp).ravel()
        k, j, i = np.meshgrid(r, r, r, indexing="ij")
        return (i + j * self.jp + k * self.kp).ravel()
