"""Studies: a base candidate, axes to vary, named variants, a plan and verdict rules.

A study expands into named candidates. Everything is validated at load time, axis by axis
and candidate by candidate, so a misspelled axis or a value of the wrong type stops the
sweep with a message that names it before any engine starts.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from .candidate import Candidate
from .errors import InputError, format_validation_error
from .names import SAFE_NAME, check_safe_name, safe_name_from
from .plan import Plan
from .rules import VerdictRules
from .search import SearchSpec
from .shown import ShownAsYaml
from .strict import StrictModel


class Axes(StrictModel):
    """`grid`: every combination of the listed values. `zip`: the i-th values go together."""

    grid: dict[str, list[Any]] = Field(default_factory=dict)
    zip: dict[str, list[Any]] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _shapes(self) -> "Axes":
        for kind, axes in (("grid", self.grid), ("zip", self.zip)):
            for name, values in axes.items():
                if not values:
                    raise ValueError(f"axes.{kind}.{name}: give at least one value")
        lengths = {len(v) for v in self.zip.values()}
        if len(lengths) > 1:
            raise ValueError("axes.zip: every zipped axis needs the same number of values, got "
                             + ", ".join(f"{k}={len(v)}" for k, v in self.zip.items()))
        overlap = set(self.grid) & set(self.zip)
        if overlap:
            raise ValueError(f"axes: {sorted(overlap)} appear in both grid and zip")
        return self

    def combinations(self) -> list[dict[str, Any]]:
        grid_names = list(self.grid)
        grid = [dict(zip(grid_names, values, strict=True)) for values in itertools.product(*self.grid.values())] or [{}]
        zipped = [dict(zip(self.zip, values, strict=True)) for values in zip(*self.zip.values(), strict=True)] or [{}]
        if not self.grid and not self.zip:
            return []
        return [{**g, **z} for g in grid for z in zipped]


class Variant(StrictModel):
    """A named candidate stated by hand: the base with these overrides."""

    name: str = Field(..., min_length=1)
    set: dict[str, Any] = Field(default_factory=dict, description="dotted overrides, e.g. knobs.chunk_size")
    note: str | None = None

    @field_validator("name")
    @classmethod
    def _file_name(cls, name: str) -> str:
        return check_safe_name(name, "variant name")


class Study(ShownAsYaml, StrictModel):
    name: str = Field(..., pattern=SAFE_NAME)
    description: str | None = None
    base: Candidate
    include_base: bool = Field(True, description="measure the base itself, named 'baseline'")
    axes: Axes = Axes()
    variants: list[Variant] = Field(default_factory=list)
    plan: Plan = Plan()
    verdict: VerdictRules = VerdictRules()
    repeats: int = Field(1, ge=1, le=100, description="independent engine launches per candidate, interleaved "
                                                      "across candidates; runs are the unit of the statistics")
    search: SearchSpec | None = Field(None, description="a configuration search over knobs (servebook search): "
                                                        "pruned by memory, screened, the best confirmed with repeats")

    @field_validator("variants")
    @classmethod
    def _unique_names(cls, variants: list[Variant]) -> list[Variant]:
        names = [v.name for v in variants]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes or "baseline" in names:
            raise ValueError(f"variant names must be unique and not 'baseline': {dupes or ['baseline']}")
        return variants

    @model_validator(mode="after")
    def _runnable(self) -> "Study":
        """Everything a sweep would otherwise find out only after running every candidate."""
        names = [entry.name for entry in self.expand()]
        if self.verdict.baseline not in names and self.verdict.baseline_from is None:
            hint = " (include_base is false, so 'baseline' is not measured)" if not self.include_base else ""
            from ..util.suggest import close_names

            close = close_names(self.verdict.baseline, names)
            meant = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            raise ValueError(f"verdict.baseline: no candidate named {self.verdict.baseline!r}{hint}{meant} "
                             f"(the study's candidates: {', '.join(names) or 'none'})")
        problems = [f"verdict.rules[{i}]: {problem}" for i, rule in enumerate(self.verdict.rules)
                    for problem in self.plan.unmatched(rule)]
        problems += [f"verdict.guards[{i}]: {problem}" for i, rule in enumerate(self.verdict.guards)
                     for problem in self.plan.unmatched(rule)]
        problems += [f"verdict.scaling[{i}]: {problem}" for i, rule in enumerate(self.verdict.scaling)
                     for problem in self.plan.unmatched(rule)]
        if self.search is not None:
            problems += [f"search.objective: {problem}" for problem in self.plan.unmatched(self.search.objective.rule())]
            problems += [f"search.screen.plan: {problem}"
                         for problem in self.screening_plan().unmatched(self.search.objective.rule())]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def screening_plan(self) -> Plan:
        """The study's plan with the search's screening overrides: shorter, so more configurations are screened."""
        if self.search is None or not self.search.screen.plan:
            return self.plan
        from .candidate import set_dotted

        data = set_dotted(self.plan.model_dump(mode="json", exclude_unset=True), self.search.screen.plan)
        try:
            return Plan.model_validate(data)
        except ValidationError as error:
            raise ValueError(format_validation_error(error, "search.screen.plan")) from None

    def heading(self) -> str:
        return f"study {self.name}: {len(self.expand())} candidates x {self.repeats} repeats"

    @property
    def rules_hash(self) -> str:
        # guards came later: a study without them keeps the hash it had
        unset = set() if self.verdict.guards else {"guards"}
        return hashlib.sha256(self.verdict.model_dump_json(exclude=unset).encode()).hexdigest()[:12]

    def expand(self) -> list["StudyEntry"]:
        """Named candidates in a stable order; a combination equal to an earlier one is dropped."""
        entries: list[StudyEntry] = []
        seen: dict[str, str] = {}

        def add(name: str, overrides: dict[str, Any], where: str, note: str | None = None) -> None:
            try:
                candidate = self.base.with_overrides(overrides)
            except ValidationError as error:
                raise InputError(format_validation_error(error, f"study {self.name}, {where}")) from None
            if candidate.id in seen:
                return
            taken = {e.name for e in entries}
            unique, n = name, 1
            while unique in taken:  # two generated names that differed only in characters a file name cannot hold
                n += 1
                unique = f"{name}-{n}"
            name = unique
            candidate = candidate.model_copy(update={"name": name})
            seen[candidate.id] = name
            entries.append(StudyEntry(name, candidate, overrides, note))

        if self.include_base:
            add("baseline", {}, "base")
        for combo in self.axes.combinations():
            add(combo_name(combo), combo, "axes " + ", ".join(f"{k}={v!r}" for k, v in combo.items()))
        for variant in self.variants:
            add(variant.name, variant.set, f"variant {variant.name!r}", variant.note)
        return entries


@dataclass(frozen=True)
class StudyEntry:
    name: str
    candidate: Candidate
    overrides: dict[str, Any]
    #: the variant's `note`: why it is in the study, shown beside its verdict
    note: str | None = None


def combo_name(combo: dict[str, Any]) -> str:
    def short(key: str) -> str:
        return key.split(".")[-1]

    def value(v: Any) -> str:
        # A mapping's values only (drafter={kind: mtp, max_draft_tokens: 2} -> mtp-2): its keys are in the study.
        if isinstance(v, dict):
            return "-".join(value(x) for x in v.values() if x is not None) or "default"
        return json.dumps(v, sort_keys=True) if isinstance(v, list) else str(v)

    return safe_name_from(",".join(f"{short(k)}={value(v)}" for k, v in combo.items()))
