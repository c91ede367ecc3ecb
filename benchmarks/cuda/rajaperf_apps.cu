// Apps group: PRESSURE, ENERGY, VOL3D, DEL_DOT_VEC_2D, FIR, LTIMES
// (see rajaperf_common.cuh for the calling convention).
#include "rajaperf_common.cuh"

#define RP_INDEX long i = blockIdx.x * (long)blockDim.x + threadIdx.x

__global__ void rp_pressure_1(const double* compression, double* bvc, double cls, long n) {
    RP_INDEX;
    if (i < n) bvc[i] = cls * (compression[i] + 1.0);
}
__global__ void rp_pressure_2(const double* bvc, const double* e_old, const double* vnewc, double* p_new,
                              double p_cut, double pmin, double eosvmax, long n) {
    RP_INDEX;
    if (i < n) {
        p_new[i] = bvc[i] * e_old[i];
        if (fabs(p_new[i]) < p_cut) p_new[i] = 0.0;
        if (vnewc[i] >= eosvmax) p_new[i] = 0.0;
        if (p_new[i] < pmin) p_new[i] = pmin;
    }
}

__device__ inline double rp_ssc(double pbvc, double e, double v2, double bvc, double p, double rho0) {
    double ssc = (pbvc * e + v2 * bvc * p) / rho0;
    return ssc <= 0.1111111e-36 ? 0.3333333e-18 : sqrt(ssc);
}
// ENERGY's arrays, in native.py's order.
struct RpEnergy {
    const double *e_old, *delvc, *p_new, *p_old, *q_old, *work, *comp_half, *p_half, *bvc, *pbvc, *ql_old,
        *qq_old, *vnewc;
    double *e_new, *q_new;
};
__global__ void rp_energy_1(RpEnergy d, long n) {
    RP_INDEX;
    if (i < n) d.e_new[i] = d.e_old[i] - 0.5 * d.delvc[i] * (d.p_old[i] + d.q_old[i]) + 0.5 * d.work[i];
}
__global__ void rp_energy_2(RpEnergy d, double rho0, long n) {
    RP_INDEX;
    if (i < n) {
        if (d.delvc[i] > 0.0) {
            d.q_new[i] = 0.0;
        } else {
            double vhalf = 1.0 / (1.0 + d.comp_half[i]);
            double ssc = rp_ssc(d.pbvc[i], d.e_new[i], vhalf * vhalf, d.bvc[i], d.p_half[i], rho0);
            d.q_new[i] = ssc * d.ql_old[i] + d.qq_old[i];
        }
    }
}
__global__ void rp_energy_3(RpEnergy d, long n) {
    RP_INDEX;
    if (i < n)
        d.e_new[i] = d.e_new[i] + 0.5 * d.delvc[i] * (3.0 * (d.p_old[i] + d.q_old[i]) - 4.0 * (d.p_half[i] + d.q_new[i]));
}
__global__ void rp_energy_4(RpEnergy d, double e_cut, double emin, long n) {
    RP_INDEX;
    if (i < n) {
        d.e_new[i] += 0.5 * d.work[i];
        if (fabs(d.e_new[i]) < e_cut) d.e_new[i] = 0.0;
        if (d.e_new[i] < emin) d.e_new[i] = emin;
    }
}
__global__ void rp_energy_5(RpEnergy d, double rho0, double e_cut, double emin, long n) {
    RP_INDEX;
    if (i < n) {
        double q_tilde = 0.0;
        if (d.delvc[i] <= 0.0) {
            double ssc = rp_ssc(d.pbvc[i], d.e_new[i], d.vnewc[i] * d.vnewc[i], d.bvc[i], d.p_new[i], rho0);
            q_tilde = ssc * d.ql_old[i] + d.qq_old[i];
        }
        d.e_new[i] = d.e_new[i] - (7.0 * (d.p_old[i] + d.q_old[i]) - 8.0 * (d.p_half[i] + d.q_new[i]) +
                                   (d.p_new[i] + q_tilde)) * d.delvc[i] / 6.0;
        if (fabs(d.e_new[i]) < e_cut) d.e_new[i] = 0.0;
        if (d.e_new[i] < emin) d.e_new[i] = emin;
    }
}
__global__ void rp_energy_6(RpEnergy d, double rho0, double q_cut, long n) {
    RP_INDEX;
    if (i < n && d.delvc[i] <= 0.0) {
        double ssc = rp_ssc(d.pbvc[i], d.e_new[i], d.vnewc[i] * d.vnewc[i], d.bvc[i], d.p_new[i], rho0);
        d.q_new[i] = ssc * d.ql_old[i] + d.qq_old[i];
        if (fabs(d.q_new[i]) < q_cut) d.q_new[i] = 0.0;
    }
}
// VOL3D over the linear zone range [ibegin, iend), written to vol[i - ibegin].
__global__ void rp_vol3d(const double* x, const double* y, const double* z, double* vol, double vnormq,
                         long ibegin, long iend, long jp, long kp) {
    long i = ibegin + blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < iend) {
        const long n0 = i, n1 = i + 1, n2 = i + jp, n3 = i + 1 + jp, n4 = i + kp, n5 = i + 1 + kp, n6 = i + jp + kp,
                   n7 = i + 1 + jp + kp;
        double x71 = x[n7] - x[n1], x72 = x[n7] - x[n2], x74 = x[n7] - x[n4];
        double x30 = x[n3] - x[n0], x50 = x[n5] - x[n0], x60 = x[n6] - x[n0];
        double y71 = y[n7] - y[n1], y72 = y[n7] - y[n2], y74 = y[n7] - y[n4];
        double y30 = y[n3] - y[n0], y50 = y[n5] - y[n0], y60 = y[n6] - y[n0];
        double z71 = z[n7] - z[n1], z72 = z[n7] - z[n2], z74 = z[n7] - z[n4];
        double z30 = z[n3] - z[n0], z50 = z[n5] - z[n0], z60 = z[n6] - z[n0];
        double xps = x71 + x60, yps = y71 + y60, zps = z71 + z60;
        double cyz = y72 * z30 - z72 * y30, czx = z72 * x30 - x72 * z30, cxy = x72 * y30 - y72 * x30;
        double v = xps * cyz + yps * czx + zps * cxy;
        xps = x72 + x50; yps = y72 + y50; zps = z72 + z50;
        cyz = y74 * z60 - z74 * y60; czx = z74 * x60 - x74 * z60; cxy = x74 * y60 - y74 * x60;
        v += xps * cyz + yps * czx + zps * cxy;
        xps = x74 + x30; yps = y74 + y30; zps = z74 + z30;
        v += xps * cyz + yps * czx + zps * cxy;
        cyz = y71 * z50 - z71 * y50; czx = z71 * x50 - x71 * z50; cxy = x71 * y50 - y71 * x50;
        v += xps * cyz + yps * czx + zps * cxy;
        vol[i - ibegin] = v * vnormq;
    }
}
// DEL_DOT_VEC_2D through the real-zone list (zone = lower-left node).
__global__ void rp_del_dot_vec_2d(const double* x, const double* y, const double* fx, const double* fy,
                                  const int* zones, double* div, long jp, long nzones) {
    long ii = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (ii < nzones) {
        long n4 = zones[ii], n1 = n4 + 1, n2 = n1 + jp, n3 = n4 + jp;
        double xi = 0.5 * (x[n1] + x[n2] - x[n3] - x[n4]), xj = 0.5 * (x[n2] + x[n3] - x[n4] - x[n1]);
        double yi = 0.5 * (y[n1] + y[n2] - y[n3] - y[n4]), yj = 0.5 * (y[n2] + y[n3] - y[n4] - y[n1]);
        double fxi = 0.5 * (fx[n1] + fx[n2] - fx[n3] - fx[n4]), fxj = 0.5 * (fx[n2] + fx[n3] - fx[n4] - fx[n1]);
        double fyi = 0.5 * (fy[n1] + fy[n2] - fy[n3] - fy[n4]), fyj = 0.5 * (fy[n2] + fy[n3] - fy[n4] - fy[n1]);
        double rarea = 1.0 / (xi * yj - xj * yi + 1.0e-20);
        double dfxdx = rarea * (fxi * yj - fxj * yi), dfydy = rarea * (fyj * xi - fyi * xj);
        double affine = (fy[n1] + fy[n2] + fy[n3] + fy[n4]) / (y[n1] + y[n2] + y[n3] + y[n4]);
        div[n4] = dfxdx + dfydy + affine;
    }
}
#define RP_FIR_TAPS 16
__constant__ double rp_fir_coeff[RP_FIR_TAPS];
__global__ void rp_fir(const double* in, double* out, long n) {
    RP_INDEX;
    if (i < n) {
        double sum = 0.0;
        for (int j = 0; j < RP_FIR_TAPS; ++j) sum += rp_fir_coeff[j] * in[i + j];
        out[i] = sum;
    }
}
// LTIMES: phi[z][g][m] += sum_d ell[m][d] psi[z][g][d], one thread per (m, g, z).
__global__ void rp_ltimes(const double* ell, const double* psi, double* phi, long nd, long ng, long nm, long nz) {
    long m = threadIdx.x + blockIdx.x * (long)blockDim.x, g = blockIdx.y, z = blockIdx.z;
    if (m < nm && g < ng && z < nz) {
        double v = phi[m + nm * (g + ng * z)];
        for (long d = 0; d < nd; ++d) v += ell[d + nd * m] * psi[d + nd * (g + ng * z)];
        phi[m + nm * (g + ng * z)] = v;
    }
}

