"""Random-weight GGUF models of realistic sizes (0.5B to 8B parameters), deterministic and cached.

Same recipe as the tiny models: llama architecture, the qwen2 tokenizer copied from the vocab-only
GGUF the llama-cpp-python sdist ships, the Qwen2.5 chat template, and seeded noise for weights,
so a real llama-server loads them, tokenizes real text and honours json_schema. Their speed is a
real model's of that shape (the arithmetic does not care what the weights are); their text is
noise. Sizes follow public model shapes; `random:draft` is a small model of the same vocabulary
to serve as a speculative drafter. Weights come from one seeded pool of noise, rolled per tensor,
so a 1B model is written in seconds rather than drawn number by number. A reference (`random:NAME`,
`tiny:NAME`) names this GGUF for llama.cpp, and the Hugging Face checkpoint of the same shape
(hf_checkpoints) for vLLM and SGLang.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..engines import ModelFormat
from ..engines.llamacpp_build import LlamaCppInstall, find_llamacpp, install_llamacpp
from ..util.files import temp_beside
from ..util.progress import Reporter
from .hf_checkpoints import HF_SUFFIX, ensure_hf_checkpoint, hf_checkpoint_path
from .model_specs import (
    EVERY_WEIGHT_DRAWN_BELOW,
    NOISE_POOL,
    RANDOM_MODELS,
    TINY_HF_MODELS,
    TINY_MODELS,
    ModelSpec,
    models_dir,
)
from .real_checkpoints import real_hf_checkpoint_path
from .real_models import REAL_PREFIX, real_model, real_model_path

VOCAB_SOURCE = "ggml-vocab-qwen2.gguf"
CHAT_TEMPLATE = "Qwen-Qwen2.5-7B-Instruct.jinja"
RANDOM_PREFIX = "random:"


def random_model_path(spec: ModelSpec) -> Path:
    return models_dir() / spec.filename


def custom_spec(name: str, *, layers: int, width: int, heads: int, kv_heads: int, ffn: int, dtype: str = "f16",
                context_length: int = 131072, seed: int = 100) -> ModelSpec:
    """A model of any llama shape, for `servebook models random --layers ... --name NAME`."""
    if width % heads or heads % kv_heads:
        raise ValueError(f"width {width} must divide into {heads} heads, and heads into {kv_heads} KV heads")
    if dtype not in ("f16", "f32"):
        raise ValueError(f"dtype {dtype!r}: f16 or f32")
    return ModelSpec(name, seed, width, layers, ffn, heads, kv_heads, context_length, dtype)


def find_custom(name: str, fmt: ModelFormat = "gguf") -> Path | None:
    """A model written earlier with `models random --name NAME` (any shape), as a GGUF file or an HF directory."""
    found = sorted(models_dir().glob(f"random-{name}-d*" + (".gguf" if fmt == "gguf" else HF_SUFFIX)))
    return found[-1] if found else None


def resolve_random(name: str) -> ModelSpec:
    if name not in RANDOM_MODELS:
        raise KeyError(f"unknown random model {name!r}; known: "
                       + ", ".join(f"{RANDOM_PREFIX}{n}" for n in RANDOM_MODELS))
    return RANDOM_MODELS[name]


def ensure_model(spec: ModelSpec, install: LlamaCppInstall | None = None, reporter: Reporter | None = None) -> Path:
    """The model's file, written once (deterministically) and cached."""
    path = random_model_path(spec)
    if not path.is_file():
        reporter = reporter or Reporter(quiet=True)
        install = install or find_llamacpp() or install_llamacpp(reporter=reporter)
        with reporter.task(f"write random {spec.name} model ({spec.parameters() / 1e9:.2f}B parameters, "
                           f"{spec.dtype})"):
            write_model(spec, path, install)
    return path


def write_model(spec: ModelSpec, path: Path, install: LlamaCppInstall) -> Path:
    """Write `spec` to `path` atomically (a temp file renamed into place)."""
    from gguf import GGUFReader, GGUFValueType, GGUFWriter

    vocab = GGUFReader(install.vocab_dir / VOCAB_SOURCE)
    n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = temp_beside(path)
    os.close(fd)
    writer = GGUFWriter(tmp_name, "llama")
    writer.add_name(f"servebook {spec.family} {spec.name} (random weights)")
    writer.add_context_length(spec.context_length)
    writer.add_embedding_length(spec.embedding_length)
    writer.add_block_count(spec.block_count)
    writer.add_feed_forward_length(spec.feed_forward_length)
    writer.add_head_count(spec.head_count)
    writer.add_head_count_kv(spec.head_count_kv)
    writer.add_layer_norm_rms_eps(1e-6)
    writer.add_rope_freq_base(1_000_000.0)
    writer.add_file_type({"f32": 0, "f16": 1}[spec.dtype])
    for key, field in vocab.fields.items():
        if not key.startswith("tokenizer.") or key == "tokenizer.chat_template":
            continue
        value_type = field.types[0]
        sub_type = field.types[1] if value_type == GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), value_type, sub_type)
    writer.add_chat_template((install.templates_dir / CHAT_TEMPLATE).read_text())
    _add_weights(writer, spec, n_vocab)
    try:
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    finally:
        writer.close()
    os.replace(tmp_name, path)
    return path


