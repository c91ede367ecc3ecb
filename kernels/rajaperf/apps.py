"""RAJAPerf Apps group: PRESSURE, ENERGY, VOL3D, DEL_DOT_VEC_2D, FIR, LTIMES (float64).

- PRESSURE and ENERGY are LULESH's equation-of-state updates. The suite runs them as 2 and 6
  loops over the same index; every loop body touches only index i, so each becomes one kernel
  whose thread performs the loop bodies in order (same arithmetic, fewer launches).
- VOL3D: hexahedral zone volumes from the 8 corner nodes; the mesh is (n+1)^3 nodes on a
  uniform grid (the suite's mesh without its ghost padding).
- DEL_DOT_VEC_2D: divergence per zone over a list of real zones (indirect reads). The suite
  writes ``div[zone_index]`` through the list; here thread ii writes ``div[ii]`` (a dense,
  partitioned output) and the host scatters it into the node-sized array for the checksum, so
  no Raw buffer is needed.
"""
import numpy as np

import kaio
from kaio import f64, i32

from .._bench import empty, launcher, up
from ..registry import Tolerance
from ._case import raja_case
from .checksum import DataInit

N = 1_000_000
SMALL = 10_000
FIR_COEFF = np.array([3.0, -1.0, -1.0, -1.0, -1.0, 3.0, -1.0, -1.0,
                      -1.0, -1.0, 3.0, -1.0, -1.0, -1.0, -1.0, 3.0])
VNORMQ = 0.083333333333333333  # 1/12 in the hexahedron volume formula
PTINY = 1.0e-20


@kaio.kernel
def pressure(compression: kaio.In[f64], e_old: kaio.In[f64], vnewc: kaio.In[f64],
             bvc: kaio.Out[f64], p_new: kaio.Out[f64], cls: f64, p_cut: f64, pmin: f64,
             eosvmax: f64):
    for i in p_new.owned():
        bvc[i] = cls * (compression[i] + 1.0)
        p = bvc[i] * e_old[i]
        if kaio.math.abs(p) < p_cut:
            p = 0.0
        if vnewc[i] >= eosvmax:
            p = 0.0
        if p < pmin:
            p = pmin
        p_new[i] = p


@kaio.func
def sound_speed(pbvc, e, v2, bvc, p, rho0):
    """sqrt((pbvc e + v^2 bvc p) / rho0), floored at 0.3333333e-18 (LULESH's ssc)."""
    ssc = (pbvc * e + v2 * bvc * p) / rho0
    if ssc <= 0.1111111e-36:
        ssc = 0.3333333e-18
    else:
        ssc = kaio.math.sqrt(ssc)
    return ssc


@kaio.kernel
def energy(e_old: kaio.In[f64], delvc: kaio.In[f64], p_new: kaio.In[f64], p_old: kaio.In[f64],
           q_old: kaio.In[f64], work: kaio.In[f64], comp_half: kaio.In[f64], p_half: kaio.In[f64],
           bvc: kaio.In[f64], pbvc: kaio.In[f64], ql_old: kaio.In[f64], qq_old: kaio.In[f64],
           vnewc: kaio.In[f64], e_new: kaio.Out[f64], q_new: kaio.Out[f64],
           rho0: f64, e_cut: f64, emin: f64, q_cut: f64):
    for i in e_new.owned():
        # 1: half-step energy
        e = e_old[i] - 0.5 * delvc[i] * (p_old[i] + q_old[i]) + 0.5 * work[i]
        # 2: half-step artificial viscosity
        q = f64(0.0)
        if delvc[i] <= 0.0:
            vhalf = 1.0 / (1.0 + comp_half[i])
            q = sound_speed(pbvc[i], e, vhalf * vhalf, bvc[i], p_half[i], rho0) * ql_old[i] + qq_old[i]
        # 3, 4: full-step energy, cut-offs
        e = e + 0.5 * delvc[i] * (3.0 * (p_old[i] + q_old[i]) - 4.0 * (p_half[i] + q))
        e += 0.5 * work[i]
        if kaio.math.abs(e) < e_cut:
            e = 0.0
        if e < emin:
            e = emin
        # 5: correction with the new pressure
        q_tilde = f64(0.0)
        if delvc[i] <= 0.0:
            q_tilde = (sound_speed(pbvc[i], e, vnewc[i] * vnewc[i], bvc[i], p_new[i], rho0)
                       * ql_old[i] + qq_old[i])
        e = e - (7.0 * (p_old[i] + q_old[i]) - 8.0 * (p_half[i] + q)
                 + (p_new[i] + q_tilde)) * delvc[i] / 6.0
        if kaio.math.abs(e) < e_cut:
            e = 0.0
        if e < emin:
            e = emin
        # 6: final viscosity
        if delvc[i] <= 0.0:
            q = sound_speed(pbvc[i], e, vnewc[i] * vnewc[i], bvc[i], p_new[i], rho0) * ql_old[i] + qq_old[i]
            if kaio.math.abs(q) < q_cut:
                q = 0.0
        e_new[i] = e
        q_new[i] = q


