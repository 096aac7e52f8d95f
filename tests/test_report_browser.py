"""The HTML report as a person sees it: rendered by headless Chromium.

The report of the last run of the recorded -O1 series (tests/data/history/), with a
variant whose verification failed and a power trace, is opened in Chromium: the
DOM must show the failure first, then the regressions found in the history, then
the variant matrix with the best variant highlighted, and every image must load.
The screenshot is kept in the test's directory and copied to test-artifacts/
(uploaded by CI).
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import write_run

from apptune import cli, report

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DATA = Path(__file__).parent / "data" / "history" / "o1-slowdown.json"

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _chromium():
    if CHROMIUM is None:
        why = "chromium not installed (ci/apt-packages.txt lists it: run ci/bootstrap.sh)"
        if os.environ.get("CI"):  # the bootstrap installs it: a skip in CI would hide a defect
            pytest.fail(f"the browser test cannot run in CI: {why}")
        pytest.skip(why)


# Appended to a copy of the page: after load, writes into the DOM each image's load state,
# the elements that follow the exit status, and where each link of the first table leads.
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => ({src: i.getAttribute('src'),
                                              ok: i.complete && i.naturalWidth > 0}));
  const after = [];
  for (let e = document.getElementById('outcome'); e && after.length < 2; ) {
    e = e.nextElementSibling;
    if (e) after.push(e.tagName.toLowerCase() + '#' + e.id);
  }
  const links = [...document.querySelectorAll('#first-screen a')].map(a => {
    const target = document.getElementById(decodeURIComponent(a.hash.slice(1)));
    return {href: a.getAttribute('href'), text: a.textContent,
            to: target ? target.tagName.toLowerCase() + ': ' + target.textContent : null};
  });
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({imgs, after, links});
  document.body.appendChild(pre);
});
</script>
"""


def chromium(*args, cwd):
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--allow-file-access-from-files",
        *args,
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=cwd)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def _run_with_history(tmp_path) -> tuple[Path, Path]:
    data = json.loads(DATA.read_text())
    hdir = tmp_path / "history"
    dirs = []
    for i, run in enumerate(data["runs"]):
        results = [dict(r, provenance=data["provenance"][r["provenance"]]) for r in run["results"]]
        if i == len(data["runs"]) - 1:
            results.append(
                {
                    "app": "hpcc",
                    "tier": "nightly",
                    "environment": "gnu",
                    "variant": "aggressive",
                    "figures": {"HPL": 99.0, "StarFFT": 9.0, "wall_time": 50.0},
                    "ok": False,
                    "provenance": data["provenance"]["tuned"],
                }
            )
        dirs.append(write_run(tmp_path / run["uuid"], run["uuid"], run["start"], results))
    assert cli.main(["history", "ingest", "--history", str(hdir), *map(str, dirs)]) == 0
    last = dirs[-1]
    # a build that fails as expected, and the check that depends on it, skipped
    rep = json.loads((last / "report.json").read_text())
    rep["runs"][0]["testcases"] += [
        {
            "display_name": name,
            "unique_name": name.replace(" ", "_"),
            "app": "hpcc",
            "tier": tier,
            "environ": "llvm",
            "result": result,
            "fixture": tier is None,
            "fail_reason": "flang cannot build it",
            "dependencies_actual": deps,
        }
        for name, tier, result, deps in (
            ("HPCCBuild llvm", None, "xfail", []),
            ("HPCCCheck %tier=nightly llvm", "nightly", "skip", [["HPCCBuild_llvm", "", "llvm"]]),
        )
    ]
    (last / "report.json").write_text(json.dumps(rep))
    for p in (last / "output").rglob("apptune-result.json"):
        if json.loads(p.read_text())["variant"] == "baseline":
            (p.parent / "power-trace.csv").write_text(
                "t_s,power_W\n0.0,21\n0.5,58\n1.0,60\n1.5,59\n2.0,22\n"
            )
    return last, hdir


