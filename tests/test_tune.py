"""apptune tune: the tuning space file, scoring, targets, the recommended-variants diff,
bad inputs, and a real (small) search on the synthetic program: a wrong answer is
never the winner, and a second invocation resumes the same study."""

import json
from types import SimpleNamespace

import pytest
import synth_app
import yaml

from apptune import cli
from apptune.core.data import recipes
from apptune.core.data.site import Site, load_site
from apptune.core.run import localrun
from apptune.errors import ApptuneError
from apptune.tools import tune
from apptune.tools.tune import trials as tune_trials

SPACE = """\
app: synth
tier: ci
baseline: {environment: gnu, variant: baseline}
objectives:
  time: [wall_time]
build:
  environments: [gnu]
  ladders: [tuned, aggressive]
  extra_flags: [[], [-fno-math-errno]]
env:
  SYNTH_UNUSED: {values: ["", "1", "2", "3"]}
targets:
  - {name: "speedup", figure: wall_time, over_baseline: true, goal: 0.0}
"""


@pytest.fixture
def synth_root(toy_root):
    synth_app.write_tree(toy_root)
    (toy_root / "tuning").mkdir()
    (toy_root / "tuning/synth.yaml").write_text(SPACE)
    return toy_root


@pytest.fixture
def site(gnu_toolchain):
    return Site("gnu", gnu_toolchain, {}, "local", "test:local", {})


def test_the_hpcc_space_is_valid():
    s = tune.load_space("hpcc")
    assert s.tier == "ci" and "mkl" in s.build.axes["blas"] and s.inputs["N"][0] == 3520
    r = recipes.load_recipe("hpcc")
    assert tune.objective_figures(s, "time", r) == ["HPL", "MPIFFT"]
    assert tune.objective_figures(s, "StarFFT", r) == ["StarFFT"]


@pytest.mark.parametrize(
    "edit,match",
    [
        (("[tuned, aggressive]", "[tuned, turbo]"), "build.ladders: unknown flag ladder 'turbo'"),
        (
            ("extra_flags:", "axes: {blas: [openblas, mkl]}\n  extra_flags:"),
            "build.axes.blas: unknown axis 'blas' (the recipe has: none)",
        ),
        (("time: [wall_time]", "time: [speed]"), "objectives.time: unknown figure 'speed'"),
        (
            ("targets:", "inputs: {N: [1, 2]}\ntargets:"),
            "inputs.N: 'N' is not a parameter of inputs/synth/ci/input.yaml",
        ),
        (("tier: ci", "tier: huge"), "tier: unknown tier 'huge'"),
        (("over_baseline: true, ", ""), "targets[0]: give either 'per'"),
        (
            ("targets:", "runtime: {binding: [core, tight]}\ntargets:"),
            "runtime.binding: unknown binding 'tight'",
        ),
        (
            (
                "targets:",
                "runtime: {layouts: [{ranks: 1, threads: 2, when: {blas: [mkl]}}]}\ntargets:",
            ),
            "runtime.layouts[0].when: unknown axis 'blas'",
        ),
        (
            ("targets:", "runtime: {layouts: [{ranks: 0}]}\ntargets:"),
            "runtime.layouts[0].ranks: must be greater than or equal to 1 (got 0)",
        ),
        (
            (
                'SYNTH_UNUSED: {values: ["", "1", "2", "3"]}',
                'SYNTH_UNUSED: {values: ["1"], when: {nodes: [2]}}',
            ),
            "env.SYNTH_UNUSED.when: unknown axis 'nodes' (allowed: ranks, threads)",
        ),
    ],
)
def test_bad_tuning_spaces_are_one_clear_error(synth_root, edit, match):
    f = synth_root / "tuning/synth.yaml"
    f.write_text(SPACE.replace(*edit))
    with pytest.raises(ApptuneError) as e:
        tune.load_space("synth")
    assert "tuning/synth.yaml" in str(e.value) and match in str(e.value)


def test_missing_space_and_unknown_objective(synth_root):
    with pytest.raises(ApptuneError, match="tuning/toy.yaml: no tuning space for 'toy'"):
        tune.load_space("toy")
    s = tune.load_space("synth")
    with pytest.raises(ApptuneError, match="unknown objective 'fast'"):
        tune.objective_figures(s, "fast", recipes.load_recipe("synth"))


