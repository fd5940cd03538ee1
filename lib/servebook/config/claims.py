"""What checking a candidate's claims against the engine's own report found: one typed record per claim.

A claim (the model file, a knob) is verified when the engine reports the same, contradicted when it reports
otherwise, set on the command line when servebook launched the engine with it and the server does not report it,
and claimed, not verified when nothing confirms it. Decisions read `status`; the present layer writes the words.
Runs recorded before claims were typed hold a sentence per claim; `Verification` reads those back here, once.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

ClaimStatus = Literal["verified", "contradicted", "on_command_line", "not_verified"]
#: where a claim's value was read: the engine's report of itself, or the command line servebook launched it with
ClaimSource = Literal["self_report", "command_line"]


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    status: ClaimStatus
    #: what the server reports (or, set on the command line, the flags and values servebook passed)
    value: str | int | float | bool | None = None
    source: ClaimSource | None = None
    #: the claim asked the engine to choose (`auto`): `value` is what it chose, which confirms nothing
    resolved_auto: bool = False
    #: the flag holds, but the scheduler runs at most this many at once (the KV pool fits no more)
    scheduler_limit: int | None = None
    #: a sentence of a run recorded before claims were typed that matches none of the known forms, kept as written
    legacy_text: str | None = None

    @property
    def checked(self) -> bool:
        """Whether something other than the candidate itself stands behind the claim."""
        return self.status in ("verified", "on_command_line")

    @classmethod
    def from_legacy(cls, text: str) -> Claim:
        """The record of a claim written as a sentence by an older servebook (the forms below are all it wrote)."""
        body, limit = text, None
        found = _LEGACY_LIMIT.search(body)
        if found:
            body, limit = body[:found.start()], int(found.group(1))
        for pattern, status, source in _LEGACY_FORMS:
            match = pattern.fullmatch(body)
            if match:
                value = match.groupdict().get("value")
                return cls(status=status, value=value, source=source, scheduler_limit=limit,
                           resolved_auto="auto" in match.groupdict() and value is not None)
        return cls(status="not_verified", legacy_text=text)


#: the sentences servebook wrote per claim before `Claim` (launch/verify.py at 2f63741)
_LEGACY_FORMS: list[tuple[re.Pattern[str], ClaimStatus, ClaimSource | None]] = [
    (re.compile(r"verified: (?P<value>.*)", re.S), "verified", "self_report"),
    (re.compile(r"contradicted: server reports (?P<value>.*)", re.S), "contradicted", "self_report"),
    (re.compile(r"set on the command line: (?P<value>.*) \(the server does not report it\)", re.S), "on_command_line",
     "command_line"),
    (re.compile(r"claimed, not verified \((?P<auto>auto); the server resolved it to (?P<value>.*)\)", re.S),
     "not_verified", "self_report"),
    (re.compile(r"claimed, not verified"), "not_verified", None),
]
_LEGACY_LIMIT = re.compile(r"; the scheduler runs at most (\d+) at once$")


class Verification(BaseModel):
    """Each claim of the candidate against what the engine reports of itself, and the report itself."""

    model_config = ConfigDict(extra="allow")

    claims: dict[str, Claim] = Field(default_factory=dict)
    #: the models the endpoint lists and the settings its engine reports, in knob terms
    reported: dict[str, Any] = Field(default_factory=dict)

    @field_validator("claims", mode="before")
    @classmethod
    def _legacy_sentences(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {name: Claim.from_legacy(c) if isinstance(c, str) else c for name, c in value.items()}
        return value

    @property
    def settings(self) -> dict[str, Any]:
        return self.reported.get("settings") or {}
