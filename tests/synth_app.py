"""A small Fortran + C program in which exactly one file is fast-math sensitive.

``lib/missing.c`` counts missing values (NaN markers) with ``x != x``, which GCC folds
to false under -ffinite-math-only (part of -Ofast): the aggressive build reports 0
missing values. Its other function, ``count_above``, gives the same count under any
flags: function-level bisection must name ``count_missing`` alone. Every other file
does arithmetic that is exact in any order (sums of small integers), so its result
does not depend on the flags. Two Fortran modules
(``stats`` used by ``kernels``, both used by ``main``) make the build order matter
at compile time; the C helpers go into a static archive, as HPL's objects do.
"""

import textwrap
from pathlib import Path

N = 100000
FILES = {
    "Makefile": """\
        include config.mk
        COBJ = lib/missing.o lib/fill.o lib/checksum.o lib/scale.o lib/maxabs.o
        FOBJ = stats.o kernels.o main.o
        synth: $(FOBJ) libhelp.a
        \t$(FC) $(FFLAGS) -o synth $(FOBJ) libhelp.a
        libhelp.a: $(COBJ)
        \tar rcs libhelp.a $(COBJ)
        main.o: main.f90 kernels.o stats.o
        \t$(FC) $(FFLAGS) -c main.f90
        kernels.o: kernels.f90 stats.o
        \t$(FC) $(FFLAGS) -c kernels.f90
        stats.o: stats.f90
        \t$(FC) $(FFLAGS) -c stats.f90
        lib/%.o: lib/%.c
        \t$(CC) $(CFLAGS) -c $< -o $@
        """,
    "lib/missing.c": """\
        /* Missing values are NaN markers; x != x holds only for a NaN. */
        int count_missing(const double *x, int n)
        {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (x[i] != x[i]) k++;
            return k;
        }

        /* Values above a threshold, on data without NaN: the same under any flags. */
        int count_above(const double *y, int n, double t)
        {
            int k = 0;
            for (int i = 0; i < n; i++)
                if (y[i] > t) k++;
            return k;
        }
        """,
    "lib/fill.c": """\
        #include <stdlib.h>
        /* x: every 7th value missing (NaN); y: small integers, exact in any sum order. */
        void fill(double *x, double *y, int n)
        {
            double nan = strtod("nan", NULL);
            for (int i = 0; i < n; i++) {
                x[i] = (i % 7 == 0) ? nan : (double)(i % 1000);
                y[i] = (double)(i % 1000);
            }
        }
        """,
    "lib/checksum.c": """\
        long checksum(const double *y, int n)
        {
            long s = 0;
            for (int i = 0; i < n; i++) s = (s * 31 + (long)y[i]) % 1000003;
            return s;
        }
        """,
    "lib/scale.c": """\
        void scale(double *y, int n, double a) { for (int i = 0; i < n; i++) y[i] *= a; }
        """,
    "lib/maxabs.c": """\
        double maxabs(const double *y, int n)
        {
            double m = 0;
            for (int i = 0; i < n; i++) m = (y[i] > m) ? y[i] : (-y[i] > m ? -y[i] : m);
            return m;
        }
        """,
    "stats.f90": """\
        module stats
          use iso_c_binding, only: c_double
          implicit none
        contains
          pure function total(y) result(s)
            real(c_double), intent(in) :: y(:)
            real(c_double) :: s
            s = sum(y)
          end function total
        end module stats
        """,
    "kernels.f90": """\
        module kernels
          use iso_c_binding, only: c_double
          use stats, only: total
          implicit none
        contains
          function mean_of(y) result(m)
            real(c_double), intent(in) :: y(:)
            real(c_double) :: m
            m = total(y) / real(size(y), c_double)
          end function mean_of
        end module kernels
        """,
    "main.f90": f"""\
        program synth
          use iso_c_binding
          use stats, only: total
          use kernels, only: mean_of
          implicit none
          interface
            subroutine fill(x, y, n) bind(C, name="fill")
              import :: c_double, c_int
              real(c_double) :: x(*), y(*)
              integer(c_int), value :: n
            end subroutine fill
            function count_missing(x, n) bind(C, name="count_missing") result(k)
              import :: c_double, c_int
              real(c_double) :: x(*)
              integer(c_int), value :: n
              integer(c_int) :: k
            end function count_missing
            function count_above(y, n, t) bind(C, name="count_above") result(k)
              import :: c_double, c_int
              real(c_double) :: y(*)
              integer(c_int), value :: n
              real(c_double), value :: t
              integer(c_int) :: k
            end function count_above
            function checksum(y, n) bind(C, name="checksum") result(s)
              import :: c_double, c_int, c_long
              real(c_double) :: y(*)
              integer(c_int), value :: n
              integer(c_long) :: s
            end function checksum
            subroutine scale(y, n, a) bind(C, name="scale")
              import :: c_double, c_int
              real(c_double) :: y(*)
              integer(c_int), value :: n
              real(c_double), value :: a
            end subroutine scale
            function maxabs(y, n) bind(C, name="maxabs") result(m)
              import :: c_double, c_int
              real(c_double) :: y(*)
              integer(c_int), value :: n
              real(c_double) :: m
            end function maxabs
          end interface
          integer(c_int), parameter :: n = {N}
          real(c_double), allocatable :: x(:), y(:)
          allocate(x(n), y(n))
          call fill(x, y, n)
          open(10, file="synth.out")
          write(10, '(a)') "BEGIN"
          write(10, '(a,i0)') "n=", n
          write(10, '(a,i0)') "missing=", count_missing(x, n)
          write(10, '(a,i0)') "above=", count_above(y, n, 500.0_c_double)
          write(10, '(a,i0)') "checksum=", checksum(y, n)
          write(10, '(a,f0.3)') "mean=", mean_of(y)
          call scale(y, n, 2.0_c_double)
          write(10, '(a,f0.1)') "total=", total(y)
          write(10, '(a,f0.1)') "maxabs=", maxabs(y, n)
          write(10, '(a)') "END"
          close(10)
        end program synth
        """,
}

