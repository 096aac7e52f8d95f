/* IMB-style benchmarks: PingPong, PingPing, Sendrecv ring, Allreduce, Alltoall, Bcast.
 *
 * Per message size: verify_reps untimed exchanges whose received data is checked in full
 * (pattern from benchmark, source, destination, size, repetition) and digested; then the
 * timed loop (repetitions fitted to --time-per-size) with the buffers poisoned before and
 * checked again after it.  Point-to-point tests use ranks 0 and 1 (the others wait).
 * Curves: imb-NAME.dat; point-to-point columns bytes t_us mbytes_per_s reps (t_us is the
 * one-way time for PingPong, the time per exchange otherwise; MB = 10^6 B, Sendrecv counts
 * both directions as IMB does); collectives bytes t_avg_us t_min_us t_max_us reps.
 */
#include "mm.h"

#include <stdlib.h>
#include <string.h>

/* Allreduce contributions are pattern bytes shifted right so that the sum over all ranks
 * cannot exceed 255: MPI does not define what MPI_SUM does on overflow (Open MPI 4.1's
 * op/avx saturates 8-bit sums, other implementations wrap; see docs/mpi-micro.md).
 * Beyond 256 ranks every contribution is 0 and the check proves only that zeros arrive. */
static unsigned reduce_shift(void)
{
    unsigned s = 0;
    while ((1 << s) < mm_size) s++;
    return s;
}

static void allreduce_contribution(unsigned char *b, size_t n, int rank, size_t size, long v)
{
    const unsigned sh = reduce_shift();
    mm_fill(b, n, mm_stream(MM_ALLREDUCE, rank, 0, size, v));
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(b[i] >> sh);
}

typedef struct {
    MPI_Comm comm;
    int kind;
    size_t size;
    unsigned char *sbuf, *rbuf;
    long bcast_i;
} imb_ctx;

static void imb_loop(void *c, long n)
{
    imb_ctx *x = c;
    const int me = mm_rank, P = mm_size;
    const int other = me == 0 ? 1 : 0, right = (me + 1) % P, left = (me - 1 + P) % P;
    const int sz = (int)x->size;
    MPI_Request req;
    switch (x->kind) {
    case MM_PINGPONG:
        if (me == 0)
            for (long i = 0; i < n; i++) {
                MPI_Send(x->sbuf, sz, MPI_BYTE, 1, 1, x->comm);
                MPI_Recv(x->rbuf, sz, MPI_BYTE, 1, 1, x->comm, MPI_STATUS_IGNORE);
            }
        else if (me == 1)
            for (long i = 0; i < n; i++) {
                MPI_Recv(x->rbuf, sz, MPI_BYTE, 0, 1, x->comm, MPI_STATUS_IGNORE);
                MPI_Send(x->sbuf, sz, MPI_BYTE, 0, 1, x->comm);
            }
        break;
    case MM_PINGPING:
        if (me < 2)
            for (long i = 0; i < n; i++) {
                MPI_Isend(x->sbuf, sz, MPI_BYTE, other, 2, x->comm, &req);
                MPI_Recv(x->rbuf, sz, MPI_BYTE, other, 2, x->comm, MPI_STATUS_IGNORE);
                MPI_Wait(&req, MPI_STATUS_IGNORE);
            }
        break;
    case MM_SENDRECV:
        for (long i = 0; i < n; i++)
            MPI_Sendrecv(x->sbuf, sz, MPI_BYTE, right, 3, x->rbuf, sz, MPI_BYTE, left, 3, x->comm,
                         MPI_STATUS_IGNORE);
        break;
    case MM_ALLREDUCE:
        for (long i = 0; i < n; i++)
            MPI_Allreduce(x->sbuf, x->rbuf, sz, MPI_UINT8_T, MPI_SUM, x->comm);
        break;
    case MM_ALLTOALL:
        for (long i = 0; i < n; i++)
            MPI_Alltoall(x->sbuf, sz, MPI_BYTE, x->rbuf, sz, MPI_BYTE, x->comm);
        break;
    case MM_BCAST:
        /* the root rotates as in IMB; every rank keeps the buffer it received */
        for (long i = 0; i < n; i++)
            MPI_Bcast(x->rbuf, sz, MPI_BYTE, (int)(x->bcast_i++ % P), x->comm);
        break;
    }
}

/* Fill the send side for repetition v (and poison what will be received). */
static void setup(imb_ctx *x, long v)
{
    const int me = mm_rank, P = mm_size, right = (me + 1) % P;
    const size_t s = x->size;
    switch (x->kind) {
    case MM_PINGPONG:
    case MM_PINGPING:
        if (me < 2) mm_fill(x->sbuf, s, mm_stream(x->kind, me, 1 - me, s, v));
        mm_poison(x->rbuf, s);
        break;
    case MM_SENDRECV:
        mm_fill(x->sbuf, s, mm_stream(x->kind, me, right, s, v));
        mm_poison(x->rbuf, s);
        break;
    case MM_ALLREDUCE:
        allreduce_contribution(x->sbuf, s, me, s, v);
        mm_poison(x->rbuf, s);
        break;
    case MM_ALLTOALL:
        for (int d = 0; d < P; d++) mm_fill(x->sbuf + (size_t)d * s, s, mm_stream(x->kind, me, d, s, v));
        mm_poison(x->rbuf, s * (size_t)P);
        break;
    case MM_BCAST: {
        int root = (int)(v % P);
        if (me == root) mm_fill(x->rbuf, s, mm_stream(x->kind, root, 0, s, v));
        else mm_poison(x->rbuf, s);
        break;
    }
    }
}

