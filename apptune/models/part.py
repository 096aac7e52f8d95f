"""The base of a run record's parts (:mod:`apptune.models.record`,
:mod:`apptune.models.provenance`): typed fields, and the keys of other versions kept."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Part(BaseModel):
    """A run record or a part of one: typed fields, and the keys of other versions kept;
    a part set on a record (its baseline verdict) is checked as it is set."""

    model_config = ConfigDict(extra="allow", validate_assignment=True)

    def data(self) -> dict:
        """As the JSON object it was read or made from (the defaults not added)."""
        return self.model_dump(exclude_unset=True)


def as_data(part):
    """A part of a run record as its JSON object (:meth:`Part.data`); None stays None, and
    a dict or list that holds parts (a report's summary) is the same with each part as its
    JSON object."""
    if isinstance(part, Part):
        return part.data()
    if callable(getattr(part, "data", None)):  # a row of a report (apptune/report/row.py)
        return as_data(part.data())
    if isinstance(part, dict):
        return {k: as_data(v) for k, v in part.items()}
    if isinstance(part, (list, tuple)):
        return [as_data(v) for v in part]
    return part