def test_report_in_headless_chromium(tmp_path):
    run_dir, hdir = _run_with_history(tmp_path)
    html = report.write(run_dir, history_dir=hdir)[2]
    probe = run_dir / "probe.html"
    probe.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), cwd=tmp_path)

    probe_out = json.loads(
        re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1).replace("&quot;", '"')
    )
    # the first table is the first thing after the exit status, and each of its links leads
    # to what it names: the application's matrix, the history's regressions, the expected
    # failures and the skipped tests
    assert probe_out["after"] == ["h2#at-a-glance", "table#first-screen"], probe_out["after"]
    links = {a["href"]: a for a in probe_out["links"]}
    assert None not in [a["to"] for a in links.values()], links
    assert links["#app-hpcc-nightly"]["to"].startswith("h2: hpcc — tier nightly")
    assert links["#expected-failures"]["text"] == "1" and links["#skipped"]["text"] == "1"
    assert links["#expected-failures"]["to"] == "h2: Expected failures"
    assert links["#skipped"]["to"] == "h2: Skipped"
    first = dom[dom.find('id="first-screen"') : dom.find("</table>", dom.find('id="first-screen"'))]
    assert '2 of 3 <span class="bad">(NOT verified: gnu/aggressive)' in first, first
    assert "a tie, within noise, with gnu/" in first and "no verdict: no baseline<" in first
    assert (
        ">REGRESSION</span>:<br>gnu/baseline: <b>StarFFT</b> -5.1%, <b>wall_time</b> +4.4% "
        "<small>(changed: flags -O2 → -O1)</small>"
    ) in first, first

    # failures first, then the history's regressions, then the matrix
    pos = [dom.find(s) for s in ('id="failures"', 'id="history"', 'class="matrix"')]
    assert -1 not in pos and pos == sorted(pos), pos
    failures = dom[pos[0] : pos[1]]
    assert "aggressive" in failures and "sum = nan" in failures
    regressions = dom[pos[1] : pos[2]]
    assert regressions.count(">regression<") == 2 and "flags -O2 → -O1" in regressions
    # the matrix: one column per variant (repeats merged), the wrong variant marked, the best
    # highlighted
    matrix = dom[pos[2] : dom.find("</table>", pos[2])]
    assert len(re.findall(r'<th class="variant">', matrix)) == 3
    assert "median of 3" in matrix and 'class="bad"' in matrix
    assert re.search(r'<b class="best-variant">gnu/(baseline|tuned)</b>', dom)
    assert re.search(r'<td class="best\s', matrix)
    # every image (trend, power) loaded in the browser
    srcs = {i["src"]: i["ok"] for i in probe_out["imgs"]}
    assert srcs == {"plots/trend-hpcc-nightly.png": True, "plots/power-hpcc-nightly.png": True}, (
        srcs
    )

    shot = tmp_path / "report.png"
    chromium(f"--screenshot={shot}", "--window-size=1280,2000", html.as_uri(), cwd=tmp_path)
    assert shot.stat().st_size > 20_000
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copy(shot, artifacts / "report-headless-chromium.png")


# Each payload, if it ran, marks the page's <body>; escaped, it is only text.
def _payload(n: int) -> str:
    mark = f"document.body.setAttribute('data-pwned-{n}','1')"
    return [
        f"<script>{mark}</script>",
        f'"><img src=x onerror="{mark}">',
        f'\'><svg onload="{mark}">',
        f"</title></td><script>{mark}</script>",
    ][n % 4]


def test_hostile_values_do_not_run_in_the_report(tmp_path, monkeypatch):
    """Program output (a field's value, the verification summary), a figure's name and unit
    and an environment's name reach the page as text: Chromium runs none of them."""
    from apptune.core.data import recipes
    from apptune.models import Figure

    real_specs = recipes.figure_specs

    def hostile_specs(recipe):
        specs = dict(real_specs(recipe))
        # validate refuses such a unit; the page must not trust that it did
        specs["HPL"] = Figure.model_construct(field="HPL", unit=_payload(4), better="higher")
        return specs

    monkeypatch.setattr(recipes, "figure_specs", hostile_specs)
    run_dir = write_run(
        tmp_path / "run",
        "u1",
        1.7e9,
        [
            {
                "app": "hpcc",
                "tier": "ci",
                "environment": "gnu",
                "variant": "tuned",
                "figures": {"HPL": 40.0, _payload(1): 2.0, "wall_time": 9.0},
                "fields": [{"field": "HPL", "ok": False, "got": _payload(2)}],
                "ok": False,
            },
            {
                "app": "hpcc",
                "tier": "ci",
                "environment": "gnu",
                "variant": "baseline",
                "figures": {"HPL": 30.0, "wall_time": 9.5},
            },
        ],
        mode="ci",
    )
    rec = next((run_dir / "stage").rglob("apptune-result.json"))
    data = json.loads(rec.read_text())
    data["verification"]["summary"] = f"'{_payload(3)}' is not a number" + _payload(0)
    rec.write_text(json.dumps(data))
    html = report.write(run_dir)[2]
    text = html.read_text()
    assert "<script>document" not in text and "<img src=x" not in text, "not escaped"
    dom = chromium("--virtual-time-budget=5000", "--dump-dom", html.as_uri(), cwd=tmp_path)
    body = re.search(r"<body[^>]*>", dom).group(0)
    assert "data-pwned" not in body, f"a payload ran in Chromium: {body}"
    # the values are there, as text
    assert "is not a number" in dom and "onerror" in dom
