/* mpi-micro: options, data patterns, verification tallies, timed loops, output files. */
#define _POSIX_C_SOURCE 200809L
#include "mm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int mm_rank, mm_size;
volatile uint64_t mm_sink;

static FILE *summary;
static uint64_t total_errors;
static double spin_steps_per_us = 100.0;

/* ------------------------------------------------------------------ options */
static const char *BENCHMARKS[] = {"imb", "noise", "overlap", "contention", "placement", "rma"};

static void defaults(mm_opts *o)
{
    memset(o, 0, sizeof *o);
    o->min_bytes = 1;
    o->max_bytes = 4u << 20;
    o->time_per_size = 0.05;
    o->min_reps = 3;
    o->max_reps = 100000;
    o->verify_reps = 2;
    o->noise_outer = 100;
    o->noise_inner = 100;
    o->noise_work = 10000;
    o->noise_outlier = 1.5;
    o->overlap_max_work = 256;
    o->overlap_tolerance = 0.1;
    o->contention_max_bytes = 1u << 20;
    o->seed = 20261121;
    o->placement_min = 125;
    o->placement_max = 5000;
    o->placement_step = 125;
    o->rma_max_bytes = 1u << 20;
    o->rma_window = 16;
    o->amo_ops = 2000;
    strcpy(o->benchmarks, "imb,noise,overlap,contention,placement,rma");
}

static void usage(void)
{
    if (mm_rank == 0)
        fprintf(stderr,
                "usage: mpi-micro [--key=value ...]\n"
                "  --benchmarks=imb,noise,overlap,contention,placement,rma (default: all)\n"
                "  --min-bytes --max-bytes --time-per-size(s) --min-reps --max-reps --verify-reps\n"
                "  --noise-outer --noise-inner --noise-work(steps) --noise-outlier(factor)\n"
                "  --overlap-max-work(us) --overlap-tolerance(fraction)\n"
                "  --contention-max-bytes --seed\n"
                "  --placement-min --placement-max --placement-step\n"
                "  --rma-max-bytes --rma-window(<=16) --amo-ops\n"
                "  --corrupt=SUBTEST[,...]|all  fault injection: flip one received byte\n");
}

static int parse_size(const char *v, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || x == 0) return -1;
    *out = (size_t)x;
    return 0;
}

static int parse_long(const char *v, long *out, long lo)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo) return -1;
    *out = x;
    return 0;
}

static int parse_double(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= 0) || !isfinite(x)) return -1;
    *out = x;
    return 0;
}

int mm_selected(const mm_opts *o, const char *bench)
{
    char list[sizeof o->benchmarks];
    strcpy(list, o->benchmarks);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, bench)) return 1;
    return 0;
}

int mm_parse_args(int argc, char **argv, mm_opts *o)
{
    defaults(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(); return 1; }
        const char *eq = strchr(a, '=');
        if (strncmp(a, "--", 2) || !eq) {
            if (mm_rank == 0) fprintf(stderr, "mpi-micro: expected --key=value, got '%s'\n", a);
            usage();
            return 2;
        }
        char key[64];
        size_t klen = (size_t)(eq - a - 2);
        if (klen >= sizeof key) klen = sizeof key - 1;
        memcpy(key, a + 2, klen);
        key[klen] = 0;
        const char *v = eq + 1;
        long l = 0;
        size_t z = 0;
        int bad = 0;
#define SZ(k, f) else if (!strcmp(key, k)) { bad = parse_size(v, &z); o->f = z; }
#define LG(k, f, lo) else if (!strcmp(key, k)) { bad = parse_long(v, &l, lo); o->f = l; }
#define DB(k, f) else if (!strcmp(key, k)) { bad = parse_double(v, &o->f); }
        if (0) {}
        SZ("min-bytes", min_bytes) SZ("max-bytes", max_bytes)
        DB("time-per-size", time_per_size)
        LG("min-reps", min_reps, 1) LG("max-reps", max_reps, 1) LG("verify-reps", verify_reps, 1)
        LG("noise-outer", noise_outer, 1) LG("noise-inner", noise_inner, 1)
        LG("noise-work", noise_work, 1) DB("noise-outlier", noise_outlier)
        DB("overlap-max-work", overlap_max_work) DB("overlap-tolerance", overlap_tolerance)
        SZ("contention-max-bytes", contention_max_bytes)
        else if (!strcmp(key, "seed")) { bad = parse_size(v, &z); o->seed = z; }
        SZ("placement-min", placement_min) SZ("placement-max", placement_max)
        SZ("placement-step", placement_step)
        SZ("rma-max-bytes", rma_max_bytes) LG("rma-window", rma_window, 1) LG("amo-ops", amo_ops, 1)
        else if (!strcmp(key, "benchmarks") && strlen(v) < sizeof o->benchmarks) {
            strcpy(o->benchmarks, v);
            char list[sizeof o->benchmarks];
            strcpy(list, v);
            for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
                int known = 0;
                for (size_t b = 0; b < sizeof BENCHMARKS / sizeof *BENCHMARKS; b++)
                    known |= !strcmp(tok, BENCHMARKS[b]);
                if (!known) {
                    if (mm_rank == 0) fprintf(stderr, "mpi-micro: unknown benchmark '%s'\n", tok);
                    return 2;
                }
            }
        }
        else if (!strcmp(key, "corrupt") && strlen(v) < sizeof o->corrupt) strcpy(o->corrupt, v);
        else {
            if (mm_rank == 0) fprintf(stderr, "mpi-micro: unknown option '--%s'\n", key);
            usage();
            return 2;
        }
