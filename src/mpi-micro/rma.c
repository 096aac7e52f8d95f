/* One-sided communication (MPI-3 RMA, passive target: MPI_Win_lock_all and flushes).
 *
 * put / get / accumulate (uint64 SUM) from rank 0 to rank 1, contiguous and strided (8-byte
 * elements at a 128 B stride on the target), per size from 8 B to --rma-max-bytes:
 *   latency   one operation + MPI_Win_flush, per operation;
 *   bandwidth --rma-window operations to distinct target regions + one flush;
 *   the two modes share one size's --time-per-size (half each).
 * Each size starts with one fully checked operation, and after the timed loops every
 * target region (put, accumulate: checked by the target) or origin buffer (get) is checked
 * again; accumulate regions must hold their initial value + (number of operations) x the
 * added value.
 * fetch-and-op: MPI_Fetch_and_op(+1) latency; the fetched values must count up one by one.
 * shift: every rank puts to its right neighbour at once (aggregate bandwidth).
 * AMO counter: ranks 0..k-1 (k = 1, 2, 4, ..., all) each do --amo-ops fetch-and-add(1) on one
 * counter of rank 0; the counter must end at k x amo-ops, and with all ranks the fetched
 * values together must be exactly 0 .. ranks x amo-ops - 1.
 * Curves: rma-put.dat, rma-get.dat, rma-acc.dat (bytes lat_us bw_mbytes_per_s strided_lat_us
 * strided_bw_mbytes_per_s), rma-shift.dat (bytes lat_us aggregate_mbytes_per_s),
 * rma-amo.dat (ranks us_per_op mops_per_s).
 */
#include "mm.h"

#include <stdlib.h>
#include <string.h>

enum { ORIGIN = 0, TARGET = 1, STRIDE = 16 /* elements of 8 B: 128 B */ };

typedef struct {
    MPI_Comm comm;
    MPI_Win win;
    unsigned char *base;
    int kind, strided, bw, W;
    size_t size, n64;
    unsigned char *obuf;
    MPI_Datatype vec;
    uint64_t ops[16];          /* operations per target region (accumulate) */
    int right;                 /* shift */
    size_t counter;            /* offset of the fetch-and-op counter */
    uint64_t fetched_next;     /* fetch-and-op: the value the next fetch must return */
    uint64_t fop_errors;
    long fop_n;
} rma_ctx;

static void op(rma_ctx *c, int j)
{
    const int n = (int)c->size, n64 = (int)c->n64;
    const MPI_Aint disp = c->strided ? (MPI_Aint)j * 8 : (MPI_Aint)j * (MPI_Aint)c->size;
    switch (c->kind) {
    case MM_PUT:
        if (c->strided) MPI_Put(c->obuf, n64, MPI_UINT64_T, TARGET, disp, 1, c->vec, c->win);
        else MPI_Put(c->obuf, n, MPI_BYTE, TARGET, disp, n, MPI_BYTE, c->win);
        break;
    case MM_GET:
        if (c->strided) MPI_Get(c->obuf + (size_t)j * c->size, n64, MPI_UINT64_T, TARGET, disp, 1, c->vec, c->win);
        else MPI_Get(c->obuf + (size_t)j * c->size, n, MPI_BYTE, TARGET, disp, n, MPI_BYTE, c->win);
        break;
    case MM_ACC:
        if (c->strided) MPI_Accumulate(c->obuf, n64, MPI_UINT64_T, TARGET, disp, 1, c->vec, MPI_SUM, c->win);
        else MPI_Accumulate(c->obuf, n64, MPI_UINT64_T, TARGET, disp, n64, MPI_UINT64_T, MPI_SUM, c->win);
        break;
    }
    c->ops[j]++;
}

static void xfer_loop(void *p, long n)
{
    rma_ctx *c = p;
    if (mm_rank != ORIGIN) return;
    for (long i = 0; i < n; i++) {
        for (int j = 0; j < (c->bw ? c->W : 1); j++) op(c, j);
        MPI_Win_flush(TARGET, c->win);
    }
}

/* Element k of target region j, for the current layout. */
static uint64_t *elem(rma_ctx *c, int j, size_t k)
{
    size_t off = c->strided ? (size_t)j * 8 + k * STRIDE * 8 : (size_t)j * c->size + k * 8;
    return (uint64_t *)(c->base + off);
}

static void target_region_set(rma_ctx *c, int j, const uint64_t *v)
{
    for (size_t k = 0; k < c->n64; k++) *elem(c, j, k) = v[k];
}

static void target_region_get(rma_ctx *c, int j, uint64_t *v)
{
    for (size_t k = 0; k < c->n64; k++) v[k] = *elem(c, j, k);
}

