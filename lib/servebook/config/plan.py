"""The plan: what to measure against a candidate, with its own hash."""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import Field, field_validator, model_validator

from .agents import AgentsPlan
from .load import CapacitySearch, LoadPlan, ReplayPlan, ServiceObjectives
from .metrics import METRICS
from .shown import ShownAsYaml
from .strict import StrictModel

#: prompt categories of decode cells: each a corpus of lib/servebook/data/corpora/ but structured (JSON notes under a
#: schema); copy asks for a given text back, unchanged or lightly edited: the workload prompt lookup is for
Category = Literal["prose", "code", "copy", "structured"]
Gate = Literal["json_schema", "nullable_argument", "agent_protocol", "needle"]


def _ascending_unique(values: list[int], field: str) -> list[int]:
    if sorted(set(values)) != list(values):
        raise ValueError(f"{field} must be strictly ascending without repeats, got {values}")
    return values


class DecodePlan(StrictModel):
    """Decode at several concurrencies with a forced output length."""

    concurrency: list[int] = Field(default_factory=lambda: [1, 2, 4])
    categories: list[Category] = Field(default_factory=lambda: list[Category](["prose", "code"]))
    output_tokens: int = Field(128, ge=2, description="forced with ignore_eos + max_tokens, then checked")
    rounds: int = Field(2, ge=1, description="requests per cell = concurrency x rounds (at least)")
    min_cell_s: float | None = Field(
        None, gt=0, le=3600, description="keep each of the concurrency's streams busy with more requests until the "
                                         "cell has measured at least this long (a short cell is mostly ramp)")
    prompt_tokens: int | None = Field(
        None, ge=32, le=1_048_576, description="exact decode prompt length; every prompt then starts with its own "
                                               "token, so no two share a prefix (checked by the cache counters)")
    slices: int = Field(
        1, ge=1, le=8, description="in a resident round, measure each cell in this many slices, the round's seats "
                                   "taking turns slice by slice in mirrored order (forward, then backward), so a host "
                                   "that speeds up or slows down during the step weighs on every seat alike; 1 or "
                                   "an even number that divides rounds (each slice keeps the cell's concurrency)")
    prompt_style: Literal["chat", "completion"] = Field(
        "chat", description="chat: each passage as a user message through the model's chat template; completion: "
                            "the passage as raw text to continue (/v1/completions), for a base model, which has no "
                            "chat template to follow (a pretrained Gemma 3 under llama.cpp's fallback template "
                            "wrote that template's markers back, in a loop)")
    realism_probes: int = Field(
        2, ge=0, le=16, description="after each decode cell, send this many of its requests again greedily without "
                                    "a forced length, to find how much of the forced output lies past the model's "
                                    "own end (forced_tail_share); 0 measures no tail")

    @model_validator(mode="after")
    def _slices(self) -> "DecodePlan":
        if self.slices > 1 and (self.slices % 2 or self.rounds % self.slices):
            raise ValueError(f"slices: {self.slices} must be 1 or even, and divide rounds ({self.rounds}), so the "
                             "mirrored order balances and every slice keeps the cell's concurrency")
        return self

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        if any(c < 1 for c in v):
            raise ValueError("concurrency values must be >= 1")
        return _ascending_unique(v, "concurrency")


class ProbePlan(StrictModel):
    """Interference probes: short decode requests sent while each long prefill runs, so the decode stall a prefill
    chunk causes shows in their TTFT and chunk gaps (reported apart: they never count in the prefill figure)."""

    interval_ms: float = Field(100.0, ge=10, le=10_000, description="after the first probe (already decoding when "
                                                                     "the prefill request leaves), one leaves this "
                                                                     "often while the prefill is in flight")
    output_tokens: int = Field(32, ge=2, le=1024, description="forced length of each probe")
    prompt_tokens: int = Field(64, ge=48, le=4096, description="exact prompt length of each probe, cold like the "
                                                                "prefill's")
    max_in_flight: int = Field(2, ge=1, le=64, description="no new probe while this many are in flight (so probes "
                                                            "beyond the engine's slots do not measure its queue)")


class PrefillPlan(StrictModel):
    """Cold prefill: exact prompt sizes, a unique prefix per request so nothing is cached."""

    prompt_tokens: list[int] = Field(default_factory=lambda: [512, 2048])
    requests: int = Field(2, ge=1, description="sequential requests per size (at least)")
    min_cell_s: float | None = Field(None, gt=0, le=3600, description="more requests until the cell lasted this long")
    probes: ProbePlan | None = Field(None, description="short decode requests beside each prefill request, whose "
                                                       "TTFT and chunk gaps show the decode stall it causes")

    @field_validator("prompt_tokens")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        if any(n < 32 for n in v):
            raise ValueError("prompt sizes below 32 tokens measure overhead, not prefill")
        return _ascending_unique(v, "prompt_tokens")


