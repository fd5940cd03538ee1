"""Engine adapters behind one registry: `get_engine("llamacpp")`."""

from __future__ import annotations

from ._base import EngineAdapter, FailureCause, ServerCounts

_REGISTRY: dict[str, EngineAdapter] = {}


def register(adapter: EngineAdapter) -> EngineAdapter:
    _REGISTRY[adapter.kind] = adapter
    return adapter


def get_engine(kind: str) -> EngineAdapter:
    if not _REGISTRY:
        from . import llamacpp, openai, sglang, vllm  # noqa: F401  (each registers itself)
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise ValueError(f"engine {kind!r} is not known; known engines: {', '.join(sorted(_REGISTRY))}") from None


__all__ = ["EngineAdapter", "FailureCause", "ServerCounts", "get_engine", "register"]