#undef SZ
#undef LG
#undef DB
        if (bad) {
            if (mm_rank == 0) fprintf(stderr, "mpi-micro: bad value for --%s: '%s'\n", key, v);
            return 2;
        }
    }
    if (o->min_bytes > o->max_bytes || o->min_reps > o->max_reps || o->rma_window > 16 ||
        o->placement_min > o->placement_max || o->rma_max_bytes < 8 || o->rma_max_bytes % 8 ||
        o->noise_inner >= 65535 || o->noise_outer >= (1 << 20)) {
        if (mm_rank == 0)
            fprintf(stderr, "mpi-micro: inconsistent options (min > max, rma-window > 16, rma-max-bytes "
                            "not a multiple of 8, noise-inner >= 65535 or noise-outer >= 2^20)\n");
        return 2;
    }
    return 0;
}

/* ------------------------------------------------------------------ patterns */
uint64_t mm_mix(uint64_t z)
{
    /* splitmix64 finaliser */
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t mm_stream(int bench, long src, long dst, uint64_t size, long rep)
{
    uint64_t s = mm_mix((uint64_t)bench);
    s = mm_mix(s ^ (uint64_t)src);
    s = mm_mix(s ^ (uint64_t)dst);
    s = mm_mix(s ^ size);
    return mm_mix(s ^ (uint64_t)rep);
}

static inline uint64_t word_of(uint64_t stream, size_t k)
{
    return mm_mix(stream + (uint64_t)k * 0xD1B54A32D192ED03ull);
}

void mm_fill(void *buf, size_t n, uint64_t stream)
{
    unsigned char *p = buf;
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t w = word_of(stream, k);
        memcpy(p + k * 8, &w, 8);
    }
    if (k * 8 < n) {
        uint64_t w = word_of(stream, k);
        memcpy(p + k * 8, &w, n - k * 8);
    }
}

void mm_fill_u64(uint64_t *buf, size_t n, uint64_t stream)
{
    for (size_t k = 0; k < n; k++) buf[k] = word_of(stream, k);
}

static uint64_t differing_bytes(uint64_t a, uint64_t b, size_t n)
{
    uint64_t x = a ^ b, c = 0;
    for (size_t i = 0; i < n; i++, x >>= 8) c += (x & 0xff) != 0;
    return c;
}

static uint64_t mismatches(const void *buf, size_t n, uint64_t stream)
{
    const unsigned char *p = buf;
    uint64_t bad = 0;
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t w = word_of(stream, k), g;
        memcpy(&g, p + k * 8, 8);
        if (g != w) bad += differing_bytes(g, w, 8);
    }
    if (k * 8 < n) {
        uint64_t w = word_of(stream, k), g = 0, e = 0;
        memcpy(&g, p + k * 8, n - k * 8);
        memcpy(&e, &w, n - k * 8);
        if (g != e) bad += differing_bytes(g, e, n - k * 8);
    }
    return bad;
}

uint64_t mm_hash(const void *buf, size_t n)
{
    const unsigned char *p = buf;
    uint64_t h = mm_mix(n);
    size_t k = 0;
    for (; (k + 1) * 8 <= n; k++) {
        uint64_t w;
        memcpy(&w, p + k * 8, 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 32;
    }
    if (k * 8 < n) {
        uint64_t w = 0;
        memcpy(&w, p + k * 8, n - k * 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    }
    return mm_mix(h);
}

void mm_poison(void *buf, size_t n) { memset(buf, 0xA5, n); }

uint32_t mm_fold32(uint64_t d) { return (uint32_t)(d ^ (d >> 32)); }

/* ------------------------------------------------------------------ verification */
void mm_tally_init(mm_tally *t, const char *name, const mm_opts *o)
{
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    char list[sizeof o->corrupt];
    strcpy(list, o->corrupt);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ","))
        if (!strcmp(tok, name) || !strcmp(tok, "all")) t->corrupt = 1;
}

