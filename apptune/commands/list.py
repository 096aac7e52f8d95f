"""``apptune list``: the applications, their patches, tiers and variants."""

from __future__ import annotations

from ..core.data import recipes


def cmd_list(a) -> int:
    from ..core.data import inputs

    for app in recipes.list_recipes():
        r = recipes.load_recipe(app)
        print(f"{r.name} {r.version}: {r.description}")
        if r.source.path:
            print(f"  source: {r.source.path}/ (this repository)")
        else:
            print(f"  source: {r.source.file} sha256 {r.source.sha256[:16]}…")
        for p in r.patches:
            print(f"  patch: {p.file} — {p.reason}")
        for tname, t in r.tiers.items():
            stands = inputs.load_input(app, tname)[1].stands_for
            print(
                f"  tier {tname} ({t.ranks} ranks)" + (f", stands for {stands}:" if stands else ":")
            )
            for env, specs in t.variants.items():
                print(f"    {env}: {', '.join(specs)}")
    return 0


def register(subparsers) -> None:
    """Add ``apptune list``."""
    lst = subparsers.add_parser("list", help="list applications, patches, tiers and variants")
    lst.set_defaults(func=cmd_list)
