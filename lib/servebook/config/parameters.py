"""The qualify notebook's parameters, validated like any other input.

papermill passes `-p NAME VALUE` as strings unless the value looks like a number, so the strings
whose meaning is clear are read as the CLI would read them: `overrides = "knobs.chunk_size=128"`
(several separated by commas or new lines), `visible_gpus = "0,1"` or `0`.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Seat(BaseModel):
    """A run's place in a resident round (`sweep --resident`): the round's runs are launched at once on one machine
    and measured in turn, cell by cell (measure.turns). Recorded in the run; the round is the verdict's block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    round_id: str = Field(description="the round's name, the same in each of its runs")
    directory: str = Field(description="where the round's state file lives (the journal's .sweeps folder)")
    seat: int = Field(ge=0)
    seats: int = Field(ge=1)


class QualifyParameters(BaseModel):
    model_config = ConfigDict(extra="forbid")

    candidate: dict[str, Any] | None = Field(None, description="inline candidate fields (win over candidate_path)")
    candidate_path: str | None = None
    overrides: dict[str, Any] = Field(default_factory=dict, description='dotted overrides: {"knobs.chunk_size": 256}')
    plan: dict[str, Any] | None = None
    plan_path: str | None = None
    journal: str = "journal"
    run_id: str | None = None
    study: str | None = None
    study_entry: str | None = None
    visible_gpus: list[int] | None = Field(None, description="GPU indices this run may use: [0, 1], 0 or \"0,1\"")
    lane: str | None = None
    turns: Seat | None = Field(None, description="set by `sweep --resident`: this run's seat in its round")

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides_as_text(cls, value: Any) -> Any:
        from .loading import parse_overrides

        if value is None:
            return {}
        if isinstance(value, str):
            items = [item.strip() for item in re.split(r"[,\n]", value) if item.strip()]
            return parse_overrides(items, "overrides")
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            return parse_overrides(value, "overrides")
        return value

    @field_validator("visible_gpus", mode="before")
    @classmethod
    def _gpus_as_text(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError("a list of GPU indices, not a boolean")
        if isinstance(value, int):
            return [value]
        if isinstance(value, str):
            parts = [part.strip() for part in value.split(",")]
            if not all(part.isdigit() for part in parts):
                raise ValueError(f"{value!r}: GPU indices separated by commas, e.g. \"0,1\"")
            return [int(part) for part in parts]
        return value
