"""``apptune new``: start an application (recipe, check, ci input, reference skeleton)."""

from __future__ import annotations

from .. import paths
from .options import COUNT


def cmd_new(a) -> int:
    from ..tools import scaffold

    s = scaffold.new(
        a.app,
        debian=a.debian,
        url=a.url,
        sha256=a.sha256,
        file=a.file,
        path=a.path,
        version=a.version,
        build_system=a.build_system,
        ranks=a.ranks,
    )
    scaffold.write(s)
    print(
        f"apptune: new: {a.app}: source {s.tarball.name} verified; build {s.kind} ({s.guess}); "
        f"languages {', '.join(s.languages)}"
    )
    print(f"apptune: new: wrote {', '.join(str(f.relative_to(paths.root())) for f in s.files)}")
    if s.mpi_users:
        print(
            f"apptune: new: {s.app}: {len(s.mpi_users)} Fortran file(s) `use mpi` "
            f"({', '.join(s.mpi_users[:3])}): Debian's MPI modules are gfortran's, which the "
            "llvm family's flang-new cannot read; an llvm variant needs `include 'mpif.h'` "
            "instead (a patch; see the recipe's family_flags comment)"
        )
    print(scaffold.next_steps(s))
    return 0


def register(subparsers) -> None:
    """Add ``apptune new``."""
    nw = subparsers.add_parser(
        "new",
        help="start an application: fetch its source, guess its build, write "
        "its recipe, check, ci input and reference skeleton (docs/adding-an-application.md)",
    )
    nw.add_argument("app", metavar="APP", help="application name (build-recipes/APP.yaml)")
    src = nw.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--debian",
        metavar="PACKAGE",
        help="a Debian source package: its newest orig "
        "tarball, name and sha256 from apt-cache showsrc",
    )
    src.add_argument(
        "--url",
        help="a tarball's https:// address (or file:// for a tarball on this machine); "
        "with --sha256",
    )
    src.add_argument("--path", metavar="src/NAME", help="source kept in this repository")
    nw.add_argument("--sha256", metavar="HEX", help="the pinned sha256 of the --url tarball")
    nw.add_argument(
        "--file",
        metavar="NAME",
        help="the --url tarball's file name (default: the URL's last part)",
    )
    nw.add_argument(
        "--version",
        help="the application's version (default: the Debian upstream "
        "version, or the one in the file name; 1.0 for --path)",
    )
    nw.add_argument(
        "--build-system",
        metavar="KIND",
        help="how it builds: cmake, configure, autoreconf "
        "(configure.ac, no configure) or make (default: guessed from the top of the source)",
    )
    nw.add_argument("--ranks", type=COUNT, default=2, help="MPI ranks of the ci tier (default 2)")
    nw.set_defaults(func=cmd_new)