RECIPE = """\
name: synth
version: "1.0"
description: a Fortran + C program with one fast-math sensitive file (apptune's bisect test)
source: {path: src/synth, strip_components: 1}
build:
  system: make
  jobs: 2
  languages: [c, fortran]
  templates:
    - {src: synth/config.mk.j2, dest: config.mk}
  products: [synth]
run:
  executable: synth
  output:
    file: synth.out
    format: keyvalue
    begin: BEGIN
    end: END
    keys: [n, missing, above, checksum, mean, total, maxabs]
  figures:
    elements: {field: n, unit: elements, better: higher}
tiers:
  ci:
    ranks: 1
    time_limit: 1m
    variants:
      gnu: [baseline, aggressive]
  nightly:
    ranks: 1
    variants:
      gnu: [baseline]
"""

CONFIG_MK = """\
CC = {{ cc }}
FC = {{ ftn }}
CFLAGS = {{ (app_cflags + cflags) | makeflags }}
FFLAGS = {{ (app_fflags + fflags) | makeflags }}
"""


def reference() -> str:
    ys = [i % 1000 for i in range(N)]
    missing = sum(1 for i in range(N) if i % 7 == 0)
    s = 0
    for y in ys:
        s = (s * 31 + y) % 1000003
    return textwrap.dedent(f"""\
        app: synth
        tier: ci
        recorded: computed by tests/synth_app.py
        fields:
          n: {{value: {N}, abs: 0}}
          missing: {{value: {missing}, abs: 0, why: every 7th value is a NaN marker}}
          above: {{value: {sum(1 for y in ys if y > 500)}, abs: 0}}
          checksum: {{value: {s}, abs: 0}}
          mean: {{value: {sum(ys) / N:.3f}, abs: 0.001}}
          total: {{value: {2 * sum(ys)}.0, abs: 0}}
          maxabs: {{value: {2 * max(ys)}.0, abs: 0}}
        """)


# The same program built with CMake (out of source, Makefile generator): the compiler
# wrappers come in as CMAKE_*_COMPILER, the resolved flags as CMAKE_*_FLAGS, and CMake's
# own probes (compiler identification, try_compile) run through the wrappers too.
CMAKELISTS = """\
cmake_minimum_required(VERSION 3.13)
project(synth C Fortran)
add_library(helpers STATIC lib/missing.c lib/fill.c lib/checksum.c lib/scale.c lib/maxabs.c)
add_executable(synth stats.f90 kernels.f90 main.f90)
target_link_libraries(synth helpers)
"""

CMAKE_BUILD = """\
  system: cmake
  steps:
    - command: [cmake, -S, ., -B, _build, -DCMAKE_BUILD_TYPE=None,
                "-DCMAKE_C_COMPILER={{ cc }}", "-DCMAKE_Fortran_COMPILER={{ ftn }}",
                "-DCMAKE_C_FLAGS={{ (app_cflags + cflags) | join(' ') }}",
                "-DCMAKE_Fortran_FLAGS={{ (app_fflags + fflags) | join(' ') }}"]
    - command: [cmake, --build, _build, --parallel, "2"]
  languages: [c, fortran]
  products: [{src: _build/synth, name: synth}]
"""


def write_tree(root: Path, cmake: bool = False) -> None:
    """The synth application inside an apptune tree (recipe, source, input, reference);
    ``cmake``: built with CMake instead of its Makefile."""
    for name, text in FILES.items():
        f = root / "src/synth" / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    (root / "build-recipes/templates/synth").mkdir(parents=True, exist_ok=True)
    recipe = RECIPE
    if cmake:
        (root / "src/synth/CMakeLists.txt").write_text(CMAKELISTS)
        head, rest = recipe.split("build:\n", 1)
        recipe = head + "build:\n" + CMAKE_BUILD + rest[rest.index("run:") :]
    (root / "build-recipes/synth.yaml").write_text(recipe)
    (root / "build-recipes/templates/synth/config.mk.j2").write_text(CONFIG_MK)
    for tier in ("ci", "nightly"):
        (root / f"inputs/synth/{tier}").mkdir(parents=True, exist_ok=True)
        (root / f"inputs/synth/{tier}/input.yaml").write_text(
            "description: no input\n"
            + (
                "stands_for: nightly (the same program, which has no input)\n"
                if tier == "ci"
                else ""
            )
            + "parameters: {}\n"
        )
        (root / "reference/synth").mkdir(parents=True, exist_ok=True)
        (root / f"reference/synth/{tier}.yaml").write_text(
            reference().replace("tier: ci", f"tier: {tier}")
        )
