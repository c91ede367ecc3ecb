"""kaio over MPI ranks (mpi4py): split an array into slabs with halos, exchange the halos,
gather the result. Install with ``pip install "kaio[mpi]"``; run with ``mpiexec -n 4 python ...``.

    from kaio import mpi
    mpi.select_device()                        # on GPUs: one device per rank of this host
    dec = mpi.Decomposition(a.shape, halo=1)   # rows split over the ranks of COMM_WORLD
    la = kaio.to_device(dec.split(a))          # this rank's slab, halo rows above and below
    dec.exchange(la)                           # halos <- the neighbours' edge rows
    step(la, dec.owned(lb), ...)               # a kernel writes only the owned rows
    whole = dec.gather(dec.owned(lb))          # the global array on rank 0 (None elsewhere)

Each rank's local array holds its owned slab with ``halo`` rows (along ``axis``) on both sides,
also at the edges of the global array, where they are zeros that nothing exchanges: every rank
has the same layout, so one kernel fits all of them. A kernel writes the owned part
(:meth:`Decomposition.owned`, a Region parameter) and reads the halos as an ``In`` parameter, so
each launch is race-free on its own rank exactly as the checker proved it; between launches
:meth:`Decomposition.exchange` refreshes the halos.

How halos of device arrays travel (``transport``; "auto" picks the first that applies, the
same on every rank):

- "direct": the MPI library is CUDA-aware (asked at run time, ``MPIX_Query_cuda_support``;
  ``KAIO_MPI_CUDA_AWARE=1/0`` overrides): device buffers are handed to MPI;
- "ipc": all ranks on one host and device memory that can be shared between processes (CUDA
  IPC): each rank opens its neighbours' local arrays once and copies their edge layers into its
  halos device to device (a peer copy between two GPUs, a plain copy when ranks share one);
- "host": through host memory.

On the reference backend "device" memory is host memory: "host" and "direct" both run in CI,
"ipc" in one process with threads standing in for ranks (tests/test_mpi.py).
"""
from __future__ import annotations

import ctypes
import math
import weakref

import numpy as np

from .backends import get_backend, set_device
from .config import settings
from .device import DeviceArray


def _mpi():
    from mpi4py import MPI  # lazy: mpi4py is optional (the [mpi] extra)
    return MPI


def MPI():
    """The ``mpi4py.MPI`` module (imported on first use)."""
    return _mpi()


def world():
    """``MPI.COMM_WORLD`` (ImportError naming the extra when mpi4py is missing)."""
    try:
        return _mpi().COMM_WORLD
    except ImportError as e:
        raise ImportError(f"kaio.mpi needs mpi4py and an MPI library: pip install 'kaio[mpi]' ({e})") from e


def cuda_aware() -> bool:
    """Whether MPI can read and write device memory: ``KAIO_MPI_CUDA_AWARE`` when set, else
    the library's answer to ``MPIX_Query_cuda_support`` (MPICH and Open MPI), else False."""
    told = settings().mpi_cuda_aware
    if told is not None:
        return told
    try:
        query = getattr(ctypes.CDLL(_mpi().__file__), "MPIX_Query_cuda_support", None)
    except OSError:
        return False
    if query is None:
        return False
    query.restype = ctypes.c_int
    return bool(query())


def local_rank(comm=None) -> int:
    """This rank's index among the ranks of its host."""
    comm = comm or world()
    node = comm.Split_type(_mpi().COMM_TYPE_SHARED)
    try:
        return node.Get_rank()
    finally:
        node.Free()


def select_device(comm=None) -> int:
    """Make device ``local_rank % device_count`` this thread's current device and return it:
    one GPU per rank where the host has as many GPUs as ranks; ranks share devices otherwise."""
    device = local_rank(comm) % get_backend().device_count()
    set_device(device)
    return device


