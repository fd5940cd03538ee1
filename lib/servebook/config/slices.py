"""A slice of a journal: the runs that match a few fields of the index ("candidate=baseline,engine_version=1.1",
"since=2026-11-23"). `servebook compare` compares two slices; a study's recorded baseline is one."""

from __future__ import annotations

from datetime import datetime, timezone

from pydantic import Field, ValidationError, field_validator

from .errors import InputError, format_validation_error
from .strict import StrictModel


def iso_instant(value: str) -> str:
    """`value` as runs' start times are written, so that comparing the two as text compares instants: an ISO date
    or time, one with an offset brought to UTC. Anything else (12/31/2099) would compare as text with every start
    time and silently match all runs or none, so it is refused."""
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO date or time (e.g. 2026-11-23 or 2026-11-23T08:00:00Z)") from None
    if moment.tzinfo is None or value.strip().endswith("Z"):
        return value.strip()
    utc = moment.astimezone(timezone.utc)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if utc.microsecond else "%Y-%m-%dT%H:%M:%SZ")


class JournalSlice(StrictModel):
    candidate: str | None = Field(None, description="the candidate's name (label), or a prefix of its id")
    study: str | None = None
    plan_id: str | None = None
    engine_version: str | None = None
    image_digest: str | None = None
    driver: str | None = None
    machine: str | None = Field(None, description="a fragment of the machine identity (machine id or host, GPUs)")
    since: str | None = Field(None, description="runs started at or after this ISO date or time")
    until: str | None = Field(None, description="runs started before this ISO date or time")
    status: str = "completed"

    @field_validator("since", "until")
    @classmethod
    def _instant(cls, value: str | None) -> str | None:
        return None if value is None else iso_instant(value)

    def describe(self) -> str:
        fields = self.model_dump(exclude_defaults=True)
        return ", ".join(f"{k}={v}" for k, v in fields.items()) or "every completed run"

    def select(self, frame):
        """The rows of the journal's index (a pandas frame) in this slice, in time order; archived runs are no
        evidence of anything, so no slice holds them."""
        chosen = frame[frame["status"] == self.status]
        if "archived" in chosen.columns:
            chosen = chosen[chosen["archived"].isna()]
        if self.candidate:
            chosen = chosen[(chosen["candidate"] == self.candidate)
                            | chosen["candidate_id"].fillna("").str.startswith(self.candidate)]
        for column in ("study", "plan_id", "engine_version", "image_digest", "driver"):
            wanted = getattr(self, column)
            if wanted is not None:
                chosen = chosen[chosen[column] == wanted]
        if self.machine:
            chosen = chosen[chosen["machine"].fillna("").str.contains(self.machine, regex=False)]
        started = chosen["started_at"].fillna("")
        if self.since:
            chosen = chosen[started >= self.since]
            started = chosen["started_at"].fillna("")
        if self.until:
            chosen = chosen[started < self.until]
        return chosen.sort_values("started_at", kind="stable")

    def unknown_names(self, frame) -> str:
        """Why the slice may be empty, where a name it gives is in no run of the index `frame` at all: `; candidate
        'basline' is in no run; did you mean 'baseline'?` (empty when every name is known)."""
        from ..util.suggest import suggestion

        said = []
        if self.candidate and not ((frame["candidate"] == self.candidate)
                                   | frame["candidate_id"].fillna("").str.startswith(self.candidate)).any():
            said.append(f"candidate {self.candidate!r} is in no run{suggestion(self.candidate, frame['candidate'])}")
        for column in ("study", "plan_id", "engine_version", "image_digest", "driver"):
            wanted = getattr(self, column)
            if wanted is not None and not (frame[column] == wanted).any():
                said.append(f"{column} {wanted!r} is in no run{suggestion(wanted, frame[column].dropna())}")
        if self.machine and not frame["machine"].fillna("").str.contains(self.machine, regex=False).any():
            said.append(f"machine {self.machine!r} matches no run's machine")
        return "".join(f"; {line}" for line in said)


def parse_slice(text: str, what: str = "slice") -> JournalSlice:
    """`key=value,key=value` -> a slice; an unknown key is an error that names it."""
    fields: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise InputError(f"{what} {text!r}: write key=value pairs separated by commas, e.g. "
                             "candidate=baseline,engine_version=1.1")
        fields[key.strip()] = value.strip()
    try:
        return JournalSlice.model_validate(fields)
    except ValidationError as error:
        raise InputError(format_validation_error(error, what)) from None
