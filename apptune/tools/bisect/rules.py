"""The recipe's side: the good flags of a culprit file as a ``per_file`` rule, whether a
rule already covers it, and the rules written into the recipe (its comments kept)."""

from __future__ import annotations

import fnmatch
import json

import yaml

from ... import yamlio
from ...core.data import recipes
from ...errors import ApptuneError
from ...models import BuildPlan, Recipe


# ---------------------------------------------------------------------- the recipe
def good_flags(plan: BuildPlan, source: str) -> dict:
    """The flags the good build gave ``source``, as a per_file rule's flags."""
    for r in plan.per_file:
        if any(fnmatch.fnmatch(source, g) for g in r.files):
            if r.ladder == "recipe":
                return {"cflags": list(r.cflags), "fflags": list(r.fflags)}
            return {"flags": r.ladder}
    return {
        "flags": recipes.Variant.parse(
            plan.variant.split()[0], recipes.load_recipe(plan.app)
        ).ladder
    }


def covering_rule(recipe: Recipe, source: str) -> int | None:
    for i, r in enumerate(recipe.per_file):
        if any(fnmatch.fnmatch(source, g) for g in r.files):
            return i
    return None


def per_file_entries(plan_good: BuildPlan, sources: list[str], reason: str) -> list[dict]:
    groups: dict[str, dict] = {}
    for s in sources:
        fl = good_flags(plan_good, s)
        key = json.dumps(fl, sort_keys=True)
        groups.setdefault(key, {"files": [], **fl, "reason": reason})["files"].append(s)
    return list(groups.values())


def _rule(e: dict):
    """A rule in the recipes' own style: flow lists, the reason folded (``>-``) at 84."""
    import textwrap

    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.scalarstring import FoldedScalarString

    def flow(items):
        s = CommentedSeq(items)
        s.fa.set_flow_style()
        return s

    m = CommentedMap(files=flow(e["files"]))
    for k in ("flags", "cflags", "fflags"):
        if k in e:
            m[k] = flow(e[k]) if isinstance(e[k], list) else e[k]
    text = " ".join(e["reason"].split())
    reason, folds, at = FoldedScalarString(text), [], 0
    for line in textwrap.wrap(text, 84)[:-1]:
        at += len(line)
        folds.append(at)
        at += 1
    reason.fold_pos = folds
    m["reason"] = reason
    return m


def add_per_file(text: str, entries: list[dict], where: str = "recipe") -> str:
    """The recipe's text with ``entries`` appended to ``per_file``; comments, order and
    style of everything else stay (ruamel.yaml round trip)."""
    from ruamel.yaml.comments import CommentedSeq

    def change(doc):
        rules = doc.get("per_file")
        if not rules:  # absent, or an empty flow list: a block list, before `run`
            rules = CommentedSeq()
            keys = list(doc)
            if "per_file" in doc:
                doc["per_file"] = rules
            else:
                doc.insert(keys.index("run") if "run" in keys else len(keys), "per_file", rules)
        last = rules[-1] if len(rules) else None
        for e in entries:
            rules.append(_rule(e))
        # the blank lines and comments after the list stay after it
        if last is not None and hasattr(last, "ca") and len(last):
            key = list(last)[-1]
            tail = last.ca.items.pop(key, None)
            if tail:
                token = tail[2]
                block = type(last[key]).__name__ in ("FoldedScalarString", "LiteralScalarString")
                if token is not None and not block and token.value.startswith("\n"):
                    # after a plain value the token also ends its line; a folded reason
                    # (the new rule's) ends its own
                    token.value = token.value[1:]
                    if not token.value:
                        tail = None
                if tail:
                    new = rules[-1]
                    new.ca.items[list(new)[-1]] = tail

    out = yamlio.edit_yaml_text(text, change)
    old_n = len((yaml.safe_load(text) or {}).get("per_file") or [])
    data = yaml.safe_load(out)
    Recipe.model_validate(data)
    if len(data.get("per_file") or []) != old_n + len(entries):
        raise ApptuneError(where, "per_file", "could not add the rule to the recipe's text")
    return out
