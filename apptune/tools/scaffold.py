"""``apptune new APP``: a new application's files, from its source.

The source is fetched and checked as every build fetches it (:mod:`apptune.core.builds.sources`):
a Debian orig tarball (``--debian PACKAGE``: its name and sha256 from
``apt-cache showsrc``), a tarball at a URL with its pinned sha256 (``--url``), or a
directory of this repository (``--path src/NAME``). The build system is guessed from the
tarball's top level (``CMakeLists.txt``: CMake; ``configure``: autotools; ``configure.ac``
alone: autoreconf, then configure; ``Makefile``: make), the languages from the source
files' extensions. Written, from the templates in ``apptune/templates/``:

* ``build-recipes/APP.yaml``: a commented recipe, valid except for the values a person
  must write (``FILL IN: ...``; each is an error naming its field until replaced);
* ``reframe-checks/APP/APP.py``: the thin check (the shape of every other check);
* ``inputs/APP/ci/input.yaml``: the ci input, without parameters;
* ``reference/APP/ci.yaml``: a reference without fields, which ``apptune bless --new``
  fills from a first run;
* ``reference/APP/sensitivity/faults.yaml``: the faults a person plants to measure what the
  verification sees (``FILL IN``: one of their own, run by ``apptune sensitivity APP``).

An existing file is never overwritten: the command refuses, naming it, before it writes
anything.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tarfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from types import SimpleNamespace

import yaml

from .. import paths, templating
from ..core.builds import sources
from ..core.builds.ccwrap import SOURCE_LANGUAGE
from ..core.data import faults, recipes
from ..errors import ApptuneError
from ..models import NAME_RE, SHA256_RE, SourceSpec
from ..models.source import TARBALL_NAME_RE, url_problem
from ..yamlio import atomic_write_text, placeholders

#: The build kinds ``apptune new`` writes, by the file at the top of the source that
#: decides them, in order of precedence.
BUILD_FILES = (
    ("CMakeLists.txt", "cmake"),
    ("configure", "configure"),
    ("configure.ac", "autoreconf"),
    ("configure.in", "autoreconf"),
    ("GNUmakefile", "make"),
    ("Makefile", "make"),
    ("makefile", "make"),
)
BUILD_KINDS = ("cmake", "configure", "autoreconf", "make")
#: What ``--version`` may be: it is written into the recipe and its comments.
VERSION_RE = r"[A-Za-z0-9][A-Za-z0-9._+~-]*"
ARCHIVE_EXT = re.compile(r"(\.orig)?\.(tar\.(gz|bz2|xz|zst)|tgz|tbz2|txz|tar)$")

# Build words per language: (compiler variable, compiler, flags variable, flags).
_MAKE = {
    "c": ("CC", "cc", "CFLAGS", "(app_cflags + cflags + cppflags) | makeflags"),
    "cxx": ("CXX", "cxx", "CXXFLAGS", "(app_cflags + cflags + cppflags) | makeflags"),
    "fortran": ("FC", "ftn", "FFLAGS", "(app_fflags + fflags + cppflags) | makeflags"),
}
_CONFIGURE = {
    "c": [("CC", "cc"), ("CFLAGS", "(app_cflags + cflags) | join(' ')")],
    "cxx": [("CXX", "cxx"), ("CXXFLAGS", "(app_cflags + cflags) | join(' ')")],
    "fortran": [
        ("FC", "ftn"),
        ("FCFLAGS", "(app_fflags + fflags + cppflags) | join(' ')"),
        ("F77", "ftn"),
        ("FFLAGS", "(app_fflags + fflags + cppflags) | join(' ')"),
    ],
}
_CMAKE = {
    "c": ("C", "cc", "(app_cflags + cflags + cppflags) | join(' ')"),
    "cxx": ("CXX", "cxx", "(app_cflags + cflags + cppflags) | join(' ')"),
    "fortran": ("Fortran", "ftn", "(app_fflags + fflags + cppflags) | join(' ')"),
}
_LDFLAGS = "(app_ldflags + ldflags) | "
_JOIN = "join(' ')"


@dataclass
class DebianOrig:
    """A Debian source package's orig tarball, as ``apt-cache showsrc`` lists it."""

    package: str
    version: str
    file: str
    sha256: str

    @property
    def upstream_version(self) -> str:
        """The version without its epoch and Debian revision (``1:2.2-3`` -> ``2.2``)."""
        v = re.sub(r"^\d+:", "", self.version)
        return v.rsplit("-", 1)[0] if "-" in v else v