class ReusePlan(StrictModel):
    """Agent-style turns: each turn resends the whole conversation so far and appends to it."""

    conversations: int = Field(2, ge=1, le=64, description="independent conversations, one after another")
    turns: int = Field(4, ge=2, le=64)
    first_prompt_tokens: int = Field(1024, ge=32)
    turn_tokens: int = Field(256, ge=8, description="tokens each turn appends (the previous answer and a new ask)")
    output_tokens: int = Field(16, ge=1)


class WavePlan(StrictModel):
    """Bursts of requests sent at once, typically more than the candidate has slots: those beyond the
    slots queue, and the wait shows in TTFT (p50, p90) and in aggregate throughput."""

    concurrency: list[int] = Field(default_factory=lambda: [8])
    waves: int = Field(2, ge=1, le=100, description="bursts per cell, each sent when the previous one finished")
    output_tokens: int = Field(32, ge=2)
    prompt_tokens: int = Field(256, ge=32)

    @field_validator("concurrency")
    @classmethod
    def _concurrency(cls, v: list[int]) -> list[int]:
        if not v or any(c < 1 for c in v):
            raise ValueError("waves.concurrency needs values >= 1")
        return _ascending_unique(v, "waves.concurrency")


class EquivalencePlan(StrictModel):
    """Greedy output with a fixed seed, each prompt alone and then all at once: batching must not change it,
    and a drafter must not change it against the baseline (compared across runs)."""

    prompts: int = Field(3, ge=1, le=32)
    output_tokens: int = Field(48, ge=2, le=4096)
    prompt_tokens: int = Field(128, ge=32)


class SteadyWarmup(StrictModel):
    """After the fixed warm-up requests, bursts at the decode plan's highest concurrency until two bursts in a
    row agree on their aggregate decode rate: a fixed count is too few on one engine and wasted on another."""

    within_pct: float = Field(3.0, gt=0, le=50, description="two bursts in a row within this percentage: steady")
    max_bursts: int = Field(10, ge=2, le=100, description="give up after this many bursts (the run records it)")
    output_tokens: int = Field(32, ge=8, le=1024, description="forced output length of each burst's requests")


#: what a rule on a metric of each judged cell kind needs of the plan, whose section of that name holds it
_NEEDS = {"decode": "decode cells", "prefill": "prefill cells", "reuse": "reuse cells", "capacity": "a capacity search",
          "agents": "agent sessions"}
#: per rule selector: the field of the plan's section it must name values of, and how a miss reads
_SELECTED = {"concurrency": ("concurrency", "is not in"), "category": ("categories", "is not in"),
             "prompt_tokens": ("prompt_tokens", "are not in")}


#: fields added after journals were recorded, which at their default measure exactly what plans without them did:
#: left out of the id there, so recorded plans keep their ids (and their runs their verdicts). Another value is
#: another plan.
_ADDED_AT_DEFAULT: dict[tuple[str, ...], object] = {
    ("remeasure_disturbed",): 1,  # which attempt of a host-disturbed cell is kept, not what a cell measures
    ("decode", "slices"): 1,
    # sampling the engine's gauges during cells reads /metrics beside them, which its cost check found negligible
    # (benchmarks/gauge_sampling.py); 0 turns it off, another plan
    ("gauge_interval_ms",): 250,
    # the realism probes are sent after a cell's measured window and its counters: its figures are the same
    ("decode", "realism_probes"): 2,
    ("decode", "prompt_style"): "chat",
}