@kaio.kernel
def vol3d(x: kaio.In[f64, 3], y: kaio.In[f64, 3], z: kaio.In[f64, 3], vol: kaio.Out[f64, 3],
          vnormq: f64):
    """Corners of zone (k, j, i): node offsets (di, dj, dk) in binary order 0..7."""
    for k, j, i in vol.owned():
        x71 = x[k + 1, j + 1, i + 1] - x[k, j, i + 1]
        x72 = x[k + 1, j + 1, i + 1] - x[k, j + 1, i]
        x74 = x[k + 1, j + 1, i + 1] - x[k + 1, j, i]
        x30 = x[k, j + 1, i + 1] - x[k, j, i]
        x50 = x[k + 1, j, i + 1] - x[k, j, i]
        x60 = x[k + 1, j + 1, i] - x[k, j, i]
        y71 = y[k + 1, j + 1, i + 1] - y[k, j, i + 1]
        y72 = y[k + 1, j + 1, i + 1] - y[k, j + 1, i]
        y74 = y[k + 1, j + 1, i + 1] - y[k + 1, j, i]
        y30 = y[k, j + 1, i + 1] - y[k, j, i]
        y50 = y[k + 1, j, i + 1] - y[k, j, i]
        y60 = y[k + 1, j + 1, i] - y[k, j, i]
        z71 = z[k + 1, j + 1, i + 1] - z[k, j, i + 1]
        z72 = z[k + 1, j + 1, i + 1] - z[k, j + 1, i]
        z74 = z[k + 1, j + 1, i + 1] - z[k + 1, j, i]
        z30 = z[k, j + 1, i + 1] - z[k, j, i]
        z50 = z[k + 1, j, i + 1] - z[k, j, i]
        z60 = z[k + 1, j + 1, i] - z[k, j, i]
        v = ((x71 + x60) * (y72 * z30 - z72 * y30) + (y71 + y60) * (z72 * x30 - x72 * z30)
             + (z71 + z60) * (x72 * y30 - y72 * x30))
        v += ((x72 + x50) * (y74 * z60 - z74 * y60) + (y72 + y50) * (z74 * x60 - x74 * z60)
              + (z72 + z50) * (x74 * y60 - y74 * x60))
        v += ((x74 + x30) * (y71 * z50 - z71 * y50) + (y74 + y30) * (z71 * x50 - x71 * z50)
              + (z74 + z30) * (x71 * y50 - y71 * x50))
        vol[k, j, i] = v * vnormq


@kaio.kernel
def del_dot_vec_2d(x: kaio.In[f64], y: kaio.In[f64], fx: kaio.In[f64], fy: kaio.In[f64],
                   zones: kaio.In[i32], div: kaio.Out[f64], jp: i32):
    """Zone with lower-left node z has corners 4 = z, 1 = z + 1, 2 = z + 1 + jp, 3 = z + jp."""
    for ii in div.owned():
        n4 = zones[ii]
        n1 = n4 + 1
        n2 = n1 + jp
        n3 = n4 + jp
        xi = 0.5 * (x[n1] + x[n2] - x[n3] - x[n4])
        xj = 0.5 * (x[n2] + x[n3] - x[n4] - x[n1])
        yi = 0.5 * (y[n1] + y[n2] - y[n3] - y[n4])
        yj = 0.5 * (y[n2] + y[n3] - y[n4] - y[n1])
        fxi = 0.5 * (fx[n1] + fx[n2] - fx[n3] - fx[n4])
        fxj = 0.5 * (fx[n2] + fx[n3] - fx[n4] - fx[n1])
        fyi = 0.5 * (fy[n1] + fy[n2] - fy[n3] - fy[n4])
        fyj = 0.5 * (fy[n2] + fy[n3] - fy[n4] - fy[n1])
        rarea = 1.0 / (xi * yj - xj * yi + PTINY)
        dfxdx = rarea * (fxi * yj - fxj * yi)
        dfydy = rarea * (fyj * xi - fyi * xj)
        affine = (fy[n1] + fy[n2] + fy[n3] + fy[n4]) / (y[n1] + y[n2] + y[n3] + y[n4])
        div[ii] = dfxdx + dfydy + affine