@dataclass
class Scaffold:
    """What ``apptune new`` writes and found."""

    app: str
    #: file -> text
    files: dict[Path, str]
    kind: str
    guess: str
    languages: list[str]
    #: Fortran sources that ``use`` an MPI module (an llvm build needs them patched)
    mpi_users: list[str]
    tarball: Path
    #: (field, what to write) of every FILL IN left in the recipe
    to_fill: list[tuple[str, str]] = field(default_factory=list)


# --------------------------------------------------------------------------- Debian
def parse_showsrc(text: str, package: str) -> DebianOrig:
    """The orig tarball of the newest version of source package ``package`` in
    ``apt-cache showsrc PACKAGE``'s output (which also lists the sources of a binary
    package of that name)."""
    stanzas = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields: dict[str, str] = {}
        key = None
        for line in block.splitlines():
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        if "Package" in fields and "Version" in fields:
            stanzas.append(fields)
    if not stanzas:
        raise ApptuneError(
            None,
            "--debian",
            f"no Debian source package '{package}' (apt-cache showsrc "
            "found none: is the name right, and deb-src enabled? ci/bootstrap.sh enables it)",
        )
    own = [s for s in stanzas if s["Package"] == package]
    names = sorted({s["Package"] for s in stanzas})
    if not own and len(names) > 1:
        raise ApptuneError(
            None,
            "--debian",
            f"'{package}' is no source package; binary packages of "
            f"that name come from {', '.join(names)}: give one of them",
        )
    chosen = max(
        own or stanzas,
        key=functools.cmp_to_key(lambda a, b: _compare_versions(a["Version"], b["Version"])),
    )
    src, version = chosen["Package"], chosen["Version"]
    files = {}
    for line in chosen.get("Checksums-Sha256", "").splitlines():
        parts = line.split()
        if len(parts) == 3:
            files[parts[2]] = parts[0]
    upstream = DebianOrig(src, version, "", "").upstream_version
    orig = [
        f for f in files if re.fullmatch(re.escape(f"{src}_{upstream}") + r"\.orig\.tar\.\w+", f)
    ]
    native = [
        f
        for f in files
        if re.fullmatch(re.escape(f"{src}_{re.sub(r'^[0-9]+:', '', version)}") + r"\.tar\.\w+", f)
    ]
    pick = (orig or native or [None])[0]
    if pick is None:
        raise ApptuneError(
            None,
            "--debian",
            f"Debian source {src} {version} lists no orig tarball "
            f"(files: {', '.join(files) or 'none with a sha256'}): give the upstream tarball "
            "with --url URL --sha256 HEX",
        )
    return DebianOrig(src, version, pick, files[pick])


def _compare_versions(a: str, b: str) -> int:
    """Debian's version order, as dpkg itself compares."""
    if a == b:
        return 0
    lt = (
        subprocess.run(["dpkg", "--compare-versions", a, "lt", b], capture_output=True).returncode
        == 0
    )
    return -1 if lt else 1


def debian_orig(package: str) -> DebianOrig:
    """The newest orig tarball of a Debian source package, from the machine's deb-src lists."""
    if shutil.which("apt-cache") is None:
        raise ApptuneError(
            None,
            "--debian",
            "apt-cache not found: this machine cannot look up Debian "
            "source packages; give the tarball with --url URL --sha256 HEX",
        )
    p = subprocess.run(["apt-cache", "showsrc", package], capture_output=True, text=True)
    return parse_showsrc(p.stdout, package)


