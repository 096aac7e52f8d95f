"""Harness features the QE and micro-benchmark recipes need: expected build failures,
per-family flags, in-repo sources, tarballs with links that point outside."""

import io
import json
import tarfile

import pytest

from apptune import report
from apptune.constants import XFAIL_FILE
from apptune.core.builds import sources, steps
from apptune.core.data import recipes
from apptune.core.data.recipes import Toolchain
from apptune.errors import ApptuneError


def _bad_flag_recipe(root, envs):
    """The toy build fails with gcc's own message about an unknown option."""
    (root / "build-recipes/templates/toy/config.mk.j2").write_text(
        "CC = {{ cc }}\nCFLAGS = {{ (app_cflags + cflags) | makeflags }} -fno-such-option-here\n"
    )
    text = (root / "build-recipes/toy.yaml").read_text()
    text = text.replace(
        "  products: [toy]\n",
        "  products: [toy]\n"
        "  expected_failures:\n"
        f"    - environments: [{envs}]\n"
        '      match: "unrecognized command-line option .-fno-such-option-here."\n'
        "      reason: this compiler does not know the option yet\n",
    )
    (root / "build-recipes/toy.yaml").write_text(text)


def _main(tmp_path, tc):
    tmp_path.mkdir(parents=True, exist_ok=True)
    plan = recipes.resolve(recipes.load_recipe("toy"), "baseline", tc).to_dict()
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    tarball = sources.fetch(recipes.load_recipe("toy"))
    stage = tmp_path / "stage"
    stage.mkdir(exist_ok=True)
    return steps.main(
        ["--plan", str(tmp_path / "plan.json"), "--source", str(tarball), "--stage", str(stage)]
    ), stage


@pytest.mark.slow
def test_expected_build_failure_records_the_compilers_message(
    toy_root, tmp_path, gnu_toolchain, capsys
):
    _bad_flag_recipe(toy_root, "gnu")
    rc, stage = _main(tmp_path, gnu_toolchain)
    assert rc == 0
    rec = json.loads((stage / XFAIL_FILE).read_text())
    assert rec["reason"] == "this compiler does not know the option yet"
    assert "-fno-such-option-here" in rec["compiler_said"]
    assert not (stage / "provenance.json").exists()
    assert "expected build failure" in capsys.readouterr().out


@pytest.mark.slow
def test_an_expected_failure_is_cached_and_replayed_while_the_recipe_expects_it(
    toy_root, tmp_path, gnu_toolchain, capsys
):
    """The same sources, flags and compilers fail the same way: the second build replays
    the failure from the build cache instead of compiling up to it; once the recipe no
    longer expects that failure, the build runs again (and fails for real)."""
    _bad_flag_recipe(toy_root, "gnu")
    rc, stage = _main(tmp_path / "first", gnu_toolchain)
    first = json.loads((stage / XFAIL_FILE).read_text())
    assert rc == 0 and "cached" not in first
    capsys.readouterr()
    rc, stage = _main(tmp_path / "second", gnu_toolchain)
    out = capsys.readouterr().out
    again = json.loads((stage / XFAIL_FILE).read_text())
    assert rc == 0 and again == dict(first, cached=True)
    assert "replaying its expected failure" in out and "running (in" not in out
    text = (
        (toy_root / "build-recipes/toy.yaml")
        .read_text()
        .replace("environments: [gnu]", "environments: [llvm]")
    )
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    rc, stage = _main(tmp_path / "third", gnu_toolchain)
    captured = capsys.readouterr()
    assert rc == 1 and not (stage / XFAIL_FILE).exists()
    assert "running (in" in captured.out and "make exited" in captured.err


@pytest.mark.slow
def test_expected_failure_of_another_environment_is_a_real_failure(
    toy_root, tmp_path, gnu_toolchain, capsys
):
    _bad_flag_recipe(toy_root, "llvm")
    rc, stage = _main(tmp_path, gnu_toolchain)
    assert rc == 1 and not (stage / XFAIL_FILE).exists()
    assert "make exited" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.slow
def test_a_failure_with_another_message_is_a_real_failure(toy_root, tmp_path, gnu_toolchain):
    _bad_flag_recipe(toy_root, "gnu")
    text = (
        (toy_root / "build-recipes/toy.yaml")
        .read_text()
        .replace("fno-such-option-here.", "fother.")
    )
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    rc, stage = _main(tmp_path, gnu_toolchain)
    assert rc == 1 and not (stage / XFAIL_FILE).exists()


def test_expected_failure_regex_is_validated(toy_root):
    _bad_flag_recipe(toy_root, "gnu")
    text = (toy_root / "build-recipes/toy.yaml").read_text().replace('match: "', 'match: "(')
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    with pytest.raises(ApptuneError, match=r"expected_failures.*not a valid regular expression"):
        recipes.load_recipe("toy")


