"""A small timed C application for the tests of performance verdicts and of the run path.

``kernel.c`` is the hot file: a dependent integer recurrence whose steps are small
functions, which -O3 inlines and -O0 calls (3.8x slower on an AMD EPYC VM), so a
``per_file`` rule compiling it with
``-O0`` is a real slowdown of the ``kernel_time`` figure. The program times its kernel
itself (the best of 7 repetitions, so its figure has little noise), writes its result
between BEGIN/END, and with a last argument ``crash`` kills itself with SIGSEGV after the
output is complete. The input tier ``ci`` runs it on 1 rank through the partition's launcher.
"""

import textwrap
from pathlib import Path

ITER = 100_000_000
REPS = 7
#: What the BLAS computes: 1^2 + ... + 1000^2.
DOT = sum(i * i for i in range(1, 1001))

FILES = {
    "kernel.c": """\
        /* The hot loop: a linear congruential recurrence, exact in any order of evaluation;
           returns its final state, and the sum of the high bits through *sum. Its steps are
           small functions that -O3 inlines and -O0 calls: several times slower at -O0 on
           every x86 tried (a bare loop at -O0 is only 1.4x slower on an AMD EPYC VM). */
        static inline unsigned long long step(unsigned long long x)
        {
            return x * 6364136223846793005ULL + 1442695040888963407ULL;
        }
        static inline unsigned long long high(unsigned long long x) { return x >> 33; }
        unsigned long long kernel(long n, unsigned long long *sum)
        {
            unsigned long long x = 88172645463325252ULL, s = 0;
            for (long i = 0; i < n; i++) {
                x = step(x);
                s += high(x);
            }
            *sum = s;
            return x;
        }
        """,
    "main.c": """\
        #include <signal.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        #include <time.h>
        unsigned long long kernel(long n, unsigned long long *sum);
        #ifdef TIMEAPP_BLAS
        double ddot_(const int *n, const double *x, const int *incx, const double *y,
                     const int *incy);
        /* 1^2 + ... + K^2 through the BLAS, outside the timed kernel (exact in double) */
        static double blas_dot(void)
        {
            enum { K = 1000 };
            static double v[K];
            int k = K, one = 1;
            for (int i = 0; i < K; i++)
                v[i] = i + 1;
            return ddot_(&k, v, &one, v, &one);
        }
        #endif
        static double now(void)
        {
            struct timespec t;
            clock_gettime(CLOCK_MONOTONIC, &t);
            return t.tv_sec + 1e-9 * t.tv_nsec;
        }
        int main(int argc, char **argv)
        {
            long n = argc > 1 ? atol(argv[1]) : 1000;
            double best = 1e30;
            unsigned long long r = 0, sum = 0;
            for (int k = 0; k < REPS; k++) {
                double t0 = now();
                r = kernel(n, &sum);
                double t = now() - t0;
                if (t < best) best = t;
            }
            FILE *f = fopen("timeapp.out", "w");
            fprintf(f, "BEGIN\\nn=%ld\\nresult=%llu\\nsum=%llu\\n", n, r, sum);
        #ifdef TIMEAPP_BLAS
            fprintf(f, "dot=%.0f\\n", blas_dot());
        #endif
            fprintf(f, "kernel_seconds=%.6f\\nEND\\n", best);
            fclose(f);
            for (int i = 2; i < argc; i++)
                printf("arg %d: [%s]\\n", i, argv[i]);
            if (argc > 2 && strcmp(argv[argc - 1], "crash") == 0)
                raise(SIGSEGV);
            return 0;
        }
        """.replace("REPS", str(REPS)),
    "Makefile": """\
        include config.mk
        timeapp: main.o kernel.o
        \t$(CC) $(CFLAGS) -o timeapp main.o kernel.o $(LDFLAGS)
        %.o: %.c
        \t$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@
        """,
}

