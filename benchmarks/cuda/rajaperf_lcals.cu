// Lcals group: DIFF_PREDICT, EOS, FIRST_DIFF, HYDRO_1D, INT_PREDICT, PLANCKIAN, TRIDIAG_ELIM,
// GEN_LIN_RECUR (see rajaperf_common.cuh for the calling convention).
#include "rajaperf_common.cuh"

#define RP_INDEX long i = blockIdx.x * (long)blockDim.x + threadIdx.x

// rows = px rows 4..13 and cx4 = cx rows 4..13 (row length n): the suite's chain down column i.
__global__ void rp_diff_predict(const double* cx4, double* rows, long n) {
    RP_INDEX;
    if (i < n) {
        double ar = cx4[i];
        for (int k = 0; k < 9; ++k) {
            double br = ar - rows[i + k * n];
            rows[i + k * n] = ar;
            ar = br;
        }
        rows[i + 9 * n] = ar;
    }
}
__global__ void rp_eos(const double* y, const double* z, const double* u, double* x, double q, double r,
                       double t, long n) {
    RP_INDEX;
    if (i < n)
        x[i] = u[i] + r * (z[i] + r * y[i]) +
               t * (u[i + 3] + r * (u[i + 2] + r * u[i + 1]) + t * (u[i + 6] + q * (u[i + 5] + q * u[i + 4])));
}
__global__ void rp_first_diff(const double* y, double* x, long n) {
    RP_INDEX;
    if (i < n) x[i] = y[i + 1] - y[i];
}
__global__ void rp_hydro_1d(const double* y, const double* z, double* x, double q, double r, double t, long n) {
    RP_INDEX;
    if (i < n) x[i] = q + y[i] * (r * z[i + 10] + t * z[i + 11]);
}
// rest = px rows 1..12, px0 = px row 0; dm = (dm22 .. dm28, c0).
__global__ void rp_int_predict(const double* rest, double* px0, const double d22, const double d23,
                               const double d24, const double d25, const double d26, const double d27,
                               const double d28, const double c0, long n) {
    RP_INDEX;
    if (i < n)
        px0[i] = d28 * rest[i + 11 * n] + d27 * rest[i + 10 * n] + d26 * rest[i + 9 * n] +
                 d25 * rest[i + 8 * n] + d24 * rest[i + 7 * n] + d23 * rest[i + 6 * n] +
                 d22 * rest[i + 5 * n] + c0 * (rest[i + 3 * n] + rest[i + 4 * n]) + rest[i + 1 * n];
}
__global__ void rp_planckian(const double* x, const double* u, const double* v, double* y, double* w, long n) {
    RP_INDEX;
    if (i < n) {
        y[i] = u[i] / v[i];
        w[i] = x[i] / (exp(y[i]) - 1.0);
    }
}
__global__ void rp_tridiag_elim(const double* xin, const double* y, const double* z, double* xout, long n) {
    RP_INDEX;
    if (i > 0 && i < n) xout[i] = z[i] * (y[i] - xin[i - 1]);
}
__global__ void rp_gen_lin_recur_fwd(const double* sa, const double* sb, double* b5, double* stb5, long n) {
    RP_INDEX;
    if (i < n) {
        b5[i] = sa[i] + stb5[i] * sb[i];
        stb5[i] = b5[i] - stb5[i];
    }
}
__global__ void rp_gen_lin_recur_bwd(const double* sa, const double* sb, double* b5, double* stb5, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x + 1;
    if (i > 0 && i < n + 1) {
        long k = n - i;
        b5[k] = sa[k] + stb5[k] * sb[k];
        stb5[k] = b5[k] - stb5[k];
    }
}

RP_ENTRY(DIFF_PREDICT) {
    for (long r = 0; r < reps; ++r) rp_diff_predict<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), n[0]);
    return rp_status();
}
RP_ENTRY(EOS) {
    for (long r = 0; r < reps; ++r)
        rp_eos<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), RP_ARG(double, 3),
                                           s[0], s[1], s[2], n[0]);
    return rp_status();
}
RP_ENTRY(FIRST_DIFF) {
    for (long r = 0; r < reps; ++r) rp_first_diff<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), n[0]);
    return rp_status();
}
RP_ENTRY(HYDRO_1D) {
    for (long r = 0; r < reps; ++r)
        rp_hydro_1d<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2), s[0], s[1],
                                                s[2], n[0]);
    return rp_status();
}
RP_ENTRY(INT_PREDICT) {
    for (long r = 0; r < reps; ++r)
        rp_int_predict<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), s[0], s[1], s[2], s[3],
                                                   s[4], s[5], s[6], s[7], n[0]);
    return rp_status();
}
RP_ENTRY(PLANCKIAN) { return rp_map5(rp_planckian, reps, a, n[0]); }
RP_ENTRY(TRIDIAG_ELIM) {
    for (long r = 0; r < reps; ++r)
        rp_tridiag_elim<<<rp_grid(n[0]), RP_BLOCK>>>(RP_ARG(double, 0), RP_ARG(double, 1), RP_ARG(double, 2),
                                                    RP_ARG(double, 3), n[0]);
    return rp_status();
}
RP_ENTRY(GEN_LIN_RECUR) {
    double *sa = RP_ARG(double, 0), *sb = RP_ARG(double, 1), *b5 = RP_ARG(double, 2), *stb5 = RP_ARG(double, 3);
    for (long r = 0; r < reps; ++r) {
        rp_gen_lin_recur_fwd<<<rp_grid(n[0]), RP_BLOCK>>>(sa, sb, b5, stb5, n[0]);
        rp_gen_lin_recur_bwd<<<rp_grid(n[0]), RP_BLOCK>>>(sa, sb, b5, stb5, n[0]);
    }
    return rp_status();
}
