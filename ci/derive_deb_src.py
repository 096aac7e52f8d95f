"""Write a deb-src source list derived from this machine's Debian deb entries.

Reads the deb822 files in /etc/apt/sources.list.d/ and the one-line
/etc/apt/sources.list, keeps the entries signed by (or pointing at) Debian's
archive, and writes the same entries as ``Types: deb-src``.  No host name is
written by hand: every URI comes from the machine's own configuration.
"""

import glob
import os
import re
import sys
import tempfile

DEBIAN_KEY = "debian-archive-keyring"


def deb822_stanzas(text):
    return [s for s in re.split(r"\n\s*\n", text) if s.strip()]


def main(out, etc="/etc/apt"):
    stanzas = []
    for path in sorted(glob.glob(os.path.join(etc, "sources.list.d", "*.sources"))):
        if os.path.abspath(path) == os.path.abspath(out):
            continue
        for st in deb822_stanzas(open(path, encoding="utf-8").read()):
            types = re.search(r"^Types:\s*(.+)$", st, re.M)
            if not types or "deb" not in types.group(1).split():
                continue
            if DEBIAN_KEY not in st and "debian.sources" not in path:
                continue
            body = re.sub(r"^Types:.*$", "Types: deb-src", st, flags=re.M)
            stanzas.append(body.strip())
    legacy = os.path.join(etc, "sources.list")
    if os.path.exists(legacy):
        for line in open(legacy, encoding="utf-8"):
            m = re.match(r"^deb\s+(\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s+(.+)$", line.strip())
            if m and "debian" in m.group(2):
                opts = m.group(1) or ""
                stanzas.append(
                    "\n".join(
                        [
                            "Types: deb-src",
                            f"URIs: {m.group(2)}",
                            f"Suites: {m.group(3)}",
                            f"Components: {m.group(4)}",
                        ]
                        + ([f"# options {opts.strip()}"] if opts else [])
                    )
                )
    if not stanzas:
        sys.exit(f"derive_deb_src: no Debian 'deb' entry found in {etc}: cannot enable deb-src")
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(out))
    with os.fdopen(fd, "w") as f:
        f.write("# Written by apptune ci/derive_deb_src.py from this machine's deb entries\n")
        f.write("\n\n".join(stanzas) + "\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    print(f"derive_deb_src: wrote {out} ({len(stanzas)} entries)")


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])
