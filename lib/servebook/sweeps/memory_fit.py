"""The search's memory check: whether a candidate fits a GPU budget, from the model's shape alone (engines.sizing
does the arithmetic). It lives above the engines because a `tiny:`/`random:`/`real:` reference is resolved to the
file servebook's model writers put it in (models.random_models), and the engines do not import the writers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..engines.registry import get_engine
from ..engines.sizing import GIB, ModelShape, fit

if TYPE_CHECKING:
    from ..config.candidate import Candidate
    from ..config.search import MemoryBudget
    from ..engines import ModelFormat


def does_not_fit(candidate: "Candidate", budget: "MemoryBudget") -> str | None:
    """Why `candidate` cannot run within `budget`, from the arithmetic alone, or None when it fits: too many GPUs,
    weights that leave no room for a KV cache, or more running requests than full-context KV caches fit."""
    knobs = candidate.knobs
    tp = knobs.tensor_parallel_size
    gpus = tp * candidate.launch.replicas
    if gpus > budget.gpus:
        return f"needs {gpus} GPUs (TP {tp} x {candidate.launch.replicas} replicas); the host has {budget.gpus}"
    shape = ModelShape.from_file(_shape_source(budget.model or candidate.model.path,
                                               get_engine(candidate.engine).model_format))
    if budget.weights_gib is not None:
        shape = shape.with_weights(int(budget.weights_gib * GIB), "search.memory.weights_gib")
    # What one request may hold as the engine reads its knobs (llama.cpp shares its context among its slots).
    context = budget.context_length or get_engine(candidate.engine).context_per_request(candidate)
    if context is None:
        raise ValueError("search.memory.context_length: give the tokens each request may hold (or set "
                         "knobs.context_length)")
    found = fit(shape, gpu_gib=budget.gpu_gib, tensor_parallel=tp, context_length=context, kv_dtype=knobs.kv_dtype,
                gpus=budget.gpus, memory_fraction=budget.memory_fraction, overhead_gib=budget.overhead_gib)
    weights = shape.weight_bytes / tp / GIB
    usable = budget.gpu_gib * budget.memory_fraction - budget.overhead_gib
    if found.token_pool == 0:
        return f"weights of {weights:.1f} GiB per GPU at TP {tp} leave no room for a KV cache in {usable:.1f} GiB"
    running = knobs.max_running_requests
    if running is not None and running > found.requests_at_context:
        need = running * found.request_bytes_per_gpu / GIB
        return (f"{running} running requests of {context} tokens need {need:.1f} GiB of KV per GPU "
                f"({found.request_bytes_per_gpu / context / 1024:.0f} KiB per token at {knobs.kv_dtype or 'auto'}); "
                f"{usable - weights:.1f} GiB is left after the weights, "
                f"room for {found.requests_at_context}")
    return None


def _shape_source(model: str | None, fmt: "ModelFormat") -> Path:
    """The file the model's shape is read from: a path, or the GGUF (or, for a GPU engine, the Hugging Face
    directory) a `tiny:`/`random:` reference was written to."""
    if not model:
        raise ValueError("search.memory.model: give the model's shape (a GGUF file or a config.json)")
    if not model.startswith(("tiny:", "random:", "real:")):
        return Path(model)
    from ..models.random_models import generated_path  # numpy and the writers, only where a reference is resolved

    try:
        path = generated_path(model, fmt)
    except KeyError as error:
        raise ValueError(f"search.memory.model: {error.args[0]}") from None
    if path is None or not path.exists():
        raise ValueError(f"search.memory.model: {model} is not written yet (servebook models random / models tiny "
                         f"--format {fmt}), so its shape cannot be read; write it, or give a GGUF file or config.json")
    return path