@kaio.kernel
def fir(inp: kaio.In[f64], coeff: kaio.In[f64], out: kaio.Out[f64]):
    for i in out.owned():
        acc = f64(0.0)
        for j in range(coeff.shape[0]):
            acc += coeff[j] * inp[i + j]
        out[i] = acc


@kaio.kernel
def ltimes(ell: kaio.In[f64, 2], psi: kaio.In[f64, 3], phi: kaio.Region[f64, 3]):
    """phi[z, g, m] += sum_d ell[m, d] psi[z, g, d], adding one d at a time as the suite does."""
    for z, g, m in phi.owned():
        v = phi[z, g, m]
        for d in range(ell.shape[1]):
            v += ell[m, d] * psi[z, g, d]
        phi[z, g, m] = v


# --- host side ---------------------------------------------------------------------------------
def _pressure_in(n):
    d = DataInit()
    out = {"compression": d.real(n), "bvc": d.real(n), "p_new": d.const(n, 0.0),
           "e_old": d.real(n), "vnewc": d.real(n)}
    for name in ("cls", "p_cut", "pmin", "eosvmax"):
        out[name] = d.scalar()
    return out


def _pressure_run(i):
    bvc, p = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    pressure(i["compression"], i["e_old"], i["vnewc"], bvc, p, i["cls"], i["p_cut"], i["pmin"],
             i["eosvmax"])
    return {"p_new": p, "bvc": bvc}


def _pressure_ref(i):
    bvc = i["cls"] * (i["compression"] + 1.0)
    p = bvc * i["e_old"]
    p = np.where(np.abs(p) < i["p_cut"], 0.0, p)
    p = np.where(i["vnewc"] >= i["eosvmax"], 0.0, p)
    p = np.where(p < i["pmin"], i["pmin"], p)
    return {"p_new": p, "bvc": bvc}


_ENERGY_ARRAYS = ("e_new", "e_old", "delvc", "p_new", "p_old", "q_new", "q_old", "work",
                  "comp_half", "p_half", "bvc", "pbvc", "ql_old", "qq_old", "vnewc")


_ENERGY_INPUTS = tuple(k for k in _ENERGY_ARRAYS if k not in ("e_new", "q_new"))


def _energy_in(n):
    d = DataInit()
    out = {k: (d.const(n, 0.0) if k in ("e_new", "q_new") else d.real(n)) for k in _ENERGY_ARRAYS}
    for name in ("rho0", "e_cut", "emin", "q_cut"):
        out[name] = d.scalar()
    return out


def _energy_run(i):
    e, q = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    energy(*(i[k] for k in _ENERGY_ARRAYS if k not in ("e_new", "q_new")), e, q,
           i["rho0"], i["e_cut"], i["emin"], i["q_cut"])
    return {"e_new": e, "q_new": q}


def _ssc(pbvc, e, v2, bvc, p, rho0):
    s = (pbvc * e + v2 * bvc * p) / rho0
    return np.where(s <= 0.1111111e-36, 0.3333333e-18, np.sqrt(np.maximum(s, 0.0)))


def _energy_ref(i):
    g = i
    dv = g["delvc"]
    comp = dv <= 0.0
    e = g["e_old"] - 0.5 * dv * (g["p_old"] + g["q_old"]) + 0.5 * g["work"]
    vhalf = 1.0 / (1.0 + g["comp_half"])
    q = np.where(comp, _ssc(g["pbvc"], e, vhalf * vhalf, g["bvc"], g["p_half"], g["rho0"])
                 * g["ql_old"] + g["qq_old"], 0.0)
    e = e + 0.5 * dv * (3.0 * (g["p_old"] + g["q_old"]) - 4.0 * (g["p_half"] + q))
    e = e + 0.5 * g["work"]
    e = np.where(np.abs(e) < g["e_cut"], 0.0, e)
    e = np.where(e < g["emin"], g["emin"], e)
    v2 = g["vnewc"] * g["vnewc"]
    qt = np.where(comp, _ssc(g["pbvc"], e, v2, g["bvc"], g["p_new"], g["rho0"]) * g["ql_old"]
                  + g["qq_old"], 0.0)
    e = e - (7.0 * (g["p_old"] + g["q_old"]) - 8.0 * (g["p_half"] + q) + (g["p_new"] + qt)) * dv / 6.0
    e = np.where(np.abs(e) < g["e_cut"], 0.0, e)
    e = np.where(e < g["emin"], g["emin"], e)
    qn = _ssc(g["pbvc"], e, v2, g["bvc"], g["p_new"], g["rho0"]) * g["ql_old"] + g["qq_old"]
    qn = np.where(np.abs(qn) < g["q_cut"], 0.0, qn)
    q = np.where(comp, qn, q)
    return {"e_new": e, "q_new": q}


