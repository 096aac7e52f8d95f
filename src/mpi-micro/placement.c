/* Placement ping-pong: rank 0 with a partner on the same socket, on the other socket of
 * its node, and on another node, averaged over --placement-min..max bytes in steps of
 * --placement-step (125-5000 B as in the study).
 *
 * A rank's socket is the physical package of the CPUs it may run on (its affinity); a rank
 * allowed on CPUs of several sockets is not classified.  A class without a partner (one
 * socket, one node, or unbound ranks) is reported as not available: its column in
 * placement.dat is nan and the summary says placement_CLASS_available=0.
 * Curve: placement.dat, columns bytes same_socket_us other_socket_us other_node_us.
 */
#define _GNU_SOURCE
#include "mm.h"

#include <math.h>
#include <sched.h>
#include <stdlib.h>

static int package_of(int cpu)
{
    char path[128];
    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", cpu);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int id = -1;
    if (fscanf(f, "%d", &id) != 1) id = -1;
    fclose(f);
    return id;
}

/* The socket this rank is confined to, or -1 (several sockets, or unknown). */
static int my_socket(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set)) return -1;
    int sock = -2;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, &set)) continue;
        int p = package_of(cpu);
        if (p < 0 || (sock != -2 && p != sock)) return -1;
        sock = p;
    }
    return sock < 0 ? -1 : sock;
}

typedef struct {
    MPI_Comm comm;
    int partner;
    size_t size;
    unsigned char *sbuf, *rbuf;
} pl_ctx;

static void pl_loop(void *p, long n)
{
    pl_ctx *c = p;
    const int sz = (int)c->size;
    if (c->partner < 0) return;
    for (long i = 0; i < n; i++) {
        if (mm_rank == 0) {
            MPI_Send(c->sbuf, sz, MPI_BYTE, c->partner, 11, c->comm);
            MPI_Recv(c->rbuf, sz, MPI_BYTE, c->partner, 11, c->comm, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(c->rbuf, sz, MPI_BYTE, 0, 11, c->comm, MPI_STATUS_IGNORE);
            MPI_Send(c->sbuf, sz, MPI_BYTE, 0, 11, c->comm);
        }
    }
}

static const char *CLASSES[] = {"same_socket", "other_socket", "other_node"};

void mm_run_placement(MPI_Comm comm, const mm_opts *o)
{
    const int me = mm_rank, P = mm_size;
    /* node: index of the node's first rank among node leaders */
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &node);
    int node_rank, node_id = me;
    MPI_Comm_rank(node, &node_rank);
    MPI_Bcast(&node_id, 1, MPI_INT, 0, node);   /* world rank of the node's first rank */
    MPI_Comm_free(&node);
    int mine[2] = {node_id, my_socket()};
    int *where = mm_alloc(sizeof(int) * 2 * (size_t)P);
    MPI_Allgather(mine, 2, MPI_INT, where, 2, MPI_INT, comm);
    const int n0 = where[0], s0 = where[1];
    int partner[3] = {-1, -1, -1};
    for (int r = 1; r < P; r++) {
        int n = where[2 * r], s = where[2 * r + 1];
        if (n == n0 && s0 >= 0 && s == s0 && partner[0] < 0) partner[0] = r;
        if (n == n0 && s0 >= 0 && s >= 0 && s != s0 && partner[1] < 0) partner[1] = r;
        if (n != n0 && partner[2] < 0) partner[2] = r;
    }
    if (s0 < 0) mm_say("  rank 0 is not confined to one socket: socket classes not available\n");
    free(where);

    size_t nsizes = 0;
    for (size_t s = o->placement_min; s <= o->placement_max; s += o->placement_step) nsizes++;
    double *lat = mm_alloc(sizeof(double) * 3 * nsizes);
    pl_ctx c = {.comm = comm};
    c.sbuf = mm_alloc(o->placement_max);
    c.rbuf = mm_alloc(o->placement_max);
    mm_tally t;
    mm_tally_init(&t, "placement", o);
    for (int k = 0; k < 3; k++) {
        char key[64];
        snprintf(key, sizeof key, "placement_%s_available", CLASSES[k]);
        mm_kv_u(key, partner[k] >= 0);
        if (partner[k] < 0) {
            mm_say("  %-12s not available (no such partner for rank 0)\n", CLASSES[k]);
            for (size_t i = 0; i < nsizes; i++) lat[k * nsizes + i] = NAN;
            continue;
        }
        snprintf(key, sizeof key, "placement_%s_partner", CLASSES[k]);
        mm_kv_u(key, (unsigned long long)partner[k]);
        c.partner = me == 0 ? partner[k] : me == partner[k] ? 0 : -1;
        double sum = 0;
        size_t i = 0;
        for (size_t s = o->placement_min; s <= o->placement_max; s += o->placement_step, i++) {
            c.size = s;
            double sec = mm_checked_exchange(comm, pl_loop, &c, o, &t, MM_PLACEMENT, me, c.partner,
                                             c.sbuf, c.rbuf, s);
            lat[k * nsizes + i] = sec / 2 * 1e6;
            sum += sec / 2 * 1e6;
        }
        snprintf(key, sizeof key, "placement_%s_us", CLASSES[k]);
        mm_kv_f(key, sum / (double)nsizes);
        mm_say("  %-12s partner rank %d: %.3f us (mean one-way, %zu-%zu B)\n", CLASSES[k], partner[k],
               sum / (double)nsizes, o->placement_min, o->placement_max);
    }
    FILE *f = mm_curve_open("placement.dat", "placement ping-pong, one-way time (nan: not available)",
                            "bytes same_socket_us other_socket_us other_node_us");
    if (f) {
        size_t i = 0;
        for (size_t s = o->placement_min; s <= o->placement_max; s += o->placement_step, i++)
            fprintf(f, "%zu %.4f %.4f %.4f\n", s, lat[i], lat[nsizes + i], lat[2 * nsizes + i]);
    }
    mm_curve_close(f);
    mm_tally_report(&t, comm);
    free(lat);
    free(c.sbuf);
    free(c.rbuf);
}
