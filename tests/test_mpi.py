"""kaio.mpi: the decomposition in one process (a stand-in communicator for several ranks), and
under ``mpiexec -n 2`` / ``-n 4`` on the reference backend: halo exchange and gather
(tests/mpi_worker.py), and the 2-D Jacobi example equal bit for bit to one process. Skipped
cleanly where mpi4py or mpiexec is missing (``pip install -e ".[mpi]"``)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kaio

ROOT = Path(__file__).resolve().parent.parent
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None
MPIEXEC = shutil.which("mpiexec")
needs_mpi4py = pytest.mark.skipif(not HAVE_MPI4PY, reason="mpi4py is not installed (the [mpi] extra)")
needs_mpiexec = pytest.mark.skipif(not (HAVE_MPI4PY and MPIEXEC),
                                   reason="mpi4py or mpiexec missing (the [mpi] extra)")


class Ranks:
    """A stand-in communicator: rank ``rank`` of ``size`` (enough for the decomposition)."""

    def __init__(self, rank: int, size: int):
        self.rank, self.size = rank, size

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size


def test_split_sizes_are_even_and_cover_the_axis():
    from kaio.mpi import split_sizes
    assert split_sizes(10, 4) == [3, 3, 2, 2]
    assert split_sizes(8, 2) == [4, 4]
    assert sum(split_sizes(16387, 7)) == 16387


@needs_mpi4py
def test_decomposition_of_each_rank():
    from kaio.mpi import Decomposition
    g = np.arange(10 * 3, dtype=np.float64).reshape(10, 3)
    starts, owned = [], []
    for r in range(4):
        dec = Decomposition(g.shape, halo=1, comm=Ranks(r, 4))
        local = dec.split(g)
        assert local.shape == dec.local_shape == (dec.stop - dec.start + 2, 3)
        np.testing.assert_array_equal(dec.owned(local), g[dec.start:dec.stop])
        # halos inside the global array hold the neighbours' rows, beyond it zeros
        np.testing.assert_array_equal(local[0], g[dec.start - 1] if r > 0 else 0)
        np.testing.assert_array_equal(local[-1], g[dec.stop] if r < 3 else 0)
        starts.append(dec.start)
        owned.append(dec.owned(local))
    assert starts == [0, 3, 6, 8]
    np.testing.assert_array_equal(np.concatenate(owned), g)


@needs_mpi4py
def test_decomposition_refuses_slabs_thinner_than_the_halo():
    from kaio.mpi import Decomposition
    with pytest.raises(ValueError, match="slab of 1, thinner than the halo \\(2\\)"):
        Decomposition((7, 4), halo=2, comm=Ranks(0, 4))
    with pytest.raises(ValueError, match="the global array is"):
        Decomposition((8, 4), comm=Ranks(0, 2)).split(np.zeros((8, 5)))


@needs_mpi4py
def test_owned_rows_of_a_device_array_share_its_memory(reference):
    from kaio.mpi import Decomposition
    dec = Decomposition((6, 4), halo=1, comm=Ranks(1, 2))
    d = kaio.to_device(dec.split(np.arange(24, dtype=np.float32).reshape(6, 4)))
    owned = dec.owned(d)
    assert owned.shape == (3, 4) and owned.device == d.device
    owned.copy_from_host(np.full((3, 4), 7, np.float32))
    np.testing.assert_array_equal(d.to_host()[1:4], 7)
    np.testing.assert_array_equal(d.to_host()[0], np.arange(8, 12))   # the halo row: untouched
    with pytest.raises(ValueError, match="axis 0"):
        Decomposition((4, 6), axis=1, comm=Ranks(0, 2)).owned(kaio.to_device(np.zeros((4, 5))))


@needs_mpi4py
def test_cuda_aware_follows_the_setting_then_the_library(monkeypatch):
    from kaio import mpi
    monkeypatch.setenv("KAIO_MPI_CUDA_AWARE", "1")
    assert mpi.cuda_aware() is True
    monkeypatch.setenv("KAIO_MPI_CUDA_AWARE", "0")
    assert mpi.cuda_aware() is False
    monkeypatch.delenv("KAIO_MPI_CUDA_AWARE")
    assert mpi.cuda_aware() in (True, False)   # the library's own answer


def _mpiexec(n: int, *args, env=None, timeout=300):
    # Open MPI refuses to run as root (the GPU image's tests do) unless told twice
    full = {**os.environ, "KAIO_BACKEND": "reference", "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", **(env or {})}
    r = subprocess.run([MPIEXEC, "-n", str(n), sys.executable, *args], cwd=ROOT, env=full,
                       capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, f"mpiexec -n {n} failed:\n{r.stdout}\n{r.stderr}"
    return r.stdout


@needs_mpiexec
@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("cuda_aware", ["0", "1"])
def test_halo_exchange_and_gather_under_mpiexec(n, cuda_aware):
    """Host-staged and direct (device memory handed to MPI; host memory on the reference)."""
    out = _mpiexec(n, "tests/mpi_worker.py", env={"KAIO_MPI_CUDA_AWARE": cuda_aware})
    assert "mpi worker ok" in out


def _single_process_jacobi(n: int, steps: int):
    from kaio.kernels.rajaperf.polybench import jacobi_2d_step
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from jacobi_mpi import initial
    finally:
        sys.path.pop(0)
    a, b = (kaio.to_device(x) for x in initial(n, n, 0, n))
    for _ in range(steps):
        jacobi_2d_step(a, b)
        jacobi_2d_step(b, a)
    return a.to_host(), b.to_host()


@needs_mpiexec
@pytest.mark.parametrize("ranks", [2, 4])
def test_jacobi_over_ranks_is_bit_identical_to_one_process(reference, tmp_path, ranks):
    n, steps = 30, 3
    out = _mpiexec(ranks, "examples/jacobi_mpi.py", "--n", str(n), "--steps", str(steps),
                   "--check", "--out", str(tmp_path / "jacobi.npz"))
    assert f"jacobi_mpi: {ranks} rank(s) on reference" in out
    assert "time per step:" in out and "check: bit-identical" in out
    got = np.load(tmp_path / "jacobi.npz")
    want_a, want_b = _single_process_jacobi(n, steps)   # computed here, in this process
    assert got["a"].view(np.uint64).tolist() == want_a.view(np.uint64).tolist()
    assert got["b"].view(np.uint64).tolist() == want_b.view(np.uint64).tolist()


class _World:
    """Ranks as threads of one process: mailboxes per (source, destination) and one barrier."""

    def __init__(self, size: int):
        import queue
        import threading
        self.size = size
        self.boxes = {(s, d): queue.Queue() for s in range(size) for d in range(size)}
        self.barrier = threading.Barrier(size)


class _ThreadComm(Ranks):
    """The part of a communicator the 'ipc' transport uses, for one thread-rank of a _World."""

    def __init__(self, world: _World, rank: int):
        super().__init__(rank, world.size)
        self.world = world

    def sendrecv(self, obj, dest, source):
        from mpi4py import MPI
        if dest != MPI.PROC_NULL:
            self.world.boxes[(self.rank, dest)].put(obj)
        return None if source == MPI.PROC_NULL else self.world.boxes[(source, self.rank)].get(timeout=20)

    def Barrier(self):
        self.world.barrier.wait(timeout=20)


@needs_mpi4py
@pytest.mark.parametrize("size", [2, 3])
def test_ipc_transport_copies_the_neighbours_edges(size):
    """The 'ipc' exchange (open each neighbour's local array once, copy its edge layers device
    to device) with threads standing in for ranks and host addresses for IPC handles."""
    import threading

    from kaio.backends.reference.runtime import ReferenceRuntime
    from kaio.mpi import Decomposition

    class SharedRuntime(ReferenceRuntime):
        ipc = True
        opened = []

        def ipc_export(self, ptr):
            return ptr.to_bytes(8, "little")

        def ipc_open(self, handle):
            self.opened.append(handle)
            return int.from_bytes(handle, "little")

    rt, world = SharedRuntime(), _World(size)
    g = np.arange(11 * 4, dtype=np.float64).reshape(11, 4)
    got, want, errors = {}, {}, []

    def rank(r):
        try:
            dec = Decomposition(g.shape, halo=2, comm=_ThreadComm(world, r), transport="ipc")
            exact = dec.split(g)
            blank = exact.copy()
            blank[:2], blank[-2:] = -1, -1
            local = kaio.DeviceArray(dec.local_shape, np.float64, runtime=rt).copy_from_host(blank)
            assert dec.transport_for(local) == "ipc"
            dec.exchange(local)
            dec.exchange(local)          # the second exchange reuses the opened arrays
            got[r] = local.to_host()
            if r == 0:
                exact[:2] = -1           # beyond the global edges: untouched
            if r == size - 1:
                exact[-2:] = -1
            want[r] = exact
        except Exception as e:  # reported by the main thread
            errors.append(e)
            world.barrier.abort()

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for r in range(size):
        np.testing.assert_array_equal(got[r], want[r])
    assert len(SharedRuntime.opened) == 2 * (size - 1)   # each neighbour opened once


@needs_mpi4py
def test_transport_choice(reference, monkeypatch):
    from kaio.mpi import Decomposition
    dec = Decomposition((8, 4), comm=Ranks(0, 2))
    d = kaio.to_device(np.zeros(dec.local_shape))
    assert dec.transport_for(np.zeros(dec.local_shape)) == "direct"
    monkeypatch.setenv("KAIO_MPI_CUDA_AWARE", "0")
    assert dec.transport_for(d) == "host"       # reference memory is not shared between processes
    monkeypatch.setenv("KAIO_MPI_CUDA_AWARE", "1")
    assert dec.transport_for(d) == "direct"
    with pytest.raises(ValueError, match="transport 'ipc' needs memory shared between processes"):
        Decomposition((8, 4), comm=Ranks(0, 2), transport="ipc").transport_for(d)
    with pytest.raises(ValueError, match="transport must be one of"):
        Decomposition((8, 4), comm=Ranks(0, 2), transport="nvlink")


def test_gather_pieces_cover_the_slab_in_order(monkeypatch):
    """Slabs past 2 GiB gather in pieces (a pickled gather fails there): the pieces are views
    that cover the array's bytes exactly once, in order, whatever the piece size."""
    from kaio import mpi as kmpi
    a = np.arange(1000, dtype=np.float64).reshape(10, 100)
    monkeypatch.setattr(kmpi, "_PIECE_BYTES", 3000)
    pieces = kmpi._pieces(a)
    assert [p.size for p in pieces] == [3000, 3000, 2000]
    assert np.array_equal(np.concatenate(pieces).view(np.float64).reshape(10, 100), a)
    pieces[1][:8] = 0                                  # views: a receive fills the array
    assert a.reshape(-1)[375] == 0
