"""Engine adapters: each owns all of its engine's facts (flags, counters, readiness, failures).

Adapters register themselves on import, in the engine registry here, with their knob model in
`config.knobs.KNOB_MODELS` and their candidate check in `config.ENGINE_CHECKS`, so a candidate naming an engine
is validated by that engine.
"""

from __future__ import annotations

from ..config.candidate import ENGINE_CHECKS
from ..config.knobs import register_knobs
from ..util.errors import EngineFailed, FailureCause
from ._base import Diagnosis, EngineAdapter, KvLog, ServerCounts, ServerTimings

_REGISTRY: dict[str, EngineAdapter] = {}


def register(adapter: EngineAdapter) -> EngineAdapter:
    _REGISTRY[adapter.kind] = adapter
    register_knobs(adapter.kind, adapter.knobs_model)
    ENGINE_CHECKS[adapter.kind] = adapter.check
    return adapter


def get_engine(kind: str) -> EngineAdapter:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise ValueError(f"engine {kind!r} is not known; known engines: {', '.join(sorted(_REGISTRY))}") from None


def known_engines() -> list[str]:
    return sorted(_REGISTRY)


def every_engine() -> list[EngineAdapter]:
    """Every registered adapter, by kind (what is true of any engine, e.g. how its process is recognised)."""
    return [adapter for _, adapter in sorted(_REGISTRY.items())]


from . import llamacpp, openai, sglang, vllm  # noqa: E402,F401  (each registers itself)

__all__ = ["Diagnosis", "EngineAdapter", "EngineFailed", "FailureCause", "KvLog", "ServerCounts", "ServerTimings",
           "every_engine", "get_engine", "known_engines", "register"]
