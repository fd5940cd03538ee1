"""manifest.json as a typed model: the one place that knows its shape.

Manifests are records, not inputs: unknown fields are kept (extra="allow"), so a journal written
by another servebook version still opens and round-trips unchanged. Every reader and writer in
servebook goes through these models instead of digging through dicts.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..config.claims import Verification
from ..config.parameters import Seat
from ..util.errors import FailureCause, FailureStage

SCHEMA_VERSION = 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Failure(_Record):
    """Why a run has no numbers: the stage it stopped in and the classified cause."""

    stage: FailureStage | None = None
    #: "unknown" only in a record that names no cause
    cause: FailureCause | Literal["unknown"] = "unknown"
    message: str = "no cause recorded"
    exit_code: int | None = None
    log_tail: str | None = None

    @property
    def text(self) -> str:
        return f"{self.cause}: {self.message}"


class GateScore(_Record):
    passed: int
    cases: int
    first_failure: str | None = None

    @property
    def ok(self) -> bool:
        return self.passed == self.cases


class Summary(_Record):
    cells: int = 0
    valid_cells: int = 0
    invalid_cells: dict[str, str] = Field(default_factory=dict)
    #: the same cells' fault codes (measure.validity.InvalidCode); absent in journals written before codes
    invalid_codes: dict[str, list[str]] = Field(default_factory=dict)
    reconciled_cells: int | None = None
    decode_aggregate_tok_s: dict[str, float | None] = Field(default_factory=dict)
    prefill_tok_s: dict[str, float | None] = Field(default_factory=dict)
    gates: dict[str, GateScore] = Field(default_factory=dict)
    #: greedy outputs batched against the same prompts alone (plan.equivalence): identical share, divergences
    batch_invariance: dict[str, Any] | None = None
    #: plan.warmup_until_steady: each warm-up burst's aggregate decode rate, and whether the last two agreed
    warmup_tok_s: list[float] = Field(default_factory=list)
    warmup_steady: bool | None = None
    #: plan.remeasure_disturbed: per cell, the reasons of each attempt discarded as disturbed by the host before
    #: the one recorded
    remeasured: dict[str, list[str]] = Field(default_factory=dict)


class PreflightFinding(_Record):
    code: str
    level: str = "note"
    message: str = ""


class Environment(_Record):
    """Where and on what the run was measured. GPU and host fields are absent where not known."""

    host: str | None = None
    #: /etc/machine-id and the kernel's boot id: host names do not tell lent machines apart
    machine_id: str | None = None
    boot_id: str | None = None
    platform: str | None = None
    cpu: str | None = None
    cpu_count: int | None = None
    memory_gib: float | None = None
    gpus: list[dict[str, Any]] = Field(default_factory=list)
    python: str | None = None
    servebook: str | None = None
    engine_version: str | None = None
    model_digest: str | None = None
    #: a `real:` model's provenance (models.real_models.real_source): registry package, version, upstream digest,
    #: licence; None for any other model
    model_source: dict[str, Any] | None = None
    image: str | None = None
    image_digest: str | None = None
    model_revision: str | None = None
    simulated: bool = False
    preflight: list[PreflightFinding] = Field(default_factory=list)
    #: the GPU group or Ray node a parallel sweep placed the run on (sweeps.placement): a block of the design
    lane: str | None = None

    @property
    def machine_key(self) -> str:
        """The machine and GPU group a run was measured on; runs are compared within one, never across.
        Journals written before machine ids fall back to the host name."""
        base = ":".join(p for p in (self.machine_id, self.boot_id) if p) or (self.host or "")
        if self.lane:  # placed by a parallel sweep: the lane is the block, whatever part of it a candidate used
            return f"{base}/lane {self.lane}"
        gpus = ",".join(str(g.get("uuid") or g.get("index")) for g in self.gpus if isinstance(g, dict))
        visible = ((getattr(self, "engine_env", None) or {}).get("CUDA_VISIBLE_DEVICES")) or ""
        return "/".join(p for p in (base, gpus, visible) if p)

    @property
    def host_identity(self) -> str:
        """The machine and its GPUs across reboots and placements: where a configuration's history is kept
        (`machine_key` adds the boot and the lane, which only blocks within one study)."""
        gpus = ",".join(str(g.get("uuid") or g.get("index")) for g in self.gpus if isinstance(g, dict))
        return "/".join(p for p in (self.machine_id or self.host or "", gpus) if p)

    def finding(self, code: str) -> PreflightFinding | None:
        return next((f for f in self.preflight if f.code == code), None)


class EngineInfo(_Record):
    argv: list[str] = Field(default_factory=list)
    base_url: str | None = None
    pid: int | None = None
    ready_s: float | None = None
    measure_s: float | None = None
    served_model: str | None = None
    #: attach and launch alike: each claim of the candidate against what the engine reports of itself (a `Claim`
    #: each; a run recorded before they were typed holds sentences, read back as claims), and the report itself
    verification: Verification | None = None
    #: the memory arithmetic of the model against the KV cache the engine logged at load (llama.cpp)
    memory: dict[str, Any] | None = None
    #: launch.cpus: the CPUs the engine's threads were held to once it served, and how many threads were pinned
    pinned: dict[str, Any] | None = None
    #: launch.replicas: each replica's port and pid, the router, and every replica that died (launch.replicas)
    replicas: dict[str, Any] | None = None


class RunIdentity(_Record):
    """Who a run is: written to launch.json when the run starts, repeated in its manifest at sealing."""

    candidate_id: str | None = None
    candidate_label: str | None = None
    candidate: dict[str, Any] = Field(default_factory=dict)
    plan_id: str | None = None
    plan: dict[str, Any] = Field(default_factory=dict)
    study: str | None = None
    study_entry: str | None = None
    synthetic: bool = False
    started_at: str | None = None
    #: the resident round the run was measured in, its seat and the round's size (sweep --resident)
    resident: Seat | None = None

    @property
    def label(self) -> str:
        return self.study_entry or self.candidate_label or self.candidate_id or "?"

    @property
    def engine_kind(self) -> str | None:
        return self.candidate.get("engine")

    @property
    def simulated(self) -> bool:
        return bool((self.candidate.get("launch") or {}).get("simulator"))


class Manifest(RunIdentity):
    """A sealed run. Written last and atomically: its presence is what makes a run sealed."""

    schema_version: int = Field(SCHEMA_VERSION, alias="schema")
    run_id: str = ""
    #: interrupted: stopped by the user; its finished cells are kept, but it is no evidence for a verdict
    #: degraded: a replica of several died mid-plan (launch.replicas); its cells are kept, `failure` names the replica
    status: Literal["completed", "failed", "interrupted", "degraded"]
    environment: Environment = Field(default_factory=Environment)
    engine: EngineInfo = Field(default_factory=EngineInfo)
    finished_at: str | None = None
    sealed_at: str | None = None
    failure: Failure | None = None
    summary: Summary | None = None

    def to_json(self) -> bytes:
        return (self.model_dump_json(by_alias=True, indent=2) + "\n").encode()
