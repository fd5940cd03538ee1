"""Commands that build what candidates run: the embedded engine (llama-server) and the models (tiny, random and
real weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..config import InputError
from ..engines.llamacpp_build import find_llamacpp, install_llamacpp
from ..models.model_specs import disk_bytes, model_formats
from ..util.progress import Reporter
from ._app import engine_app, friendly, models_app, out


@engine_app.command("install")
@friendly
def engine_install(
    kind: str = typer.Argument("llamacpp", help="engine to build; only llamacpp is built locally"),
    backend: str = typer.Option("auto", help="cpu, cuda (for the GPUs nvidia-smi reports), or auto: cuda where "
                                             "nvcc and a GPU are there"),
    source: Optional[Path] = typer.Option(None, help="a llama.cpp source tree or .tar.gz to build instead of the "
                                                     "PyPI sdist (hosts without network)"),
    force: bool = typer.Option(False, help="rebuild even if a build is cached"),
):
    """Build llama-server from the pinned llama-cpp-python sdist and cache it (idempotent, per backend)."""
    from ..engines.llamacpp_build import default_backend

    if kind != "llamacpp":
        raise InputError(f"engine install: only llamacpp is built here, not {kind!r}")
    chosen = default_backend() if backend == "auto" else backend
    install = install_llamacpp(reporter=Reporter(), force=force, backend=chosen, source=source)
    out.print(f"llama-server ({install.backend}): {install.server}")


@engine_app.command("info")
@friendly
def engine_info():
    """The cached engine builds (CPU and CUDA), and which one candidates use here."""
    builds = {b: find_llamacpp(backend=b) for b in ("cpu", "cuda")}
    if not any(builds.values()):
        out.print("llama-server is not built; run `servebook engine install llamacpp`")
        raise typer.Exit(1)
    used = find_llamacpp()
    out.print_json(data={"used": used.backend if used else None,
                         "builds": {b: {"server": str(i.server), **i.info} for b, i in builds.items() if i}})


ModelFormatOption = typer.Option("gguf", "--format", help="gguf (for llama.cpp), hf (a Hugging Face checkpoint for "
                                                            "vLLM and SGLang, written without the llama.cpp build), "
                                                            "or both")


@models_app.command("tiny")
@friendly
def models_tiny(format_: str = ModelFormatOption):
    """Write the deterministic random-weight tiny target and draft models (if missing)."""
    from ..models.tiny_models import ensure_tiny_hf_checkpoints, ensure_tiny_models

    for fmt in model_formats(format_):
        written = ensure_tiny_models(reporter=Reporter()) if fmt == "gguf" else ensure_tiny_hf_checkpoints(Reporter())
        for name, path in written.items():
            out.print(f"tiny:{name}  {path}  ({disk_bytes(path) / 1e6:.0f} MB{', hf' if fmt == 'hf' else ''})")


@models_app.command("real")
@friendly
def models_real(name: str = typer.Argument("gemma3-270m", help="the real model, as real:NAME names it"),
                format_: str = ModelFormatOption):
    """Assemble a real-weight model from its registry package into the cache, checked against its upstream digest
    (--format hf: also a Hugging Face checkpoint of it for vLLM and SGLang, written from the same file)."""
    from ..models.real_checkpoints import ensure_real_hf_checkpoint
    from ..models.real_models import ensure_real_model, real_model

    try:
        model = real_model(name)
    except KeyError as error:
        raise InputError(f"models real: {error.args[0]}") from None
    for fmt in model_formats(format_):
        path = ensure_real_model(model.reference, Reporter()) if fmt == "gguf" else \
            ensure_real_hf_checkpoint(model.reference, Reporter())
        out.print(f"{model.reference}  {path}  ({disk_bytes(path) / 1e6:.0f} MB{', hf' if fmt == 'hf' else ''}, "
                  f"{model.licence})")


@models_app.command("memory")
@friendly
def models_memory(
    model: str = typer.Argument(..., help="a GGUF file, tiny:NAME / random:NAME, or a config.json (or its folder)"),
    gpu_gib: float = typer.Option(141.0, help="memory of one GPU (an H200 has 141 GiB)"),
    gpus: int = typer.Option(8, help="GPUs on the host"),
    context: int = typer.Option(32768, help="tokens each request may hold"),
    kv_dtype: str = typer.Option("f16", help="KV cache element type (f16, bf16, fp8, q8_0, ...)"),
    memory_fraction: float = typer.Option(0.9, help="share of each GPU the engine takes"),
    overhead_gib: float = typer.Option(1.0, help="per GPU: activations and graphs the arithmetic cannot know"),
    weights_gib: Optional[float] = typer.Option(None, help="the checkpoint's size, where the config cannot say it"),
):
    """The memory arithmetic of a model: KV bytes per token, and replicas versus wider TP on a host."""
    from ..present.views import size_model

    out.print(size_model(model, gpu_gib=gpu_gib, gpus=gpus, context_length=context, kv_dtype=kv_dtype,
                         memory_fraction=memory_fraction, overhead_gib=overhead_gib, weights_gib=weights_gib))


@models_app.command("random")
@friendly
def models_random(
    params: Optional[str] = typer.Option(None, help="a preset: 0.5b, 1b, 3b, 8b, or draft (writes it and the draft)"),
    name: Optional[str] = typer.Option(None, help="with a shape: the name candidates use, as random:NAME"),
    layers: Optional[int] = typer.Option(None), width: Optional[int] = typer.Option(None),
    heads: Optional[int] = typer.Option(None), kv_heads: Optional[int] = typer.Option(None),
    ffn: Optional[int] = typer.Option(None),
    dtype: str = typer.Option("f16", help="f16 or f32 (the GGUF's; a Hugging Face checkpoint is bf16)"),
    format_: str = ModelFormatOption,
):
    """Write a realistic-size random-weight model (deterministic, cached): a preset or any llama shape."""
    from ..models.hf_checkpoints import ensure_hf_checkpoint
    from ..models.random_models import RANDOM_MODELS, custom_spec, ensure_model

    shape = {"layers": layers, "width": width, "heads": heads, "kv_heads": kv_heads, "ffn": ffn}
    if params and any(v is not None for v in shape.values()):
        raise InputError("models random: give --params, or a shape (--name --layers --width --heads --kv-heads "
                         "--ffn), not both")
    if params:
        if params not in RANDOM_MODELS:
            raise InputError(f"--params {params!r}: choose one of {', '.join(RANDOM_MODELS)}")
        specs = [RANDOM_MODELS[params]] + ([RANDOM_MODELS["draft"]] if params != "draft" else [])
    else:
        missing = [k for k, v in shape.items() if v is None]
        if missing or not name:
            raise InputError("models random: give --params 0.5b|1b|3b|8b, or --name and every one of --layers "
                             "--width --heads --kv-heads --ffn" + (f" (missing: {', '.join(missing)})" if missing else ""))
        sizes = {k: v for k, v in shape.items() if v is not None}  # all of them: none is missing
        try:
            specs = [custom_spec(name, dtype=dtype, **sizes)]
        except ValueError as error:
            raise InputError(f"models random: {error}") from None
    formats = model_formats(format_)
    for spec in specs:
        for fmt in formats:
            path = ensure_model(spec, reporter=Reporter()) if fmt == "gguf" else ensure_hf_checkpoint(spec, Reporter())
            out.print(f"random:{spec.name}  {path}  ({spec.parameters() / 1e9:.2f}B parameters, "
                      f"{disk_bytes(path) / 1e9:.2f} GB{', hf' if fmt == 'hf' else ''})")
