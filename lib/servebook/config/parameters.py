"""The notebooks' parameters, validated like any other input.

papermill passes `-p NAME VALUE` as strings unless the value looks like a number, so the strings
whose meaning is clear are read as the CLI would read them: `overrides = "knobs.chunk_size=128"`
(several separated by commas or new lines), `visible_gpus = "0,1"` or `0`. Every list parameter of
every notebook reads through `as_list` (the types `TextList`, `IndexList`): `-p run_ids a,b`,
`-p run_ids "[a, b]"`, `-y "run_ids: [a, b]"` and `-p run_ids a` are the same list, never a
string iterated one character at a time.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from .strict import StrictModel


def as_list(value: Any) -> Any:
    """A list parameter as users pass it: a list or tuple (the notebook's own value, `-y` YAML), a string of
    items separated by commas or new lines, or a YAML list written as text (`-p`), or one scalar (a list of
    it). None and a blank string are None (the parameter not given); anything else is left for the model to
    refuse."""
    if isinstance(value, bool):
        raise ValueError("a list, not a boolean")
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (int, float)):
        return [value]
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:  # `-p run_ids ""`: not given
        return None
    if text.startswith("["):
        import yaml

        try:
            parsed = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ValueError(f"{value!r}: not a YAML list; write items separated by commas, e.g. a,b") from None
        return parsed if isinstance(parsed, list) else value
    items = [item.strip() for item in re.split(r",\s*|\n", text)]  # "a,\nb" is two items, "a,,b" has an empty one
    if not all(items):
        raise ValueError(f"{value!r}: items separated by commas, none of them empty, e.g. \"a,b\"")
    return items


def _as_text_list(value: Any) -> Any:
    listed = as_list(value)
    if isinstance(listed, list):  # a run id YAML read as a number is still a name
        return [str(item) if isinstance(item, (int, float)) and not isinstance(item, bool) else item
                for item in listed]
    return listed


#: a list of names (run ids) as papermill passes one, or None (not given)
TextList = Annotated[list[str] | None, BeforeValidator(_as_text_list)]
#: a list of indices (GPUs) as papermill passes one, or None (not given)
IndexList = Annotated[list[int] | None, BeforeValidator(as_list)]


class Seat(StrictModel):
    """A run's place in a resident round (`sweep --resident`): the round's runs are launched at once on one machine
    and measured in turn, cell by cell (measure.turns). Recorded in the run; the round is the verdict's block."""


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
    visible_gpus: IndexList = Field(None, description="GPU indices this run may use: [0, 1], 0 or \"0,1\"")
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


class CompareParameters(BaseModel):
    """The compare notebook's parameters: a study (its latest run per candidate) or a list of run ids."""

    model_config = ConfigDict(extra="forbid")

    study_path: str | None = None
    run_ids: TextList = Field(None, description="run ids (or unique fragments): [a, b] or \"a,b\"")
    journal: str = "journal"