/* Check what this rank received for repetition v. */
static void check(imb_ctx *x, mm_tally *t, long v, unsigned char *scratch, unsigned char *expect)
{
    const int me = mm_rank, P = mm_size, left = (me - 1 + P) % P;
    const size_t s = x->size;
    switch (x->kind) {
    case MM_PINGPONG:
    case MM_PINGPING:
        if (me < 2) mm_check(t, x->rbuf, s, mm_stream(x->kind, 1 - me, me, s, v));
        break;
    case MM_SENDRECV:
        mm_check(t, x->rbuf, s, mm_stream(x->kind, left, me, s, v));
        break;
    case MM_ALLREDUCE:
        /* byte-wise sum of every rank's contribution, computed here */
        memset(expect, 0, s);
        for (int r = 0; r < P; r++) {
            allreduce_contribution(scratch, s, r, s, v);
            for (size_t i = 0; i < s; i++) expect[i] = (unsigned char)(expect[i] + scratch[i]);
        }
        mm_check_bytes(t, x->rbuf, expect, s);
        break;
    case MM_ALLTOALL:
        for (int src = 0; src < P; src++)
            mm_check(t, x->rbuf + (size_t)src * s, s, mm_stream(x->kind, src, me, s, v));
        break;
    case MM_BCAST: {
        int root = (int)(v % P);
        if (me != root) mm_check(t, x->rbuf, s, mm_stream(x->kind, root, 0, s, v));
        break;
    }
    }
}

static const struct {
    int kind;
    const char *name;
    int p2p;
    double bw_factor;   /* bytes moved per reported time, in units of the message size */
} TESTS[] = {
    {MM_PINGPONG, "pingpong", 1, 1.0}, {MM_PINGPING, "pingping", 1, 1.0},
    {MM_SENDRECV, "sendrecv", 1, 2.0}, {MM_ALLREDUCE, "allreduce", 0, 0},
    {MM_ALLTOALL, "alltoall", 0, 0},   {MM_BCAST, "bcast", 0, 0},
};

void mm_run_imb(MPI_Comm comm, const mm_opts *o)
{
    const int P = mm_size;
    const size_t maxb = o->max_bytes;
    imb_ctx x = {.comm = comm};
    x.sbuf = mm_alloc(maxb * (size_t)P);
    x.rbuf = mm_alloc(maxb * (size_t)P);
    unsigned char *scratch = mm_alloc(maxb), *expect = mm_alloc(maxb);
    for (size_t k = 0; k < sizeof TESTS / sizeof *TESTS; k++) {
        x.kind = TESTS[k].kind;
        mm_tally t;
        mm_tally_init(&t, TESTS[k].name, o);
        char file[64], what[96];
        snprintf(file, sizeof file, "imb-%s.dat", TESTS[k].name);
        snprintf(what, sizeof what, "IMB-style %s", TESTS[k].name);
        FILE *f = mm_curve_open(file, what, TESTS[k].p2p ? "bytes t_us mbytes_per_s reps"
                                                          : "bytes t_avg_us t_min_us t_max_us reps");
        double t0 = MPI_Wtime();
        for (size_t s = o->min_bytes; s; s = mm_next_size(s, maxb)) {
            x.size = s;
            for (long v = 0; v < o->verify_reps; v++) {
                setup(&x, v);
                if (x.kind == MM_BCAST) MPI_Bcast(x.rbuf, (int)s, MPI_BYTE, (int)(v % P), comm);
                else imb_loop(&x, 1);
                check(&x, &t, v, scratch, expect);
            }
            /* timed: Bcast starts at root 0, whose buffer the others then carry on */
            const long V = o->verify_reps;
            if (x.kind == MM_BCAST) {
                if (mm_rank == 0) mm_fill(x.rbuf, s, mm_stream(x.kind, 0, 0, s, V));
                else mm_poison(x.rbuf, s);
                x.bcast_i = 0;
            } else {
                setup(&x, V);
            }
            long reps;
            double sec = mm_time_loop(comm, imb_loop, &x, o, &reps);
            if (x.kind == MM_BCAST) {
                /* every rank must now hold root 0's data */
                mm_check(&t, x.rbuf, s, mm_stream(x.kind, 0, 0, s, V));
            } else {
                check(&x, &t, V, scratch, expect);
            }
            double tmax = sec, tmin = sec, tsum = sec;
            MPI_Allreduce(MPI_IN_PLACE, &tmax, 1, MPI_DOUBLE, MPI_MAX, comm);
            MPI_Allreduce(MPI_IN_PLACE, &tmin, 1, MPI_DOUBLE, MPI_MIN, comm);
            MPI_Allreduce(MPI_IN_PLACE, &tsum, 1, MPI_DOUBLE, MPI_SUM, comm);
            if (f && TESTS[k].p2p) {
                double tus = (x.kind == MM_PINGPONG ? tmax / 2 : tmax) * 1e6;
                fprintf(f, "%zu %.4f %.2f %ld\n", s, tus, TESTS[k].bw_factor * (double)s / tus, reps);
            } else if (f) {
                fprintf(f, "%zu %.4f %.4f %.4f %ld\n", s, tsum / P * 1e6, tmin * 1e6, tmax * 1e6, reps);
            }
        }
        mm_curve_close(f);
        mm_tally_report(&t, comm);
        char key[64];
        snprintf(key, sizeof key, "%s_seconds", TESTS[k].name);
        mm_kv_f(key, MPI_Wtime() - t0);
        mm_say("  %-10s %.2f s\n", TESTS[k].name, MPI_Wtime() - t0);
    }
    free(x.sbuf);
    free(x.rbuf);
    free(scratch);
    free(expect);
}
