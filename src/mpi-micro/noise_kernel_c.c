/* The system-noise kernel in C (the `noise=c` build).  Bit-identical to the Fortran 2008
 * kernel in noise_kernel_f08.f90 (same integer work, same contributions, same digest),
 * so both builds share one reference checksum.
 *
 * For each of `outer` iterations: `inner` timed repetitions of a fixed sequential loop
 * (`work` xorshift steps), then four MPI_Allreduce (SUM, BXOR, MAX, MIN) whose results
 * are checked against the values computed locally from every rank's contribution. */
#include "mm.h"

static uint64_t xorshift(uint64_t x)
{
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

static uint64_t seed_of(uint64_t seed, int rank, int outer, int inner, int k)
{
    uint64_t x = seed ^ ((uint64_t)rank << 40) ^ ((uint64_t)outer << 20) ^ ((uint64_t)inner << 4) ^
                 (uint64_t)k;
    if (x == 0) x = 2685821657736338717ull;
    for (int i = 0; i < 4; i++) x = xorshift(x);
    return x;
}

static int64_t contribution(uint64_t seed, int rank, int outer, int k)
{
    uint64_t c = seed_of(seed, rank, outer, 65535, k);
    return (int64_t)(k == 1 ? (c & 65535u) : c);
}

static uint64_t fold(uint64_t d, uint64_t v)
{
    d = ((d << 5) | (d >> 59)) ^ v;
    return xorshift(d);
}

void mm_noise_kernel(MPI_Fint fcomm, int outer, int inner, int64_t work, int64_t seed, int corrupt,
                     double *times, int64_t *errors, int64_t *digest)
{
    MPI_Comm comm = MPI_Comm_f2c(fcomm);
    int rank, nranks;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    const MPI_Op ops[4] = {MPI_SUM, MPI_BXOR, MPI_MAX, MPI_MIN};
    uint64_t d = 0;
    int64_t bad = 0;
    for (int j = 0; j < outer; j++) {
        for (int i = 0; i < inner; i++) {
            uint64_t x = seed_of((uint64_t)seed, rank, j, i, 0);
            double t0 = MPI_Wtime();
            for (int64_t w = 0; w < work; w++) x = xorshift(x);
            times[(size_t)j * (size_t)inner + (size_t)i] = MPI_Wtime() - t0;
            d = fold(d, x);
        }
        for (int k = 1; k <= 4; k++) {
            int64_t c = contribution((uint64_t)seed, rank, j, k), res = 0;
            MPI_Allreduce(&c, &res, 1, MPI_INT64_T, ops[k - 1], comm);
            if (corrupt && j == 0 && k == 1) res ^= 1;
            int64_t expect = contribution((uint64_t)seed, 0, j, k);
            for (int r = 1; r < nranks; r++) {
                int64_t v = contribution((uint64_t)seed, r, j, k);
                switch (k) {
                case 1: expect += v; break;
                case 2: expect ^= v; break;
                case 3: expect = v > expect ? v : expect; break;
                case 4: expect = v < expect ? v : expect; break;
                }
            }
            bad += res != expect;
            d = fold(d, (uint64_t)res);
        }
    }
    *errors = bad;
    *digest = (int64_t)d;
}
