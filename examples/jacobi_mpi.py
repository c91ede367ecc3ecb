"""2-D Jacobi (RAJAPerf JACOBI_2D) over MPI ranks with kaio.mpi: rows split over the ranks,
one halo row exchanged with each neighbour before every half-step.

    mpiexec -n 4 python examples/jacobi_mpi.py --check          # reference backend (CI)
    mpiexec -n 2 python examples/jacobi_mpi.py --rows-per-rank 16384 --cols 16384 --steps 50

On GPUs each rank takes device ``local rank % device count`` (one rank per GPU; ranks share a
GPU where there are fewer). ``--check`` runs the same global problem in one process on rank 0
and requires the gathered result to be bit-identical. Prints the time per step (the slowest
rank's, after one warm-up step): two half-steps, each a halo exchange and a kernel.
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import kaio
from kaio import mpi
from kaio.kernels.rajaperf.polybench import jacobi_2d_slab, jacobi_2d_step


def initial(rows: int, cols: int, lo: int, hi: int):
    """Rows lo:hi of PolyBench's JACOBI_2D initial A and B (every element distinct)."""
    i, j = np.meshgrid(np.arange(lo, hi, dtype=np.float64), np.arange(cols, dtype=np.float64),
                       indexing="ij")
    return (i * (j + 2) + 2.0) / rows, (i * (j + 3) + 3.0) / rows


def single_process(rows: int, cols: int, steps: int):
    """The same global problem in one process (jacobi_2d_step: square grids)."""
    a, b = (kaio.to_device(x) for x in initial(rows, cols, 0, rows))
    for _ in range(steps):
        jacobi_2d_step(a, b)
        jacobi_2d_step(b, a)
    return a.to_host(), b.to_host()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=48, help="global grid n x n (default 48)")
    p.add_argument("--rows-per-rank", type=int, help="weak scaling: rows per rank (grid rows = this x ranks)")
    p.add_argument("--cols", type=int, help="columns (default: as many as rows)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--check", action="store_true", help="compare with one process, bit for bit")
    p.add_argument("--out", help="rank 0 saves the gathered A and B here (.npz)")
    p.add_argument("--transport", default="auto", choices=mpi.Decomposition.TRANSPORTS,
                   help="how device halos travel (kaio.mpi; default: auto)")
    args = p.parse_args(argv)

    comm = mpi.world()
    rank, size = comm.Get_rank(), comm.Get_size()
    backend = kaio.get_backend().name
    device = mpi.select_device(comm)
    rows = args.rows_per_rank * size if args.rows_per_rank else args.n
    cols = args.cols or rows
    dec = mpi.Decomposition((rows, cols), halo=1, comm=comm, transport=args.transport)
    made = {}   # A and B come from one evaluation of the formulas (large grids: host memory)

    def layers(k):
        return lambda lo, hi: made.setdefault((lo, hi), initial(rows, cols, lo, hi))[k]
    la, lb = (kaio.to_device(dec.local_from(layers(k), np.float64)) for k in (0, 1))
    made.clear()
    oa, ob = dec.owned(la), dec.owned(lb)
    how = dec.transport_for(la)   # collective on first use: every rank asks

    def step():
        dec.exchange(la)
        jacobi_2d_slab(la, ob, dec.halo, dec.start, rows)
        dec.exchange(lb)
        jacobi_2d_slab(lb, oa, dec.halo, dec.start, rows)

    timed = max(args.steps - 1, 0)
    if args.steps:
        step()                               # warm-up: compiles and loads the kernel
    kaio.synchronize()
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(timed):
        step()
    kaio.synchronize()
    elapsed = comm.allreduce(time.perf_counter() - t0, op=mpi.MPI().MAX)
    devices = comm.gather(device, root=0)
    want = args.out or args.check   # a timing run need not assemble the grid on rank 0
    ga, gb = (dec.gather(oa), dec.gather(ob)) if want else (None, None)
    if rank != 0:
        return 0
    print(f"jacobi_mpi: {size} rank(s) on {backend} devices {devices}, grid {rows} x {cols}, "
          f"{args.steps} steps, halos by '{how}'")
    if timed:
        per = elapsed / timed
        updates = 2 * (rows - 2) * (cols - 2) / per  # interior points, two half-steps
        print(f"time per step: {per * 1e3:.3f} ms ({updates / 1e6:.1f} M point updates/s, "
              f"{updates / 1e6 / size:.1f} per rank; {rows // size} rows per rank)")
    if args.out:
        np.savez(args.out, a=ga, b=gb)
    if args.check:
        if rows != cols:
            print("check: needs a square grid (the single-process kernel is JACOBI_2D's)")
            return 1
        wa, wb = single_process(rows, cols, args.steps)
        same = (np.array_equal(ga.view(np.uint64), wa.view(np.uint64))
                and np.array_equal(gb.view(np.uint64), wb.view(np.uint64)))
        print("check: bit-identical to the single-process run" if same
              else f"check: DIFFERS from the single-process run (max |A diff| {np.abs(ga - wa).max()})")
        return 0 if same else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