def _add_weights(writer, spec: ModelSpec, n_vocab: int) -> None:
    rng = np.random.default_rng(spec.seed)
    dtype = np.float16 if spec.dtype == "f16" else np.float32
    d, ff = spec.embedding_length, spec.feed_forward_length
    d_kv = d // spec.head_count * spec.head_count_kv
    if spec.parameters(n_vocab) < EVERY_WEIGHT_DRAWN_BELOW:
        def weight(*shape: int) -> np.ndarray:  # small models: every number drawn (the tiny models' recipe)
            return (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(dtype)
    else:
        pool = (rng.standard_normal(NOISE_POOL, dtype=np.float32) * 0.02).astype(dtype)

        def weight(*shape: int) -> np.ndarray:  # large models: cut from the pool at a seeded offset
            start = int(rng.integers(0, pool.size))
            return np.resize(np.roll(pool, -start), shape)

    # numpy shapes are ggml's reversed: token_embd is ggml [d, n_vocab].
    writer.add_tensor("token_embd.weight", weight(n_vocab, d))
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    for i in range(spec.block_count):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.attn_q.weight", weight(d, d))
        writer.add_tensor(f"blk.{i}.attn_k.weight", weight(d_kv, d))
        writer.add_tensor(f"blk.{i}.attn_v.weight", weight(d_kv, d))
        writer.add_tensor(f"blk.{i}.attn_output.weight", weight(d, d))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", weight(ff, d))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", weight(ff, d))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", weight(d, ff))


def generated_spec(value: str, fmt: ModelFormat = "gguf") -> ModelSpec | None:
    """The spec behind a model reference `tiny:NAME` or `random:NAME` in format `fmt`; None for a plain path (and
    for a custom random model, found by its file). Raises KeyError (listing the known names) for an unknown name."""
    if value.startswith("tiny:"):
        name = value[len("tiny:"):]
        if name not in TINY_MODELS:
            raise KeyError(f"unknown tiny model {name!r}; known: " + ", ".join(f"tiny:{n}" for n in TINY_MODELS))
        # the tiny checkpoints have a vocabulary of their own, the tiny GGUFs the qwen2 one
        return (TINY_HF_MODELS if fmt == "hf" else TINY_MODELS)[name]
    if value.startswith(RANDOM_PREFIX):
        name = value[len(RANDOM_PREFIX):]
        if name in RANDOM_MODELS:
            return RANDOM_MODELS[name]
        custom = find_custom(name, fmt)
        if custom is None:
            raise KeyError(f"unknown random model {name!r}; known: "
                           + ", ".join(f"{RANDOM_PREFIX}{n}" for n in RANDOM_MODELS)
                           + f" (or write one with `servebook models random --name NAME --layers ... --format {fmt}`)")
        return None
    return None


def generated_path(value: str, fmt: ModelFormat = "gguf") -> Path | None:
    """Where a `tiny:`, `random:` or `real:` model lives in format `fmt` (written or not); None for a plain path."""
    if value.startswith(REAL_PREFIX):
        return real_model_path(real_model(value)) if fmt == "gguf" else real_hf_checkpoint_path(value)
    spec = generated_spec(value, fmt)
    if spec is not None:
        return random_model_path(spec) if fmt == "gguf" else hf_checkpoint_path(spec)
    return find_custom(value[len(RANDOM_PREFIX):], fmt) if value.startswith(RANDOM_PREFIX) else None


def model_file_name(value: str | None, fmt: ModelFormat = "gguf") -> str | None:
    """A model reference as the file (or HF directory) it names: tiny:NAME and random:NAME as the path they are (or
    will be) written to, without writing them; anything else (a path, a hub id, an unknown name) as given."""
    try:
        found = generated_path(value, fmt) if value else None
    except KeyError:
        return value
    return str(found) if found is not None else value


def ensure_generated(value: str, reporter: Reporter | None = None, fmt: ModelFormat = "gguf") -> Path | None:
    """The file (or HF directory) of a `tiny:` or `random:` model, written first if missing; None for a plain
    path. Only the GGUF needs the llama.cpp build (for its vocabulary)."""
    spec = generated_spec(value, fmt)
    if spec is not None:
        return ensure_model(spec, reporter=reporter) if fmt == "gguf" else ensure_hf_checkpoint(spec, reporter)
    return generated_path(value, fmt)
