"""The engines by kind. Each adapter's module registers itself here on import (engines/__init__.py imports them
all), with its knob model in `config.knobs.KNOB_MODELS` and its candidate check in `config.ENGINE_CHECKS`."""

from __future__ import annotations

from ..config.candidate import ENGINE_CHECKS
from ..config.knobs import register_knobs
from ._base import EngineAdapter

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
