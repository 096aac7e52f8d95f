"""``apptune cache``: list, prune and verify the content-addressed build cache."""

from __future__ import annotations

from .options import GIB


def cmd_cache(a) -> int:
    from ..core.builds import buildcache

    if a.ccmd == "list":
        es = buildcache.entries()
        total = 0
        for e in es:
            m = e.manifest
            total += e.size
            print(
                f"{e.key[:16]}  {m.get('app', '?'):<8} {m.get('environment', '?'):<8} "
                f"{m.get('variant', '?'):<24} {e.size / 2**20:8.1f} MiB"
            )
        print(
            f"{len(es)} entries, {total / 2**20:.1f} MiB in {buildcache.root()} "
            f"(limit {buildcache.max_bytes() / 2**30:.1f} GiB)"
        )
        return 0
    if a.ccmd == "prune":
        limit = None if a.max_gb is None else int(a.max_gb * 2**30)
        removed = buildcache.prune(limit)
        print(f"removed {len(removed)} entries ({sum(e.size for e in removed) / 2**20:.1f} MiB)")
        return 0
    bad = buildcache.verify_all()
    for e, why in bad:
        print(f"{e.key[:16]}: {why}")
    print(
        f"{len(buildcache.entries())} entries checked, {len(bad)} corrupted"
        + (" (they are rebuilt on next use)" if bad else "")
    )
    return 1 if bad else 0


def register(subparsers) -> None:
    """Add ``apptune cache`` and its subcommands."""
    c = subparsers.add_parser("cache", help="the content-addressed build cache")
    cs = c.add_subparsers(dest="ccmd", required=True)
    cs.add_parser("list", help="entries with app, environment, variant and size")
    cp = cs.add_parser("prune", help="drop least recently used entries beyond the size limit")
    cp.add_argument(
        "--max-gb", type=GIB, help="size limit (default $APPTUNE_BUILD_CACHE_MAX_GB or 5)"
    )
    cs.add_parser("verify", help="check every entry's checksums; exit 1 if any is corrupted")
    c.set_defaults(func=cmd_cache)
