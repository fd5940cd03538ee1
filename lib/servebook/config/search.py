"""A configuration search: the space of knobs, the objective, the memory the configurations must fit in,
and how the launches are spent (screening with a short plan, then confirming the best few with repeats)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, field_validator, model_validator

from .candidate import IDENTITY_LAUNCH_FIELDS
from .metrics import LOWER_IS_BETTER, METRIC_WORDS, Metric
from .rules import ComparisonRule
from .strict import StrictModel


def _in_identity(field: str) -> bool:
    """Whether a dotted candidate field enters the candidate's id (config/candidate.py `Candidate.identity`): its
    name and the launch fields that only say how servebook reaches the engine do not."""
    head, _, rest = field.partition(".")
    if head == "name":
        return False
    return head != "launch" or rest.partition(".")[0] in (*IDENTITY_LAUNCH_FIELDS, "mode", "simulator", "sim_faults",
                                                          "api_key_env")


class Objective(StrictModel):
    """The figure the search maximises (or minimises, for times), selected like a verdict rule's cells. Where it
    selects several cells (both categories at a concurrency), a run's figure is their geometric mean."""

    metric: Metric
    concurrency: int | None = Field(None, ge=1)
    category: str | None = None
    prompt_tokens: int | None = Field(None, ge=1)

    def rule(self, limit_pct: float = 0.0) -> ComparisonRule:
        return ComparisonRule(metric=self.metric, max_regression_pct=limit_pct,
                              concurrency=[self.concurrency] if self.concurrency else None, category=self.category,
                              prompt_tokens=[self.prompt_tokens] if self.prompt_tokens else None)

    @property
    def lower_is_better(self) -> bool:
        return self.metric in LOWER_IS_BETTER

    def describe(self) -> str:
        where = [f"{self.category}" if self.category else "",
                 f"at {self.concurrency} requests" if self.concurrency else "",
                 f"at {self.prompt_tokens} prompt tokens" if self.prompt_tokens else ""]
        return " ".join([METRIC_WORDS[self.metric]] + [w for w in where if w])


class MemoryBudget(StrictModel):
    """What each configuration must fit in before it is launched (engines/sizing.py): the weights split over its
    tensor-parallel GPUs, and a full-context KV cache for every running request it allows."""

    gpu_gib: float = Field(..., gt=0, description="memory of one GPU")
    gpus: int = Field(8, ge=1, description="GPUs on the host: a configuration needing more is pruned")
    model: str | None = Field(None, description="a GGUF file, or a config.json (or its folder) for the model's shape; "
                                                "default: the candidate's model.path")
    weights_gib: float | None = Field(None, gt=0, description="the checkpoint's size, where the shape cannot know it")
    context_length: int | None = Field(None, ge=256, description="tokens each running request may hold; default: "
                                                                 "the candidate's knobs.context_length")
    memory_fraction: float = Field(0.9, gt=0, le=1, description="share of each GPU the engine takes")
    overhead_gib: float = Field(1.0, ge=0, description="per GPU: activations and graphs")


class Screening(StrictModel):
    plan: dict[str, Any] = Field(default_factory=dict, description="dotted overrides of the study's plan for the "
                                 "screening launches (e.g. decode.duration_s: 1); the objective's cell must stay")
    initial: int | None = Field(None, ge=2, description="configurations of the first, space-filling design "
                                                        "(default: twice the number of knobs, at least 4)")


class Confirmation(StrictModel):
    top: int = Field(3, ge=2, le=8, description="the best screened configurations that are confirmed")
    repeats: int = Field(3, ge=2, le=20, description="interleaved launches of each under the full plan")


class SearchSpec(StrictModel):
    space: dict[str, list[Any]] = Field(..., description="dotted candidate fields (knobs.chunk_size) and the values "
                                        "to try; numbers are a numeric knob, anything else a categorical one")
    objective: Objective
    budget: int = Field(30, ge=4, le=1000, description="engine launches, screening and confirmation together")
    screen: Screening = Screening()
    confirm: Confirmation = Confirmation()
    memory: MemoryBudget | None = None
    seed: int = Field(0, ge=0, le=2**32 - 1, description="the seed every drawn figure comes from")

    @field_validator("space")
    @classmethod
    def _values(cls, space: dict[str, list[Any]]) -> dict[str, list[Any]]:
        if not space:
            raise ValueError("give at least one knob to search")
        for name, values in space.items():
            if not _in_identity(name):
                raise ValueError(f"{name}: not part of a candidate's identity (its name, a port, a timeout), so its "
                                 "values would be the same candidate launched again; search knobs that change what "
                                 "the engine does")
            if not values:
                raise ValueError(f"{name}: give at least one value")
            texts = [json.dumps(v, sort_keys=True) for v in values]
            if len(set(texts)) != len(texts):
                raise ValueError(f"{name}: a value is listed twice")
        return space

    @model_validator(mode="after")
    def _budget(self) -> "SearchSpec":
        if self.size == 1:  # a launch screened against nothing, and no winner named: nothing to search
            raise ValueError("space: one configuration, nothing to choose between; give a knob two values or more, "
                             "or measure it with `servebook run` or a study's sweep")
        confirming = self.confirm.top * self.confirm.repeats
        if self.budget < confirming + self.confirm.top:
            raise ValueError(f"budget {self.budget}: confirming {self.confirm.top} x {self.confirm.repeats} takes "
                             f"{confirming} launches, and screening needs at least {self.confirm.top} more")
        return self

    @property
    def screening_launches(self) -> int:
        return self.budget - self.confirm.top * self.confirm.repeats

    @property
    def size(self) -> int:
        size = 1
        for values in self.space.values():
            size *= len(values)
        return size
