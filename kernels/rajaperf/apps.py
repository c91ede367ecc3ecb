"""RAJAPerf Apps group: PRESSURE, ENERGY, VOL3D, DEL_DOT_VEC_2D, FIR, LTIMES (float64).

- PRESSURE and ENERGY are LULESH's equation-of-state updates. The ports keep the suite's
  structure, 2 and 6 loops (kernels) per rep (src/apps/PRESSURE.hpp, ENERGY.hpp); every loop
  body touches only index i, so PRESSURE_FUSED and ENERGY_FUSED run all bodies in one kernel
  per thread (same arithmetic, fewer launches), as separately named variants.
- VOL3D and DEL_DOT_VEC_2D use the suite's padded domain (:mod:`._domain`): 2 ghost layers
  below and 1 above, spacings 0.3/0.2/0.1 (3-D) and 0.2/0.1 (2-D). VOL3D loops over the whole
  linear zone range, ghost zones included (src/apps/VOL3D.cpp), with the suite's four-term
  volume sum (src/apps/VOL3D.hpp).
- DEL_DOT_VEC_2D: the suite writes ``div[zone]`` through its real-zone list. Regions cannot
  prove writes through a list disjoint, so each thread owns one node of the full ``div`` array
  and computes it when the node starts a real zone (the list is the interior block of the
  padded mesh): the same values in the same places, no host scatter, no Raw buffer.
"""
import numpy as np

import kaio
from kaio import f64, i32

from .._bench import launcher, like, resident
from ..registry import Tolerance
from ._case import feed, raja_case
from ._domain import Domain
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


@kaio.func
def divergence(x, y, fx, fy, n4, jp):
    """The suite's DEL_DOT_VEC_2D body for the zone whose lower-left node is n4 (flat node
    arrays, rows of jp): corners 4 = n4, 3 = n4 + jp, 1 = n4 + 1, 2 = n3 + 1 (written so, kaio's
    PTX addresses corners 1 and 2 as immediates off corners 4 and 3: two 64-bit addresses per
    array, as nvcc's)."""
    n3 = n4 + jp
    n1 = n4 + 1
    n2 = n3 + 1
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
    return dfxdx + dfydy + affine


@kaio.kernel
def del_dot_vec_2d(x: kaio.In[f64], y: kaio.In[f64], fx: kaio.In[f64], fy: kaio.In[f64],
                   zones: kaio.In[i32], div: kaio.Out[f64], jp: i32):
    """Zone with lower-left node z has corners 4 = z, 1 = z + 1, 2 = z + 1 + jp, 3 = z + jp."""
    for ii in div.owned():
        div[ii] = divergence(x, y, fx, fy, zones[ii], jp)


def fir_kernel(coeff: tuple):
    """out[i] = sum_j coeff[j] inp[i + j] over the taps, added in order (unrolled, as nvcc
    unrolls the suite's loop over its constant length). The coefficients are compile-time
    constants, as the suite's are (a fixed table in FIR.cpp, copied to ``__constant__`` memory,
    whose values reach the CUDA kernel's FMAs as constant-bank operands): read from a buffer,
    each thread loaded all 16 besides its 16 inputs, twice the load instructions of the CUDA
    form, 1.70x its time at 64x on the H200 (2026-12-02)."""
    taps = len(coeff)

    @kaio.kernel
    def fir(inp: kaio.In[f64], out: kaio.Out[f64]):
        for i in out.owned():
            acc = f64(0.0)
            for j in kaio.static_range(taps):
                acc += coeff[j] * inp[i + j]
            out[i] = acc
    return fir


#: the suite's FIR: its 16 coefficients
fir = fir_kernel(tuple(float(c) for c in FIR_COEFF))


@kaio.kernel
def ltimes(ell: kaio.In[f64, 2], psi: kaio.In[f64, 3], phi: kaio.Region[f64, 3]):
    """phi[z, g, m] += sum_d ell[m, d] psi[z, g, d], adding one d at a time as the suite does."""
    for z, g, m in phi.owned():
        v = phi[z, g, m]
        for d in range(ell.shape[1]):
            v += ell[m, d] * psi[z, g, d]
        phi[z, g, m] = v


@kaio.kernel
def pressure_bvc(compression: kaio.In[f64], bvc: kaio.Out[f64], cls: f64):
    """PRESSURE loop 1 (src/apps/PRESSURE.hpp BODY1)."""
    for i in bvc.owned():
        bvc[i] = cls * (compression[i] + 1.0)


