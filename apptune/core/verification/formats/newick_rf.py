"""``newick_rf``: the Robinson-Foulds distance of the Newick tree a run writes to the
stored tree ``reference/<reference>`` (``{tier}`` replaced), one ``field``.

A likelihood within tolerance can still come with a different tree; comparing
topologies (RF distance 0 = same unrooted tree) catches that.  Branch lengths
and support values are ignored.
"""

from __future__ import annotations

from pathlib import Path

from .... import paths
from ....errors import ApptuneError
from ....models import OutputSpec, Recipe

NAMES = ("newick_rf",)


def fields(spec: OutputSpec, recipe: Recipe) -> set[str]:
    return {spec.field}


def reference_tree(spec: OutputSpec, tier: str) -> Path:
    """The stored tree a ``newick_rf`` output is compared with, for one tier."""
    return paths.root() / "reference" / spec.reference.format(tier=tier)


def parse(spec: OutputSpec, path: Path, tier: str = "") -> dict:
    ref = reference_tree(spec, tier)
    if not ref.is_file():
        raise ApptuneError(ref, None, f"reference tree for '{spec.field}' is missing")
    got = parse_newick(path.read_text(errors="replace"), path)
    want = parse_newick(ref.read_text(), ref)
    return {spec.field: robinson_foulds(got, want, path)}


def parse_newick(text: str, where: str | Path = "tree") -> list:
    """Nested lists of leaf names (``[[a, b], c]``); branch lengths/labels dropped."""
    s = text.strip()
    if not s.endswith(";"):
        raise ApptuneError(where, None, "not a Newick tree (no closing ';')")
    pos = 0

    def node():
        nonlocal pos
        if s[pos] == "(":
            pos += 1
            kids = [node()]
            while s[pos] == ",":
                pos += 1
                kids.append(node())
            if s[pos] != ")":
                raise ApptuneError(
                    where, f"offset {pos}", f"expected ')' in Newick, got {s[pos]!r}"
                )
            pos += 1
            _label()
            return kids
        name = _label()
        if not name:
            raise ApptuneError(where, f"offset {pos}", "empty leaf name in Newick")
        return name

    def _label():
        nonlocal pos
        start = pos
        while pos < len(s) and s[pos] not in ",():;":
            pos += 1
        name = s[start:pos].strip()
        if pos < len(s) and s[pos] == ":":
            pos += 1
            while pos < len(s) and s[pos] not in ",();":
                pos += 1
        return name

    try:
        tree = node()
    except IndexError:
        raise ApptuneError(where, None, "truncated Newick tree") from None
    if s[pos:].strip() != ";":
        raise ApptuneError(where, f"offset {pos}", "trailing text after the Newick tree")
    return tree


def leaves(tree) -> list[str]:
    if isinstance(tree, str):
        return [tree]
    return [x for k in tree for x in leaves(k)]


def splits(tree) -> set[frozenset]:
    """Non-trivial bipartitions of the unrooted tree, each as the side without the first leaf."""
    all_leaves = frozenset(leaves(tree))
    anchor = min(all_leaves)
    out = set()

    def walk(t) -> frozenset:
        if isinstance(t, str):
            return frozenset([t])
        below = frozenset().union(*(walk(k) for k in t))
        side = all_leaves - below if anchor in below else below
        if 1 < len(side) < len(all_leaves) - 1:
            out.add(side)
        return below

    walk(tree)
    return out


def robinson_foulds(a, b, where: str | Path = "tree") -> int:
    la, lb = set(leaves(a)), set(leaves(b))
    if la != lb:
        diff = sorted(la ^ lb)
        raise ApptuneError(where, None, f"trees have different taxa ({', '.join(diff[:5])})")
    return len(splits(a) ^ splits(b))
