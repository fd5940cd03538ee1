"""The tiny random-weight GGUF models that a real llama-server loads in a second (tests and the demo).

They are written by the random-model writer (same tokenizer, template and recipe) at a size a
2-core CPU serves at hundreds of tokens per second. A target and a smaller draft share the
vocabulary, so the draft can serve as a speculative drafter for the target. The GPU engines get them
as Hugging Face checkpoints of the same shapes, with a 4096-token vocabulary of their own.
"""

from __future__ import annotations

from pathlib import Path

from ..engines.llamacpp_build import LlamaCppInstall
from ..util.progress import Reporter
from .hf_checkpoints import ensure_hf_checkpoint
from .model_specs import TINY_HF_MODELS
from .random_models import TINY_MODELS, ensure_model, models_dir

__all__ = ["TINY_HF_MODELS", "TINY_MODELS", "ensure_tiny_hf_checkpoints", "ensure_tiny_models", "tiny_model_path",
           "tiny_models_dir"]


def tiny_models_dir() -> Path:
    return models_dir()


def tiny_model_path(name: str) -> Path:
    if name not in TINY_MODELS:
        raise KeyError(f"unknown tiny model {name!r}; known: {', '.join(TINY_MODELS)}")
    return tiny_models_dir() / TINY_MODELS[name].filename


def ensure_tiny_models(install: LlamaCppInstall | None = None, reporter: Reporter | None = None) -> dict[str, Path]:
    """Write every tiny model that is missing; return name -> path."""
    return {name: ensure_model(spec, install, reporter) for name, spec in TINY_MODELS.items()}


def ensure_tiny_hf_checkpoints(reporter: Reporter | None = None) -> dict[str, Path]:
    """Write every tiny Hugging Face checkpoint that is missing (no llama.cpp build needed); return name -> directory."""
    return {name: ensure_hf_checkpoint(spec, reporter) for name, spec in TINY_HF_MODELS.items()}
