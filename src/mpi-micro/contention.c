/* Latency without and with contention (WOCON / WICON), vs message size.
 *
 * WOCON: rank 0 ping-pongs with each other rank in turn while the rest wait; the latency
 * is the mean one-way time over partners.  WICON: every repetition draws a random
 * pairing of all ranks (from --seed: the same pairs in every run) and all pairs
 * ping-pong at once; the latency is the mean one-way time over ranks.  With 2 ranks the
 * only pairing is 0-1: WICON then measures one pair without contention (said in the
 * output), not a made-up contended figure.
 * Curve: contention.dat, columns bytes wocon_us wicon_us ratio (wicon/wocon).
 */
#include "mm.h"

#include <stdlib.h>

typedef struct {
    MPI_Comm comm;
    size_t size;
    unsigned char *sbuf, *rbuf;
    int partner, first;   /* WOCON: the fixed pair */
    int wicon;
    uint64_t seed;
    long rep;             /* WICON: pairing counter */
    int *perm;
    int last_partner;
} ct_ctx;

/* The partner of this rank in pairing `rep` (and whether it sends first); -1 if none. */
static int pairing(ct_ctx *c, long rep, int *first)
{
    const int P = mm_size;
    uint64_t r = mm_mix(c->seed ^ mm_mix((uint64_t)rep) ^ c->size);
    for (int i = 0; i < P; i++) c->perm[i] = i;
    for (int i = P - 1; i > 0; i--) {
        r = mm_mix(r);
        int j = (int)(r % (uint64_t)(i + 1));
        int tmp = c->perm[i];
        c->perm[i] = c->perm[j];
        c->perm[j] = tmp;
    }
    for (int pos = 0; pos < P; pos++)
        if (c->perm[pos] == mm_rank) {
            int q = pos ^ 1;
            *first = pos % 2 == 0;
            return q < P ? c->perm[q] : -1;
        }
    return -1;
}

static void exchange(ct_ctx *c, int partner, int first)
{
    const int n = (int)c->size;
    if (first) {
        MPI_Send(c->sbuf, n, MPI_BYTE, partner, 9, c->comm);
        MPI_Recv(c->rbuf, n, MPI_BYTE, partner, 9, c->comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(c->rbuf, n, MPI_BYTE, partner, 9, c->comm, MPI_STATUS_IGNORE);
        MPI_Send(c->sbuf, n, MPI_BYTE, partner, 9, c->comm);
    }
}

static void ct_loop(void *p, long n)
{
    ct_ctx *c = p;
    for (long i = 0; i < n; i++) {
        int first = 0, partner = c->partner;
        if (c->wicon) {
            partner = pairing(c, c->rep++, &first);
            c->last_partner = partner;
        } else {
            first = c->first;
        }
        if (partner >= 0) exchange(c, partner, first);
    }
}

void mm_run_contention(MPI_Comm comm, const mm_opts *o)
{
    const int me = mm_rank, P = mm_size;
    const long V = o->verify_reps;
    ct_ctx c = {.comm = comm, .seed = o->seed};
    c.sbuf = mm_alloc(o->contention_max_bytes);
    c.rbuf = mm_alloc(o->contention_max_bytes);
    c.perm = mm_alloc(sizeof(int) * (size_t)P);
    mm_tally two, twi;
    mm_tally_init(&two, "wocon", o);
    mm_tally_init(&twi, "wicon", o);
    if (P == 2)
        mm_say("  2 ranks: the only pairing is 0-1, so WICON runs one pair without contention\n");
    mm_kv_u("contention_pairs", (unsigned long long)(P / 2));
    FILE *f = mm_curve_open("contention.dat", "latency without (WOCON) and with (WICON) contention",
                            "bytes wocon_us wicon_us ratio");
    for (size_t s = o->min_bytes; s && s <= o->contention_max_bytes; s = mm_next_size(s, o->contention_max_bytes)) {
        c.size = s;
        /* WOCON: 0 with each rank in turn */
        c.wicon = 0;
        double wocon = 0;
        for (int p = 1; p < P; p++) {
            c.partner = me == 0 ? p : me == p ? 0 : -1;
            c.first = me == 0;
            double sec = mm_checked_exchange(comm, ct_loop, &c, o, &two, MM_WOCON, me, c.partner,
                                             c.sbuf, c.rbuf, s);
            wocon += sec / 2 / (P - 1);
        }
        /* WICON: random pairs, all at once; verification pairings are drawn apart (rep < 0) */
        c.wicon = 1;
        for (long v = 0; v < V; v++) {
            int first = 0, partner = pairing(&c, -1 - v, &first);
            if (partner >= 0) mm_fill(c.sbuf, s, mm_stream(MM_WICON, me, partner, s, v));
            mm_poison(c.rbuf, s);
            if (partner >= 0) exchange(&c, partner, first);
            if (partner >= 0) mm_check(&twi, c.rbuf, s, mm_stream(MM_WICON, partner, me, s, v));
        }
        /* timed: each rank sends the same data to whichever partner it draws */
        mm_fill(c.sbuf, s, mm_stream(MM_WICON, me, -1, s, V));
        mm_poison(c.rbuf, s);
        c.rep = 0;
        c.last_partner = -1;
        double sec = mm_time_loop(comm, ct_loop, &c, o, NULL);
        /* the last pairing depends on how many repetitions were timed: checked, not digested */
        twi.no_digest = 1;
        if (c.last_partner >= 0) mm_check(&twi, c.rbuf, s, mm_stream(MM_WICON, c.last_partner, -1, s, V));
        twi.no_digest = 0;
        double wicon = sec / 2;
        MPI_Allreduce(MPI_IN_PLACE, &wicon, 1, MPI_DOUBLE, MPI_SUM, comm);
        wicon /= P;   /* mean over ranks (with an odd count, the one left out waits) */
        if (f) fprintf(f, "%zu %.4f %.4f %.4f\n", s, wocon * 1e6, wicon * 1e6, wicon / wocon);
    }
    mm_curve_close(f);
    mm_tally_report(&two, comm);
    mm_tally_report(&twi, comm);
    free(c.sbuf);
    free(c.rbuf);
    free(c.perm);
}