def test_score_is_the_geometric_mean_of_speedups():
    specs = recipes.figure_specs(recipes.load_recipe("hpcc"))
    base = {"HPL": 20.0, "MPIFFT": 4.0, "wall_time": 10.0}
    assert tune.score(
        {"HPL": 40.0, "MPIFFT": 4.0}, base, ["HPL", "MPIFFT"], specs
    ) == pytest.approx(2**0.5)
    assert tune.score({"wall_time": 5.0}, base, ["wall_time"], specs) == pytest.approx(2.0)
    assert tune.score({"HPL": None, "MPIFFT": 4.0}, base, ["HPL", "MPIFFT"], specs) is None


def test_targets_are_medians_of_per_run_ratios():
    s = tune.load_space("hpcc")
    runs = [
        {"figures": {"HPL": 45.0, "SingleDGEMM": 25.0, "MPIFFT": 6.0}},
        {"figures": {"HPL": 36.0, "SingleDGEMM": 20.0, "MPIFFT": 5.0}},
        {"figures": {"HPL": 50.0, "SingleDGEMM": 25.0, "MPIFFT": 7.0}},
    ]
    t = tune.target_values(s, runs, {"MPIFFT": 4.0}, ranks=2)
    assert t[0]["value"] == pytest.approx(0.9) and t[0]["met"]
    assert t[1]["value"] == pytest.approx(1.5) and t[1]["met"]


def test_suggest_maps_knobs_to_a_configuration():
    import optuna

    s = tune.load_space("hpcc")
    r = recipes.load_recipe("hpcc")
    t = optuna.trial.FixedTrial(
        {
            "environment": "gnu",
            "ladder": "tuned",
            "axis.blas": "openblas",
            "axis.fft": "fftw3",
            "env.OPENBLAS_CORETYPE": "SkylakeX",
            "runtime.layout": "2x1",
            "input.N": "5280",
            "input.NB": "192",
            "input.grid": "P=2 Q=1",
        }
    )
    gnu = load_site("gnu").toolchain
    c = tune.suggest(t, s, r, {"gnu": gnu})
    # OpenBLAS is what the gnu environment gives: the same build as the checks' tuned+fft=fftw3
    assert c.variant == "tuned+fft=fftw3" and dict(c.env) == {"OPENBLAS_CORETYPE": "SkylakeX"}
    assert dict(c.inputs) == {"N": 5280, "NB": 192, "P": 2, "Q": 1}
    # OPENBLAS_CORETYPE is only a knob when the BLAS is OpenBLAS
    t = optuna.trial.FixedTrial(
        {
            "environment": "gnu",
            "ladder": "tuned",
            "axis.blas": "mkl",
            "axis.fft": "ffte",
            "input.N": "3520",
            "input.NB": "80",
            "input.grid": "P=1 Q=2",
        }
    )
    c = tune.suggest(t, s, r, {"gnu": gnu})
    assert c.variant == "tuned+blas=mkl" and c.env == ()
    assert tune.fixed_build_params(c, s, r, gnu) == {
        "environment": "gnu",
        "ladder": "tuned",
        "axis.blas": "mkl",
        "axis.fft": "ffte",
    }
    assert (
        tune.fixed_build_params(tune.Config("gnu", "tuned"), s, r, gnu)["axis.blas"] == "openblas"
    )