class Plan(ShownAsYaml, StrictModel):
    name: str | None = None
    decode: DecodePlan | None = DecodePlan()
    prefill: PrefillPlan | None = PrefillPlan()
    warmup_requests: int = Field(2, ge=0, description="unrecorded requests before the first cell")
    warmup_until_steady: SteadyWarmup | None = None
    reuse: ReusePlan | None = None
    waves: WavePlan | None = None
    load: LoadPlan | None = None
    replay: ReplayPlan | None = Field(None, description="a request trace replayed at its arrivals, shared prompt "
                                                        "blocks sharing their tokens")
    agents: AgentsPlan | None = Field(None, description="concurrent agent sessions arriving open-loop, their "
                                                        "histories growing with the engine's replies (config.agents)")
    slo: ServiceObjectives | None = Field(None, description="objectives every decode, wave and load cell reports its "
                                                            "attainment and goodput against")
    capacity: CapacitySearch | None = Field(None, description="search the highest request rate at which slo holds, "
                                                              "with load's arrivals and lengths")
    equivalence: EquivalencePlan | None = None
    gates: list[Gate] = Field(
        default_factory=list, description="protocol checks run after the cells, each scored k/n; agent_protocol "
                                          "is five fixed cases, needle one case per gate_cases at each needle length")
    gate_cases: int = Field(3, ge=1, le=50)
    needle_tokens: list[int] | None = Field(None, description="prompt lengths of the needle gate")
    record_chunks: bool = True
    gauge_interval_ms: int = Field(
        250, ge=0, le=60_000, description="read the engine's gauges (KV usage, running and waiting requests, "
                                          "preemptions) from /metrics this often while each cell runs; 0: off")
    max_foreign_cpu_cores: float | None = Field(
        None, gt=0, description="CPU other processes may use during a cell before it counts as disturbed "
                                "(default: half the cores the run leaves idle, within 0.2 and 0.5 cores)")
    remeasure_disturbed: int = Field(
        1, ge=0, le=3, description="times a cell is measured again when its only faults are the host's (other "
                                   "processes' load, a client that stalled or fell behind): evidence lost, not a "
                                   "fault of the candidate; the discarded attempts' reasons stay in the run's summary")
    request_timeout_s: float = Field(300.0, gt=0)

    @model_validator(mode="after")
    def _capacity(self) -> "Plan":
        if self.capacity and (self.load is None or self.slo is None):
            raise ValueError("capacity: the search needs a load section (arrivals, lengths) and slo (what must hold)")
        if self.load and not self.load.rates_rps and not self.capacity:
            raise ValueError("load.rates_rps: give the rates to measure (or a capacity section to search them)")
        return self

    @model_validator(mode="after")
    def _needles(self) -> "Plan":
        if "needle" in self.gates and not self.needle_tokens:
            raise ValueError("needle_tokens: the needle gate needs the prompt lengths to test (e.g. [8192, 32768])")
        if self.needle_tokens and "needle" not in self.gates:
            raise ValueError("needle_tokens is for the needle gate: add needle to gates")
        if any(n < 256 for n in self.needle_tokens or []):
            raise ValueError("needle_tokens: at least 256 tokens")
        return self

    @property
    def needs_tokenizer(self) -> list[str]:
        """The sections of this plan that build prompts of exact token length, through the engine's tokenizer."""
        out = [name for name, present in (
            ("prefill", self.prefill), ("reuse", self.reuse), ("waves", self.waves), ("load", self.load),
            ("replay", self.replay), ("agents", self.agents), ("equivalence", self.equivalence),
            ("decode.prompt_tokens", self.decode and self.decode.prompt_tokens)) if present]
        return out

    def longest_requests(self) -> list[tuple[str, int]]:
        """(where, prompt + output tokens) of the longest request of each section, for the context check."""
        out = []
        if self.decode and self.decode.prompt_tokens:
            out.append(("decode.prompt_tokens", self.decode.prompt_tokens + self.decode.output_tokens))
        if self.prefill:
            out.append(("prefill.prompt_tokens", max(self.prefill.prompt_tokens) + 1))
        if self.reuse:
            r = self.reuse
            out.append(("reuse", r.first_prompt_tokens + (r.turns - 1) * r.turn_tokens + r.output_tokens))
        if self.waves:
            out.append(("waves.prompt_tokens", self.waves.prompt_tokens + self.waves.output_tokens))
        if self.load:
            out.append(("load", self.load.prompt_tokens.longest + self.load.output_tokens.longest))
            if self.load.trace:
                from .traces import read_rows  # read before launch: a trace that cannot be read fails here

                out.append(("load.trace", max(r.input_tokens + r.output_tokens for r in read_rows(self.load.trace))))
        if self.replay:
            from .traces import longest_replayed  # reads the trace: only where the context is checked

            out.append(("replay", longest_replayed(self.replay)))
        if self.equivalence:
            out.append(("equivalence", self.equivalence.prompt_tokens + self.equivalence.output_tokens))
        if self.needle_tokens:
            out.append(("needle_tokens", max(self.needle_tokens) + 64))
        return out

    def unmatched(self, rule) -> list[str]:
        """Why a verdict rule (config.rules.ComparisonRule) would select no cell, or some cell, this plan never
        measures; empty when every selector names cells of this plan."""
        judged = METRICS[rule.metric]
        name = judged.kind
        if getattr(self, name) is None:
            return [f"{rule.metric} needs {_NEEDS[name]}, and the plan has no {name} section"]
        measured = getattr(self, name)
        if judged.needs and getattr(measured, judged.needs, None) is None:
            return [f"{rule.metric} needs plan.{name}.{judged.needs}, and the plan's {name} section has none"]
        problems = []
        for selector in judged.selects:
            field, phrase = _SELECTED[selector]
            asked = getattr(rule, selector)
            if selector == "category":
                if asked and asked not in getattr(measured, field):
                    problems.append(f"category {asked!r} is not in plan.{name}.{field} {getattr(measured, field)}")
                continue
            missing = sorted(set(asked or []) - set(getattr(measured, field)))
            if missing:
                problems.append(f"{selector} {missing} {phrase} plan.{name}.{field} {getattr(measured, field)}")
        return problems

    def canonical_json(self) -> str:
        data = self.model_dump(mode="json", exclude={"name"}, exclude_none=True)
        capacity = data.get("capacity") or {}
        if capacity.get("narrowing_requests") == capacity.get("min_requests"):
            # how every capacity search measured before narrowing probes existed: the same plan, the same id
            capacity.pop("narrowing_requests", None)
        for path, default in _ADDED_AT_DEFAULT.items():
            *parents, leaf = path
            section = data
            for key in parents:
                section = section.get(key) or {}
            if section.get(leaf) == default:
                section.pop(leaf)
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @property
    def id(self) -> str:
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]

    def heading(self) -> str:
        return f"plan {self.name or '(unnamed)'} (id {self.id})"
