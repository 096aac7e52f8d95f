"""Selecting part of a run by name: `apptune run --app/--env/--variant/--placement`."""

import subprocess
import sys
from pathlib import Path

import pytest

from apptune.core.data import recipes, selection
from apptune.errors import ApptuneError

REPO = Path(__file__).resolve().parent.parent
REFRAME = str(Path(sys.executable).with_name("reframe"))
ENVS = ["gnu", "gnu-mpich", "gnu-mkl", "llvm", "oneapi"]


@pytest.mark.unit
@pytest.mark.parametrize(
    "sel,words",
    [
        (selection.Selection(apps=["hpc"]), "--app: 'hpc': no such application"),
        (selection.Selection(envs=["gcc"]), "--env: 'gcc': no such environment in the site"),
        (
            selection.Selection(apps=["netpipe"], variants=["tuned+fft=fftw3"]),
            "--variant: 'tuned+fft=fftw3': no such variant of netpipe (there are: baseline, tuned)",
        ),
        (
            selection.Selection(apps=["hpcc"], placements=["bound"]),
            "--placement: 'bound': no such placement of hpcc (there are: none)",
        ),
    ],
)
def test_a_selection_of_names_that_do_not_exist_is_refused_listing_those_that_do(sel, words):
    with pytest.raises(ApptuneError) as e:
        selection.reframe_options(sel, ENVS)
    assert str(e.value).startswith(words), str(e.value)
    if sel.apps == ["hpc"]:
        assert all(a in str(e.value) for a in recipes.list_recipes())


@pytest.mark.unit
def test_several_values_are_alternatives_and_options_all_hold():
    checks, opts = selection.reframe_options(
        selection.Selection(["netpipe"], ["gnu", "llvm"], ["tuned"], ["bound"]), ENVS
    )
    assert checks == ["reframe-checks/netpipe"]
    assert opts == [
        "-p",
        "^(?:gnu|llvm)$",
        "-n",
        r"^(?=.*%build\.variant=(?:tuned)(?:%|$))(?=.*%placement=(?:bound)(?:%|$))",
    ]


@pytest.mark.integration
def test_reframe_selects_exactly_the_chosen_test_cases():
    """ReFrame itself, given the options, lists one case: netpipe tuned, bound, gnu only."""
    checks, opts = selection.reframe_options(
        selection.Selection(["netpipe"], ["gnu"], ["tuned"], ["bound"]), ENVS
    )
    p = subprocess.run(
        [
            REFRAME,
            "-C",
            "site-config/settings.py",
            "-c",
            checks[0],
            "--mode",
            "ci",
            *opts,
            "--list=T",
            "--nocolor",
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    cases = [ln for ln in p.stdout.splitlines() if ln.startswith("- ")]
    assert p.returncode == 0 and len(cases) == 1, p.stdout[-2000:]
    assert "%placement=bound" in cases[0] and "%build.variant=tuned " in cases[0]
    builds = [ln for ln in p.stdout.splitlines() if "^NetPIPEBuild" in ln]
    assert builds and all("+gnu " in b for b in builds), builds