def test_runtime_layouts_and_conditional_knobs():
    """Ranks x threads and binding are knobs; a layout can require a build (threads
    need a threaded BLAS) and an input knob a layout (P x Q sets of two ranks)."""
    import optuna

    s = tune.load_space("hpcc")
    r = recipes.load_recipe("hpcc")
    gnu = load_site("gnu").toolchain
    base = {
        "environment": "gnu",
        "ladder": "aggressive",
        "axis.fft": "fftw3",
        "input.N": "5280",
        "input.NB": "192",
    }
    t = optuna.trial.FixedTrial(base | {"axis.blas": "mkl-threaded", "runtime.layout": "1x2"})
    c = tune.suggest(t, s, r, {"gnu": gnu})
    assert (c.ranks, c.threads) == (1, 2) and "P" not in dict(c.inputs)  # the tier's rule: 1 x 1
    assert "1x2" in c.label() and c.to_dict()["runtime"] == {
        "ranks": 1,
        "threads": 2,
        "binding": "",
    }
    assert tune.Config(**tune_trials.config_args(c.to_dict())) == c
    t = optuna.trial.FixedTrial(
        base | {"axis.blas": "mkl-threaded", "runtime.layout": "2x1", "input.grid": "P=2 Q=1"}
    )
    c = tune.suggest(t, s, r, {"gnu": gnu})
    assert (c.ranks, c.threads) == (2, 1) and dict(c.inputs)["P"] == 2
    # sequential MKL: only the layouts without threads, sampled under their own name
    t = optuna.trial.FixedTrial(base | {"axis.blas": "mkl", "input.grid": "P=1 Q=2"})
    c = tune.suggest(t, s, r, {"gnu": gnu})
    assert (c.ranks, c.threads) == (2, 1)
    # a trial from before runtime knobs existed still reads back
    old = {"environment": "gnu", "variant": "tuned", "extra_flags": [], "env": {}, "inputs": {}}
    assert tune.Config(**tune_trials.config_args(old)) == tune.Config("gnu", "tuned")


def test_recommended_diff_adds_the_app_and_keeps_others(toy_root):
    (toy_root / "site-config/recommended.yaml").write_text(
        "# header\nother: {variant: tuned}  # kept as written\n"
    )
    winner = {
        "config": {
            "environment": "gnu",
            "variant": "tuned+blas=mkl",
            "extra_flags": [],
            "env": {},
            "inputs": {"N": 7040},
        },
        "score": 2.5,
        "medians": {"HPL": 50.0},
        "targets": [{"name": "t", "value": 0.95}],
    }
    res = {
        "tier": "ci",
        "date": "2026-11-22",
        "objective": "time",
        "objective_figures": ["HPL"],
        "confirm": 3,
        "cost": {"trials": 10, "builds": 3, "runs": 20},
    }
    diff, text = tune.recommended_diff("hpcc", winner, res)
    data = yaml.safe_load(text)
    assert text.startswith("# header\n") and data["other"] == {"variant": "tuned"}
    assert data["hpcc"]["variant"] == "tuned+blas=mkl" and data["hpcc"]["inputs"] == {"N": 7040}
    assert "+hpcc:" in diff and "+  variant: tuned+blas=mkl" in diff
    # the other application's line, its comment included, is untouched
    assert "\n other: {variant: tuned}  # kept as written\n" in diff
    assert not any(ln.startswith("-") and not ln.startswith("---") for ln in diff.splitlines())
    # a file of comments only gets the entry below them
    (toy_root / "site-config/recommended.yaml").write_text("# only a header\n")
    _, text = tune.recommended_diff("hpcc", winner, res)
    assert text.startswith("# only a header\nhpcc:\n")


def test_cli_budget_must_be_positive(capsys):
    assert cli.main(["tune", "hpcc", "--budget", "0"]) == 2
    assert "apptune: error: --budget: must be at least 1, not 0" in capsys.readouterr().err


@pytest.mark.integration
def test_search_on_the_synthetic_program_never_crowns_a_wrong_answer_and_resumes(
    synth_root, site, tmp_path
):
    work = tmp_path / "tune"
    logs = []
    res = tune.tune(
        "synth",
        budget=6,
        max_builds=3,
        repeats=2,
        confirm=2,
        top=2,
        work=work,
        sites={"gnu": site},
        log=logs.append,
    )
    trials = res["trials"]
    assert res["cost"]["search_runs"] >= 6 and (work / "tune.db").is_file()
    wrong = [
        t for t in trials if t["label"] and "aggressive" in t["label"] and t["state"] == "COMPLETE"
    ]
    assert all(t["verified"] is False and t["summary"].startswith("missing = 0") for t in wrong)
    assert res["winner"] is None or "aggressive" not in res["winner"]["label"]
    assert all(r["verified"] for r in res["confirmation"] if "aggressive" not in r["label"])
    assert (work / "tune-report.md").read_text().startswith("# apptune tune: synth")
    n = len(trials)
    builds = res["cost"]["builds"]
    # resume: the same work directory continues the study up to the new budget
    res2 = tune.tune(
        "synth",
        budget=9,
        max_builds=3,
        repeats=2,
        confirm=1,
        top=1,
        work=work,
        sites={"gnu": site},
        log=logs.append,
    )
    assert len(res2["trials"]) > n and res2["trials"][:n] == trials[:n]
    assert res2["cost"]["search_runs"] >= 9 and builds <= res2["cost"]["builds"] <= 4
    assert res2["baseline"] == res["baseline"]
    assert json.loads((work / "tune.json").read_text())["cost"] == res2["cost"]


