/* Computation/communication overlap: Irecv, Send, `work` us of compute, Wait.
 *
 * Ranks are paired (0-1, 2-3, ...; with an odd count the last rank waits).  For 16 B,
 * 1 KiB and 16 KiB messages the total time per iteration is measured against the amount
 * of work (0, 1, 2, 3, 4, 6, 8, 12, ... us up to --overlap-max-work; the compute is a
 * fixed number of integer steps calibrated to us once at start-up).  The overlap window
 * of a size is the largest work whose total time stays within --overlap-tolerance of the
 * time without work: the compute the MPI library hides behind that message.
 * Curve: overlap.dat, columns work_us compute_us t_16B_us t_1KiB_us t_16KiB_us.
 */
#include "mm.h"

#include <stdlib.h>

static const size_t SIZES[] = {16, 1024, 16384};
static const char *SIZE_NAMES[] = {"16B", "1KiB", "16KiB"};
enum { NSIZES = 3, MAXPOINTS = 64 };

typedef struct {
    MPI_Comm comm;
    int partner;
    size_t size;
    unsigned char *sbuf, *rbuf;
    uint64_t steps, x;
    int compute_only;
} ov_ctx;

static void ov_loop(void *c, long n)
{
    ov_ctx *o = c;
    if (o->compute_only) {
        for (long i = 0; i < n; i++) o->x = mm_spin(o->steps, o->x);
    } else if (o->partner >= 0) {
        MPI_Request req;
        for (long i = 0; i < n; i++) {
            MPI_Irecv(o->rbuf, (int)o->size, MPI_BYTE, o->partner, 7, o->comm, &req);
            MPI_Send(o->sbuf, (int)o->size, MPI_BYTE, o->partner, 7, o->comm);
            o->x = mm_spin(o->steps, o->x);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    }
    mm_sink += o->x;
}

void mm_run_overlap(MPI_Comm comm, const mm_opts *o)
{
    const int me = mm_rank;
    double work[MAXPOINTS];
    int np = 0;
    work[np++] = 0;
    for (double p = 1; p <= o->overlap_max_work && np < MAXPOINTS - 1; p *= 2) {
        work[np++] = p;
        if (p >= 2 && 1.5 * p <= o->overlap_max_work && np < MAXPOINTS) work[np++] = 1.5 * p;
    }
    ov_ctx x = {.comm = comm, .x = 88172645463325252ull};
    x.partner = (me ^ 1) < mm_size ? (me ^ 1) : -1;
    x.sbuf = mm_alloc(SIZES[NSIZES - 1]);
    x.rbuf = mm_alloc(SIZES[NSIZES - 1]);
    if (mm_size % 2) mm_say("  odd number of ranks: rank %d has no partner and waits\n", mm_size - 1);
    mm_tally t;
    mm_tally_init(&t, "overlap", o);
    double compute[MAXPOINTS], total[NSIZES][MAXPOINTS];

    x.compute_only = 1;
    for (int w = 0; w < np; w++) {
        x.steps = mm_spin_steps(work[w]);
        compute[w] = mm_time_loop(comm, ov_loop, &x, o, NULL) * 1e6;
        MPI_Allreduce(MPI_IN_PLACE, &compute[w], 1, MPI_DOUBLE, MPI_MAX, comm);
    }
    x.compute_only = 0;
    for (int k = 0; k < NSIZES; k++) {
        const size_t s = x.size = SIZES[k];
        x.steps = 0;
        for (long v = 0; v < o->verify_reps; v++) {
            if (x.partner >= 0) mm_fill(x.sbuf, s, mm_stream(MM_OVERLAP, me, x.partner, s, v));
            mm_poison(x.rbuf, s);
            ov_loop(&x, 1);
            if (x.partner >= 0) mm_check(&t, x.rbuf, s, mm_stream(MM_OVERLAP, x.partner, me, s, v));
        }
        const long V = o->verify_reps;
        if (x.partner >= 0) mm_fill(x.sbuf, s, mm_stream(MM_OVERLAP, me, x.partner, s, V));
        for (int w = 0; w < np; w++) {
            x.steps = mm_spin_steps(work[w]);
            mm_poison(x.rbuf, s);
            double sec = mm_time_loop(comm, ov_loop, &x, o, NULL);
            if (x.partner >= 0) mm_check(&t, x.rbuf, s, mm_stream(MM_OVERLAP, x.partner, me, s, V));
            MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, comm);
            total[k][w] = sec * 1e6;
        }
    }
    FILE *f = mm_curve_open("overlap.dat", "overlap: Irecv, Send, compute, Wait (time per iteration)",
                            "work_us compute_us t_16B_us t_1KiB_us t_16KiB_us");
    if (f) {
        for (int w = 0; w < np; w++)
            fprintf(f, "%g %.4f %.4f %.4f %.4f\n", work[w], compute[w], total[0][w], total[1][w],
                    total[2][w]);
    }
    mm_curve_close(f);
    mm_tally_report(&t, comm);
    for (int k = 0; k < NSIZES; k++) {
        double base = total[k][0], window = 0;
        for (int w = 1; w < np && total[k][w] <= base * (1 + o->overlap_tolerance); w++) window = work[w];
        char key[64];
        snprintf(key, sizeof key, "overlap_base_%s_us", SIZE_NAMES[k]);
        mm_kv_f(key, base);
        snprintf(key, sizeof key, "overlap_window_%s_us", SIZE_NAMES[k]);
        mm_kv_f(key, window);
        mm_say("  %-6s no work %.2f us; overlap window %g us\n", SIZE_NAMES[k], base, window);
    }
    free(x.sbuf);
    free(x.rbuf);
}
