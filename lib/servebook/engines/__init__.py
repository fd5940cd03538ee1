"""Engine adapters: each owns all of its engine's facts (flags, counters, readiness, failures).

Adapters register themselves on import, in the engine registry (registry.py), with their knob model in
`config.knobs.KNOB_MODELS` and their candidate check in `config.ENGINE_CHECKS`, so a candidate naming an engine
is validated by that engine.
"""

from __future__ import annotations

from ..util.errors import EngineFailed, FailureCause
from . import llamacpp, openai, sglang, vllm  # noqa: F401  (each registers itself)
from ._base import MODEL_FORMATS, Diagnosis, EngineAdapter, KvLog, ModelFormat, ServerCounts, ServerTimings
from .registry import every_engine, get_engine, known_engines, register

__all__ = ["MODEL_FORMATS", "Diagnosis", "EngineAdapter", "EngineFailed", "FailureCause", "KvLog", "ModelFormat",
           "ServerCounts", "ServerTimings", "every_engine", "get_engine", "known_engines", "register"]
