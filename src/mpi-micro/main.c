/* mpi-micro: run the selected benchmarks, write mpi-micro.summary and the curve files.
 * Exit status 3 when any received data did not match what was sent. */
#define _GNU_SOURCE
#include "mm.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Run facts: ranks, nodes, ranks per node and how many CPUs each rank may run on
 * (the binding the launcher applied): half- vs fully-subscribed and bound vs unbound
 * are visible in the summary, whatever the launcher options were. */
static void run_facts(MPI_Comm comm)
{
    MPI_Comm node;
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, mm_rank, MPI_INFO_NULL, &node);
    int local, leader;
    MPI_Comm_size(node, &local);
    int node_rank;
    MPI_Comm_rank(node, &node_rank);
    leader = node_rank == 0;
    int nodes = 0;
    MPI_Allreduce(&leader, &nodes, 1, MPI_INT, MPI_SUM, comm);
    int rpn_max = local, rpn_min = local;
    MPI_Allreduce(MPI_IN_PLACE, &rpn_max, 1, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, &rpn_min, 1, MPI_INT, MPI_MIN, comm);
    cpu_set_t set;
    int cpus = -1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cpus = CPU_COUNT(&set);
    int aff_max = cpus, online = (int)sysconf(_SC_NPROCESSORS_ONLN);
    MPI_Allreduce(MPI_IN_PLACE, &aff_max, 1, MPI_INT, MPI_MAX, comm);
    MPI_Allreduce(MPI_IN_PLACE, &online, 1, MPI_INT, MPI_MIN, comm);
    mm_kv_u("ranks", (unsigned long long)mm_size);
    mm_kv_u("nodes", (unsigned long long)nodes);
    mm_kv_u("ranks_per_node_max", (unsigned long long)rpn_max);
    mm_kv_u("ranks_per_node_min", (unsigned long long)rpn_min);
    mm_kv_u("cpus_per_node", (unsigned long long)online);
    mm_kv_f("subscription", online > 0 ? (double)rpn_max / online : 0.0);
    mm_kv_u("affinity_cpus_max", (unsigned long long)aff_max);
    mm_kv_u("bound", (unsigned long long)(aff_max > 0 && aff_max < online));
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    char *nl = strchr(lib, '\n');
    if (nl) *nl = 0;
    mm_say("mpi-micro: %d ranks on %d node(s), %d-%d ranks per node, %d CPUs per node, "
           "each rank may run on up to %d CPU(s)\nMPI library: %s\n",
           mm_size, nodes, rpn_min, rpn_max, online, aff_max, lib);
    MPI_Comm_free(&node);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_rank(comm, &mm_rank);
    MPI_Comm_size(comm, &mm_size);
    mm_opts o;
    int rc = mm_parse_args(argc, argv, &o);
    if (rc) {
        MPI_Finalize();
        return rc == 1 ? 0 : 2;
    }
    if (mm_size < 2) {
        if (mm_rank == 0) fprintf(stderr, "mpi-micro: needs at least 2 ranks\n");
        MPI_Finalize();
        return 2;
    }
    mm_summary_open("mpi-micro.summary");
    run_facts(comm);
    if (o.corrupt[0]) mm_say("FAULT INJECTION: corrupting received data in: %s\n", o.corrupt);
    mm_spin_calibrate(comm);

    static const struct {
        const char *name;
        void (*run)(MPI_Comm, const mm_opts *);
    } benches[] = {
        {"imb", mm_run_imb},           {"noise", mm_run_noise},
        {"overlap", mm_run_overlap},   {"contention", mm_run_contention},
        {"placement", mm_run_placement}, {"rma", mm_run_rma},
    };
    double total0 = MPI_Wtime();
    for (size_t b = 0; b < sizeof benches / sizeof *benches; b++) {
        if (!mm_selected(&o, benches[b].name)) continue;
        mm_say("== %s\n", benches[b].name);
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        benches[b].run(comm, &o);
        MPI_Barrier(comm);
        double t = MPI_Wtime() - t0;
        char key[64];
        snprintf(key, sizeof key, "%s_seconds", benches[b].name);
        mm_kv_f(key, t);
        mm_say("== %s done in %.2f s\n", benches[b].name, t);
    }
    mm_kv_f("total_seconds", MPI_Wtime() - total0);
    uint64_t bad = mm_total_errors();
    mm_kv_u("verification_failures", (unsigned long long)bad);
    mm_kv_u("complete", 1);
    mm_summary_close();
    if (bad)
        mm_say("mpi-micro: VERIFICATION FAILED (%llu mismatches or unchecked subtests)\n",
               (unsigned long long)bad);
    else
        mm_say("mpi-micro: all received data verified\n");
    MPI_Finalize();
    return bad ? 3 : 0;
}
