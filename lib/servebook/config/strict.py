"""The one base of every input model a user writes (candidates, plans, studies, rules, loads, agents, replicas):
a misspelled field is refused by name, a loaded model never changes, and numbers are finite: YAML reads `.nan`
and `.inf` as floats, and a NaN rate passes every comparison check (it is neither above nor below anything), so
it failed only after the engine had started."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