def mesh_3d(n: int):
    """Nodes of an n^3-zone uniform mesh on [0, 1]^3, as [k, j, i] arrays (x varies with i)."""
    t = np.arange(n + 1, dtype=np.float64) / n
    k, j, i = np.meshgrid(t, t, t, indexing="ij")
    return i.copy(), j.copy(), k.copy()


def vol3d_ref(x, y, z, vnormq=VNORMQ):
    def c(a, di, dj, dk):
        return a[dk:a.shape[0] - 1 + dk, dj:a.shape[1] - 1 + dj, di:a.shape[2] - 1 + di]
    P = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0), (0, 0, 1), (1, 0, 1), (0, 1, 1), (1, 1, 1)]
    X = [c(x, *p) for p in P]
    Y = [c(y, *p) for p in P]
    Z = [c(z, *p) for p in P]

    def d(A, a, b):
        return A[a] - A[b]
    x71, x72, x74, x30, x50, x60 = (d(X, 7, 1), d(X, 7, 2), d(X, 7, 4), d(X, 3, 0), d(X, 5, 0), d(X, 6, 0))
    y71, y72, y74, y30, y50, y60 = (d(Y, 7, 1), d(Y, 7, 2), d(Y, 7, 4), d(Y, 3, 0), d(Y, 5, 0), d(Y, 6, 0))
    z71, z72, z74, z30, z50, z60 = (d(Z, 7, 1), d(Z, 7, 2), d(Z, 7, 4), d(Z, 3, 0), d(Z, 5, 0), d(Z, 6, 0))
    v = ((x71 + x60) * (y72 * z30 - z72 * y30) + (y71 + y60) * (z72 * x30 - x72 * z30)
         + (z71 + z60) * (x72 * y30 - y72 * x30))
    v = v + ((x72 + x50) * (y74 * z60 - z74 * y60) + (y72 + y50) * (z74 * x60 - x74 * z60)
             + (z72 + z50) * (x74 * y60 - y74 * x60))
    v = v + ((x74 + x30) * (y71 * z50 - z71 * y50) + (y74 + y30) * (z71 * x50 - x71 * z50)
             + (z74 + z30) * (x71 * y50 - y71 * x50))
    return v * vnormq


def _vol3d_in(n):
    x, y, z = mesh_3d(n)
    return {"x": x, "y": y, "z": z}


def _vol3d_run(i):
    n = i["x"].shape[0] - 1
    vol = np.empty((n, n, n), np.float64)
    vol3d(i["x"], i["y"], i["z"], vol, VNORMQ)
    return {"vol": vol}


def _ddv_in(n):
    jp = n + 1
    t = np.arange(jp, dtype=np.float64) / n
    yy, xx = np.meshgrid(t, t, indexing="ij")       # node (j, i) at flat index i + j*jp
    d = DataInit()
    fx, fy = d.real(jp * jp), d.real(jp * jp)
    j, i = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return {"x": xx.ravel(), "y": yy.ravel(), "fx": fx, "fy": fy,
            "zones": (i + j * jp).ravel().astype(np.int32), "jp": jp}


def _ddv_run(i):
    dense = np.empty(i["zones"].shape[0], np.float64)
    del_dot_vec_2d(i["x"], i["y"], i["fx"], i["fy"], i["zones"], dense, i["jp"])
    div = np.zeros_like(i["x"])
    div[i["zones"]] = dense
    return {"div": div}


def ddv_ref(x, y, fx, fy, zones, jp):
    n4 = zones.astype(np.int64)
    n1, n3 = n4 + 1, n4 + jp
    n2 = n1 + jp

    def ij(a):
        return (0.5 * (a[n1] + a[n2] - a[n3] - a[n4]), 0.5 * (a[n2] + a[n3] - a[n4] - a[n1]))
    xi, xj = ij(x)
    yi, yj = ij(y)
    fxi, fxj = ij(fx)
    fyi, fyj = ij(fy)
    rarea = 1.0 / (xi * yj - xj * yi + PTINY)
    affine = (fy[n1] + fy[n2] + fy[n3] + fy[n4]) / (y[n1] + y[n2] + y[n3] + y[n4])
    return rarea * (fxi * yj - fxj * yi) + rarea * (fyj * xi - fyi * xj) + affine


