"""ci/derive_deb_src.py: deb-src entries derived from the machine's own Debian entries."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "ci" / "derive_deb_src.py"


def derive(etc: Path, out: Path):
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(out), str(etc)], capture_output=True, text=True
    )


def test_deb822_and_one_line_entries(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    (etc / "sources.list.d" / "debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\n"
        "Components: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
    )
    (etc / "sources.list.d" / "vendor.sources").write_text(
        "Types: deb\nURIs: https://vendor.example/apt\nSuites: stable\nComponents: main\n"
    )
    (etc / "sources.list").write_text(
        "deb http://mirror.example/debian-security bookworm-security main\n"
    )
    out = tmp_path / "out.sources"
    p = derive(etc, out)
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.count("Types: deb-src") == 2
    assert "mirror.example/debian\n" in text and "debian-security" in text
    assert "vendor.example" not in text


def test_no_debian_entry_is_a_clear_error(tmp_path):
    etc = tmp_path / "apt"
    (etc / "sources.list.d").mkdir(parents=True)
    p = derive(etc, tmp_path / "out.sources")
    assert p.returncode != 0 and "no Debian 'deb' entry" in p.stderr
