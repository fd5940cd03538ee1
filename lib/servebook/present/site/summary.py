"""What the site keeps of one run: a typed summary, read once from the run's files into the build cache.

Every page is drawn from these summaries only, so an unchanged run is never read again. The fields below are the
whole contract between reading a run (`pages.summarize_run`) and drawing it; a misspelled field is an error, not
a page that quietly shows nothing.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field


class RunSummary(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    #: completed, failed, interrupted, incomplete (never sealed) or damaged (unreadable), as the journal says
    status: str
    #: the study entry, else the candidate's label or id ("?" for a run that names neither)
    label: str = "?"
    candidate_id: str | None = None
    candidate: dict[str, Any] = Field(default_factory=dict)
    plan_id: str | None = None
    study: str | None = None
    engine: str | None = None
    simulated: bool = False
    gates: dict[str, Any] = Field(default_factory=dict)
    started_at: str | None = None
    finished_at: str | None = None
    sealed_at: str | None = None
    failure: dict[str, Any] | None = None
    #: why a damaged run cannot be read as the run its manifest says
    problem: str | None = None
    #: the manifest's summary (cells, valid cells, aggregate figures), redacted
    summary: dict[str, Any] | None = None
    environment: dict[str, Any] = Field(default_factory=dict)
    #: each claim against the engine's self-report, as `config.claims.Verification` dumps it
    verification: dict[str, Any] | None = None
    memory: dict[str, Any] | None = None
    argv: list[str] = Field(default_factory=list)
    #: one JSON-ready dict per cell, as cells.parquet holds it (each cell kind has its own columns)
    cells: list[dict[str, Any]] = Field(default_factory=list)
    #: every verdict event recorded on this run, oldest first, in the shape `journal.events` reads them
    verdicts: list[dict[str, Any]] = Field(default_factory=list)
    #: the newest verdict's outcome, or (set by `covering_verdicts`) the newest verdict that compared this run
    verdict: str | None = None
    reasons: list[str] = Field(default_factory=list)
    method: str | None = None
    rules: dict[str, Any] | None = None
    rules_hash: str | None = None
    baseline_run_id: str | None = None
    #: the listings' headline figures: decode at the highest concurrency, prefill at the longest prompt, capacity
    decode_value: float | None = None
    decode_at: int | None = None
    prefill_value: float | None = None
    prefill_at: int | None = None
    capacity_value: float | None = None
    capacity_text: str = ""
    #: chunk gaps counted in the shared bins, for the gap histogram
    chunk_gaps: dict[str, Any] = Field(default_factory=dict)
    #: the interference probes' chunk gaps in the same bins, and the engine's gauges on the run's time axis
    probe_gaps: dict[str, Any] = Field(default_factory=dict)
    gauges: dict[str, Any] = Field(default_factory=dict)
    #: the run's objectives and GPUs, which its cells do not carry
    frontier: dict[str, Any] = Field(default_factory=dict)
    reuse_turns: list[dict[str, Any]] = Field(default_factory=list)
    #: the turns of its agents cells, as columns (present/sessions.py), for the session view
    agent_sessions: dict[str, list[Any]] = Field(default_factory=dict)
    log_tail: str | None = None
    files: list[str] = Field(default_factory=list)
    #: its row of the journal's index, for history() without reading the index
    index_row: dict[str, Any] = Field(default_factory=dict)
    #: tags, notes and archiving, added beside the sealed run
    annotations: dict[str, Any] = Field(default_factory=dict)
    # Set by the build, never cached: the study page's file name, the run's cache key, and the run whose verdict
    # covers this one where it holds none of its own.
    study_slug: str | None = None
    fingerprint: str | None = None
    judged_on: str | None = None

    @property
    def archived(self) -> bool:
        return bool(self.index_row.get("archived"))

    @property
    def latest_verdict(self) -> dict[str, Any]:
        return self.verdicts[-1] if self.verdicts else {}

    def blocked_cells(self) -> pd.DataFrame:
        """Its cells, marked with its machine as the verdicts mark them (the noise floor pools within machines)."""
        from ...journal.manifest import Environment

        cells = pd.DataFrame(self.cells)
        cells.attrs["block"] = (Environment.model_validate(self.environment).machine_key, self.run_id)
        return cells


def key_variable(candidate: dict | None) -> str | None:
    """The variable a run's candidate took its API key from (launch.api_key_env), as recorded."""
    launch = (candidate or {}).get("launch")
    name = launch.get("api_key_env") if isinstance(launch, dict) else None
    return name if isinstance(name, str) else None
