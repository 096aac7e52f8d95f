"""The history site as a person sees it: every page opened by headless Chromium.

A history of 13 nightly runs with a step injected at a known run (gnu/tuned built with -O1)
and the recorded runs of two machines (tests/data/compare/): every page of the site opens
with no script error, every link on it leads to a file that exists, names that hold markup
stay text, and the step shows with its cause.  The screenshot of the index is kept in the
test's directory and copied to test-artifacts/ (uploaded by CI)."""

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
from site_data import STEP_AT, nightly_history, two_machine_history
from test_report_browser import _chromium, chromium  # noqa: F401 (the fixture skips without it)

from apptune import cli, report

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration

# Put first in <head> of a copy of a page: records every script error, and after load
# every link (HTML and SVG) into the DOM.
PROBE = """<script>
window.__errors = [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
window.addEventListener('load', () => {
  const links = [...document.querySelectorAll('a')].map(a =>
    a.getAttribute('href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href'));
  const pre = document.createElement('pre');
  pre.id = 'probe';
  pre.textContent = JSON.stringify({errors: window.__errors, links: links});
  document.body.appendChild(pre);
});
</script>
"""
HOSTILE = "tuned<script>document.body.setAttribute('data-pwned','1')</script>"


def _site(tmp_path) -> tuple[Path, list[Path]]:
    hdir, dirs = nightly_history(tmp_path, variant_names={"baseline": "baseline", "tuned": HOSTILE})
    two_machine_history(tmp_path / "recorded", hdir)
    for d in (dirs[STEP_AT - 1], dirs[STEP_AT], dirs[-1]):
        report.write(d)
    out = tmp_path / "site"
    assert cli.main(["history", "site", str(out), "--history", str(hdir)]) == 0
    return out, dirs


def _open(page: Path, tmp_path) -> tuple[str, dict]:
    probe = page.with_name("probe-" + page.name)
    probe.write_text(page.read_text().replace("<head>", "<head>\n" + PROBE, 1))
    try:
        dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.as_uri(), cwd=tmp_path)
    finally:
        probe.unlink()
    m = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert m, f"{page.name}: the page did not finish loading"
    return dom, json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_every_page_opens_without_error_and_every_link_leads_somewhere(tmp_path):
    out, dirs = _site(tmp_path)
    pages = sorted(out.glob("*.html"))
    names = {p.name for p in pages}
    assert {"index.html", "since.html"} <= names
    assert any(n.startswith("compare-") for n in names) and any(
        n.startswith("series-") for n in names
    )
    reports = set()
    for page in pages:
        dom, probe = _open(page, tmp_path)
        assert probe["errors"] == [], f"{page.name}: script errors {probe['errors']}"
        body = re.search(r"<body[^>]*>", dom).group(0)
        assert "data-pwned" not in body, f"{page.name}: a name ran as a script"
        for href in probe["links"]:
            assert href and not re.match(r"[a-z]+:", href), f"{page.name}: link {href!r}"
            target = (out / unquote(href.split("#")[0])).resolve()
            assert target.is_file(), f"{page.name}: broken link {href}"
            if target.name == "report.html":
                reports.add(target.parent.name)
        if page.name.startswith("series-") and "hpcc, tier nightly" in dom:
            # the step, with its cause, at its run, linking to that run's report
            assert (
                "cflags -O2 → -O1" in dom
                and HOSTILE.replace("<", "&lt;").replace(">", "&gt;") in dom
            )
    assert reports == {d.name for d in (dirs[STEP_AT - 1], dirs[STEP_AT], dirs[-1])}

    shot = tmp_path / "site-index.png"
    chromium(
        f"--screenshot={shot}",
        "--window-size=1280,1000",
        (out / "index.html").as_uri(),
        cwd=tmp_path,
    )
    assert shot.stat().st_size > 10_000
    artifacts = REPO / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    shutil.copy(shot, artifacts / "history-site-index-headless-chromium.png")