def test_family_flags_reach_the_plan_for_that_family_only(toy_root, gnu_toolchain):
    text = (
        (toy_root / "build-recipes/toy.yaml")
        .read_text()
        .replace(
            "  products: [toy]\n",
            "  products: [toy]\n  family_flags:\n"
            "    gnu: {cflags: [-fno-common], ldflags: ['-Wl,--as-needed']}\n"
            "    llvm: {cflags: [-fno-vectorize]}\n",
        )
    )
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    r = recipes.load_recipe("toy")
    plan = recipes.resolve(r, "baseline", gnu_toolchain)
    assert plan.app_cflags == ["-fno-common"] and plan.app_ldflags == ["-Wl,--as-needed"]
    llvm = Toolchain(
        environment="llvm",
        family="llvm",
        cc="clang",
        cxx="clang++",
        ftn="flang",
        mpi="none",
        mpi_standard="3.1",
        blas="openblas",
    )
    assert recipes.resolve(r, "baseline", llvm).app_cflags == ["-fno-vectorize"]


def _local_recipe(root, path="src/toy"):
    text = (root / "build-recipes/toy.yaml").read_text()
    start = text.index("source:")
    end = text.index("build:")
    text = text[:start] + f"source: {{path: {path}}}\n" + text[end:]
    (root / "build-recipes/toy.yaml").write_text(text)


@pytest.mark.slow
def test_in_repo_source_is_packed_reproducibly_and_named_by_content(
    toy_root, tmp_path, gnu_toolchain
):
    from conftest import TOY_ACC, TOY_MAIN, TOY_MAKEFILE

    src = toy_root / "src/toy"
    src.mkdir(parents=True)
    for name, text in {"main.c": TOY_MAIN, "acc.c": TOY_ACC, "Makefile": TOY_MAKEFILE}.items():
        (src / name).write_text(text)
    (src / "acc.o").write_text("stale object: never packed")
    _local_recipe(toy_root)
    r = recipes.load_recipe("toy")
    first = sources.fetch(r)
    data = first.read_bytes()
    first.unlink()
    assert sources.fetch(r) == first and first.read_bytes() == data  # byte-identical
    with tarfile.open(first) as tf:
        assert sorted(tf.getnames()) == ["toy/Makefile", "toy/acc.c", "toy/main.c"]
    (src / "acc.c").write_text(TOY_ACC + "\n/* changed */\n")
    assert sources.fetch(r) != first
    # and it builds like a downloaded source
    stage = tmp_path / "stage"
    stage.mkdir()
    prov = steps.build(
        recipes.resolve(r, "baseline", gnu_toolchain).to_dict(), sources.fetch(r), stage
    )
    assert (stage / "toy").is_file() and "changed" in (stage / "src/acc.c").read_text()
    assert prov["source"]["file"].startswith("toy-")


def test_in_repo_source_outside_the_repository_is_refused(toy_root):
    _local_recipe(toy_root, path="src/../../elsewhere")
    with pytest.raises(ApptuneError, match=r"source.path: .* is outside the repository"):
        sources.fetch(recipes.load_recipe("toy"))


def test_in_repo_source_with_a_checksum_is_refused(toy_root):
    _local_recipe(toy_root)
    text = (
        (toy_root / "build-recipes/toy.yaml")
        .read_text()
        .replace("source: {path: src/toy}", "source: {path: src/toy, sha256: '" + "0" * 64 + "'}")
    )
    (toy_root / "build-recipes/toy.yaml").write_text(text)
    with pytest.raises(ApptuneError, match="pinned by the repository"):
        recipes.load_recipe("toy")


def test_unpack_leaves_out_links_pointing_outside(tmp_path, capsys):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"ok\n"
        info = tarfile.TarInfo("app-1/keep.txt")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
        for name, target in (
            ("app-1/abs", "/usr/share/tcltk/bwidget"),
            ("app-1/up", "../../etc/passwd"),
            ("app-1/inside", "keep.txt"),
        ):
            link = tarfile.TarInfo(name)
            link.type = tarfile.SYMTYPE
            link.linkname = target
            tf.addfile(link)
    t = tmp_path / "app.tar.gz"
    t.write_bytes(buf.getvalue())
    skipped = sources.unpack(t, tmp_path / "src", 1)
    assert sorted(s.split(" ->")[0] for s in skipped) == ["abs", "up"]
    assert (tmp_path / "src/keep.txt").read_text() == "ok\n"
    assert (tmp_path / "src/inside").is_symlink()
    assert not (tmp_path / "src/abs").exists() and not (tmp_path / "src/up").exists()
    assert "left out symbolic link" in capsys.readouterr().out