def test_validate_checks_tuning_spaces(synth_root, capsys):
    (synth_root / "tuning/synth.yaml").write_text(
        SPACE.replace("[tuned, aggressive]", "[tuned, turbo]")
    )
    (synth_root / "site-config/settings.py").write_text(
        "site_configuration = {'environments': [{'name': 'gnu'}]}\n"
    )
    (synth_root / "build-recipes/toy.yaml").unlink()
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err
    assert "tuning/synth.yaml: build.ladders: unknown flag ladder 'turbo'" in err


def test_a_layout_with_another_rank_count_does_not_compare_per_process_sizes(monkeypatch, tmp_path):
    """HPCC sizes DGEMM, STREAM and FFT from each process's share of the memory: with
    one rank instead of two they change, so the tuner names `ranks` as a changed input
    and the reference lists those fields as depending on it."""
    from apptune.core.verification import verify

    seen = {}

    def fake_run_tier(
        recipe,
        tier,
        stage,
        run_dir,
        site,
        ranks=None,
        overrides=None,
        env=None,
        variant=None,
        changed_inputs=(),
        threads=1,
        binding=None,
    ):
        seen.update(ranks=ranks, threads=threads, binding=binding, changed=set(changed_inputs))
        return SimpleNamespace(
            ok=True, summary="", figures={}, verification=SimpleNamespace(skipped=[]), quality=None
        )

    monkeypatch.setattr(localrun, "run_tier", fake_run_tier)
    t = tune.Tuner("hpcc", tune.load_space("hpcc"), "time", tmp_path, sites={"gnu": object()})
    t.run(
        tune.Config("gnu", "aggressive", inputs=(("N", 5280),), ranks=1, threads=2, binding="core"),
        tmp_path,
        "a",
    )
    assert seen == {"ranks": 1, "threads": 2, "binding": "core", "changed": {"N", "ranks"}}
    t.run(tune.Config("gnu", "aggressive", inputs=(("N", 2000),), ranks=2), tmp_path, "b")
    assert seen["changed"] == set() and seen["binding"] is None
    _, ref = verify.load_reference("hpcc", "ci")
    per_process = {n for n, f in ref.fields.items() if "ranks" in f.depends_on}
    assert per_process == {"DGEMM_N", "STREAM_VectorSize", "FFT_N"}


def test_a_stalled_sampler_steps_to_unmeasured_neighbours_of_the_best_trial():
    """CI once stopped a resumed search one run short of its budget: TPE kept
    proposing measured configurations. The neighbour step walks the rest."""
    import hashlib
    import types

    import optuna
    from optuna.distributions import CategoricalDistribution as Cat

    dist = {"ladder": Cat(["tuned", "aggressive"]), "env.X": Cat(["a", "b", "c"])}
    study = optuna.create_study(direction="maximize")

    def add(ladder, x, value, verified=True):
        cfg = tune.Config("gnu", ladder, env=(("X", x),)).to_dict()
        study.add_trial(
            optuna.trial.create_trial(
                params={"ladder": ladder, "env.X": x},
                distributions=dist,
                value=value,
                user_attrs={"config": cfg, "runs": 2, "verified": verified},
            )
        )

    add("tuned", "a", 1.2)
    add("tuned", "b", 1.0)
    add("aggressive", "a", 1.5, verified=False)

    def key(variant):
        return hashlib.sha256(
            json.dumps(tune.Config("gnu", variant).build_key).encode()
        ).hexdigest()[:16]

    t = types.SimpleNamespace(builds={key("tuned"): {"ok": True}, key("aggressive"): {"ok": True}})
    # run knobs of the best verified trial first (tuned/a -> X=c), never one asked before
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) == {
        "ladder": "tuned",
        "env.X": "c",
    }
    study.enqueue_trial({"ladder": "tuned", "env.X": "c"})
    # then the other trials' neighbours: aggressive is built, so aggressive/b needs no build
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) == {
        "ladder": "aggressive",
        "env.X": "b",
    }
    study.enqueue_trial({"ladder": "aggressive", "env.X": "b"})
    study.enqueue_trial({"ladder": "aggressive", "env.X": "c"})
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) is None
    # a step to a build not yet made is offered only while the build budget lasts
    del t.builds[key("aggressive")]
    study2 = optuna.create_study(direction="maximize")
    study2.add_trial(study.trials[0])
    study = study2
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) == {
        "ladder": "tuned",
        "env.X": "b",
    }
    study.enqueue_trial({"ladder": "tuned", "env.X": "b"})
    study.enqueue_trial({"ladder": "tuned", "env.X": "c"})
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) is None
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=True) == {
        "ladder": "aggressive",
        "env.X": "a",
    }


