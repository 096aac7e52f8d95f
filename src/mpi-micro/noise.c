/* System noise: a fixed sequential loop, outer x inner timed repetitions, four
 * MPI_Allreduce per outer iteration (the kernel: noise_kernel_f08.f90 or noise_kernel_c.c).
 *
 * Per rank: min/mean/median/max of the repetition times and the fraction of outliers
 * (samples above --noise-outlier x the rank's minimum, i.e. the noise-free time);
 * stretch = max/min.  Curves: noise-hist.dat (1 us bins: bin_us count_all then one count
 * column per rank for up to 16 ranks; empty bins left out) and noise-ranks.dat.
 */
#include "mm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef MM_NOISE_F08
#define MM_NOISE_F08 0   /* the Makefile sets it to 1 for the Fortran kernel */
#endif
#if MM_NOISE_F08
static const char KERNEL[] = "Fortran 2008 (mpi_f08)";
#else
static const char KERNEL[] = "C";
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void mm_run_noise(MPI_Comm comm, const mm_opts *o)
{
    const int P = mm_size, outer = o->noise_outer, inner = o->noise_inner;
    const size_t n = (size_t)outer * (size_t)inner;
    double *t = mm_alloc(n * sizeof *t);
    mm_tally tl;
    mm_tally_init(&tl, "noise", o);
    mm_say("  kernel: %s, %d x %d repetitions of %ld steps\n", KERNEL, outer, inner, o->noise_work);
    int64_t errors = 0, digest = 0;
    mm_noise_kernel(MPI_Comm_c2f(comm), outer, inner, (int64_t)o->noise_work, (int64_t)o->seed,
                    tl.corrupt, t, &errors, &digest);
    tl.errors = (uint64_t)errors;
    tl.checked = (uint64_t)outer * 4;
    tl.digest = (uint64_t)digest;

    for (size_t i = 0; i < n; i++) t[i] *= 1e6;
    double mn = t[0], mx = t[0], sum = 0;
    for (size_t i = 0; i < n; i++) {
        mn = t[i] < mn ? t[i] : mn;
        mx = t[i] > mx ? t[i] : mx;
        sum += t[i];
    }
    uint64_t outliers = 0;
    for (size_t i = 0; i < n; i++) outliers += t[i] > o->noise_outlier * mn;
    double *sorted = mm_alloc(n * sizeof *sorted);
    memcpy(sorted, t, n * sizeof *t);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    free(sorted);

    /* per-rank table */
    double mine[5] = {mn, sum / (double)n, median, mx, 100.0 * (double)outliers / (double)n};
    double *all = mm_rank == 0 ? mm_alloc(sizeof mine * (size_t)P) : NULL;
    MPI_Gather(mine, 5, MPI_DOUBLE, all, 5, MPI_DOUBLE, 0, comm);
    FILE *f = mm_curve_open("noise-ranks.dat", "system noise per rank",
                            "rank min_us mean_us median_us max_us outlier_pct");
    double stretch = 0;
    if (mm_rank == 0) {
        for (int r = 0; r < P; r++) {
            double *a = all + 5 * r;
            fprintf(f, "%d %.4f %.4f %.4f %.4f %.3f\n", r, a[0], a[1], a[2], a[3], a[4]);
            if (a[0] > 0 && a[3] / a[0] > stretch) stretch = a[3] / a[0];
        }
        free(all);
    }
    mm_curve_close(f);

    /* histogram, 1 us bins */
    long maxbin = (long)floor(mx);
    MPI_Allreduce(MPI_IN_PLACE, &maxbin, 1, MPI_LONG, MPI_MAX, comm);
    size_t nb = (size_t)maxbin + 1;
    uint64_t *h = mm_alloc(nb * sizeof *h);
    for (size_t i = 0; i < n; i++) h[(size_t)floor(t[i])]++;
    const int per_rank = P <= 16;
    uint64_t *hall = mm_rank == 0 && per_rank ? mm_alloc(nb * (size_t)P * sizeof *h) : NULL;
    if (per_rank) MPI_Gather(h, (int)nb, MPI_UINT64_T, hall, (int)nb, MPI_UINT64_T, 0, comm);
    uint64_t *hsum = mm_rank == 0 ? mm_alloc(nb * sizeof *h) : NULL;
    MPI_Reduce(h, hsum, (int)nb, MPI_UINT64_T, MPI_SUM, 0, comm);
    f = mm_curve_open("noise-hist.dat", "system noise histogram, 1 us bins (empty bins omitted)",
                      per_rank ? "bin_us count then count_rank0 ... one column per rank"
                               : "bin_us count (more than 16 ranks: no per-rank columns)");
    if (mm_rank == 0) {
        for (size_t b = 0; b < nb; b++) {
            if (!hsum[b]) continue;
            fprintf(f, "%zu %llu", b, (unsigned long long)hsum[b]);
            for (int r = 0; per_rank && r < P; r++)
                fprintf(f, " %llu", (unsigned long long)hall[(size_t)r * nb + b]);
            fputc('\n', f);
        }
        free(hsum);
        free(hall);
    }
    mm_curve_close(f);
    free(h);

    double gmin = mn, gmax = mx, gsum = sum;
    uint64_t gout = outliers;
    MPI_Allreduce(MPI_IN_PLACE, &gmin, 1, MPI_DOUBLE, MPI_MIN, comm);
    MPI_Allreduce(MPI_IN_PLACE, &gmax, 1, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, &gsum, 1, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Allreduce(MPI_IN_PLACE, &gout, 1, MPI_UINT64_T, MPI_SUM, comm);
    const double total = (double)n * P;
    mm_tally_report(&tl, comm);
    mm_kv_u("noise_kernel_fortran", MM_NOISE_F08 ? 1 : 0);
    mm_kv_u("noise_samples", (unsigned long long)total);
    mm_kv_f("noise_min_us", gmin);
    mm_kv_f("noise_mean_us", gsum / total);
    mm_kv_f("noise_max_us", gmax);
    mm_kv_f("noise_stretch", stretch);
    mm_kv_f("noise_outlier_pct", 100.0 * (double)gout / total);
    mm_say("  min %.2f us, mean %.2f us, max %.2f us, stretch %.2f, outliers %.3f %% (> %.2f x min)\n",
           gmin, gsum / total, gmax, stretch, 100.0 * (double)gout / total, o->noise_outlier);
    free(t);
}