@kaio.kernel
def pressure_p(bvc: kaio.In[f64], e_old: kaio.In[f64], vnewc: kaio.In[f64], p_new: kaio.Out[f64],
               p_cut: f64, pmin: f64, eosvmax: f64):
    """PRESSURE loop 2 (BODY2): the new pressure with its cut-offs."""
    for i in p_new.owned():
        p = bvc[i] * e_old[i]
        if kaio.math.abs(p) < p_cut:
            p = 0.0
        if vnewc[i] >= eosvmax:
            p = 0.0
        if p < pmin:
            p = pmin
        p_new[i] = p


@kaio.kernel
def energy_1(e_old: kaio.In[f64], delvc: kaio.In[f64], p_old: kaio.In[f64], q_old: kaio.In[f64],
             work: kaio.In[f64], e_new: kaio.Out[f64]):
    """ENERGY loop 1 (src/apps/ENERGY.hpp BODY1): half-step energy."""
    for i in e_new.owned():
        e_new[i] = e_old[i] - 0.5 * delvc[i] * (p_old[i] + q_old[i]) + 0.5 * work[i]


@kaio.kernel
def energy_2(delvc: kaio.In[f64], comp_half: kaio.In[f64], pbvc: kaio.In[f64], e_new: kaio.In[f64],
             bvc: kaio.In[f64], p_half: kaio.In[f64], ql_old: kaio.In[f64], qq_old: kaio.In[f64],
             q_new: kaio.Out[f64], rho0: f64):
    """ENERGY loop 2 (BODY2): half-step artificial viscosity."""
    for i in q_new.owned():
        q = f64(0.0)
        if delvc[i] <= 0.0:
            vhalf = 1.0 / (1.0 + comp_half[i])
            q = sound_speed(pbvc[i], e_new[i], vhalf * vhalf, bvc[i], p_half[i], rho0) * ql_old[i] + qq_old[i]
        q_new[i] = q


@kaio.kernel
def energy_3(delvc: kaio.In[f64], p_old: kaio.In[f64], q_old: kaio.In[f64], p_half: kaio.In[f64],
             q_new: kaio.In[f64], e_new: kaio.Region[f64]):
    """ENERGY loop 3 (BODY3): full-step energy."""
    for i in e_new.owned():
        e_new[i] = e_new[i] + 0.5 * delvc[i] * (3.0 * (p_old[i] + q_old[i]) - 4.0 * (p_half[i] + q_new[i]))


@kaio.kernel
def energy_4(work: kaio.In[f64], e_new: kaio.Region[f64], e_cut: f64, emin: f64):
    """ENERGY loop 4 (BODY4): work term and cut-offs."""
    for i in e_new.owned():
        e = e_new[i] + 0.5 * work[i]
        if kaio.math.abs(e) < e_cut:
            e = 0.0
        if e < emin:
            e = emin
        e_new[i] = e


@kaio.kernel
def energy_5(delvc: kaio.In[f64], pbvc: kaio.In[f64], vnewc: kaio.In[f64], bvc: kaio.In[f64],
             p_new: kaio.In[f64], ql_old: kaio.In[f64], qq_old: kaio.In[f64], p_old: kaio.In[f64],
             q_old: kaio.In[f64], p_half: kaio.In[f64], q_new: kaio.In[f64], e_new: kaio.Region[f64],
             rho0: f64, e_cut: f64, emin: f64):
    """ENERGY loop 5 (BODY5): correction with the new pressure."""
    for i in e_new.owned():
        q_tilde = f64(0.0)
        if delvc[i] <= 0.0:
            q_tilde = (sound_speed(pbvc[i], e_new[i], vnewc[i] * vnewc[i], bvc[i], p_new[i], rho0)
                       * ql_old[i] + qq_old[i])
        e = e_new[i] - (7.0 * (p_old[i] + q_old[i]) - 8.0 * (p_half[i] + q_new[i])
                        + (p_new[i] + q_tilde)) * delvc[i] / 6.0
        if kaio.math.abs(e) < e_cut:
            e = 0.0
        if e < emin:
            e = emin
        e_new[i] = e