def test_polish_steps_from_the_best_trial_only_and_to_adjacent_input_values():
    """The polish phase: one knob at a time from the best verified trial, run knobs
    first, an ordered input knob (N) only to the value next to the best one's."""
    import optuna
    from optuna.distributions import CategoricalDistribution as Cat

    dist = {
        "ladder": Cat(["tuned", "aggressive"]),
        "input.N": Cat(["1", "2", "3", "4"]),
        "input.grid": Cat(["1x2", "2x1"]),
    }
    study = optuna.create_study(direction="maximize")

    def add(ladder, n, grid, value):
        cfg = tune.Config("gnu", ladder, inputs=(("N", int(n)), ("grid", grid))).to_dict()
        study.add_trial(
            optuna.trial.create_trial(
                params={"ladder": ladder, "input.N": n, "input.grid": grid},
                distributions=dist,
                value=value,
                user_attrs={"config": cfg, "runs": 2, "verified": True},
            )
        )

    add("tuned", "4", "2x1", 2.0)  # the best
    add("aggressive", "1", "1x2", 1.0)
    built = {tune.Config("gnu", v).build_id: {"ok": True} for v in ("tuned", "aggressive")}
    t = SimpleNamespace(builds=built)
    steps = []
    while (
        step := tune_trials.unseen_neighbour(study, t, fresh_builds_left=False, best_only=True)
    ) is not None:
        steps.append(step)
        study.enqueue_trial(step)
    assert steps == [
        {"ladder": "tuned", "input.N": "3", "input.grid": "2x1"},
        {"ladder": "tuned", "input.N": "4", "input.grid": "1x2"},
        {"ladder": "aggressive", "input.N": "4", "input.grid": "2x1"},
    ]
    # without best_only the same study also offers far values and other trials' neighbours
    assert tune_trials.unseen_neighbour(study, t, fresh_builds_left=False) == {
        "ladder": "tuned",
        "input.N": "1",
        "input.grid": "2x1",
    }


def test_polish_outside_the_budget_is_refused_naming_the_option(tmp_path):
    with pytest.raises(
        ApptuneError, match=r"--polish: must be between 0 and the budget \(4\), not 5"
    ):
        tune.tune("hpcc", budget=4, polish=5, work=tmp_path)


TOY_SPACE = """\
app: toy
tier: ci
baseline: {environment: gnu, variant: baseline}
build:
  environments: [gnu]
  ladders: [baseline, tuned]
  extra_flags: [[]]
"""
TOY_TUNE = ["tune", "toy", "--budget", "2", "--max-builds", "2", "--repeats", "1"]
TOY_TUNE += ["--confirm", "1", "--top", "1", "--polish", "0"]