/* Initial contents of target region j for accumulate. */
static uint64_t acc_init_stream(rma_ctx *c, int j) { return mm_stream(MM_ACC, TARGET, j, c->size, c->strided); }

static void prepare(rma_ctx *c, uint64_t *tmp)
{
    const uint64_t src = mm_stream(c->kind, ORIGIN, TARGET, c->size, c->strided);
    if (mm_rank == TARGET) {
        for (int j = 0; j < c->W; j++) {
            if (c->kind == MM_PUT) {
                memset(tmp, 0xA5, c->n64 * 8);
            } else if (c->kind == MM_GET) {
                mm_fill_u64(tmp, c->n64, mm_stream(MM_GET, TARGET, ORIGIN, c->size, c->strided));
            } else {
                mm_fill_u64(tmp, c->n64, acc_init_stream(c, j));
            }
            target_region_set(c, j, tmp);
        }
        MPI_Win_sync(c->win);
    }
    if (mm_rank == ORIGIN) {
        if (c->kind == MM_GET) mm_poison(c->obuf, c->size * (size_t)c->W);
        else mm_fill_u64((uint64_t *)c->obuf, c->n64, src);
    }
    memset(c->ops, 0, sizeof c->ops);
    MPI_Barrier(c->comm);
}

/* Check regions 0..nreg-1 (on the target for put/accumulate, the origin for get). */
static void verify(rma_ctx *c, mm_tally *t, int nreg, uint64_t *tmp, uint64_t *want)
{
    /* every rank learns the origin's operation counts (accumulate expectations); the origin
     * sends them after its last flush, so the target checks completed operations */
    MPI_Bcast(c->ops, 16, MPI_UINT64_T, ORIGIN, c->comm);
    if (mm_rank == TARGET && c->kind != MM_GET) {
        MPI_Win_sync(c->win);
        for (int j = 0; j < nreg; j++) {
            target_region_get(c, j, tmp);
            if (c->kind == MM_PUT) {
                mm_check(t, tmp, c->size, mm_stream(MM_PUT, ORIGIN, TARGET, c->size, c->strided));
            } else {
                uint64_t *add = want + c->n64;
                mm_fill_u64(want, c->n64, acc_init_stream(c, j));
                mm_fill_u64(add, c->n64, mm_stream(MM_ACC, ORIGIN, TARGET, c->size, c->strided));
                for (size_t k = 0; k < c->n64; k++) want[k] += c->ops[j] * add[k];
                mm_check_u64(t, tmp, want, c->n64);
            }
        }
    }
    if (mm_rank == ORIGIN && c->kind == MM_GET)
        for (int j = 0; j < nreg; j++)
            mm_check(t, c->obuf + (size_t)j * c->size, c->size,
                     mm_stream(MM_GET, TARGET, ORIGIN, c->size, c->strided));
    MPI_Barrier(c->comm);   /* no operation may touch a region while it is checked */
}

static void transfers(rma_ctx *c, const mm_opts *o, int kind, const char *name, uint64_t *tmp,
                      uint64_t *want)
{
    mm_tally t;
    mm_tally_init(&t, name, o);
    mm_opts half = *o;
    half.time_per_size = o->time_per_size / 2;
    c->kind = kind;
    char file[64], what[64];
    snprintf(file, sizeof file, "%s.dat", name);
    for (char *p = file; *p; p++) if (*p == '_') *p = '-';
    snprintf(what, sizeof what, "one-sided %s, rank 0 to rank 1", name + 4);
    FILE *f = mm_curve_open(file, what, "bytes lat_us bw_mbytes_per_s strided_lat_us strided_bw_mbytes_per_s");
    for (size_t s = 8; s; s = mm_next_size(s, o->rma_max_bytes)) {
        c->size = s;
        c->n64 = s / 8;
        MPI_Type_vector((int)c->n64, 1, STRIDE, MPI_UINT64_T, &c->vec);
        MPI_Type_commit(&c->vec);
        double res[2][2];
        for (int strided = 0; strided < 2; strided++) {
            c->strided = strided;
            prepare(c, tmp);
            /* one fully checked operation */
            if (mm_rank == ORIGIN) {
                op(c, 0);
                MPI_Win_flush(TARGET, c->win);
            }
            verify(c, &t, 1, tmp, want);
            for (int bw = 0; bw < 2; bw++) {
                c->bw = bw;
                double sec = mm_time_loop(c->comm, xfer_loop, c, &half, NULL);
                MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, c->comm);
                res[strided][bw] = bw ? (double)c->W * (double)s / (sec * 1e6) : sec * 1e6;
            }
            /* accumulate regions now depend on how many operations were timed */
            t.no_digest = kind == MM_ACC;
            verify(c, &t, c->W, tmp, want);
            t.no_digest = 0;
        }
        MPI_Type_free(&c->vec);
        if (f) fprintf(f, "%zu %.4f %.2f %.4f %.2f\n", s, res[0][0], res[0][1], res[1][0], res[1][1]);
    }
    mm_curve_close(f);
    mm_tally_report(&t, c->comm);
}