@kaio.kernel
def energy_6(delvc: kaio.In[f64], pbvc: kaio.In[f64], e_new: kaio.In[f64], vnewc: kaio.In[f64],
             bvc: kaio.In[f64], p_new: kaio.In[f64], ql_old: kaio.In[f64], qq_old: kaio.In[f64],
             q_new: kaio.Region[f64], rho0: f64, q_cut: f64):
    """ENERGY loop 6 (BODY6): final viscosity."""
    for i in q_new.owned():
        if delvc[i] <= 0.0:
            ssc = sound_speed(pbvc[i], e_new[i], vnewc[i] * vnewc[i], bvc[i], p_new[i], rho0)
            q = ssc * ql_old[i] + qq_old[i]
            if kaio.math.abs(q) < q_cut:
                q = 0.0
            q_new[i] = q


@kaio.kernel
def vol3d_zones(x: kaio.In[f64], y: kaio.In[f64], z: kaio.In[f64], vol: kaio.Out[f64], ibegin: i32,
                jp: i32, kp: i32, vnormq: f64):
    """The suite's VOL3D over the linear zone range ``ibegin + ii``: corners 0..7 of zone i are
    nodes i, i+1, i+jp, i+1+jp, then the same plus kp; the volume sums four triple products,
    the third repeating the second's cross product (src/apps/VOL3D.hpp, VOL3D_BODY)."""
    for ii in vol.owned():
        i = ii + ibegin
        x71 = x[i + 1 + jp + kp] - x[i + 1]
        x72 = x[i + 1 + jp + kp] - x[i + jp]
        x74 = x[i + 1 + jp + kp] - x[i + kp]
        x30 = x[i + 1 + jp] - x[i]
        x50 = x[i + 1 + kp] - x[i]
        x60 = x[i + jp + kp] - x[i]
        y71 = y[i + 1 + jp + kp] - y[i + 1]
        y72 = y[i + 1 + jp + kp] - y[i + jp]
        y74 = y[i + 1 + jp + kp] - y[i + kp]
        y30 = y[i + 1 + jp] - y[i]
        y50 = y[i + 1 + kp] - y[i]
        y60 = y[i + jp + kp] - y[i]
        z71 = z[i + 1 + jp + kp] - z[i + 1]
        z72 = z[i + 1 + jp + kp] - z[i + jp]
        z74 = z[i + 1 + jp + kp] - z[i + kp]
        z30 = z[i + 1 + jp] - z[i]
        z50 = z[i + 1 + kp] - z[i]
        z60 = z[i + jp + kp] - z[i]
        v = ((x71 + x60) * (y72 * z30 - z72 * y30) + (y71 + y60) * (z72 * x30 - x72 * z30)
             + (z71 + z60) * (x72 * y30 - y72 * x30))
        v += ((x72 + x50) * (y74 * z60 - z74 * y60) + (y72 + y50) * (z74 * x60 - x74 * z60)
              + (z72 + z50) * (x74 * y60 - y74 * x60))
        v += ((x74 + x30) * (y74 * z60 - z74 * y60) + (y74 + y30) * (z74 * x60 - x74 * z60)
              + (z74 + z30) * (x74 * y60 - y74 * x60))
        v += ((x74 + x30) * (y71 * z50 - z71 * y50) + (y74 + y30) * (z71 * x50 - x71 * z50)
              + (z74 + z30) * (x71 * y50 - y71 * x50))
        vol[ii] = v * vnormq


@kaio.kernel
def del_dot_vec_2d_nodes(x: kaio.In[f64], y: kaio.In[f64], fx: kaio.In[f64], fy: kaio.In[f64],
                         div: kaio.Out[f64, 2], lo: i32, hi: i32):
    """The suite's divergence (:func:`divergence`), written at the zone's lower-left node (j, i)
    of the (jp, jp) node grid; the node arrays are flat, as the suite's are, so the four share
    one linear index. Nodes that start no real zone (row or column outside [lo, hi)) keep the
    suite's initial 0."""
    nj = div.shape[0]
    jp = div.shape[1]
    for j, i in div.owned():
        d = f64(0.0)
        if j >= lo and j < hi and i >= lo and i < hi and j + 1 < nj and i + 1 < jp:
            d = divergence(x, y, fx, fy, j * jp + i, jp)
        div[j, i] = d


# --- host side ---------------------------------------------------------------------------------
def _pressure_in(n):
    d = DataInit()
    out = {"compression": d.real(n), "bvc": d.real(n), "p_new": d.const(n, 0.0),
           "e_old": d.real(n), "vnewc": d.real(n)}
    for name in ("cls", "p_cut", "pmin", "eosvmax"):
        out[name] = d.scalar()
    return out