# --------------------------------------------------------------------------- the source
def source_spec(
    app: str,
    debian: str | None = None,
    url: str | None = None,
    sha256: str | None = None,
    file: str | None = None,
    path: str | None = None,
    version: str | None = None,
) -> tuple[SourceSpec, str, str]:
    """The recipe's ``source``, the application's version and where the source is from."""
    given = [o for o, v in (("--debian", debian), ("--url", url), ("--path", path)) if v]
    if len(given) != 1:
        raise ApptuneError(
            None,
            "source",
            "give exactly one of --debian PACKAGE, --url URL "
            "--sha256 HEX or --path src/NAME" + (f" (got {', '.join(given)})" if given else ""),
        )
    if not url and (sha256 or file):
        raise ApptuneError(
            None,
            "--sha256" if sha256 else "--file",
            "only with --url (a Debian source's file and sha256 come from apt-cache showsrc)",
        )
    if debian:
        d = debian_orig(debian)
        spec = SourceSpec(
            debian={"package": d.package, "version": d.version}, file=d.file, sha256=d.sha256
        )
        return spec, version or d.upstream_version, f"Debian source package {d.package} {d.version}"
    if version is not None and not re.fullmatch(VERSION_RE, version):
        raise ApptuneError(
            None,
            "--version",
            f"{version!r} must be a version: letters, digits and . _ + ~ - (e.g. 2.1.0), "
            "starting with a letter or digit",
        )
    if url:
        if why := url_problem(url):
            raise ApptuneError(None, "--url", why)
        if not sha256:
            raise ApptuneError(
                None,
                "--sha256",
                f"give the sha256 of {url} (the pin every fetch is "
                "checked against; sha256sum prints it)",
            )
        if not re.fullmatch(SHA256_RE, sha256.lower()):
            raise ApptuneError(
                None, "--sha256", f"'{sha256}' is not a sha256 (64 hexadecimal digits)"
            )
        name = file
        if name is None:
            name = urllib.parse.unquote(PurePosixPath(urllib.parse.urlparse(url).path).name)
        if not re.fullmatch(TARBALL_NAME_RE, name):
            said = repr(file) if file is not None else f"the URL's last part {name!r}"
            raise ApptuneError(
                None,
                "--file",
                f"{said} must be a tarball's file name (no directory: no '/'), ending in "
                ".tar.gz, .tar.xz, .tar.bz2, .tar.zst, .tgz or .tar"
                + ("" if file is not None else ": give it with --file"),
            )
        if version is None:
            m = re.search(r"[-_]v?(\d[\w.+~]*?)$", ARCHIVE_EXT.sub("", name))
            if not m or not re.fullmatch(VERSION_RE, m.group(1)):
                raise ApptuneError(
                    None, "--version", f"no version in the file name {name}: give --version"
                )
            version = m.group(1)
        return SourceSpec(url=url, file=name, sha256=sha256.lower()), version, url
    path = path.rstrip("/")
    if not re.fullmatch(r"[^/.][^\\]*", path):
        raise ApptuneError(
            None,
            "--path",
            f"'{path}' must be a directory of this repository, "
            "relative to its root (e.g. src/NAME)",
        )
    return SourceSpec(path=path), version or "1.0", f"{path}/ in this repository"


_OPTION = {"source.debian": "--debian", "source.file": "--debian", "source.path": "--path"}


def fetch(app: str, spec: SourceSpec) -> Path:
    """The verified tarball in the download cache (:func:`apptune.core.builds.sources.fetch`); its
    errors name the command-line option the source came from."""
    try:
        return sources.fetch(SimpleNamespace(name=app, source=spec))
    except ApptuneError as e:
        if e.file not in (None, str(recipes.recipe_path(app))):
            raise
        if spec.debian:  # apt named a file its mirror does not have (or apt cannot fetch)
            raise ApptuneError(None, "--debian", f"{e.message}; {ways_out(spec)}") from None
        option = _OPTION.get(e.field) or (
            "--sha256"
            if spec.url and e.field == "source.sha256"
            else "--url"
            if spec.url
            else "--debian"
            if spec.debian
            else "--path"
        )
        raise ApptuneError(None, option, e.message) from None


def ways_out(spec: SourceSpec) -> str:
    """What a person can do when a Debian source's tarball cannot be fetched."""
    mirror = paths.mirror_dir()
    return (
        f"ways out: give another copy of it with --url URL --sha256 {spec.sha256} (the "
        f"sha256 Debian lists), or put {spec.file} in the local mirror directory "
        f"$APPTUNE_SOURCE_MIRROR ({f'now {mirror}' if mirror else 'not set'}), checked "
        "against the same sha256"
    )


def tarball_layout(tarball: Path) -> tuple[int, list[str], list[str]]:
    """(strip_components, the names at the top of the source tree, every file's path in it)."""
    try:
        with tarfile.open(tarball) as tf:
            members = [(PurePosixPath(m.name).parts, m.isdir()) for m in tf.getmembers()]
    except (tarfile.TarError, OSError) as e:
        raise ApptuneError(tarball, None, f"cannot read the tarball: {e}") from None
    members = [(tuple(p for p in parts if p not in (".", "")), d) for parts, d in members]
    members = [(parts, d) for parts, d in members if parts]
    tops = {parts[0] for parts, _ in members}
    strip = 1 if len(tops) == 1 and any(len(parts) > 1 for parts, _ in members) else 0
    inner = [(parts[strip:], d) for parts, d in members if len(parts) > strip]
    top = sorted({parts[0] for parts, _ in inner})
    files = ["/".join(parts) for parts, d in inner if not d]
    return strip, top, files