def split_sizes(n: int, parts: int) -> list[int]:
    """``n`` items in ``parts`` slabs as even as possible, the larger ones first."""
    return [n // parts + (r < n % parts) for r in range(parts)]


class Decomposition:
    """A global array of ``shape`` split along ``axis`` over the ranks of ``comm`` (default
    COMM_WORLD), each slab padded with ``halo`` layers on both sides (see the module docstring).

    Attributes: ``rank``, ``size``, ``start``/``stop`` (the owned global range along ``axis``),
    ``local_shape`` (slab plus halos), ``owned_shape``."""

    TRANSPORTS = ("auto", "host", "direct", "ipc")

    def __init__(self, shape, halo: int = 1, axis: int = 0, comm=None, transport: str = "auto"):
        if transport not in self.TRANSPORTS:
            raise ValueError(f"kaio.mpi: transport must be one of {', '.join(self.TRANSPORTS)}, "
                             f"got {transport!r}")
        self.transport = transport
        self.comm = comm or world()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        self.shape, self.halo = tuple(int(s) for s in shape), int(halo)
        self.axis = axis % len(self.shape)
        sizes = split_sizes(self.shape[self.axis], self.size)
        if self.halo < 0 or min(sizes) < self.halo:
            raise ValueError(f"kaio.mpi: {self.shape[self.axis]} layers along axis {self.axis} over "
                             f"{self.size} ranks leave a slab of {min(sizes)}, thinner than the halo "
                             f"({self.halo}); use fewer ranks or a larger array")
        self.sizes = sizes
        self.start = sum(sizes[:self.rank])
        self.stop = self.start + sizes[self.rank]
        self.owned_shape = self._with_axis(sizes[self.rank])
        self.local_shape = self._with_axis(sizes[self.rank] + 2 * self.halo)
        null = _mpi().PROC_NULL
        self.lower = self.rank - 1 if self.rank > 0 else null
        self.upper = self.rank + 1 if self.rank < self.size - 1 else null
        self._one_host = None                   # all ranks on one host (asked on first use)
        self._opened = weakref.WeakKeyDictionary()   # local array -> neighbours' arrays ("ipc")

    def _with_axis(self, n: int) -> tuple:
        return self.shape[:self.axis] + (n,) + self.shape[self.axis + 1:]

    def _index(self, lo: int, hi: int) -> tuple:
        return (slice(None),) * self.axis + (slice(lo, hi),)

    def split(self, global_array: np.ndarray) -> np.ndarray:
        """This rank's local array cut from the whole global array (owned slab and the halos
        inside the global array; zeros beyond its edges)."""
        g = np.asarray(global_array)
        if g.shape != self.shape:
            raise ValueError(f"kaio.mpi.split: the global array is {g.shape}, the decomposition {self.shape}")
        return self.local_from(lambda lo, hi: g[self._index(lo, hi)], g.dtype)

    def local_from(self, layers, dtype) -> np.ndarray:
        """This rank's local array from ``layers(lo, hi)``, which returns the global array's
        layers ``lo:hi`` along the axis (so no rank builds the whole global array)."""
        local = np.zeros(self.local_shape, dtype)
        lo, hi = max(self.start - self.halo, 0), min(self.stop + self.halo, self.shape[self.axis])
        off = lo - (self.start - self.halo)
        local[self._index(off, off + hi - lo)] = layers(lo, hi)
        return local

    def owned(self, local):
        """The owned slab of a local array: a numpy view, or a device array over the same
        memory (device arrays: ``axis`` 0 only, where the slab is contiguous)."""
        return _part(local, self, self.halo, self.halo + self.owned_shape[self.axis])

    def exchange(self, local) -> None:
        """Fill the halos of ``local`` (numpy or device array of ``local_shape``) from the
        neighbours' edge layers. Collective: every rank calls it. Device arrays: the device is
        synchronized first (the edges were written by kernels)."""
        if tuple(local.shape) != self.local_shape:
            raise ValueError(f"kaio.mpi.exchange: local array is {tuple(local.shape)}, "
                             f"the decomposition's is {self.local_shape}")
        h, n = self.halo, self.owned_shape[self.axis]
        if h == 0 or self.size == 1:
            return
        how = self.transport_for(local)
        if how == "ipc":
            return self._exchange_ipc(local)
        if isinstance(local, DeviceArray):
            local.runtime.synchronize()
        direct = how == "direct"
        null = _mpi().PROC_NULL
        # (send layers, to, receive layers, from): edges down and up, halos from above and below
        for send, dest, recv, source in (((h, 2 * h), self.lower, (h + n, 2 * h + n), self.upper),
                                         ((n, h + n), self.upper, (0, h), self.lower)):
            out, into = _part(local, self, *send), _part(local, self, *recv)
            if direct:
                sendbuf, target = _buffer(out), _buffer(into)
                if isinstance(sendbuf, np.ndarray):  # a slab across other axes is strided
                    sendbuf = np.ascontiguousarray(sendbuf)
                staged = target
                if isinstance(target, np.ndarray) and not target.flags.c_contiguous:
                    staged = np.empty(target.shape, target.dtype)
                self.comm.Sendrecv(sendbuf, dest=dest, recvbuf=staged, source=source)
                if staged is not target and source != null:
                    target[...] = staged
            else:  # through host memory
                staged = np.empty(into.shape, into.dtype)
                self.comm.Sendrecv(out.to_host(), dest=dest, recvbuf=staged, source=source)
                if source != null:
                    into.copy_from_host(staged)

    def transport_for(self, local) -> str:
        """How :meth:`exchange` moves the halos of ``local``: 'direct' (numpy arrays always),
        'ipc' or 'host' (see the module docstring). Collective on first use ("auto")."""
        if not isinstance(local, DeviceArray):
            return "direct"
        if self.axis != 0:
            raise ValueError(_AXIS0.format(self.axis))
        if self.transport == "ipc" and not local.runtime.ipc:
            raise ValueError(f"kaio.mpi: transport 'ipc' needs memory shared between processes; "
                             f"{local.runtime.name} memory is not (use 'host' or 'auto')")
        if self.transport != "auto":
            return self.transport
        if cuda_aware():
            return "direct"
        if local.runtime.ipc and self.size > 1:
            if self._one_host is None:
                hosts = self.comm.allgather(_mpi().Get_processor_name())
                self._one_host = len(set(hosts)) == 1
            if self._one_host:
                return "ipc"
        return "host"

    def _exchange_ipc(self, local: DeviceArray) -> None:
        """Halos copied device to device from the neighbours' local arrays, opened once through
        IPC handles. Barriers before (their edges are written) and after (read before anyone
        writes again)."""
        rt, h = local.runtime, self.halo
        opened = self._opened.get(local)
        if opened is None:
            if local._owner is not None:
                raise ValueError("kaio.mpi: transport 'ipc' shares whole allocations: pass a local "
                                 "array made by kaio.to_device / kaio.device_array, not a view")
            mine = rt.ipc_export(local.live_ptr("kaio.mpi"))
            below = self.comm.sendrecv(mine, dest=self.upper, source=self.lower)
            above = self.comm.sendrecv(mine, dest=self.lower, source=self.upper)
            opened = self._opened[local] = tuple(None if x is None else rt.ipc_open(x)
                                                 for x in (below, above))
        row = math.prod(local.shape[1:]) * local.dtype.itemsize
        n = self.owned_shape[0]
        rt.synchronize()
        self.comm.Barrier()
        below, above = opened
        if below is not None:   # its last owned layers -> my lower halo
            rt.memcpy("dtod", local.ptr, below + self.sizes[self.rank - 1] * row, h * row)
        if above is not None:   # its first owned layers -> my upper halo
            rt.memcpy("dtod", local.ptr + (h + n) * row, above + h * row, h * row)
        rt.synchronize()
        self.comm.Barrier()

    def gather(self, owned, root: int = 0):
        """The global array assembled on ``root`` from every rank's owned slab (numpy or
        device array of ``owned_shape``); None on the other ranks. For checking results.

        Slabs travel as raw buffers, point to point, in pieces under MPI's 2**31-element
        count limit, so a slab of any size gathers (a pickled gather fails past 2 GiB)."""
        part = owned.to_host() if isinstance(owned, DeviceArray) else np.ascontiguousarray(owned)
        if self.rank != root:
            for piece in _pieces(part):
                self.comm.Send(piece, dest=root, tag=_GATHER_TAG)
            return None
        parts = []
        for r in range(self.size):
            if r == self.rank:
                parts.append(part)
                continue
            got = np.empty(self._with_axis(self.sizes[r]), dtype=part.dtype)
            for piece in _pieces(got):
                self.comm.Recv(piece, source=r, tag=_GATHER_TAG)
            parts.append(got)
        return np.concatenate(parts, axis=self.axis)


_GATHER_TAG = 7301
_PIECE_BYTES = 1 << 30   # well under MPI's int count limit for MPI_BYTE


def _pieces(array):
    """Contiguous byte views of ``array`` of at most _PIECE_BYTES each, in order."""
    flat = array.reshape(-1).view(np.uint8)
    return [flat[i:i + _PIECE_BYTES] for i in range(0, flat.size, _PIECE_BYTES)] or [flat]


_AXIS0 = "kaio.mpi: device arrays are split along axis 0 (contiguous slabs); this one splits axis {}"


def _part(local, dec: Decomposition, lo: int, hi: int):
    """Layers ``lo:hi`` along the decomposition's axis of ``local``: a numpy view, or for a
    device array (axis 0) a device array over those rows."""
    if not isinstance(local, DeviceArray):
        return local[dec._index(lo, hi)]
    if dec.axis != 0:
        raise ValueError(_AXIS0.format(dec.axis))
    row = math.prod(local.shape[1:]) * local.dtype.itemsize
    return DeviceArray((hi - lo,) + tuple(local.shape[1:]), local.dtype, runtime=local.runtime,
                       _ptr=local.live_ptr("kaio.mpi") + lo * row, _owner=local)


def _buffer(a):
    """What MPI reads or writes for ``a`` in place: a numpy array as is, a device array's own
    memory (a numpy view of host memory on the reference backend; on a GPU the array itself,
    which mpi4py reads through ``__cuda_array_interface__``)."""
    if isinstance(a, DeviceArray):
        host_array = getattr(a.runtime, "host_array", None)
        return host_array(a, "kaio.mpi") if host_array is not None else a
    return a
