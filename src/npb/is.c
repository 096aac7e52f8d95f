/* IS, the integer sort kernel (NAS RNR-94-007 section 2.7; NPB 3 classes), in C + MPI:
 * rank 2**n keys in [0, 2**m), each the mean of four numbers of the specified generator
 * (seed 314159265, a = 5**13) times 2**m. Ten rankings, each after two keys are changed
 * (key[i] = i, key[i+10] = 2**m - i); after each, the ranks of five specified keys are
 * checked against the published ones (partial verification), and after the last the keys
 * are sorted by their ranks and checked to be in order (full verification).
 *
 * Keys are split in contiguous blocks over the ranks (each rank jumps to its place in the
 * sequence); a ranking sends every key to the rank owning its range of values (an
 * all-to-all), counts them there and adds the counts of the lower ranges. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITERATIONS 10
#define TEST_ARRAY_SIZE 5

static const int64_t T23 = (int64_t)1 << 23, T46 = (int64_t)1 << 46;

/* a * x mod 2**46, exactly (the generator of random.f90 in C) */
static int64_t mulmod46(int64_t a, int64_t x) {
  int64_t a1 = a >> 23, a2 = a & (T23 - 1), x1 = x >> 23, x2 = x & (T23 - 1);
  int64_t z = (a1 * x2 + a2 * x1) & (T23 - 1);
  return ((z << 23) + a2 * x2) & (T46 - 1);
}

static double randlc(int64_t *x, int64_t a) {
  *x = mulmod46(a, *x);
  return (double)*x * (1.0 / (double)T46);
}

static int64_t powmod46(int64_t a, int64_t e) {
  int64_t r = 1;
  while (e > 0) {
    if (e & 1) r = mulmod46(r, a);
    a = mulmod46(a, a);
    e >>= 1;
  }
  return r;
}

struct is_class {
  char name;
  int total_log2, max_log2;
  int64_t index[TEST_ARRAY_SIZE], rank[TEST_ARRAY_SIZE];
};

static const struct is_class classes[] = {
    {'S', 16, 11, {48427, 17148, 23627, 62548, 4431}, {0, 18, 346, 64917, 65463}},
    {'W', 20, 16, {357773, 934767, 875723, 898999, 404505}, {1249, 11698, 1039987, 1043896, 1048018}},
    {'A', 23, 19, {2112377, 662041, 5336171, 3642833, 4250760}, {104, 17523, 123928, 8288932, 8388264}},
    {'B', 25, 21, {41869, 812306, 5102857, 18232239, 26860214}, {33422937, 10244, 59149, 33135281, 99}},
};

/* The published rank of test key i at an iteration: each class's keys move up or down by
 * the iteration number (W: shifted by 2, A: by 1), as the specification's tables give. */
static int64_t expected_rank(const struct is_class *c, int i, int it) {
  int64_t r = c->rank[i];
  switch (c->name) {
  case 'S': return i <= 2 ? r + it : r - it;
  case 'W': return i < 2 ? r + (it - 2) : r - it;
  case 'A': return i <= 2 ? r + (it - 1) : r - (it - 1);
  default: return (i == 1 || i == 2 || i == 4) ? r + it : r - it; /* B */
  }
}

struct is_state {
  const struct is_class *c;
  int me, np;
  int64_t nkeys, maxkey, klo, nloc, vlo, vhi; /* my keys [klo, klo+nloc), my values [vlo, vhi) */
  int *keys, *recv, *sendcounts, *recvcounts, *sdispl, *rdispl;
  int64_t *count; /* count[v - vlo]: keys < v+1 in my range, cumulative */
  int64_t below;  /* keys in lower ranges */
  int nrecv;
};

static int owner_of_value(const struct is_state *s, int v) {
  return (int)(((int64_t)v * s->np) / s->maxkey);
}