static void fop_loop(void *p, long n)
{
    rma_ctx *c = p;
    if (mm_rank != ORIGIN) return;
    const uint64_t one = 1;
    for (long i = 0; i < n; i++) {
        uint64_t got;
        MPI_Fetch_and_op(&one, &got, MPI_UINT64_T, TARGET, (MPI_Aint)c->counter, MPI_SUM, c->win);
        MPI_Win_flush(TARGET, c->win);
        c->fop_errors += got != c->fetched_next++;
        c->fop_n++;
    }
}

static void fetch_and_op(rma_ctx *c, const mm_opts *o)
{
    mm_tally t;
    mm_tally_init(&t, "rma_fop", o);
    uint64_t *ctr = (uint64_t *)(c->base + c->counter);
    if (mm_rank == TARGET) {
        *ctr = 0;
        MPI_Win_sync(c->win);
    }
    MPI_Barrier(c->comm);
    c->fetched_next = 0;
    c->fop_errors = 0;
    c->fop_n = 0;
    if (mm_rank == ORIGIN) {
        /* checked operations: the fetched values 0, 1, ... */
        for (long v = 0; v < o->verify_reps; v++) {
            uint64_t got, want = (uint64_t)v;
            const uint64_t one = 1;
            MPI_Fetch_and_op(&one, &got, MPI_UINT64_T, TARGET, (MPI_Aint)c->counter, MPI_SUM, c->win);
            MPI_Win_flush(TARGET, c->win);
            mm_check_u64(&t, &got, &want, 1);
            c->fetched_next++;
            c->fop_n++;
        }
    }
    double sec = mm_time_loop(c->comm, fop_loop, c, o, NULL);
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, c->comm);
    t.errors += c->fop_errors;   /* out-of-sequence values in the timed loop */
    uint64_t total = (uint64_t)c->fop_n;
    MPI_Bcast(&total, 1, MPI_UINT64_T, ORIGIN, c->comm);
    MPI_Barrier(c->comm);
    if (mm_rank == TARGET) {
        MPI_Win_sync(c->win);
        uint64_t got = *ctr;
        t.no_digest = 1;   /* the count depends on timing: checked, not digested */
        mm_check_u64(&t, &got, &total, 1);
        t.no_digest = 0;
    }
    mm_tally_report(&t, c->comm);
    mm_kv_f("rma_fop_latency_us", sec * 1e6);
    mm_say("  rma_fop    %.3f us per fetch-and-op + flush\n", sec * 1e6);
}

static void shift_loop(void *p, long n)
{
    rma_ctx *c = p;
    for (long i = 0; i < n; i++) {
        MPI_Put(c->obuf, (int)c->size, MPI_BYTE, c->right, 0, (int)c->size, MPI_BYTE, c->win);
        MPI_Win_flush(c->right, c->win);
    }
}