def _pressure_run(i):
    """The suite's two loops, one kernel each."""
    bvc, p = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    pressure_bvc(i["compression"], bvc, i["cls"])
    pressure_p(bvc, i["e_old"], i["vnewc"], p, i["p_cut"], i["pmin"], i["eosvmax"])
    return {"p_new": p, "bvc": bvc}


def _pressure_fused_run(i):
    bvc, p = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    pressure(i["compression"], i["e_old"], i["vnewc"], bvc, p, i["cls"], i["p_cut"], i["pmin"],
             i["eosvmax"])
    return {"p_new": p, "bvc": bvc}


_PRESSURE_READ = ("compression", "e_old", "vnewc")


def _pressure_bench(i, fused=False):
    def bind(d):
        comp, e_old, vnewc, bvc, p = (d[k] for k in (*_PRESSURE_READ, "bvc", "p_new"))
        if fused:
            return launcher(pressure, comp, e_old, vnewc, bvc, p, i["cls"], i["p_cut"], i["pmin"],
                            i["eosvmax"])

        def launch():
            pressure_bvc(comp, bvc, i["cls"])
            pressure_p(bvc, e_old, vnewc, p, i["p_cut"], i["pmin"], i["eosvmax"])
        return launch
    return resident(i, bind, read=_PRESSURE_READ, new=like(i, "e_old", "p_new", "bvc"))


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


def _energy_fused_run(i):
    e, q = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    energy(*(i[k] for k in _ENERGY_INPUTS), e, q, i["rho0"], i["e_cut"], i["emin"], i["q_cut"])
    return {"e_new": e, "q_new": q}


def _energy_loops(g, e, q):
    """The suite's six loops on arrays ``g`` (host or device), writing ``e`` and ``q``."""
    energy_1(g["e_old"], g["delvc"], g["p_old"], g["q_old"], g["work"], e)
    energy_2(g["delvc"], g["comp_half"], g["pbvc"], e, g["bvc"], g["p_half"], g["ql_old"],
             g["qq_old"], q, g["rho0"])
    energy_3(g["delvc"], g["p_old"], g["q_old"], g["p_half"], q, e)
    energy_4(g["work"], e, g["e_cut"], g["emin"])
    energy_5(g["delvc"], g["pbvc"], g["vnewc"], g["bvc"], g["p_new"], g["ql_old"], g["qq_old"],
             g["p_old"], g["q_old"], g["p_half"], q, e, g["rho0"], g["e_cut"], g["emin"])
    energy_6(g["delvc"], g["pbvc"], e, g["vnewc"], g["bvc"], g["p_new"], g["ql_old"], g["qq_old"],
             q, g["rho0"], g["q_cut"])


def _energy_run(i):
    e, q = np.empty_like(i["e_old"]), np.empty_like(i["e_old"])
    _energy_loops(i, e, q)
    return {"e_new": e, "q_new": q}


def _energy_bench(i, fused=False):
    scalars = ("rho0", "e_cut", "emin", "q_cut")

    def bind(d):
        g = {**d, **{k: i[k] for k in scalars}}
        if fused:
            return launcher(energy, *(d[k] for k in (*_ENERGY_INPUTS, "e_new", "q_new")),
                            *(i[k] for k in scalars))
        return lambda: _energy_loops(g, d["e_new"], d["q_new"])
    return resident(i, bind, read=_ENERGY_INPUTS, new=like(i, "e_old", "e_new", "q_new"))


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
    """The suite's set-up (src/apps/VOL3D.cpp): x, y, z zeroed (3 initialisation calls), then
    node positions with spacings 0.3, 0.2, 0.1 on the padded domain."""
    dom = Domain(n, 3)
    d = DataInit()
    for _ in range(3):
        d.const(0, 0.0)
    x, y, z = dom.positions(0.3, 0.2, 0.1)
    return {"x": x, "y": y, "z": z, "n": n}


def _vol3d_run(i):
    dom = Domain(i["n"], 3)
    dense = np.empty(dom.lpz + 1 - dom.fpz, np.float64)
    vol3d_zones(i["x"], i["y"], i["z"], dense, dom.fpz, dom.jp, dom.kp, VNORMQ)
    vol = np.zeros(dom.nnalls)
    vol[dom.fpz:dom.lpz + 1] = dense             # the zone range is contiguous: no scatter
    return {"vol": vol}