def _ddv_ref(i):
    div = np.zeros_like(i["x"])
    div[i["zones"]] = ddv_ref(i["x"], i["y"], i["fx"], i["fy"], i["zones"], i["jp"])
    return {"div": div}


def _fir_in(n):
    d = DataInit()
    return {"inp": d.rand_value(n + FIR_COEFF.size - 1), "n": n}


def _fir_run(i):
    out = np.empty(i["n"], np.float64)
    fir(i["inp"], FIR_COEFF, out)
    return {"out": out}


def _fir_ref(i):
    n = i["n"]
    acc = np.zeros(n)
    for j, c in enumerate(FIR_COEFF):
        acc = acc + c * i["inp"][j:j + n]
    return {"out": acc}


def _ltimes_in(size):
    nz, ng, nm, nd = size
    d = DataInit()
    phi = d.const(nz * ng * nm, 0.0).reshape(nz, ng, nm)
    ell = d.real(nm * nd).reshape(nm, nd)
    return {"phi": phi, "ell": ell, "psi": d.real(nz * ng * nd).reshape(nz, ng, nd)}


def _ltimes_run(i):
    phi = i["phi"].copy()
    ltimes(i["ell"], i["psi"], phi)
    return {"phi": phi}


def _ltimes_ref(i):
    phi = i["phi"].copy()
    for d in range(i["ell"].shape[1]):
        phi = phi + i["ell"][None, None, :, d] * i["psi"][:, :, d][:, :, None]
    return {"phi": phi}


_SQRT = Tolerance(atol=1e-14, rtol=1e-13,
                  why="float64 arithmetic and sqrt (correctly rounded), same order")

raja_case(name="PRESSURE", group="apps", make=_pressure_in, reps=700, default_size=N,
          small_size=SMALL, run=_pressure_run, reference=_pressure_ref, flops=lambda n: 2.0 * n,
          bytes=lambda n: 8.0 * 5 * n, checksum_keys=("p_new",), description="LULESH pressure")
raja_case(name="ENERGY", group="apps", make=_energy_in, reps=130, default_size=N, small_size=SMALL,
          run=_energy_run, reference=_energy_ref, tolerance=_SQRT, flops=lambda n: 58.0 * n,
          bytes=lambda n: 8.0 * 15 * n, description="LULESH energy (6 loop bodies per thread)",
          bench=lambda i: launcher(energy, *up(i, *_ENERGY_INPUTS),
                                   empty(i["e_old"].shape, np.float64), empty(i["e_old"].shape, np.float64),
                                   i["rho0"], i["e_cut"], i["emin"], i["q_cut"]))
raja_case(name="VOL3D", group="apps", make=_vol3d_in, reps=100, default_size=100, small_size=10,
          run=_vol3d_run, reference=lambda i: {"vol": vol3d_ref(i["x"], i["y"], i["z"])},
          flops=lambda n: 72.0 * n ** 3, bytes=lambda n: 8.0 * (3 * (n + 1) ** 3 + n ** 3),
          description="hexahedron volumes",
          bench=lambda i: launcher(vol3d, *up(i, "x", "y", "z"),
                                   empty(tuple(s - 1 for s in i["x"].shape), np.float64), VNORMQ))
raja_case(name="DEL_DOT_VEC_2D", group="apps", make=_ddv_in, reps=100, default_size=1000,
          small_size=40, run=_ddv_run, reference=_ddv_ref, flops=lambda n: 54.0 * n * n,
          bytes=lambda n: 8.0 * 5 * n * n, description="2-D divergence over an index list")
raja_case(name="FIR", group="apps", make=_fir_in, reps=160, default_size=N, small_size=SMALL,
          run=_fir_run, reference=_fir_ref, flops=lambda n: 32.0 * n, bytes=lambda n: 16.0 * n,
          description="16-tap FIR filter",
          bench=lambda i: launcher(fir, *up(i, "inp"), up({"c": FIR_COEFF}, "c")[0],
                                   empty(i["n"], np.float64)))
raja_case(name="LTIMES", group="apps", make=_ltimes_in, reps=50, default_size=(488, 32, 25, 64),
          small_size=(6, 4, 5, 8), run=_ltimes_run, reference=_ltimes_ref,
          flops=lambda s: 2.0 * s[0] * s[1] * s[2] * s[3],
          bytes=lambda s: 8.0 * (2 * s[0] * s[1] * s[2] + s[0] * s[1] * s[3] + s[2] * s[3]),
          description="phi += ell psi (discrete-ordinates moments)",
          bench=lambda i: launcher(ltimes, *up(i, "ell", "psi", "phi")))
