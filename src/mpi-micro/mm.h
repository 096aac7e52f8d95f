/* mpi-micro: MPI micro-benchmarks written for apptune (issue #4).
 *
 * Every benchmark checks the data it received against what was sent (a pattern that
 * is a pure function of benchmark, source, destination, size and repetition), counts
 * mismatched bytes/elements, and folds the checked data into a digest that does not
 * depend on timing.  Results go to files in the working directory:
 *   mpi-micro.summary   key=value lines (verification tallies, figures, run facts)
 *   *.dat               one whitespace-separated curve per file, '#' header lines
 */
#ifndef MM_H
#define MM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Benchmark identifiers: part of every data pattern's seed. */
enum {
    MM_PINGPONG = 1, MM_PINGPING, MM_SENDRECV, MM_ALLREDUCE, MM_ALLTOALL, MM_BCAST,
    MM_NOISE, MM_OVERLAP, MM_WOCON, MM_WICON, MM_PLACEMENT,
    MM_PUT, MM_GET, MM_ACC, MM_FOP, MM_SHIFT, MM_AMO
};

typedef struct {
    /* IMB-style sweep and the timed loops of every benchmark */
    size_t min_bytes, max_bytes;
    double time_per_size;       /* s: cap of one timed loop (repetitions are fitted to it) */
    long min_reps, max_reps;
    int verify_reps;            /* untimed, fully checked exchanges per size */
    /* system noise */
    int noise_outer, noise_inner;
    long noise_work;            /* xorshift steps per inner iteration (a fixed amount of work) */
    double noise_outlier;       /* a sample is an outlier above this factor x the rank's minimum */
    /* overlap */
    double overlap_max_work;    /* us */
    double overlap_tolerance;   /* total time may grow by this fraction and still count as hidden */
    /* contention */
    size_t contention_max_bytes;
    uint64_t seed;              /* random pairs (WICON) and noise contributions */
    /* placement */
    size_t placement_min, placement_max, placement_step;
    /* one-sided */
    size_t rma_max_bytes;
    int rma_window;             /* operations per flush in the bandwidth mode (<= 16) */
    long amo_ops;               /* fetch-and-add operations per rank in the counter test */
    char benchmarks[256];
    char corrupt[256];          /* fault injection: flip one received byte in these subtests */
} mm_opts;

/* Verification tally of one subtest. */
typedef struct {
    char name[32];
    uint64_t errors;    /* mismatched bytes (or elements) seen by this rank */
    uint64_t checked;   /* messages (or element arrays) checked by this rank */
    uint64_t digest;    /* running digest of the checked data */
    int corrupt;        /* inject one corruption at the next check (fault injection) */
    int no_digest;      /* checks made while set are counted but not digested: their data
                           depend on timing (e.g. how many accumulates the timed loop did) */
} mm_tally;

typedef void (*mm_loop_fn)(void *ctx, long n);

extern int mm_rank, mm_size;

/* options */
int mm_parse_args(int argc, char **argv, mm_opts *o);
int mm_selected(const mm_opts *o, const char *bench);

/* patterns, digests */
uint64_t mm_mix(uint64_t z);
uint64_t mm_stream(int bench, long src, long dst, uint64_t size, long rep);
void mm_fill(void *buf, size_t n, uint64_t stream);
void mm_fill_u64(uint64_t *buf, size_t n, uint64_t stream);
uint64_t mm_hash(const void *buf, size_t n);
void mm_poison(void *buf, size_t n);
uint32_t mm_fold32(uint64_t d);

/* verification */
void mm_tally_init(mm_tally *t, const char *name, const mm_opts *o);
void mm_check(mm_tally *t, void *buf, size_t n, uint64_t stream);
void mm_check_bytes(mm_tally *t, void *got, const void *expect, size_t n);
void mm_check_u64(mm_tally *t, uint64_t *got, const uint64_t *expect, size_t n);
uint64_t mm_tally_report(mm_tally *t, MPI_Comm comm);
uint64_t mm_total_errors(void);

/* timing */
double mm_time_loop(MPI_Comm comm, mm_loop_fn fn, void *ctx, const mm_opts *o, long *reps);
double mm_checked_exchange(MPI_Comm comm, mm_loop_fn fn, void *ctx, const mm_opts *o, mm_tally *t,
                           int bench, int me, int partner, void *sbuf, void *rbuf, size_t size);
void mm_spin_calibrate(MPI_Comm comm);
uint64_t mm_spin_steps(double us);
uint64_t mm_spin(uint64_t steps, uint64_t x);
extern volatile uint64_t mm_sink;

/* output (rank 0 only; no-ops elsewhere) */
void mm_summary_open(const char *file);
void mm_summary_close(void);
void mm_kv_u(const char *key, unsigned long long v);
void mm_kv_f(const char *key, double v);
FILE *mm_curve_open(const char *file, const char *what, const char *columns);
void mm_curve_close(FILE *f);
void mm_say(const char *fmt, ...);
void *mm_alloc(size_t n);

/* sizes: powers of two from lo to hi (hi included even if not a power of two) */
size_t mm_next_size(size_t s, size_t hi);

/* benchmarks */
void mm_run_imb(MPI_Comm comm, const mm_opts *o);
void mm_run_noise(MPI_Comm comm, const mm_opts *o);
void mm_run_overlap(MPI_Comm comm, const mm_opts *o);
void mm_run_contention(MPI_Comm comm, const mm_opts *o);
void mm_run_placement(MPI_Comm comm, const mm_opts *o);
void mm_run_rma(MPI_Comm comm, const mm_opts *o);

/* The system-noise kernel: in Fortran 2008 with mpi_f08 (noise_kernel_f08.f90) or in C
 * (noise_kernel_c.c), chosen at build time; both compute bit-identical data and digests.
 * times(inner, outer) in seconds; errors = mismatched allreduce results. */
void mm_noise_kernel(MPI_Fint comm, int outer, int inner, int64_t work, int64_t seed, int corrupt,
                     double *times, int64_t *errors, int64_t *digest);

#endif