RECIPE = """\
name: timeapp
version: "1.0"
description: a timed C kernel (apptune's tests of performance verdicts)
source: {path: src/timeapp, strip_components: 1}
build:
  system: make
  jobs: 1
  templates:
    - {src: timeapp/config.mk.j2, dest: config.mk}
  products: [timeapp]
# a BLAS call outside the timed kernel: which BLAS is linked does not move kernel_time
axes:
  blas:
    openblas: {library: openblas, cppflags: [-DTIMEAPP_BLAS]}
    blis: {library: blis, cppflags: [-DTIMEAPP_BLAS]}
defaults: {blas: openblas}
run:
  executable: timeapp
  args: ["{{ n }}"]
  output:
    file: timeapp.out
    format: keyvalue
    begin: BEGIN
    end: END
    keys: [n, result, sum, dot, kernel_seconds]
  primary: kernel_time
  figures:
    kernel_time: {field: kernel_seconds, unit: s, better: lower}
tiers:
  ci:
    ranks: 1
    time_limit: 2m
    variants:
      gnu: [tuned]
"""

CONFIG_MK = """\
CC = {{ cc }}
CFLAGS = {{ (app_cflags + cflags) | makeflags }}
CPPFLAGS = {{ cppflags | makeflags }}
LDFLAGS = {{ ldflags | makeflags }}
"""

CHECK = """\
import reframe as rfm
from reframe.core.builtins import fixture, parameter

from apptune.rfm import AppBuild, AppRun, SourceFetch
from apptune.core.data.recipes import all_variants, load_recipe

RECIPE = load_recipe('timeapp')


class TimeappSource(SourceFetch):
    app = 'timeapp'


class TimeappBuild(AppBuild):
    app = 'timeapp'
    source = fixture(TimeappSource, scope='session')
    variant = parameter(all_variants(RECIPE), loggable=True)


@rfm.simple_test
class TimeappCheck(AppRun):
    app = 'timeapp'
    tier = parameter(list(RECIPE.tiers), loggable=True)
    build = fixture(TimeappBuild, scope='environment')
"""


def result_value(n: int = ITER) -> int:
    """The recurrence's state after n steps, by jumping ahead (O(log n))."""
    a, c, m = 6364136223846793005, 1442695040888963407, 2**64
    big_a, big_c = 1, 0
    while n:
        if n & 1:
            big_a, big_c = big_a * a % m, (big_c * a + c) % m
        c, a = (a + 1) * c % m, a * a % m
        n >>= 1
    return (big_a * 88172645463325252 + big_c) % m


def write_tree(root: Path, repo: Path, n: int = ITER) -> None:
    """The timeapp application in an apptune tree at ``root`` that runs through plain
    ReFrame: the repository's site config and a check file, the source, recipe, input
    and reference."""
    import shutil

    for d in (
        "site-config",
        "build-recipes/templates/timeapp",
        "reframe-checks/timeapp",
        "inputs/timeapp/ci",
        "reference/timeapp",
        "src/timeapp",
    ):
        (root / d).mkdir(parents=True, exist_ok=True)
    for f in ("settings.py", "flag-ladders.yaml", "libraries.yaml"):
        shutil.copy(repo / "site-config" / f, root / "site-config" / f)
    for d in ("clusters", "mpich"):
        shutil.copytree(
            repo / "site-config" / d, root / "site-config" / d, dirs_exist_ok=True, symlinks=True
        )
    for name, text in FILES.items():
        (root / "src/timeapp" / name).write_text(textwrap.dedent(text))
    (root / "build-recipes/timeapp.yaml").write_text(RECIPE)
    (root / "build-recipes/templates/timeapp/config.mk.j2").write_text(CONFIG_MK)
    (root / "reframe-checks/timeapp/timeapp.py").write_text(CHECK)
    (root / "inputs/timeapp/ci/input.yaml").write_text(
        f"description: the kernel, {n} iterations\nparameters: {{n: {n}}}\n"
    )
    (root / "reference/timeapp/ci.yaml").write_text(
        textwrap.dedent(f"""\
        app: timeapp
        tier: ci
        recorded: computed by tests/timeapp.py
        fields:
          n: {{value: {n}, abs: 0}}
          result: {{value: {result_value(n)}, abs: 0}}
          dot: {{value: {DOT}, abs: 0}}
        """)
    )
