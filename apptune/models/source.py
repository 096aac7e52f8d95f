"""Where a recipe's source comes from (``source``: a Debian source package, a URL or this
repository, pinned) and what it needs from the system (``requires``)."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, model_validator

from .base import NAME_RE, SHA256_RE, Strict

#: The schemes a source's ``url`` may have: ``https://`` (what travels is encrypted and
#: its server authenticated), ``file://`` (a tarball on this machine, e.g. a site's archive).
URL_SCHEMES = ("https", "file")

#: A tarball's file name: no directory, no control character, and an archive's extension
#: (so never ``.`` or ``..``).
TARBALL_NAME_RE = r"^[^/\x00-\x1f\x7f]+\.(tar\.(gz|bz2|xz|zst)|tgz|tbz2|txz|tar)$"


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a source's address (None: it can)."""
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme not in URL_SCHEMES:
        return (
            f"'{url[:80]}' must start with https:// (or file:// for a tarball on this machine)"
            + (f": {scheme}:// travels unencrypted" if scheme in ("http", "ftp") else "")
        )
    if re.search(r"[\s\x00-\x1f\x7f]", url):
        return "a URL has no blank or control character (a space is %20)"
    return None


def _url(url: str | None) -> str | None:
    if url is not None and (why := url_problem(url)):
        raise ValueError(why)
    return url


SourceURL = Annotated[str, AfterValidator(_url)]


class DebianSource(Strict):
    package: str = Field(pattern=NAME_RE)
    #: Debian source version, e.g. ``1.5.0-3``; the orig tarball is taken from it.
    version: str


class SourceComponent(Strict):
    """A further tarball of the same source (Debian's ``orig-COMPONENT`` tarballs, e.g.
    GROMACS's regression tests), unpacked into a directory of the source tree."""

    #: File name of the tarball in the mirror and the cache.
    file: str = Field(pattern=TARBALL_NAME_RE)
    sha256: str = Field(pattern=SHA256_RE)
    #: Where in the source tree it is unpacked (relative to the source root).
    dest: str = Field(pattern=r"^[^/.][^\\]*$")
    #: Its download address, for a ``url`` source (a ``debian`` source names its files).
    url: SourceURL | None = None
    strip_components: int = Field(default=1, ge=0)


class SourceSpec(Strict):
    #: File name of the tarball in the mirror and the cache.
    file: str | None = Field(default=None, pattern=TARBALL_NAME_RE)
    sha256: str | None = Field(default=None, pattern=SHA256_RE)
    debian: DebianSource | None = None
    #: ``https://`` (or ``file://``: a tarball on this machine) address of the tarball.
    url: SourceURL | None = None
    #: Project-written source kept in this repository (e.g. ``src/mpi-micro``), pinned by
    #: git; it is packed into a reproducible tarball named by its content digest.
    path: str | None = Field(default=None, pattern=r"^[^/.][^\\]*$")
    #: Leading path components to drop when unpacking (the tarball's top directory).
    strip_components: int = Field(default=1, ge=0)
    #: Further tarballs unpacked into the tree (pinned too), e.g. Debian's
    #: ``gromacs_2022.5.orig-regressiontests.tar.gz``.
    components: list[SourceComponent] = []

    @model_validator(mode="after")
    def _one_origin(self):
        given = [k for k in ("debian", "url", "path") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'debian', 'url' or 'path'")
        if self.path is None and (self.file is None or self.sha256 is None):
            raise ValueError("a downloaded source needs 'file' and its pinned 'sha256'")
        if self.path is not None and (self.file is not None or self.sha256 is not None):
            raise ValueError("a 'path' source is pinned by the repository: no 'file'/'sha256'")
        for i, c in enumerate(self.components):
            if self.path is not None:
                raise ValueError("a 'path' source has no components")
            if self.url is not None and c.url is None:
                raise ValueError(f"components[{i}]: a 'url' source's component needs its 'url'")
        return self


class SystemRequirements(Strict):
    """What the application needs from the system besides its environment's toolchain."""

    #: Debian packages (libraries and headers the build links, e.g. ScaLAPACK): installed by
    #: ci/bootstrap.sh; a build on a partition with ``extras.debian_packages`` is skipped,
    #: naming the package, when one is missing. On a cluster the environments' modules
    #: provide them instead.
    debian: list[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9+.-]+$")]] = []
