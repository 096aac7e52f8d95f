"""A Fortran program that reads its input with ``READ(5,*)`` (``./readin < numbers.txt``),
built and run through real ReFrame: the recipe's ``run.stdin`` names a file the tier's
input renders, and the runner inside the job gives it to the program (through ``mpirun``)
as an open file, never through a shell."""

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO

from apptune.constants import RESULT_FILE
from apptune.core.run import runner

PROGRAM = """\
    program readin
      implicit none
      integer :: n, i, x, total
      read(5, *) n
      total = 0
      do i = 1, n
        read(5, *) x
        total = total + x
      end do
      write(6, '(a, i0)') 'numbers read: ', n
      write(6, '(a, i0)') 'total: ', total
    end program readin
    """

MAKEFILE = """\
    include config.mk
    readin: readin.f90
    \t$(FC) $(FFLAGS) -o readin readin.f90
    """

RECIPE = """\
    name: readin
    version: "1.0"
    description: reads a count and that many numbers from standard input, prints their sum
    source: {path: src/readin}
    build:
      system: make
      jobs: 1
      languages: [fortran]
      templates:
        - {src: readin/config.mk.j2, dest: config.mk}
      products: [readin]
    run:
      executable: readin
      stdin: numbers.txt
      output:
        file: stdout
        format: regex
        patterns:
          n: {pattern: '^numbers read: (\\d+)'}
          total: {pattern: '^total: (\\d+)'}
      figures:
        numbers: {field: n, unit: numbers, better: higher}
    tiers:
      ci:
        ranks: 1
        time_limit: 2m
        variants:
          gnu: [baseline]
    """

CHECK = """\
    import reframe as rfm
    from reframe.core.builtins import fixture, parameter

    from apptune.core.data.recipes import all_variants
    from apptune.rfm import AppBuild, AppRun, SourceFetch, load_app

    RECIPE = load_app("readin")


    class ReadinSource(SourceFetch):
        app = "readin"


    class ReadinBuild(AppBuild):
        app = "readin"
        source = fixture(ReadinSource, scope="session")
        variant = parameter(all_variants(RECIPE), loggable=True)


    @rfm.simple_test
    class ReadinCheck(AppRun):
        app = "readin"
        tier = parameter(list(RECIPE.tiers), loggable=True)
        build = fixture(ReadinBuild, scope="environment")
    """


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.mark.integration
def test_a_fortran_program_reads_its_input_from_stdin_through_the_job(toy_root, tmp_path):
    root = toy_root
    shutil.copytree(REPO / "site-config", root / "site-config", dirs_exist_ok=True)
    write(root / "src/readin/readin.f90", PROGRAM)
    write(root / "src/readin/Makefile", MAKEFILE)
    write(root / "build-recipes/readin.yaml", RECIPE)
    write(
        root / "build-recipes/templates/readin/config.mk.j2",
        "FC = {{ ftn }}\nFFLAGS = {{ (app_fflags + fflags) | makeflags }}\n",
    )
    write(
        root / "inputs/readin/ci/input.yaml",
        "description: five numbers\nfiles: {numbers.txt: numbers.txt.j2}\nparameters: {n: 5}\n",
    )
    write(
        root / "inputs/readin/ci/numbers.txt.j2",
        "{{ n }}\n{% for i in range(1, n + 1) %}{{ i }}\n{% endfor %}",
    )
    write(
        root / "reference/readin/ci.yaml",
        "app: readin\ntier: ci\nrecorded: test\n"
        "fields:\n  n: {value: 5, abs: 0}\n  total: {value: 15, abs: 0}\n",
    )
    write(root / "reframe-checks/readin/readin.py", CHECK)
    run_dir = tmp_path / "run"
    p = subprocess.run(
        [sys.executable, "-m", "apptune", "run", "--mode", "dev", "--no-history"]
        + ["--run-dir", str(run_dir), "-c", "reframe-checks/readin"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, APPTUNE_ROOT=str(root)),
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    (found,) = list((run_dir / "output").rglob(RESULT_FILE))
    rec = json.loads(found.read_text())
    assert rec["values"] == {"n": 5, "total": 15} and rec["verification"]["ok"]
    (step,) = json.loads(found.with_name(runner.SPEC_FILE).read_text())["steps"]
    assert step["stdin"] == "numbers.txt" and "<" not in step["argv"]
