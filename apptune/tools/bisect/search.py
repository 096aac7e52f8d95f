"""The search over units (objects or global functions): FLiT's bisection for one culprit
at a time, verified, with delta debugging where the culprits only fail together."""

from __future__ import annotations

from ...errors import ApptuneError


# -------------------------------------------------------------------------- search
class BudgetExhausted(Exception):
    pass


def bisect_search(units: list[str], fails, noun: str = "object") -> dict:
    """Smallest set of units that must be good for ``fails`` to turn false.

    ``fails(bad_units)`` is True when the build with exactly these units taken from
    the bad build (all others good) fails verification; ``fails(all)`` must be True.

    First FLiT's bisection for a single culprit (one test per halving: when the
    first half alone does not fail, the culprit is taken to be in the other half),
    then one test verifies it. When that fails (several culprits, or one that only
    fails together with another), Zeller's ddmin over the set of good units finds a
    1-minimal set (no unit of it can be dropped). Returns ``{"culprits", "verified",
    "one_minimal", "method", "notes"}``."""
    notes: list[str] = []
    c = list(units)
    while len(c) > 1:
        h1, h2 = c[: len(c) // 2], c[len(c) // 2 :]
        c = h1 if fails(h1) else h2
    x = c[0]
    if not fails([u for u in units if u != x]):
        return {
            "culprits": [x],
            "verified": True,
            "one_minimal": True,
            "method": "bisection",
            "notes": notes,
        }
    if fails([]):
        if noun != "object":
            raise ApptuneError(
                None,
                "bisect",
                f"the candidate with every {noun} from the good build "
                f"still fails: the cause is not in one {noun} (code inlined elsewhere, "
                "a function with internal linkage, or data)",
            )
        raise ApptuneError(
            None,
            "bisect",
            "the candidate with every object from the good build "
            "still fails: the cause is not in an object file's flags (the link "
            "line, the libraries or the run)",
        )
    notes.append(f"{x} alone is not enough: ddmin over the good {noun}s")
    good = ddmin(list(units), lambda s: not fails([u for u in units if u not in set(s)]))
    return {
        "culprits": good,
        "verified": True,
        "one_minimal": True,
        "method": "bisection, then ddmin",
        "notes": notes,
    }


def ddmin(c: list[str], passes) -> list[str]:
    """Zeller & Hildebrandt's ddmin: a 1-minimal subset of ``c`` for which ``passes``
    holds (``passes(c)`` must hold)."""
    n = 2
    while len(c) >= 2:
        size = len(c) / n
        parts = [c[round(i * size) : round((i + 1) * size)] for i in range(n)]
        for p in parts:
            if passes(p):
                c, n = p, 2
                break
        else:
            for p in parts:
                comp = [u for u in c if u not in set(p)]
                if n > 2 and passes(comp):
                    c, n = comp, max(n - 1, 2)
                    break
            else:
                if n >= len(c):
                    break
                n = min(len(c), 2 * n)
    return c