/* Fault injection: the first received buffer this rank checks gets one byte flipped,
 * as a faulty transport would deliver it. */
static void inject(mm_tally *t, void *buf, size_t n)
{
    if (t->corrupt && n) {
        ((unsigned char *)buf)[n / 2] ^= 0x5A;
        t->corrupt = 0;
    }
}

void mm_check(mm_tally *t, void *buf, size_t n, uint64_t stream)
{
    inject(t, buf, n);
    t->errors += mismatches(buf, n, stream);
    t->checked++;
    if (!t->no_digest) t->digest = mm_mix(t->digest ^ mm_hash(buf, n));
}

void mm_check_bytes(mm_tally *t, void *got, const void *expect, size_t n)
{
    inject(t, got, n);
    const unsigned char *g = got, *e = expect;
    for (size_t i = 0; i < n; i++) t->errors += g[i] != e[i];
    t->checked++;
    if (!t->no_digest) t->digest = mm_mix(t->digest ^ mm_hash(got, n));
}

void mm_check_u64(mm_tally *t, uint64_t *got, const uint64_t *expect, size_t n)
{
    inject(t, got, n * 8);
    for (size_t i = 0; i < n; i++) t->errors += got[i] != expect[i];
    t->checked++;
    if (!t->no_digest) t->digest = mm_mix(t->digest ^ mm_hash(got, n * 8));
}

/* Collective: totals over ranks; rank 0 writes NAME_errors, NAME_checked, NAME_checksum. */
uint64_t mm_tally_report(mm_tally *t, MPI_Comm comm)
{
    uint64_t in[3] = {t->errors, t->checked, t->digest}, out[3];
    /* sums wrap modulo 2^64: the digest of all ranks, independent of arrival order */
    MPI_Allreduce(in, out, 3, MPI_UINT64_T, MPI_SUM, comm);
    char key[64];
    snprintf(key, sizeof key, "%s_errors", t->name);
    mm_kv_u(key, out[0]);
    snprintf(key, sizeof key, "%s_checked", t->name);
    mm_kv_u(key, out[1]);
    snprintf(key, sizeof key, "%s_checksum", t->name);
    mm_kv_u(key, mm_fold32(out[2]));
    if (out[0] || !out[1])
        mm_say("VERIFICATION FAILED: %s: %llu mismatched bytes/elements in %llu checks\n", t->name,
               (unsigned long long)out[0], (unsigned long long)out[1]);
    total_errors += out[0] + (out[1] == 0);
    return out[0];
}

uint64_t mm_total_errors(void) { return total_errors; }

/* ------------------------------------------------------------------ timing */
/* Time fn: once as warm-up, then a probe that grows its repetitions until it lasts at
 * least 1 ms (the slowest rank decides, so every rank runs the same counts), then
 * repetitions fitted to --time-per-size (within min/max reps) in 5 batches, stopping
 * early (all ranks together) once twice that time is spent.  Returns this
 * rank's median over the batches of the seconds per repetition: on a node shared with
 * other work a descheduled batch does not move the figure (NetPIPE keeps the best of
 * its trials for the same reason).  *reps: the timed repetitions.  Data checks that
 * depend on the number of operations count them in ctx. */