def vol3d_suite_ref(x, y, z, dom: Domain, vnormq=VNORMQ):
    """numpy VOL3D over the linear zone range (ghost zones included), zeros elsewhere."""
    lo, hi, jp, kp = dom.fpz, dom.lpz + 1, dom.jp, dom.kp
    offs = (0, 1, jp, 1 + jp, kp, 1 + kp, jp + kp, 1 + jp + kp)

    def diffs(a):
        c = [a[lo + o:hi + o] for o in offs]
        return c[7] - c[1], c[7] - c[2], c[7] - c[4], c[3] - c[0], c[5] - c[0], c[6] - c[0]
    x71, x72, x74, x30, x50, x60 = diffs(x)
    y71, y72, y74, y30, y50, y60 = diffs(y)
    z71, z72, z74, z30, z50, z60 = diffs(z)

    def term(xs, ys, zs, xa, ya, za, xb, yb, zb):
        return xs * (ya * zb - za * yb) + ys * (za * xb - xa * zb) + zs * (xa * yb - ya * xb)
    v = term(x71 + x60, y71 + y60, z71 + z60, x72, y72, z72, x30, y30, z30)
    v = v + term(x72 + x50, y72 + y50, z72 + z50, x74, y74, z74, x60, y60, z60)
    v = v + term(x74 + x30, y74 + y30, z74 + z30, x74, y74, z74, x60, y60, z60)
    v = v + term(x74 + x30, y74 + y30, z74 + z30, x71, y71, z71, x50, y50, z50)
    vol = np.zeros(dom.nnalls)
    vol[lo:hi] = v * vnormq
    return vol


def _vol3d_bench(i):
    dom = Domain(i["n"], 3)

    def finish(h, _):
        vol = np.zeros(dom.nnalls)
        vol[dom.fpz:dom.lpz + 1] = h["dense"]
        return {"vol": vol}
    return resident(i, lambda d: launcher(vol3d_zones, d["x"], d["y"], d["z"], d["dense"], dom.fpz,
                                          dom.jp, dom.kp, VNORMQ),
                    read=("x", "y", "z"), new={"dense": ((dom.lpz + 1 - dom.fpz,), np.float64)},
                    finish=finish)


def _vol3d_its(n):
    dom = Domain(n, 3)
    return dom.lpz + 1 - dom.fpz


def _ddv_in(n):
    """The suite's set-up (src/apps/DEL_DOT_VEC_2D.cpp): x, y and the zone list are constant
    initialisations (3 calls), then positions with spacings 0.2, 0.1 on the padded domain, then
    xdot and ydot (so their factors are 0.1 then 0.2)."""
    dom = Domain(n, 2)
    d = DataInit()
    for _ in range(3):
        d.const(0, 0.0)
    x, y = dom.positions(0.2, 0.1)
    fx, fy = d.real(dom.nnalls), d.real(dom.nnalls)
    return {"x": x, "y": y, "fx": fx, "fy": fy, "zones": dom.real_zones().astype(np.int32),
            "jp": dom.jp, "n": n}


def _ddv_run(i):
    dom = Domain(i["n"], 2)
    grid = (dom.jp, dom.jp)
    div = np.empty(grid, np.float64)
    del_dot_vec_2d_nodes(*(i[k].reshape(-1) for k in ("x", "y", "fx", "fy")), div, dom.imin,
                         dom.imax)
    return {"div": div.reshape(-1)}


def _ddv_bench(i):
    dom = Domain(i["n"], 2)
    grid = (dom.jp, dom.jp)
    names = ("x", "y", "fx", "fy")
    return resident(i, lambda d: launcher(del_dot_vec_2d_nodes, *(d[k] for k in names), d["div"],
                                          dom.imin, dom.imax),
                    read=names, shapes=dict.fromkeys(names, (dom.jp * dom.jp,)),
                    new={"div": (grid, np.float64)},
                    finish=lambda h, _: {"div": h["div"].reshape(-1)})


def _fir_bench(i):
    m = i["n"] - FIR_COEFF.size
    return resident(i, lambda d: launcher(fir, d["inp"], d["dense"]),
                    read=("inp",), new={"dense": ((m,), np.float64)},
                    finish=lambda h, _: {"out": np.concatenate([h["dense"], np.zeros(FIR_COEFF.size)])})


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
    """The suite's standard initialisation of ``in`` (n values); out[i] for i < n - 16, the
    last 16 outputs keep their initial 0 (src/apps/FIR.cpp)."""
    return {"inp": DataInit().real(n), "n": n}