static void rank_keys(struct is_state *s) {
  int p;
  int64_t i;
  memset(s->sendcounts, 0, sizeof(int) * s->np);
  for (i = 0; i < s->nloc; i++) s->sendcounts[owner_of_value(s, s->keys[i])]++;
  MPI_Alltoall(s->sendcounts, 1, MPI_INT, s->recvcounts, 1, MPI_INT, MPI_COMM_WORLD);
  s->sdispl[0] = s->rdispl[0] = 0;
  for (p = 1; p < s->np; p++) {
    s->sdispl[p] = s->sdispl[p - 1] + s->sendcounts[p - 1];
    s->rdispl[p] = s->rdispl[p - 1] + s->recvcounts[p - 1];
  }
  s->nrecv = s->rdispl[s->np - 1] + s->recvcounts[s->np - 1];
  /* keys grouped by destination, in their order */
  int *sorted = malloc(sizeof(int) * (s->nloc ? s->nloc : 1)), *pos = malloc(sizeof(int) * s->np);
  memcpy(pos, s->sdispl, sizeof(int) * s->np);
  for (i = 0; i < s->nloc; i++) sorted[pos[owner_of_value(s, s->keys[i])]++] = s->keys[i];
  MPI_Alltoallv(sorted, s->sendcounts, s->sdispl, MPI_INT, s->recv, s->recvcounts, s->rdispl, MPI_INT,
                MPI_COMM_WORLD);
  free(sorted);
  free(pos);
  memset(s->count, 0, sizeof(int64_t) * (size_t)(s->vhi - s->vlo));
  for (i = 0; i < s->nrecv; i++) s->count[s->recv[i] - s->vlo]++;
  for (i = 1; i < s->vhi - s->vlo; i++) s->count[i] += s->count[i - 1];
  int64_t mine = s->count[s->vhi - s->vlo - 1];
  s->below = 0;
  MPI_Exscan(&mine, &s->below, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (s->me == 0) s->below = 0;
}

/* One ranking and its partial verification: returns the tests passed (on every rank). */
static int iteration(struct is_state *s, int it, int report) {
  int64_t probe[TEST_ARRAY_SIZE], key[TEST_ARRAY_SIZE];
  int i, passed = 0, all;
  if (it >= s->klo && it < s->klo + s->nloc) s->keys[it - s->klo] = it;
  if (it + MAX_ITERATIONS >= s->klo && it + MAX_ITERATIONS < s->klo + s->nloc)
    s->keys[it + MAX_ITERATIONS - s->klo] = (int)(s->maxkey - it);
  for (i = 0; i < TEST_ARRAY_SIZE; i++) {
    int64_t j = s->c->index[i] - s->klo;
    probe[i] = (j >= 0 && j < s->nloc) ? s->keys[j] : -1;
  }
  MPI_Allreduce(probe, key, TEST_ARRAY_SIZE, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  rank_keys(s);
  for (i = 0; i < TEST_ARRAY_SIZE; i++) {
    int64_t k = key[i];
    if (!(k > 0 && k <= s->nkeys - 1) || k - 1 < s->vlo || k - 1 >= s->vhi) continue;
    int64_t got = s->below + s->count[k - 1 - s->vlo], want = expected_rank(s->c, i, it);
    if (got == want)
      passed++;
    else if (report)
      printf(" VERIFICATION FAILED: is_rank (iteration %d, test key %d = %lld at index %lld) = %lld, "
             "expected %lld\n",
             it, i, (long long)k, (long long)s->c->index[i], (long long)got, (long long)want);
  }
  MPI_Allreduce(&passed, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return all;
}

/* Sort this rank's keys by their ranks and check the order, across ranks too. */
static int full_verify(struct is_state *s, int64_t *unordered) {
  int64_t i, n = s->nrecv, bad = 0, total;
  int *sorted = malloc(sizeof(int) * (n ? n : 1));
  int edge[2] = {s->nrecv ? 0 : -1, 0}, prev = -1;
  for (i = n - 1; i >= 0; i--) {
    int v = s->recv[i];
    sorted[--s->count[v - s->vlo]] = v;
  }
  for (i = 1; i < n; i++)
    if (sorted[i - 1] > sorted[i]) bad++;
  if (n) {
    edge[0] = sorted[0];
    edge[1] = sorted[n - 1];
  }
  /* my first key against the previous rank's last */
  MPI_Sendrecv(&edge[1], 1, MPI_INT, (s->me + 1) % s->np, 7, &prev, 1, MPI_INT,
               (s->me + s->np - 1) % s->np, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  if (s->me > 0 && n && prev > edge[0]) bad++;
  MPI_Allreduce(&bad, unordered, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(&n, &total, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  free(sorted);
  return *unordered == 0 && total == s->nkeys;
}

/* Called from the Fortran driver: the timed ten rankings of class cls (a character code). */
void npb_is(int cls, double *seconds, double *mops, int *partial, int *partial_expected,
            int *full_ok, double *unordered_keys, int *verified) {
  struct is_state s = {0};
  int i, it;
  int64_t k, unordered = 0;
  for (i = 0; i < (int)(sizeof classes / sizeof classes[0]); i++)
    if (classes[i].name == cls) s.c = &classes[i];
  MPI_Comm_rank(MPI_COMM_WORLD, &s.me);
  MPI_Comm_size(MPI_COMM_WORLD, &s.np);
  if (!s.c || (s.np & (s.np - 1))) {
    if (s.me == 0) printf("npb: error: IS: unknown class %c or rank count %d not a power of two\n", cls, s.np);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  s.nkeys = (int64_t)1 << s.c->total_log2;
  s.maxkey = (int64_t)1 << s.c->max_log2;
  s.nloc = s.nkeys / s.np;
  s.klo = s.nloc * s.me;
  s.vlo = s.maxkey * s.me / s.np;
  s.vhi = s.maxkey * (s.me + 1) / s.np;
  s.keys = malloc(sizeof(int) * s.nloc);
  s.recv = malloc(sizeof(int) * s.nkeys); /* at most every key */
  s.count = malloc(sizeof(int64_t) * (size_t)(s.vhi - s.vlo));
  s.sendcounts = malloc(sizeof(int) * s.np * 4);
  s.recvcounts = s.sendcounts + s.np;
  s.sdispl = s.sendcounts + 2 * s.np;
  s.rdispl = s.sendcounts + 3 * s.np;

  /* my keys: four numbers each, from 4*klo places into the sequence */
  int64_t a = 1220703125, x = mulmod46(314159265, powmod46(a, 4 * s.klo));
  for (k = 0; k < s.nloc; k++) {
    double r = randlc(&x, a);
    r += randlc(&x, a);
    r += randlc(&x, a);
    r += randlc(&x, a);
    s.keys[k] = (int)((double)(s.maxkey / 4) * r);
  }

  iteration(&s, 1, 0); /* the specification's untimed first ranking */
  *partial = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  double t0 = MPI_Wtime(), t;
  for (it = 1; it <= MAX_ITERATIONS; it++) *partial += iteration(&s, it, 1);
  t = MPI_Wtime() - t0;
  MPI_Allreduce(&t, seconds, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  *mops = (double)MAX_ITERATIONS * (double)s.nkeys / *seconds / 1.0e6;
  *partial_expected = TEST_ARRAY_SIZE * MAX_ITERATIONS;
  *full_ok = full_verify(&s, &unordered);
  *unordered_keys = (double)unordered;
  if (s.me == 0 && !*full_ok)
    printf(" VERIFICATION FAILED: is_unordered_keys = %lld, expected 0\n", (long long)unordered);
  *verified = *full_ok && *partial == *partial_expected;
  free(s.keys);
  free(s.recv);
  free(s.count);
  free(s.sendcounts);
}
