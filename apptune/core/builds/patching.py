"""A build's patches: applied to the unpacked source, each checked against the sha256 its
plan pinned, and a patch that does not apply said per file and hunk in one line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from ... import paths
from ...errors import ApptuneError
from ..data.recipes import sha256_file


def apply_patches(plan: dict, src: Path) -> None:
    for p in plan["patches"]:
        pf = paths.patches_dir(plan["app"]) / p["file"]
        if sha256_file(pf) != p["sha256"]:
            raise ApptuneError(pf, "sha256", "patch changed since the build was planned")
        base = [
            "patch",
            f"-p{p['strip']}",
            "--forward",
            "--batch",
            "--fuzz=0",
            "--no-backup-if-mismatch",
            "-i",
            str(pf),
        ]
        dry = subprocess.run(base + ["--dry-run"], cwd=src, capture_output=True, text=True)
        if dry.returncode != 0:
            out = dry.stdout + dry.stderr
            bad = patch_failures(out, p["strip"]) or [
                (None, (out.strip().splitlines() or ["patch failed with no output"])[-1])
            ]
            first = bad[0][0]
            what = "; ".join(why if f == first else f"{f or 'patch'}: {why}" for f, why in bad)
            raise ApptuneError(
                pf,
                first or "hunks",
                f"{what} (the patch does not apply to {plan['app']} {plan['version']})",
            )
        subprocess.run(base, cwd=src, check=True, capture_output=True)
        print(f"apptune: applied {p['file']} (sha256 {p['sha256'][:12]})", flush=True)


def patch_failures(output: str, strip: int = 1) -> list[tuple[str | None, str]]:
    """(file inside the patch, what failed) for each failure GNU patch reports."""
    out: list[tuple[str | None, str]] = []
    current, missing, named = None, False, None
    for line in output.splitlines():
        m = re.match(r"^(?:checking|patching) file (.+)$", line)
        if m:
            current = m.group(1).strip("'\"")
        elif line.startswith("can't find file to patch"):
            missing, named = True, None
        elif missing and re.match(r"^\|(\+\+\+|---) ", line):
            # the headers patch shows: the new name (+++) wins over the old one (---)
            path = line[5:].split("\t")[0].strip()
            if path != "/dev/null" and (named is None or line.startswith("|+++")):
                named = "/".join(path.split("/")[strip:]) or path
        elif missing and line.startswith("No file to patch"):
            out.append((named, "file to patch not found (a wrong 'strip', or not in this version)"))
            missing = False
        elif m := re.match(r"^Hunk #(\d+) FAILED at (\d+)", line):
            out.append((current, f"hunk #{m.group(1)} does not apply at line {m.group(2)}"))
        elif line.startswith("Reversed (or previously applied) patch detected"):
            out.append((current, "already applied (or reversed)"))
        elif line.startswith("patch: **** "):
            out.append((current, line[len("patch: **** ") :]))
    return out