def _fir_run(i):
    n = i["n"]
    dense = np.empty(n - FIR_COEFF.size, np.float64)
    fir(i["inp"], dense)
    out = np.zeros(n)
    out[:dense.size] = dense
    return {"out": out}


def _fir_ref(i):
    m = i["n"] - FIR_COEFF.size
    acc = np.zeros(m)
    for j, c in enumerate(FIR_COEFF):
        acc = acc + c * i["inp"][j:j + m]
    return {"out": np.concatenate([acc, np.zeros(FIR_COEFF.size)])}


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

_LEN = dict(problem=lambda n: n)
raja_case(name="PRESSURE", group="apps", make=_pressure_in, reps=700, default_size=N,
          small_size=SMALL, run=_pressure_run, reference=_pressure_ref, flops=lambda n: 2.0 * n,
          bytes=lambda n: 8.0 * 6 * n, checksum_keys=("p_new",), bench=_pressure_bench,
          description="LULESH pressure: the suite's 2 loops, one kernel each")
raja_case(name="PRESSURE_FUSED", group="apps", make=_pressure_in, reps=700, default_size=N,
          small_size=SMALL, run=_pressure_fused_run, reference=_pressure_ref,
          flops=lambda n: 2.0 * n, bytes=lambda n: 8.0 * 5 * n, checksum_keys=("p_new",),
          bench=lambda i: _pressure_bench(i, fused=True),
          description="PRESSURE's 2 loop bodies in one kernel (a kaio variant, not the suite's)")
raja_case(name="ENERGY", group="apps", make=_energy_in, reps=130, default_size=N, small_size=SMALL,
          run=_energy_run, reference=_energy_ref, tolerance=_SQRT, flops=lambda n: 58.0 * n,
          bytes=lambda n: 8.0 * 15 * n, bench=_energy_bench,
          description="LULESH energy: the suite's 6 loops, one kernel each")
raja_case(name="ENERGY_FUSED", group="apps", make=_energy_in, reps=130, default_size=N,
          small_size=SMALL, run=_energy_fused_run, reference=_energy_ref, tolerance=_SQRT,
          flops=lambda n: 58.0 * n, bytes=lambda n: 8.0 * 15 * n,
          description="ENERGY's 6 loop bodies in one kernel (a kaio variant, not the suite's)",
          bench=lambda i: _energy_bench(i, fused=True))
raja_case(name="VOL3D", group="apps", make=_vol3d_in, reps=100, default_size=100, small_size=6,
          run=_vol3d_run,
          reference=lambda i: {"vol": vol3d_suite_ref(i["x"], i["y"], i["z"], Domain(i["n"], 3))},
          flops=lambda n: 72.0 * _vol3d_its(n), bytes=lambda n: 8.0 * 4 * _vol3d_its(n),
          checksum_scale=1e-3, problem=_vol3d_its, bench=_vol3d_bench,
          description="hexahedron volumes over the padded zone range (ghost zones included)")
raja_case(name="DEL_DOT_VEC_2D", group="apps", make=_ddv_in, reps=100, default_size=1000,
          small_size=40, run=_ddv_run, reference=_ddv_ref, flops=lambda n: 54.0 * n * n,
          bytes=lambda n: 8.0 * 5 * n * n, bench=_ddv_bench,
          description="2-D divergence over the real zones of a padded mesh")
raja_case(name="FIR", group="apps", make=_fir_in, reps=160, default_size=N, small_size=SMALL,
          run=_fir_run, reference=_fir_ref, flops=lambda n: 32.0 * (n - 16),
          bytes=lambda n: 16.0 * n, checksum_scale=1e-4, **_LEN, description="16-tap FIR filter",
          bench=_fir_bench)
raja_case(name="LTIMES", group="apps", make=_ltimes_in, reps=50, default_size=(488, 32, 25, 64),
          small_size=(6, 4, 5, 8), run=_ltimes_run, reference=_ltimes_ref,
          flops=lambda s: 2.0 * s[0] * s[1] * s[2] * s[3],
          bytes=lambda s: 8.0 * (2 * s[0] * s[1] * s[2] + s[0] * s[1] * s[3] + s[2] * s[3]),
          checksum_scale=1e-3, problem=lambda s: s[0] * s[1] * s[2], carry=feed("phi"),
          description="phi += ell psi (discrete-ordinates moments)",
          bench=lambda i: resident(i, lambda d: launcher(ltimes, d["ell"], d["psi"], d["phi"]),
                                   read=("ell", "psi"), update=("phi",)))