static void shift(rma_ctx *c, const mm_opts *o)
{
    const int me = mm_rank, P = mm_size, left = (me - 1 + P) % P;
    c->right = (me + 1) % P;
    mm_tally t;
    mm_tally_init(&t, "rma_shift", o);
    FILE *f = mm_curve_open("rma-shift.dat", "one-sided shift: every rank puts to its right neighbour",
                            "bytes lat_us aggregate_mbytes_per_s");
    for (size_t s = 8; s; s = mm_next_size(s, o->rma_max_bytes)) {
        c->size = s;
        mm_poison(c->base, s);
        MPI_Win_sync(c->win);
        mm_fill(c->obuf, s, mm_stream(MM_SHIFT, me, c->right, s, 0));
        MPI_Barrier(c->comm);
        shift_loop(c, 1);
        MPI_Barrier(c->comm);
        MPI_Win_sync(c->win);
        mm_check(&t, c->base, s, mm_stream(MM_SHIFT, left, me, s, 0));
        mm_poison(c->base, s);
        MPI_Win_sync(c->win);
        MPI_Barrier(c->comm);
        double sec = mm_time_loop(c->comm, shift_loop, c, o, NULL);
        MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, c->comm);
        MPI_Barrier(c->comm);
        MPI_Win_sync(c->win);
        mm_check(&t, c->base, s, mm_stream(MM_SHIFT, left, me, s, 0));
        MPI_Barrier(c->comm);
        if (f) fprintf(f, "%zu %.4f %.2f\n", s, sec * 1e6, (double)P * (double)s / (sec * 1e6));
    }
    mm_curve_close(f);
    mm_tally_report(&t, c->comm);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void amo_counter(rma_ctx *c, const mm_opts *o)
{
    const int me = mm_rank, P = mm_size;
    const long n = o->amo_ops;
    mm_tally t;
    mm_tally_init(&t, "rma_amo", o);
    uint64_t *vals = mm_alloc(sizeof(uint64_t) * (size_t)n);
    uint64_t *ctr = (uint64_t *)(c->base + c->counter);
    FILE *f = mm_curve_open("rma-amo.dat", "AMO counter: ranks 0..k-1 fetch-and-add one counter on rank 0",
                            "ranks us_per_op mops_per_s");
    for (int k = 1; k; k = k == P ? 0 : (2 * k < P ? 2 * k : P)) {
        if (me == 0) {
            *ctr = 0;
            MPI_Win_sync(c->win);
        }
        MPI_Barrier(c->comm);
        double t0 = MPI_Wtime(), sec = 0;
        if (me < k) {
            const uint64_t one = 1;
            for (long i = 0; i < n; i++) {
                MPI_Fetch_and_op(&one, &vals[i], MPI_UINT64_T, 0, (MPI_Aint)c->counter, MPI_SUM, c->win);
                MPI_Win_flush(0, c->win);
                /* one rank's own fetches must increase (others' adds come in between) */
                if (i && vals[i] <= vals[i - 1]) t.errors++;
            }
            sec = MPI_Wtime() - t0;
        }
        MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, c->comm);
        MPI_Barrier(c->comm);
        if (me == 0) {
            MPI_Win_sync(c->win);
            uint64_t got = *ctr, want = (uint64_t)k * (uint64_t)n;
            mm_check_u64(&t, &got, &want, 1);
        }
        if (k == P) {
            /* all fetched values together: exactly 0 .. P*n-1 */
            uint64_t *all = me == 0 ? mm_alloc(sizeof(uint64_t) * (size_t)n * (size_t)P) : NULL;
            MPI_Gather(vals, (int)n, MPI_UINT64_T, all, (int)n, MPI_UINT64_T, 0, c->comm);
            if (me == 0) {
                size_t m = (size_t)n * (size_t)P;
                qsort(all, m, sizeof *all, cmp_u64);
                uint64_t *want = mm_alloc(sizeof(uint64_t) * m);
                for (size_t i = 0; i < m; i++) want[i] = i;
                mm_check_u64(&t, all, want, m);
                free(want);
                free(all);
            }
        }
        if (f) fprintf(f, "%d %.4f %.4f\n", k, sec / (double)n * 1e6, (double)k * (double)n / (sec * 1e6));
        mm_say("  rma_amo    %d rank(s): %.3f us per fetch-and-add\n", k, sec / (double)n * 1e6);
    }
    mm_curve_close(f);
    mm_tally_report(&t, c->comm);
    free(vals);
}

void mm_run_rma(MPI_Comm comm, const mm_opts *o)
{
    rma_ctx c = {.comm = comm, .W = o->rma_window};
    const size_t area = 16 * o->rma_max_bytes;
    c.counter = area;
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "same_disp_unit", "true");
    MPI_Win_allocate((MPI_Aint)(area + 64), 1, info, comm, &c.base, &c.win);
    MPI_Info_free(&info);
    memset(c.base, 0, area + 64);
    c.obuf = mm_alloc(o->rma_max_bytes * 16);
    uint64_t *tmp = mm_alloc(o->rma_max_bytes), *want = mm_alloc(2 * o->rma_max_bytes);
    MPI_Win_lock_all(MPI_MODE_NOCHECK, c.win);
    MPI_Win_sync(c.win);
    MPI_Barrier(comm);
    double t0 = MPI_Wtime();
    transfers(&c, o, MM_PUT, "rma_put", tmp, want);
    mm_say("  rma_put    %.2f s\n", MPI_Wtime() - t0);
    t0 = MPI_Wtime();
    transfers(&c, o, MM_GET, "rma_get", tmp, want);
    mm_say("  rma_get    %.2f s\n", MPI_Wtime() - t0);
    t0 = MPI_Wtime();
    transfers(&c, o, MM_ACC, "rma_acc", tmp, want);
    mm_say("  rma_acc    %.2f s\n", MPI_Wtime() - t0);
    fetch_and_op(&c, o);
    shift(&c, o);
    amo_counter(&c, o);
    MPI_Win_unlock_all(c.win);
    MPI_Win_free(&c.win);
    free(c.obuf);
    free(tmp);
    free(want);
}