RP_ENTRY(PRESSURE) {  // a = (compression, e_old, vnewc, bvc, p_new); s = (cls, p_cut, pmin, eosvmax)
    for (long r = 0; r < reps; ++r) {
        rp_pressure_1<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 3), s[0], n[0]);
        rp_pressure_2<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 3), RP_ARG(double, 1), RP_ARG(double, 2),
                                                  RP_ARG(double, 4), s[1], s[2], s[3], n[0]);
    }
    return rp_status();
}
RP_ENTRY(ENERGY) {  // a: the RpEnergy fields in order; s = (rho0, e_cut, emin, q_cut)
    RpEnergy d;
    const double** in[] = {&d.e_old, &d.delvc, &d.p_new, &d.p_old, &d.q_old, &d.work, &d.comp_half,
                           &d.p_half, &d.bvc, &d.pbvc, &d.ql_old, &d.qq_old, &d.vnewc};
    for (int k = 0; k < 13; ++k) *in[k] = RP_ARG(const double, k);
    d.e_new = RP_ARG(double, 13);
    d.q_new = RP_ARG(double, 14);
    unsigned g = rp_grid(n[0]);
    for (long r = 0; r < reps; ++r) {
        rp_energy_1<<<g, RP_BLOCK>>>(d, n[0]);
        rp_energy_2<<<g, RP_BLOCK>>>(d, s[0], n[0]);
        rp_energy_3<<<g, RP_BLOCK>>>(d, n[0]);
        rp_energy_4<<<g, RP_BLOCK>>>(d, s[1], s[2], n[0]);
        rp_energy_5<<<g, RP_BLOCK>>>(d, s[0], s[1], s[2], n[0]);
        rp_energy_6<<<g, RP_BLOCK>>>(d, s[0], s[3], n[0]);
    }
    return rp_status();
}
RP_ENTRY(VOL3D) {  // a = (x, y, z, vol); s = (vnormq,); n = (ibegin, iend, jp, kp)
    for (long r = 0; r < reps; ++r)
        rp_vol3d<<<rp_grid(n[1] - n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2),
                                                    RP_ARG(double, 3), s[0], n[0], n[1], n[2], n[3]);
    return rp_status();
}
RP_ENTRY(DEL_DOT_VEC_2D) {  // a = (x, y, fx, fy, zones, div); n = (jp, nzones, nnalls)
    cudaMemsetAsync(RP_ARG(double, 5), 0, n[2] * sizeof(double), 0);  // the suite's set-up value
    for (long r = 0; r < reps; ++r)
        rp_del_dot_vec_2d<<<rp_grid(n[1]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2),
                                                      RP_ARG(double, 3), RP_ARG(int, 4), RP_ARG(double, 5), n[0], n[1]);
    return rp_status();
}
RP_ENTRY(FIR) {  // a = (in, out); s = the 16 coefficients; n = (outputs,)
    cudaMemcpyToSymbol(rp_fir_coeff, s, RP_FIR_TAPS * sizeof(double));
    for (long r = 0; r < reps; ++r) rp_fir<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), n[0]);
    return rp_status();
}
RP_ENTRY(LTIMES) {  // a = (ell, psi, phi); n = (nz, ng, nm, nd)
    dim3 block(32), grid((unsigned)((n[2] + 31) / 32), (unsigned)n[1], (unsigned)n[0]);
    for (long r = 0; r < reps; ++r)
        rp_ltimes<<<grid, block>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), n[3], n[1], n[2], n[0]);
    return rp_status();
}