def guess_build(top: list[str]) -> tuple[str, str]:
    """(build kind, why) from the names at the top of the source tree."""
    for name, kind in BUILD_FILES:
        if name in top:
            return kind, f"guessed from {name} at the top of the source"
    raise ApptuneError(
        None,
        "--build-system",
        f"none of {', '.join(n for n, _ in BUILD_FILES)} at the "
        f"top of the source (it has: {', '.join(top[:12]) or 'nothing'}"
        f"{', ...' if len(top) > 12 else ''}): give --build-system "
        f"{'|'.join(BUILD_KINDS)}",
    )


#: A Fortran ``use`` of the MPI modules: Debian's Open MPI and MPICH ship them built by
#: gfortran, which flang-new (the llvm family) cannot read ("Cannot read module file for
#: module 'mpi'"); ``include 'mpif.h'`` is read by every Fortran compiler.
_USE_MPI = re.compile(rb"^[ \t]*use[ \t]*(?:,[^:\n]*::)?[ \t]*(mpi(?:_f08)?)\b", re.I | re.M)


def mpi_module_users(tarball: Path, strip: int) -> list[str]:
    """The Fortran sources (paths under the source root) that ``use`` an MPI module."""
    found = []
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            parts = PurePosixPath(m.name).parts[strip:]
            if not (m.isfile() and parts) or SOURCE_LANGUAGE.get(PurePosixPath(m.name).suffix) != (
                "fortran"
            ):
                continue
            f = tf.extractfile(m)
            if f is not None and _USE_MPI.search(f.read(4 << 20)):
                found.append("/".join(parts))
    return sorted(found)


def guess_languages(files: list[str]) -> list[str]:
    found = {SOURCE_LANGUAGE.get(PurePosixPath(f).suffix) for f in files}
    return [lang for lang in ("c", "cxx", "fortran") if lang in found] or ["c"]


#: flang-new 16 (the llvm family's Fortran compiler) links an executable only with this.
FLANG_LINK_FLAG = "-flang-experimental-exec"


def family_flags(languages: list[str]) -> dict[str, dict[str, list[str]]]:
    """What a compiler family needs with every ladder for the languages found
    (``build.family_flags``): for Fortran, flang-new's link flag, as a link flag where the
    source is Fortran alone, else with the Fortran flags (they reach Fortran's links; the
    link flags also reach clang's, which refuses the flag)."""
    if "fortran" not in languages:
        return {}
    return {"llvm": {"ldflags" if languages == ["fortran"] else "fflags": [FLANG_LINK_FLAG]}}


def build_words(kind: str, languages: list[str]) -> dict[str, list[str]]:
    """The build's argument lists for ``kind`` (make arguments, configure, cmake)."""

    def t(expr):
        return "{{ " + expr + " }}"

    make = [
        w
        for lang in languages
        for w in (f"{_MAKE[lang][0]}={t(_MAKE[lang][1])}", f"{_MAKE[lang][2]}={t(_MAKE[lang][3])}")
    ]
    make.append(f"LDFLAGS={t(_LDFLAGS + 'makeflags')}")
    configure = ["./configure"] + [
        f"{var}={t(expr)}" for lang in languages for var, expr in _CONFIGURE[lang]
    ]
    configure += [f"CPPFLAGS={t('cppflags | ' + _JOIN)}", f"LDFLAGS={t(_LDFLAGS + _JOIN)}"]
    cmake = ["cmake", "-S", ".", "-B", "_build", "-DCMAKE_BUILD_TYPE=None"]
    for lang in languages:
        name, comp, flags = _CMAKE[lang]
        cmake += [f"-DCMAKE_{name}_COMPILER={t(comp)}", f"-DCMAKE_{name}_FLAGS={t(flags)}"]
    cmake.append(f"-DCMAKE_EXE_LINKER_FLAGS={t(_LDFLAGS + _JOIN)}")
    return {"make_args": make, "configure": configure, "cmake": cmake}


def check_class(app: str) -> str:
    """The check classes' name stem: ``my-app`` -> ``MyApp`` (``MyAppCheck``)."""
    stem = "".join(p[:1].upper() + p[1:] for p in re.split(r"[-_.]+", app) if p)
    return stem if stem[:1].isalpha() else f"App{stem}"


def targets(app: str) -> list[Path]:
    """The files ``apptune new APP`` writes."""
    root = paths.root()
    module = re.sub(r"[-.]", "_", app)
    return [
        recipes.recipe_path(app),
        root / "reframe-checks" / app / f"{module}.py",
        paths.inputs_dir(app, "ci") / "input.yaml",
        paths.reference_file(app, "ci"),
        faults.faults_path(app),
    ]


