"""Run under mpiexec by tests/test_mpi.py: kaio.mpi's split, exchange and gather on numpy
arrays (along axis 1) and on device arrays (axis 0, host-staged or direct); exits non-zero,
saying what differs, on any mismatch, and prints 'mpi worker ok' on rank 0."""
from __future__ import annotations

import sys

import numpy as np

import kaio
from kaio import mpi


def check(what: str, got, want) -> None:
    if not np.array_equal(got, want):
        print(f"rank {mpi.world().Get_rank()}: {what} differs:\n{got}\nwant\n{want}", flush=True)
        mpi.world().Abort(1)


def main() -> int:
    g = np.arange(7 * 10, dtype=np.int64).reshape(7, 10)

    dec = mpi.Decomposition(g.shape, halo=2, axis=1)          # numpy, strided slabs
    local = dec.split(g)
    want = local.copy()
    local[:, :2] = local[:, -2:] = -1                          # forget the halos
    dec.exchange(local)
    if dec.rank == 0:                                          # beyond the global edges: untouched
        want[:, :2] = -1
    if dec.rank == dec.size - 1:
        want[:, -2:] = -1
    check("axis-1 halos", local, want)
    whole = dec.gather(dec.owned(local))
    if dec.rank == 0:
        check("axis-1 gather", whole, g)

    rows = mpi.Decomposition((11, 3), halo=1)                  # device arrays, rows
    host = rows.split(g[:, :3].repeat(2, axis=0)[:11].astype(np.float32))
    d = kaio.to_device(host)
    blank = host.copy()
    blank[0], blank[-1] = -1, -1
    d.copy_from_host(blank)
    rows.exchange(d)
    want = host.copy()
    if rows.rank == 0:
        want[0] = -1
    if rows.rank == rows.size - 1:
        want[-1] = -1
    check("device halos", d.to_host(), want)
    whole = rows.gather(rows.owned(d))
    if rows.rank == 0:
        check("device gather", whole, g[:, :3].repeat(2, axis=0)[:11].astype(np.float32))
        print("mpi worker ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
