"""The engine as the measurement sees it, fixed once it answers: where to send, as which model, how
many requests it runs at once and how much one may hold (as the engine reports them, else as the
candidate's knobs imply)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.candidate import Candidate
from ..engines import EngineAdapter
from ..launch.identity import EngineIdentity
from ..launch.target import Target
from ..measure.transport.endpoint import Endpoint


def slots(candidate: Candidate, settings: dict[str, Any]) -> int | None:
    """How many requests the engine runs at once: what it reports, else what the candidate sets."""
    value = settings.get("max_running_requests") or candidate.knobs.max_running_requests
    return int(value) if value else None


def context_per_request(candidate: Candidate, adapter: EngineAdapter,
                        settings: dict[str, Any]) -> int | None:
    """What one request may hold: as the engine reports it (per slot, or in all), else as the
    knobs imply."""
    value = settings.get("context_per_slot") or settings.get("context_length")
    return int(value or adapter.context_per_request(candidate) or 0) or None


def endpoint_for(candidate: Candidate, adapter: EngineAdapter, target: Target,
                 identity: EngineIdentity | None, *, api_key: str | None,
                 engine_pid: int | None, engine_log: Path) -> Endpoint:
    """`engine_pid`: the engine's process when servebook started it here (host telemetry checks
    it)."""
    settings = identity.settings if identity else {}
    return Endpoint(
        target.base_url, adapter, model=identity.served_model if identity else None,
        api_key=api_key or "servebook", slots=slots(candidate, settings),
        context_tokens=context_per_request(candidate, adapter, settings),
        engine_pid=engine_pid if candidate.launch.mode == "local" else None,
        engine_log=engine_log, request_extras=candidate.request_extras,
        draft_source=candidate.knobs.drafter.acceptance_source,
        chat_request_extras=adapter.chat_extras(candidate),
        session_header=target.session_header, replica_urls=target.replica_urls,
        router_url=target.router_url, settings=settings)