def _refuse_existing(files) -> None:
    there = [f for f in files if f.exists()]
    if there:
        more = f" (also {', '.join(paths.rel(f) for f in there[1:])})" if len(there) > 1 else ""
        raise ApptuneError(
            paths.rel(there[0]), None, f"already exists: apptune new never overwrites a file{more}"
        )


def new(
    app: str,
    *,
    debian: str | None = None,
    url: str | None = None,
    sha256: str | None = None,
    file: str | None = None,
    path: str | None = None,
    version: str | None = None,
    build_system: str | None = None,
    ranks: int = 2,
) -> Scaffold:
    """Fetch the source, guess its build and render every file (nothing written yet)."""
    if not re.fullmatch(NAME_RE, app):
        raise ApptuneError(
            None,
            "APP",
            f"'{app}' must be lower case letters, digits, '_', '.', '-' "
            "(starting with a letter or digit)",
        )
    if ranks < 1:
        raise ApptuneError(None, "--ranks", f"must be at least 1, not {ranks}")
    if build_system is not None and build_system not in BUILD_KINDS:
        raise ApptuneError(None, "--build-system", f"must be one of {', '.join(BUILD_KINDS)}")
    files = targets(app)
    _refuse_existing(files)
    spec, version, origin = source_spec(app, debian, url, sha256, file, path, version)
    tarball = fetch(app, spec)
    strip, top, members = tarball_layout(tarball)
    if build_system:
        kind, guess = build_system, "given with --build-system"
    else:
        kind, guess = guess_build(top)
    languages = guess_languages(members)
    mpi_users = mpi_module_users(tarball, strip) if "fortran" in languages else []
    desc = f"{app} {version}" + (
        f", Debian source package {spec.debian.package}" if spec.debian else ""
    )
    ctx = dict(
        app=app,
        version=version,
        description=desc,
        origin=origin,
        source=spec,
        strip_components=strip,
        kind=kind,
        guess=guess,
        languages=languages,
        family_flags=family_flags(languages),
        mpi_users=mpi_users,
        ranks=ranks,
        system="cmake" if kind == "cmake" else "make",
        cls=check_class(app),
        title=re.sub(r'["\\]', "", f"{app} {version}: built per variant, verified and timed."),
        **build_words(kind, languages),
    )
    env = templating.environment()
    texts = [
        env.get_template(t).render(**ctx)
        for t in (
            "new-recipe.yaml.j2",
            "new-check.py.j2",
            "new-input.yaml.j2",
            "new-reference.yaml.j2",
            "new-faults.yaml.j2",
        )
    ]
    return Scaffold(
        app=app,
        files=dict(zip(files, texts, strict=True)),
        kind=kind,
        guess=guess,
        languages=languages,
        mpi_users=mpi_users,
        tarball=tarball,
        to_fill=placeholders(yaml.safe_load(texts[0])),
    )


def write(s: Scaffold) -> None:
    """Write every file of ``s``, each atomically; none if one exists (then: ApptuneError),
    and none left behind if writing one fails."""
    _refuse_existing(s.files)
    done: list[Path] = []
    try:
        for f, text in s.files.items():
            atomic_write_text(f, text)
            done.append(f)
    except BaseException:
        for f in done:
            f.unlink(missing_ok=True)
        raise


def next_steps(s: Scaffold) -> str:
    """What the person does next, with the commands."""
    recipe, check = list(s.files)[:2]
    faults_file = list(s.files)[-1]
    recipe, checks = paths.rel(recipe), paths.rel(check.parent)
    fill = "\n".join(f"       {f}: {what}" for f, what in s.to_fill)
    return f"""\
Next (docs/adding-an-application.md, "In 15 minutes"):
  1. In {recipe}, replace each FILL IN value:
{fill}
     and check the guesses marked "check" (build system, languages, products).
     `apptune validate` names every value still to fill.
  2. apptune run --mode dev -c {checks}
     It fails once, by design: reference/{s.app}/ci.yaml has no fields yet.
  3. apptune bless --new runs/latest
     Shows reference/{s.app}/ci.yaml with every verified field of that run (integers
     exact, other numbers within 1e-6 relative) as a diff; --yes writes it.
  4. apptune run --mode dev -c {checks}
     passes against the new reference.
  5. In {paths.rel(faults_file)}, plant a fault of your own (a patch or
     an input parameter), then `apptune sensitivity {s.app}` measures what the reference
     catches of it (docs/applications.md, "What each verification sees")."""