def test_unpack_of_a_broken_tarball_is_one_error(tmp_path):
    t = tmp_path / "bad.tar.gz"
    t.write_bytes(b"\x1f\x8b not really gzip")
    with pytest.raises(ApptuneError, match="bad.tar.gz: cannot unpack"):
        sources.unpack(t, tmp_path / "src", 1)


def test_report_lists_expected_failures_and_the_runs_they_skip(tmp_path):
    bdir = tmp_path / "build"
    bdir.mkdir()
    (bdir / XFAIL_FILE).write_text(
        json.dumps(
            {
                "reason": "flang-new 16 cannot compile FoX",
                "step": 1,
                "expected_failure": 0,
                "compiler_said": "error: not yet implemented: "
                "derived type components with non default lower bounds",
            }
        )
    )
    cases = [
        {
            "display_name": "QEBuild %variant=tuned",
            "unique_name": "QEBuild_1",
            "environ": "llvm",
            "result": "xfail",
            "fixture": True,
            "fail_phase": "sanity",
            "fail_reason": "expected",
            "outputdir": str(bdir),
            "stagedir": None,
            "dependencies_actual": [],
        },
        {
            "display_name": "QECheck %tier=ci",
            "unique_name": "QECheck_1",
            "environ": "llvm",
            "result": "skip",
            "fixture": False,
            "fail_phase": None,
            "fail_reason": None,
            "outputdir": None,
            "stagedir": str(tmp_path / "nowhere"),
            "dependencies_actual": [["QEBuild_1", "local:default", "llvm"]],
        },
    ]
    rep = tmp_path / "report.json"
    rep.write_text(json.dumps({"session_info": {"num_cases": 2}, "runs": [{"testcases": cases}]}))
    s = report.collect(rep)
    assert s["failures"] == []
    (x,) = s["expected_failures"]
    assert "cannot compile FoX" in x["reason"] and "not yet implemented" in x["reason"]
    assert s["skipped"][0]["reason"].startswith(
        "depends on QEBuild %variant=tuned, an expected failure"
    )
    md, html = (p.read_text() for p in report.render(s, tmp_path)[1:])
    assert "## Expected failures" in md and "not yet implemented" in md
    assert 'id="expected-failures"' in html


def test_curve_columns_without_a_finite_value_are_not_plotted(tmp_path):
    from apptune.models import RunCurve, RunRecord, RunVerification
    from apptune.report.row import Row

    out = tmp_path / "out"
    (out / "curves").mkdir(parents=True)
    (out / "curves/placement.csv").write_text(
        "bytes,same_socket_us,other_socket_us\n125,0.5,nan\n5000,1.5,nan\n"
    )
    plot = {"x": "bytes", "y": ["same_socket_us", "other_socket_us"]}
    record = RunRecord(
        app="mpi-micro",
        tier="ci",
        environment="gnu",
        variant="tuned",
        verification=RunVerification(ok=True, summary=""),
        curves={"placement": RunCurve(file="curves/placement.csv", plot=plot)},
    )
    row = Row.of({"display_name": "MPIMicroCheck", "outputdir": str(out)}, record, "pass")
    summary = {"apps": [{"app": "mpi-micro", "tier": "ci", "rows": [row]}]}
    report.curve_plots(summary, tmp_path)
    report.write_figures()
    assert [p["y"] for p in summary["apps"][0]["curve_plots"]] == ["same_socket_us"]
    assert (tmp_path / "plots/curve-mpi-micro-ci-placement-same_socket_us.png").is_file()


def test_optional_figure_is_declared_in_the_recipe():
    from apptune.models import Figure

    assert Figure(field="x_us", unit="us", better="lower", optional=True).optional
    r = recipes.load_recipe(recipes.recipe_path("mpi-micro"))
    assert r.run.figures["placement_other_node"].optional
    assert not r.run.figures["placement_same_socket"].optional


@pytest.mark.slow
def test_the_environment_turns_the_build_cache_off_for_every_build(
    toy_root, tmp_path, gnu_toolchain, capsys, monkeypatch
):
    rc, _ = _main(tmp_path / "first", gnu_toolchain)
    assert rc == 0 and "built in" in capsys.readouterr().out
    rc, _ = _main(tmp_path / "second", gnu_toolchain)
    assert rc == 0 and "restored from the build cache" in capsys.readouterr().out
    monkeypatch.setenv("APPTUNE_USE_BUILD_CACHE", "0")
    rc, _ = _main(tmp_path / "third", gnu_toolchain)
    assert rc == 0 and "built in" in capsys.readouterr().out