def test_tune_stores_its_trials_in_the_history(toy_root, fake_trials, tmp_path, capsys):
    """Every run of the search (baseline, trials, confirmation) is a trial of one session in
    the history, verified or not, and never part of a check's series."""
    from apptune.history import store

    (toy_root / "tuning").mkdir()
    (toy_root / "tuning/toy.yaml").write_text(TOY_SPACE)
    fake_trials.wrong = {"tuned"}
    work, hdir = tmp_path / "w", tmp_path / "h"
    rc = cli.main([*TOY_TUNE, "--work-dir", str(work), "--history", str(hdir)])
    res = json.loads((work / "tune.json").read_text())
    assert rc == (0 if res["winner"] else 1)
    ran = sorted(p.parent.name for p in (work / "runs").glob("*/apptune-result.json"))
    assert len(ran) == res["cost"]["runs"] == fake_trials.runs >= 4
    out = capsys.readouterr().out
    with store.History(hdir) as h:
        (run,) = h.runs(kind="trial")
        assert (
            f"apptune: history: {len(ran)} tune trials of session {run['session_uuid'][:8]}" in out
        )
        assert run["mode"] == "tune" and run["cmdline"].startswith("apptune tune toy --budget 2")
        got = {r["test"]: (r["variant"], r["verified"]) for r in h.results(run["session_uuid"])}
        assert sorted(got) == ran
        assert all(bool(ok) == ("tuned" not in v) for v, ok in got.values()), got
        assert got["baseline-0"] == ("baseline", 1)  # the run variant, as a check spells it
        assert h.samples() == [] and h.runs() == []
    # shown by `apptune history trials`; `apptune history list` (the checks) is unchanged
    assert cli.main(["history", "trials", "--history", str(hdir)]) == 0
    listing = capsys.readouterr().out
    assert f"tune    {len(ran):>3} trials" in listing and "1 tune/bisect sessions in" in listing
    assert cli.main(["history", "trials", run["session_uuid"][:8], "--history", str(hdir)]) == 0
    shown = capsys.readouterr().out
    assert "baseline-0  baseline [gnu]  clean  verified  rate=123.5 op/s" in shown
    assert "UNVERIFIED (sum = 1.7" in shown
    assert cli.main(["history", "list", "--history", str(hdir)]) == 0
    assert capsys.readouterr().out.startswith("0 runs in")
    assert cli.main(["history", "trials", "nosuch", "--history", str(hdir)]) == 2
    assert "history.sqlite: no tune or bisect session 'nosuch'" in capsys.readouterr().err


def test_an_interrupted_tune_stores_what_ran_and_no_history_stores_nothing(
    toy_root, fake_trials, tmp_path, capsys
):
    from apptune.history import store

    (toy_root / "tuning").mkdir()
    (toy_root / "tuning/toy.yaml").write_text(TOY_SPACE)
    fake_trials.interrupt_at = 3  # the baseline and the first trial ran
    hdir = tmp_path / "h"
    rc = cli.main([*TOY_TUNE, "--work-dir", str(tmp_path / "w"), "--history", str(hdir)])
    assert rc == 130 and "interrupted; the same command resumes" in capsys.readouterr().err
    with store.History(hdir) as h:
        (run,) = h.runs(kind="trial")
        assert run["num_cases"] == 2
    fake_trials.interrupt_at = None
    rc = cli.main([*TOY_TUNE, "--work-dir", str(tmp_path / "w2"), "--no-history"])
    assert rc in (0, 1) and not (store.history_dir() / store.DB_FILE).exists()


@pytest.mark.parametrize(
    "make,why",
    [
        (lambda h: h.write_text(""), "h: history directory: File exists"),
        (
            lambda h: (h.mkdir(), (h / "history.sqlite").write_text("not a database " * 99)),
            "history database: file is not a database",
        ),
    ],
)
def test_a_failing_history_write_keeps_the_tune_result(
    toy_root, fake_trials, tmp_path, capsys, make, why
):
    (toy_root / "tuning").mkdir()
    (toy_root / "tuning/toy.yaml").write_text(TOY_SPACE)
    hdir = tmp_path / "h"
    make(hdir)
    work = tmp_path / "w"
    rc = cli.main([*TOY_TUNE, "--work-dir", str(work), "--history", str(hdir)])
    res = json.loads((work / "tune.json").read_text())
    # the search's own verdict stands; a search that found a winner exits 2, not 0: what it
    # measured is not where the user asked it to be
    assert rc == (2 if res["winner"] else 1) and (work / "tune-report.md").is_file()
    err = [ln for ln in capsys.readouterr().err.splitlines() if "history" in ln]
    db = hdir / "history.sqlite"
    assert err == [f"apptune: error: history: tune trials not stored in {db}: {why}"]