double mm_time_loop(MPI_Comm comm, mm_loop_fn fn, void *ctx, const mm_opts *o, long *reps)
{
    enum { BATCHES = 5 };
    fn(ctx, 1);
    long probe = 1;
    double per;
    for (;;) {
        double t0 = MPI_Wtime();
        fn(ctx, probe);
        double t = MPI_Wtime() - t0;
        MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
        per = t / (double)probe;
        if (t >= 1e-3 || probe >= o->max_reps || t >= o->time_per_size) break;
        /* aim at 2 ms in one step when the probe says how (few synchronisations: on a
         * loaded node each one can cost a scheduler time slice) */
        double grow = t > 0 ? 2e-3 / t : 100.0;
        grow = grow < 2 ? 2 : grow > 100 ? 100 : grow;
        probe = (long)((double)probe * grow);
        if (probe > o->max_reps) probe = o->max_reps;
    }
    double fit = per > 0 ? o->time_per_size / per : (double)o->max_reps;
    long n = fit > (double)o->max_reps ? o->max_reps : (long)fit;
    if (n < o->min_reps) n = o->min_reps;
    const int nb = n < BATCHES ? (int)n : BATCHES;
    double t[BATCHES];
    long done = 0;
    MPI_Barrier(comm);
    const double start = MPI_Wtime();
    int b = 0;
    while (b < nb) {
        long k = n / nb + (b < n % nb);
        double t0 = MPI_Wtime();
        fn(ctx, k);
        t[b++] = (MPI_Wtime() - t0) / (double)k;
        done += k;
        /* a node shared with other work can stall a batch far beyond the probe's estimate:
         * stop (together) once twice the budget is spent */
        double spent = MPI_Wtime() - start;
        MPI_Allreduce(MPI_IN_PLACE, &spent, 1, MPI_DOUBLE, MPI_MAX, comm);
        if (spent > 2 * o->time_per_size) break;
    }
    const int nb_done = b;
    /* median of the batches (insertion sort of at most 5) */
    for (int i = 1; i < nb_done; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    if (reps) *reps = done;
    return nb_done % 2 ? t[nb_done / 2] : 0.5 * (t[nb_done / 2 - 1] + t[nb_done / 2]);
}

/* A fixed amount of integer work (a xorshift chain): same result for every compiler and
 * flag set, and not reducible by the optimiser. */
uint64_t mm_spin(uint64_t steps, uint64_t x)
{
    for (uint64_t i = 0; i < steps; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    return x;
}

void mm_spin_calibrate(MPI_Comm comm)
{
    const uint64_t steps = 200000;
    double best = 1e30;
    for (int i = 0; i < 5; i++) {
        double t0 = MPI_Wtime();
        mm_sink += mm_spin(steps, 88172645463325252ull + (uint64_t)i);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }
    spin_steps_per_us = best > 0 ? steps / (best * 1e6) : 100.0;
    double lo = spin_steps_per_us, hi = spin_steps_per_us;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_DOUBLE, MPI_MIN, comm);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_DOUBLE, MPI_MAX, comm);
    mm_say("compute calibration: %.1f - %.1f xorshift steps per us over ranks\n", lo, hi);
}

uint64_t mm_spin_steps(double us) { return (uint64_t)(us * spin_steps_per_us + 0.5); }

/* ------------------------------------------------------------------ output */
void mm_summary_open(const char *file)
{
    if (mm_rank != 0) return;
    summary = fopen(file, "w");
    if (!summary) {
        fprintf(stderr, "mpi-micro: cannot write %s\n", file);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

void mm_summary_close(void)
{
    if (summary) fclose(summary);
    summary = NULL;
}

void mm_kv_u(const char *key, unsigned long long v)
{
    if (!summary) return;
    fprintf(summary, "%s=%llu\n", key, v);
    fflush(summary);
}

void mm_kv_f(const char *key, double v)
{
    if (!summary) return;
    fprintf(summary, "%s=%.6g\n", key, v);
    fflush(summary);
}

FILE *mm_curve_open(const char *file, const char *what, const char *columns)
{
    if (mm_rank != 0) return NULL;
    FILE *f = fopen(file, "w");
    if (!f) {
        fprintf(stderr, "mpi-micro: cannot write %s\n", file);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fprintf(f, "# mpi-micro %s, %d ranks\n# %s\n", what, mm_size, columns);
    return f;
}

void mm_curve_close(FILE *f)
{
    if (f) fclose(f);
}

void mm_say(const char *fmt, ...)
{
    if (mm_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void *mm_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1)) {
        fprintf(stderr, "mpi-micro: rank %d: cannot allocate %zu bytes\n", mm_rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    memset(p, 0, n ? n : 1);
    return p;
}

size_t mm_next_size(size_t s, size_t hi)
{
    if (s >= hi) return 0;
    size_t p = 1;
    while (p <= s) p <<= 1;
    return p < hi ? p : hi;
}

/* One exchange with a partner (partner < 0: this rank only takes part in the loop's
 * collectives), verified and then timed: o->verify_reps single exchanges, each with
 * fresh data checked on arrival, then the timed loop, whose last message is checked
 * too. Returns the slowest rank's seconds per loop iteration. */
double mm_checked_exchange(MPI_Comm comm, mm_loop_fn fn, void *ctx, const mm_opts *o, mm_tally *t,
                           int bench, int me, int partner, void *sbuf, void *rbuf, size_t size)
{
    const long V = o->verify_reps;
    for (long v = 0; v < V; v++) {
        if (partner >= 0) mm_fill(sbuf, size, mm_stream(bench, me, partner, size, v));
        mm_poison(rbuf, size);
        fn(ctx, 1);
        if (partner >= 0) mm_check(t, rbuf, size, mm_stream(bench, partner, me, size, v));
    }
    if (partner >= 0) mm_fill(sbuf, size, mm_stream(bench, me, partner, size, V));
    mm_poison(rbuf, size);
    double sec = mm_time_loop(comm, fn, ctx, o, NULL);
    if (partner >= 0) mm_check(t, rbuf, size, mm_stream(bench, partner, me, size, V));
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, comm);
    return sec;
}
