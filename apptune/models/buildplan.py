"""A build's plan (``plan.json`` in its stage): everything the build step needs, decided
by :func:`apptune.core.data.recipes.resolve` before any command runs.

The plan stays typed until it is written: tools that build other than the recipe's
variant (tune's extra flags, bisect's old axes and patches, a planted fault) change it
with :meth:`BuildPlan.updated` or :meth:`BuildPlan.with_patch`, which check the result as
``resolve``'s plans are checked. :meth:`BuildPlan.to_json` is the text of ``plan.json``
(:meth:`BuildPlan.to_dict` its object, key for key): the build step, its cache key and
its provenance read that."""

from __future__ import annotations

import json
from typing import Self

from pydantic import Field

from .base import SHA256_RE, Strict


class _PlanPart(Strict):
    def updated(self, **fields) -> Self:
        """This one with ``fields`` replaced, checked (an unknown field or a value of the
        wrong type is an error, which a bare ``model_copy(update=...)`` would keep)."""
        return type(self).model_validate({**dict(self), **fields})


class PlanPatch(_PlanPart):
    """A patch the build applies, its file's checksum pinned."""

    #: Under the recipe's patch directory (``patches/APP/``).
    file: str
    sha256: str = Field(pattern=SHA256_RE)
    strip: int = Field(ge=0)
    reason: str


class PlanRule(_PlanPart):
    """A per-file rule of the recipe with the flags it gives its files."""

    files: list[str]
    cflags: list[str]
    fflags: list[str]
    #: The ladder the flags are from; ``recipe`` for the recipe's own flags.
    ladder: str
    reason: str


class BuildPlan(_PlanPart):
    app: str
    version: str
    variant: str
    environment: str
    family: str
    cc: str
    cxx: str
    ftn: str
    cflags: list[str]
    fflags: list[str]
    app_cflags: list[str]
    app_fflags: list[str]
    #: Link flags the recipe gives this compiler family (``build.family_flags``).
    app_ldflags: list[str]
    cppflags: list[str]
    ldflags: list[str]
    axes: dict[str, str]
    libraries: dict[str, str]
    #: Applied in this order.
    patches: list[PlanPatch]
    per_file: list[PlanRule]
    make_args: list[str]
    #: Template values from the chosen axis options (``vars.NAME`` in templates).
    vars: dict[str, str] = {}

    def with_patch(self, patch: PlanPatch, variant: str) -> BuildPlan:
        """This plan with ``patch`` applied after its own, named ``variant``: another name,
        so that its build is neither taken for the recipe's nor cached as it."""
        return self.updated(patches=[*self.patches, patch], variant=variant)

    def to_dict(self) -> dict:
        """As ``plan.json`` holds it (and the build step, its cache key and its provenance
        read it)."""
        return self.model_dump()

    def to_json(self) -> str:
        """The text of ``plan.json``."""
        return json.dumps(self.to_dict(), indent=1)
